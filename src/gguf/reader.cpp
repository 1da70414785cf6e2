// GGUF v2/v3 reader: maps a file read-only and validates every field.
//
// Layout (ggml's docs/gguf.md; all integers little-endian):
//   header      "GGUF" magic, uint32 version, uint64 tensor_count,
//               uint64 metadata_kv_count                       (v2 and v3)
//   metadata    kv_count x { string key, uint32 value_type, value }
//               string = uint64 length + bytes (no terminator)
//               array  = uint32 elem_type + uint64 count + count values
//   tensor info tensor_count x { string name, uint32 n_dims,
//               n_dims x uint64 ne, uint32 ggml_type, uint64 offset }
//   padding     to general.alignment (default 32)
//   data        tensor data; each offset is relative to the section start.
// Version 1 used uint32 counts and lengths and is refused (Errc::unsupported).
//
// Hostile input: every count and length is checked against the bytes left in
// the file before anything is allocated for it, so a short file that claims a
// huge array or tensor count fails at once with no large allocation; the
// memory the parsed metadata takes is charged against a budget proportional
// to the file size before it is allocated (kMetadataMemoryBase and friends in
// synapse/gguf.hpp).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <unordered_map>

#include "gguf/util.hpp"
#include "synapse/gguf.hpp"

namespace synapse::gguf {

std::string_view value_type_name(ValueType t) noexcept {
  switch (t) {
    case ValueType::UINT8: return "UINT8";
    case ValueType::INT8: return "INT8";
    case ValueType::UINT16: return "UINT16";
    case ValueType::INT16: return "INT16";
    case ValueType::UINT32: return "UINT32";
    case ValueType::INT32: return "INT32";
    case ValueType::FLOAT32: return "FLOAT32";
    case ValueType::BOOL: return "BOOL";
    case ValueType::STRING: return "STRING";
    case ValueType::ARRAY: return "ARRAY";
    case ValueType::UINT64: return "UINT64";
    case ValueType::INT64: return "INT64";
    case ValueType::FLOAT64: return "FLOAT64";
  }
  return "unknown";
}

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;

// Smallest encoding of one value of type `t` in bytes: scalars their size,
// a string its 8-byte length, an array its 4-byte type + 8-byte count.
uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 12;
    default: return scalar_size(t);
  }
}

uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

// Reads little-endian fields from [base, base + size) and throws
// Error(format) naming the file and `what` when a field runs past the end.
// Also keeps the metadata memory budget (see kMetadataMemoryBase): charge()
// is called before every allocation whose size comes from the file.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size, const std::string& label)
      : base_(base), size_(size), label_(label) {
    budget_ = sat_add(kMetadataMemoryBase, sat_mul(kMetadataMemoryPerFileByte, size));
  }

  // Charges `bytes` of memory and `values` metadata values for `what`, or
  // throws Error(format) when either cap is passed.
  void charge(uint64_t bytes, uint64_t values, const std::string& what) {
    if (values > kMaxMetadataValues - values_)
      fail(what, "the metadata holds more than " + std::to_string(kMaxMetadataValues) +
                     " values in all (arrays' items included)");
    if (bytes > budget_ - used_)
      fail(what, "parsing the metadata would take more than " + std::to_string(budget_) +
                     " bytes of memory (cap: " + std::to_string(kMetadataMemoryBase >> 20) +
                     " MiB + " + std::to_string(kMetadataMemoryPerFileByte) +
                     " x the file size); already used " + std::to_string(used_) +
                     ", this needs " + std::to_string(bytes) + " more");
    values_ += values;
    used_ += bytes;
  }

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& what, const std::string& msg) const {
    throw Error(Errc::format, label_ + ": " + what + ": " + msg);
  }

  void need(uint64_t n, const std::string& what) const {
    if (n > left())
      fail(what, "truncated: needs " + std::to_string(n) + " bytes at offset " +
                     std::to_string(pos_) + " but the file has " + std::to_string(size_) +
                     " bytes");
  }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));  // host is little-endian (x86-64, arm64)
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > kMaxStringBytes)
      fail(what, "string length " + std::to_string(len) + " exceeds the cap of " +
                     std::to_string(kMaxStringBytes) + " bytes");
    if (len > left())
      fail(what, "string length " + std::to_string(len) + " at offset " +
                     std::to_string(pos_ - 8) + " runs past the end of the file (" +
                     std::to_string(left()) + " bytes left)");
    charge(len, 0, what);
    std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& label_;
  uint64_t budget_ = 0;  // bytes
  uint64_t used_ = 0;    // bytes charged so far
  uint64_t values_ = 0;  // metadata values charged so far
};

