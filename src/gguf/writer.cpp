// GGUF v3 writer (layout: ggml's docs/gguf.md, as summarised in reader.cpp).
//
// Metadata is written in insertion order; tensor infos in add order; each
// tensor's data starts at a multiple of the alignment from the start of the
// data section and is followed by zero padding up to the next multiple (as
// ggml's gguf writer pads every tensor, the last one included).
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gguf/util.hpp"
#include "synapse/gguf.hpp"

namespace synapse::gguf {
namespace {

constexpr uint64_t kDefaultAlignment = 32;

[[noreturn]] void bad_arg(const std::string& msg) { throw Error(Errc::invalid_argument, "gguf writer: " + msg); }

// Appends little-endian fields (the host is little-endian: x86-64, arm64).
struct Out {
  std::vector<uint8_t>& b;
  template <typename T>
  void put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
  }
};

// Checks that `v` can be encoded: known types, arrays whose items all have
// the declared element type, nesting within kMaxArrayDepth.
void check_value(const Value& v, const std::string& key, int depth) {
  if (!is_known_value_type(static_cast<uint32_t>(v.type)))
    bad_arg("key '" + key + "': unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
  if (v.type != ValueType::ARRAY) return;
  if (depth >= kMaxArrayDepth) bad_arg("key '" + key + "': arrays nested too deep");
  if (!is_known_value_type(static_cast<uint32_t>(v.elem_type)))
    bad_arg("key '" + key + "': unknown array element type");
  for (const Value& it : v.items) {
    if (it.type != v.elem_type)
      bad_arg("key '" + key + "': array of " + std::string(value_type_name(v.elem_type)) +
              " holds an item of type " + std::string(value_type_name(it.type)));
    check_value(it, key, depth + 1);
  }
}

void put_value(Out& o, const Value& v) {
  switch (v.type) {
    case ValueType::UINT8: o.put<uint8_t>(static_cast<uint8_t>(v.u)); break;
    case ValueType::UINT16: o.put<uint16_t>(static_cast<uint16_t>(v.u)); break;
    case ValueType::UINT32: o.put<uint32_t>(static_cast<uint32_t>(v.u)); break;
    case ValueType::UINT64: o.put<uint64_t>(v.u); break;
    case ValueType::INT8: o.put<int8_t>(static_cast<int8_t>(v.i)); break;
    case ValueType::INT16: o.put<int16_t>(static_cast<int16_t>(v.i)); break;
    case ValueType::INT32: o.put<int32_t>(static_cast<int32_t>(v.i)); break;
    case ValueType::INT64: o.put<int64_t>(v.i); break;
    case ValueType::FLOAT32: o.put<float>(static_cast<float>(v.f)); break;
    case ValueType::FLOAT64: o.put<double>(v.f); break;
    case ValueType::BOOL: o.put<uint8_t>(v.b ? 1 : 0); break;
    case ValueType::STRING: o.put_string(v.str); break;
    case ValueType::ARRAY:
      o.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
      o.put<uint64_t>(v.items.size());
      for (const Value& it : v.items) put_value(o, it);
      break;
  }
}

}  // namespace

Writer::Writer(uint64_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment)
    bad_arg("alignment " + std::to_string(alignment) + " is not a power of two in [1, " +
            std::to_string(kMaxAlignment) + "]");
  if (alignment != kDefaultAlignment) set_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void Writer::set_value(std::string key, Value v) {
  if (key.empty()) bad_arg("empty metadata key");
  check_value(v, key, 0);
  for (KeyValue& kv : kv_)
    if (kv.key == key) {
      kv.value = std::move(v);
      return;
    }
  kv_.push_back(KeyValue{std::move(key), std::move(v)});
}

void Writer::set_u32(std::string key, uint32_t v) {
  Value x;
  x.type = ValueType::UINT32;
  x.u = v;
  set_value(std::move(key), std::move(x));
}

void Writer::set_i32(std::string key, int32_t v) {
  Value x;
  x.type = ValueType::INT32;
  x.i = v;
  set_value(std::move(key), std::move(x));
}

void Writer::set_u64(std::string key, uint64_t v) {
  Value x;
  x.type = ValueType::UINT64;
  x.u = v;
  set_value(std::move(key), std::move(x));
}

void Writer::set_f32(std::string key, float v) {
  Value x;
  x.type = ValueType::FLOAT32;
  x.f = v;
  set_value(std::move(key), std::move(x));
}

void Writer::set_bool(std::string key, bool v) {
  Value x;
  x.type = ValueType::BOOL;
  x.b = v;
  set_value(std::move(key), std::move(x));
}

void Writer::set_string(std::string key, std::string v) {
  Value x;
  x.type = ValueType::STRING;
  x.str = std::move(v);
  set_value(std::move(key), std::move(x));
}

void Writer::add_tensor(std::string name, GgmlType type, std::span<const int64_t> ne,
                        std::span<const uint8_t> data) {
  const std::string what = "tensor '" + name + "'";
  if (name.empty()) bad_arg("empty tensor name");
  for (const PendingTensor& t : tensors_)
    if (t.name == name) bad_arg(what + ": duplicate tensor name");
  const TypeTraits& tt = type_traits(type);
  if (!tt.known) bad_arg(what + ": unknown type id " + std::to_string(static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > kMaxDims)
    bad_arg(what + ": " + std::to_string(ne.size()) + " dims (must be 1.." + std::to_string(kMaxDims) + ")");
  uint64_t n_bytes = 0;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0) bad_arg(what + ": dimension " + std::to_string(d) + " is " + std::to_string(ne[d]));
    if (d == 0) {
      if (ne[0] % tt.block_size != 0)
        bad_arg(what + ": ne[0] = " + std::to_string(ne[0]) + " is not a multiple of the " +
                std::string(tt.name) + " block size " + std::to_string(tt.block_size));
      n_bytes = row_size(type, ne[0]);
    } else if (__builtin_mul_overflow(n_bytes, static_cast<uint64_t>(ne[d]), &n_bytes)) {
      bad_arg(what + ": byte size overflows 64 bits");
    }
  }
  if (data.size() != n_bytes)
    bad_arg(what + ": data holds " + std::to_string(data.size()) + " bytes, the " +
            std::string(tt.name) + " shape needs " + std::to_string(n_bytes));
  tensors_.push_back(PendingTensor{std::move(name), type, std::vector<int64_t>(ne.begin(), ne.end()),
                                   std::vector<uint8_t>(data.begin(), data.end())});
}