std::string key_what(const std::string& key) { return "key '" + key + "'"; }
std::string tensor_what(const std::string& name) { return "tensor '" + name + "'"; }

// Reads one value of type `t` (already read) for key `what`; `depth` counts
// enclosing arrays.
Value read_value(Cursor& c, ValueType t, int depth, const std::string& what) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::UINT8: v.u = c.read<uint8_t>(what); break;
    case ValueType::UINT16: v.u = c.read<uint16_t>(what); break;
    case ValueType::UINT32: v.u = c.read<uint32_t>(what); break;
    case ValueType::UINT64: v.u = c.read<uint64_t>(what); break;
    case ValueType::INT8: v.i = c.read<int8_t>(what); break;
    case ValueType::INT16: v.i = c.read<int16_t>(what); break;
    case ValueType::INT32: v.i = c.read<int32_t>(what); break;
    case ValueType::INT64: v.i = c.read<int64_t>(what); break;
    case ValueType::FLOAT32: v.f = c.read<float>(what); break;
    case ValueType::FLOAT64: v.f = c.read<double>(what); break;
    case ValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>(what);
      if (b > 1) c.fail(what, "BOOL value " + std::to_string(b) + " is neither 0 nor 1");
      v.b = b != 0;
      break;
    }
    case ValueType::STRING: v.str = c.read_string(what); break;
    case ValueType::ARRAY: {
      if (depth >= kMaxArrayDepth)
        c.fail(what, "arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
      const uint32_t et = c.read<uint32_t>(what);
      if (!is_known_value_type(et))
        c.fail(what, "unknown array element type " + std::to_string(et));
      v.elem_type = static_cast<ValueType>(et);
      const uint64_t n = c.read<uint64_t>(what);
      if (n > kMaxArrayItems)
        c.fail(what, "array of " + std::to_string(n) + " items exceeds the cap of " +
                         std::to_string(kMaxArrayItems));
      const uint64_t min_size = min_encoded_size(v.elem_type);
      if (n > c.left() / min_size)
        c.fail(what, "array of " + std::to_string(n) + " " +
                         std::string(value_type_name(v.elem_type)) + " items needs at least " +
                         std::to_string(n) + " x " + std::to_string(min_size) +
                         " bytes but only " + std::to_string(c.left()) + " are left in the file");
      c.charge(n * sizeof(Value), n, what);  // n <= kMaxArrayItems: no overflow
      v.items.reserve(static_cast<size_t>(n));
      for (uint64_t k = 0; k < n; ++k) v.items.push_back(read_value(c, v.elem_type, depth + 1, what));
      break;
    }
    default:
      c.fail(what, "unknown value type " + std::to_string(static_cast<uint32_t>(t)));
  }
  return v;
}

bool is_unsigned_int(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 ||
         t == ValueType::UINT64;
}
bool is_signed_int(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 ||
         t == ValueType::INT64;
}

std::string type_desc(const Value& v) {
  std::string s(value_type_name(v.type));
  if (v.type == ValueType::ARRAY) s += " of " + std::string(value_type_name(v.elem_type));
  return s;
}

// The integer in `v` as a signed 128-bit-safe pair: returns false when v is
// not an integer type. `neg` is set for negative signed values.
bool int_value(const Value& v, bool& neg, uint64_t& mag) {
  if (is_unsigned_int(v.type)) {
    neg = false;
    mag = v.u;
    return true;
  }
  if (is_signed_int(v.type)) {
    neg = v.i < 0;
    mag = neg ? 0 - static_cast<uint64_t>(v.i) : static_cast<uint64_t>(v.i);
    return true;
  }
  return false;
}