std::vector<uint8_t> Writer::bytes() const {
  // The layout follows a valid general.alignment key when one was set (so
  // metadata copied from another file stays truthful); an invalid one is
  // written verbatim (tests make hostile files that way) over the
  // constructor's alignment.
  uint64_t alignment = alignment_;
  for (const KeyValue& kv : kv_) {
    const Value& v = kv.value;
    const bool is_uint = v.type == ValueType::UINT8 || v.type == ValueType::UINT16 ||
                         v.type == ValueType::UINT32 || v.type == ValueType::UINT64;
    if (kv.key == "general.alignment" && is_uint && v.u != 0 && (v.u & (v.u - 1)) == 0 &&
        v.u <= kMaxAlignment)
      alignment = v.u;
  }
  std::vector<uint8_t> b;
  Out o{b};
  o.put<uint32_t>(0x46554747);  // "GGUF"
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors_.size());
  o.put<uint64_t>(kv_.size());
  for (const KeyValue& kv : kv_) {
    o.put_string(kv.key);
    o.put<uint32_t>(static_cast<uint32_t>(kv.value.type));
    put_value(o, kv.value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    o.put_string(t.name);
    o.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) o.put<uint64_t>(static_cast<uint64_t>(n));
    o.put<uint32_t>(static_cast<uint32_t>(t.type));
    o.put<uint64_t>(offset);
    offset += (t.data.size() + alignment - 1) / alignment * alignment;
  }
  o.pad_to(alignment);
  for (const PendingTensor& t : tensors_) {
    b.insert(b.end(), t.data.begin(), t.data.end());
    o.pad_to(alignment);
  }
  return b;
}

void Writer::write(const std::string& path) const {
  const std::vector<uint8_t> b = bytes();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(Errc::io, path + ": cannot create: " + std::strerror(errno));
  const size_t n = b.empty() ? 0 : std::fwrite(b.data(), 1, b.size(), f);
  const int e = errno;
  const bool ok = n == b.size() && std::fflush(f) == 0;
  if (std::fclose(f) != 0 || !ok)
    throw Error(Errc::io, path + ": write failed: " + std::strerror(ok ? errno : e));
}

}  // namespace synapse::gguf