std::string int_str(bool neg, uint64_t mag) {
  std::string s = std::to_string(mag);
  if (neg) s.insert(s.begin(), '-');
  return s;
}

// Converts an integer value to int64, or throws naming the key.
int64_t to_i64(const Value& v, const std::string& label, std::string_view key) {
  bool neg;
  uint64_t mag;
  if (!int_value(v, neg, mag))
    throw Error(Errc::format, label + ": key '" + std::string(key) +
                                  "': expected an integer, found " + type_desc(v));
  if (!neg && mag > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw Error(Errc::format, label + ": key '" + std::string(key) + "': value " +
                                  int_str(neg, mag) + " does not fit in INT64");
  return neg ? v.i : static_cast<int64_t>(mag);
}

// Owns the bytes: either a read-only mapping or an aligned private copy.
struct Storage {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  void* map = nullptr;  // munmap on destruction when set
  uint8_t* copy = nullptr;

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (map) munmap(map, static_cast<size_t>(size));
    if (copy) ::operator delete[](copy, std::align_val_t{64});
  }
};

}  // namespace

struct File::Impl {
  std::string label;
  Storage storage;
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<KeyValue> metadata;
  std::vector<TensorInfo> tensors;
  std::unordered_map<std::string_view, size_t> key_index;
  std::unordered_map<std::string_view, size_t> tensor_index;
  // Copies of tensors whose data in the file is not aligned for their type
  // (general.alignment < 8 with odd offsets): new[] memory is aligned for any
  // block type.
  std::vector<std::unique_ptr<uint8_t[]>> realigned;

  void parse();
  [[noreturn]] void fail_key(std::string_view key, const std::string& msg) const {
    throw Error(Errc::format, label + ": key '" + std::string(key) + "': " + msg);
  }
  const Value* typed(std::string_view key, ValueType t, ValueType elem) const;
};

void File::Impl::parse() {
  const uint8_t* base = storage.data;
  const uint64_t size = storage.size;
  Cursor c(base, size, label);

  // Header.
  const uint32_t magic = c.read<uint32_t>("header");
  if (magic != kMagic) {
    char got[5] = {};
    std::memcpy(got, &magic, 4);
    for (char& ch : got)
      if (ch && (ch < 32 || ch > 126)) ch = '?';
    c.fail("header", "bad magic '" + std::string(got) + "' (expected 'GGUF'): not a GGUF file");
  }
  version = c.read<uint32_t>("header");
  if (version != 2 && version != 3) {
    std::string hint;
    if (version == 1) hint = "; v1 stored 32-bit counts";
    else if (version >= 0x10000 && (version & 0xffff) == 0) hint = " (a big-endian file?)";
    throw Error(Errc::unsupported, label + ": header: GGUF version " + std::to_string(version) +
                                       " is not supported (only versions 2 and 3)" + hint);
  }
  const uint64_t n_tensors = c.read<uint64_t>("header");
  const uint64_t n_kv = c.read<uint64_t>("header");
  // Minimum encodings: a key-value pair is an 8-byte key length, a 4-byte
  // type and at least 1 value byte; a tensor info is an 8-byte name length,
  // 4-byte n_dims, 4-byte type and 8-byte offset.
  if (n_kv > c.left() / 13)
    c.fail("header", "metadata count " + std::to_string(n_kv) + " cannot fit in the " +
                         std::to_string(c.left()) + " bytes left in the file");
  if (n_tensors > c.left() / 24)
    c.fail("header", "tensor count " + std::to_string(n_tensors) + " cannot fit in the " +
                         std::to_string(c.left()) + " bytes left in the file");

  // Memory for the entries and their indexes.
  c.charge(sat_mul(n_kv, sizeof(KeyValue) + kIndexEntryBytes), n_kv, "header: metadata count");
  c.charge(sat_mul(n_tensors, sizeof(TensorInfo) + kIndexEntryBytes), 0, "header: tensor count");

  // Metadata.
  metadata.reserve(static_cast<size_t>(n_kv));
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string entry = "metadata entry " + std::to_string(k);
    KeyValue kv;
    kv.key = c.read_string(entry + " key");
    if (kv.key.empty()) c.fail(entry, "empty key");
    const std::string what = key_what(kv.key);
    const uint32_t t = c.read<uint32_t>(what);
    if (!is_known_value_type(t)) c.fail(what, "unknown value type " + std::to_string(t));
    kv.value = read_value(c, static_cast<ValueType>(t), 0, what);
    if (key_index.count(kv.key) != 0) c.fail(what, "duplicate key");
    metadata.push_back(std::move(kv));  // reserved above: views into it stay valid
    key_index.emplace(metadata.back().key, metadata.size() - 1);
  }

  // general.alignment: llama.cpp writes UINT32; any unsigned integer type is
  // accepted when its value is a power of two in [1, kMaxAlignment].
  if (auto it = key_index.find("general.alignment"); it != key_index.end()) {
    const Value* a = &metadata[it->second].value;
    if (!is_unsigned_int(a->type))
      fail_key("general.alignment", "expected an unsigned integer (UINT32), found " + type_desc(*a));
    if (a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > kMaxAlignment)
      fail_key("general.alignment", "alignment " + std::to_string(a->u) +
                                        " is not a power of two in [1, " +
                                        std::to_string(kMaxAlignment) + "]");
    alignment = a->u;
  }

  // Tensor infos.
  tensors.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo ti;
    const std::string entry = "tensor info " + std::to_string(k);
    ti.name = c.read_string(entry + " name");
    if (ti.name.empty()) c.fail(entry, "empty tensor name");
    const std::string what = tensor_what(ti.name);
    ti.n_dims = c.read<uint32_t>(what);
    if (ti.n_dims > kMaxDims)
      c.fail(what, "n_dims " + std::to_string(ti.n_dims) + " exceeds " + std::to_string(kMaxDims));
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < ti.n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>(what);
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        c.fail(what, "dimension " + std::to_string(d) + " is " + std::to_string(ne) +
                         " (must be in [1, 2^63))");
      ti.ne[d] = static_cast<int64_t>(ne);
      if (__builtin_mul_overflow(n_elements, ti.ne[d], &n_elements))
        c.fail(what, "element count of shape " + shape_str(ti.ne, d + 1) + " overflows 64 bits");
    }
    const uint32_t type_id = c.read<uint32_t>(what);
    const TypeTraits& tt = type_traits(type_id);
    if (!tt.known) c.fail(what, "unknown tensor type id " + std::to_string(type_id));
    ti.type = static_cast<GgmlType>(type_id);
    if (ti.ne[0] % tt.block_size != 0)
      c.fail(what, "ne[0] = " + std::to_string(ti.ne[0]) + " is not a multiple of the " +
                       std::string(tt.name) + " block size " + std::to_string(tt.block_size));
    uint64_t row_bytes = static_cast<uint64_t>(ti.ne[0] / tt.block_size) * tt.type_size;
    uint64_t n_bytes = row_bytes;
    for (int d = 1; d < 4; ++d)
      if (__builtin_mul_overflow(n_bytes, static_cast<uint64_t>(ti.ne[d]), &n_bytes))
        c.fail(what, "byte size of " + std::string(tt.name) + " shape " +
                         shape_str(ti.ne, ti.n_dims) + " overflows 64 bits");
    ti.n_bytes = n_bytes;
    ti.offset = c.read<uint64_t>(what);
    if (ti.offset % alignment != 0)
      c.fail(what, "data offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
                       std::to_string(alignment));
    if (tensor_index.count(ti.name) != 0) c.fail(what, "duplicate tensor name");
    tensors.push_back(std::move(ti));  // reserved above: views into it stay valid
    tensor_index.emplace(tensors.back().name, tensors.size() - 1);
  }

  // Data section: starts at the first multiple of the alignment after the
  // infos. A file without tensors may end before that point (vocab-only
  // files do), so data_offset is clamped to the file size there.
  const uint64_t infos_end = c.pos();
  data_offset = (infos_end + alignment - 1) / alignment * alignment;  // no overflow: both <= 2^63
  if (tensors.empty() && data_offset > size) data_offset = size;
  if (!tensors.empty() && data_offset > size)
    c.fail("data section", "starts at offset " + std::to_string(data_offset) +
                               ", past the end of the file (" + std::to_string(size) + " bytes)");
  const uint64_t avail = size - data_offset;
  for (TensorInfo& ti : tensors) {
    if (ti.offset > avail || ti.n_bytes > avail - ti.offset) {
      uint64_t file_off;
      const bool wraps = __builtin_add_overflow(data_offset, ti.offset, &file_off);
      c.fail(tensor_what(ti.name),
             "data [offset " + std::to_string(ti.offset) + " (file offset " +
                 (wraps ? std::string(">= 2^64") : std::to_string(file_off)) + "), " +
                 std::to_string(ti.n_bytes) + " bytes] extends past the end of the file (" +
                 std::to_string(size) + " bytes)");
    }
    ti.data = base + data_offset + ti.offset;
  }

  // llama.cpp's layout rule (gguf_init_from_file_impl): the data of the
  // tensors lies in the order of their infos, each where the previous one's
  // data, padded to the alignment, ends. So no tensor overlaps or aliases
  // another (which the zero-copy views and the load-time repack rely on).
  uint64_t expected = 0;  // no overflow: every range was checked to lie inside the file above
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorInfo& ti = tensors[k];
    if (ti.offset != expected)
      c.fail(tensor_what(ti.name),
             "data offset " + std::to_string(ti.offset) + ", expected " + std::to_string(expected) +
                 (k == 0 ? std::string(" (the start of the data section)")
                         : " (where tensor '" + tensors[k - 1].name + "' ends, padded to the alignment " +
                               std::to_string(alignment) + ")") +
                 (ti.offset < expected ? ": it overlaps the data of an earlier tensor" : ": it leaves a gap") +
                 " (llama.cpp requires the data in the order of the infos, without overlaps or gaps)");
    expected += (ti.n_bytes + alignment - 1) / alignment * alignment;
  }

  // Typed loads need each tensor aligned for its block type (whose alignment
  // divides its size, at most 8). A file with general.alignment below that
  // can place data at odd addresses; such tensors are copied (a memory cost
  // only such files pay) rather than read through misaligned pointers.
  for (TensorInfo& ti : tensors) {
    const uint64_t type_size = type_traits(static_cast<uint32_t>(ti.type)).type_size;
    const uint64_t need = std::min<uint64_t>(8, type_size & (~type_size + 1));  // lowest set bit
    if (reinterpret_cast<uintptr_t>(ti.data) % need == 0) continue;
    auto copy = std::make_unique<uint8_t[]>(ti.n_bytes);
    std::memcpy(copy.get(), ti.data, ti.n_bytes);
    ti.data = copy.get();
    realigned.push_back(std::move(copy));
  }
}

File::File(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

File File::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->label = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(Errc::io, path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(Errc::io, path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(Errc::io, path + ": not a regular file");
  }
  impl->storage.size = static_cast<uint64_t>(st.st_size);
  if (impl->storage.size > 0) {
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw Error(Errc::io, path + ": cannot map " + std::to_string(st.st_size) +
                                " bytes: " + std::strerror(e));
    }
    impl->storage.map = p;
    impl->storage.data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  impl->parse();
  return File(std::move(impl));
}

File File::from_bytes(std::span<const uint8_t> bytes, const std::string& label) {
  auto impl = std::make_unique<Impl>();
  impl->label = label;
  impl->storage.size = bytes.size();
  if (!bytes.empty()) {
    // 64-byte aligned so tensor data keeps the alignment it has in the file.
    impl->storage.copy = static_cast<uint8_t*>(::operator new[](bytes.size(), std::align_val_t{64}));
    std::memcpy(impl->storage.copy, bytes.data(), bytes.size());
    impl->storage.data = impl->storage.copy;
  }
  impl->parse();
  return File(std::move(impl));
}

const std::string& File::path() const { return impl_->label; }

void File::release_pages(const uint8_t* p, size_t n) const noexcept {
  const Storage& s = impl_->storage;
  if (s.map == nullptr || p < s.data || n > s.size || static_cast<uint64_t>(p - s.data) > s.size - n) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}
uint32_t File::version() const { return impl_->version; }
uint64_t File::alignment() const { return impl_->alignment; }
uint64_t File::data_offset() const { return impl_->data_offset; }
uint64_t File::file_size() const { return impl_->storage.size; }
const std::vector<KeyValue>& File::metadata() const { return impl_->metadata; }
const std::vector<TensorInfo>& File::tensors() const { return impl_->tensors; }

const Value* File::find(std::string_view key) const {
  auto it = impl_->key_index.find(key);
  return it == impl_->key_index.end() ? nullptr : &impl_->metadata[it->second].value;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

// Returns the value of `key` (nullptr when absent) after checking it has type
// `t` (and element type `elem` for arrays).
const Value* File::Impl::typed(std::string_view key, ValueType t, ValueType elem) const {
  auto it = key_index.find(key);
  if (it == key_index.end()) return nullptr;
  const Value& v = metadata[it->second].value;
  if (v.type != t || (t == ValueType::ARRAY && v.elem_type != elem)) {
    std::string want(value_type_name(t));
    if (t == ValueType::ARRAY) want += " of " + std::string(value_type_name(elem));
    fail_key(key, "expected " + want + ", found " + type_desc(v));
  }
  return &v;
}

std::optional<uint32_t> File::get_u32(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  bool neg;
  uint64_t mag;
  if (!int_value(*v, neg, mag)) impl_->fail_key(key, "expected an integer, found " + type_desc(*v));
  if (neg || mag > std::numeric_limits<uint32_t>::max())
    impl_->fail_key(key, "value " + int_str(neg, mag) + " (" + type_desc(*v) +
                             ") does not fit in UINT32");
  return static_cast<uint32_t>(mag);
}

std::optional<int64_t> File::get_i64(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  return to_i64(*v, impl_->label, key);
}

std::optional<float> File::get_f32(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::FLOAT32 && v->type != ValueType::FLOAT64)
    impl_->fail_key(key, "expected FLOAT32 or FLOAT64, found " + type_desc(*v));
  return static_cast<float>(v->f);
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = impl_->typed(key, ValueType::BOOL, ValueType::UINT8);
  if (!v) return std::nullopt;
  return v->b;
}

std::optional<std::string> File::get_string(std::string_view key) const {
  const Value* v = impl_->typed(key, ValueType::STRING, ValueType::UINT8);
  if (!v) return std::nullopt;
  return v->str;
}

std::optional<std::vector<std::string>> File::get_string_array(std::string_view key) const {
  const Value* v = impl_->typed(key, ValueType::ARRAY, ValueType::STRING);
  if (!v) return std::nullopt;
  std::vector<std::string> out;
  out.reserve(v->items.size());
  for (const Value& it : v->items) out.push_back(it.str);
  return out;
}

std::optional<std::vector<float>> File::get_f32_array(std::string_view key) const {
  const Value* v = impl_->typed(key, ValueType::ARRAY, ValueType::FLOAT32);
  if (!v) return std::nullopt;
  std::vector<float> out;
  out.reserve(v->items.size());
  for (const Value& it : v->items) out.push_back(static_cast<float>(it.f));
  return out;
}

std::optional<std::vector<int32_t>> File::get_i32_array(std::string_view key) const {
  const Value* v = impl_->typed(key, ValueType::ARRAY, ValueType::INT32);
  if (!v) return std::nullopt;
  std::vector<int32_t> out;
  out.reserve(v->items.size());
  for (const Value& it : v->items) out.push_back(static_cast<int32_t>(it.i));
  return out;
}

std::optional<std::vector<int64_t>> File::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::ARRAY || !(is_unsigned_int(v->elem_type) || is_signed_int(v->elem_type)))
    impl_->fail_key(key, "expected an ARRAY of integers, found " + type_desc(*v));
  std::vector<int64_t> out;
  out.reserve(v->items.size());
  for (const Value& it : v->items) out.push_back(to_i64(it, impl_->label, key));
  return out;
}

}  // namespace synapse::gguf
