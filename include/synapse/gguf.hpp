// GGUF v2/v3 reader and writer.
//
// Format: ggml's docs/gguf.md. A file is a header (magic "GGUF", version,
// tensor count, metadata count), metadata key/value pairs, tensor infos, then
// the tensor data section aligned to `general.alignment` (default 32).
//
// gguf::File maps the file read-only and checks every count, length, offset
// and size against the file before use (overflow included). A malformed file
// throws synapse::Error (Errc::format, or Errc::io when it cannot be read)
// whose message names the file, the key or tensor, and what was wrong.
//
// Thread-safety: a File is immutable after open/from_bytes, so its const
// members may be called from any number of threads; a Writer is not
// thread-safe (one thread per Writer).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/error.hpp"
#include "synapse/types.hpp"

namespace synapse::gguf {

// Metadata value types, with the ids GGUF stores (gguf_type).
enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

// "UINT32", "STRING", ... ; "unknown" for ids outside the enum.
std::string_view value_type_name(ValueType t) noexcept;

// One metadata value. Scalars: the integer types are held in `u` (unsigned)
// or `i` (signed), the floats in `f`, bools in `b`, strings in `str`.
// Arrays: `elem_type` and `items` (arrays of arrays nest).
struct Value {
  ValueType type = ValueType::UINT8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string str;
  ValueType elem_type = ValueType::UINT8;  // ARRAY only
  std::vector<Value> items;                // ARRAY only
};

struct KeyValue {
  std::string key;
  Value value;
};

// Limits the reader enforces (issue 9, "Hostile input"). Every count and
// length read from the file is checked against the bytes left in it before
// anything is allocated for it (an array of n items needs at least n times
// its element's smallest encoding), and against these caps; a file past any
// of them is refused with Error(format) naming the key or tensor.
inline constexpr uint64_t kMaxStringBytes = 64ull << 20;   // one string: 64 MiB
inline constexpr uint64_t kMaxArrayItems = 1ull << 24;     // one array: 16.7M items
inline constexpr int kMaxArrayDepth = 8;                  // nested arrays
inline constexpr uint64_t kMaxAlignment = 1ull << 20;     // general.alignment: power of two <= 1 MiB
inline constexpr uint32_t kMaxDims = 4;                   // GGML_MAX_DIMS

// Memory cap on the parsed metadata and tensor infos. Each array item becomes
// a whole gguf::Value (sizeof(Value), ~100 bytes) whatever it takes in the
// file (1 byte for UINT8), so bytes-left checks alone would let a 256 MB UINT8
// array cost ~25 GB. Before allocating, the reader charges sizeof(Value) per
// array item, the bytes of every string (keys and tensor names included), and
// sizeof(KeyValue) / sizeof(TensorInfo) plus kIndexEntryBytes per entry, and
// refuses the file once the total passes
//   kMetadataMemoryBase + kMetadataMemoryPerFileByte * file size
// or the values (keys' values plus all array items, nested ones included)
// pass kMaxMetadataValues. Real files are far below: a 256K-entry vocabulary
// (tokens, scores, token types, merges) costs ~100 MB; the 7.8 MB Llama 3
// vocabulary file ~70 MB. Worst case for any file: min(~100 x size,
// 256 MiB + 8 x size, ~1.7 GB + string bytes).
inline constexpr uint64_t kMaxMetadataValues = 1ull << 24;
inline constexpr uint64_t kMetadataMemoryBase = 256ull << 20;
inline constexpr uint64_t kMetadataMemoryPerFileByte = 8;
inline constexpr uint64_t kIndexEntryBytes = 64;  // one name -> index hash-map node

// One tensor as described by the file. ne[0] is the innermost (row) length,
// as ggml orders dimensions; unused dims are 1.
struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;       // from the start of the data section
  uint64_t n_bytes = 0;      // exact size of the tensor's data
  // Into the mapping, valid while the File lives; aligned for the type's
  // blocks (a tensor the file places at an address misaligned for them, which
  // general.alignment < 8 allows, is copied at open).
  const uint8_t* data = nullptr;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Opens and validates `path`. Throws Error(io) if it cannot be opened or
  // mapped, Error(format) on any malformed field (the message names the file
  // and the key/tensor) or tensor data out of llama.cpp's layout (each
  // tensor where the previous one ends, padded to the alignment: no overlap,
  // no aliasing), Error(unsupported) on an unknown version.
  static File open(const std::string& path);

  // Parses an in-memory GGUF image (used by tests and fuzzers). The bytes are
  // copied; `label` stands for the file name in error messages.
  static File from_bytes(std::span<const uint8_t> bytes, const std::string& label);

  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  ~File();

  const std::string& path() const;

  // Advice that the bytes [p, p + n) of this file's tensor data will not be
  // read again (a matrix now read from an interleaved copy): the whole
  // memory pages inside the range leave this process's resident set
  // (madvise MADV_DONTNEED; a later read brings them back from the file, so
  // nothing changes but memory). No effect for a File made by from_bytes,
  // or for a range not wholly inside the file. Never throws.
  void release_pages(const uint8_t* p, size_t n) const noexcept;
  uint32_t version() const;
  uint64_t alignment() const;
  uint64_t data_offset() const;  // byte offset of the data section in the file
  uint64_t file_size() const;

  const std::vector<KeyValue>& metadata() const;
  const std::vector<TensorInfo>& tensors() const;

  // nullptr when absent.
  const Value* find(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;

  // Typed getters: std::nullopt when the key is absent; Error(format) naming
  // the key when it is present with a type the consumer cannot use.
  // get_u32/get_i64 accept any integer type whose value fits; get_f32
  // accepts FLOAT32 and FLOAT64; get_bool accepts BOOL; get_string STRING.
  std::optional<uint32_t> get_u32(std::string_view key) const;
  std::optional<int64_t> get_i64(std::string_view key) const;
  std::optional<float> get_f32(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;

  // Array getters: std::nullopt when absent; Error(format) naming the key if
  // the value is not an array of exactly that element type (e.g.
  // tokenizer.ggml.scores must be FLOAT32, token_type INT32).
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_f32_array(std::string_view key) const;
  std::optional<std::vector<int32_t>> get_i32_array(std::string_view key) const;
  // Integer arrays of any integer element type, values converted (e.g.
  // per-layer head counts); Error(format) if a value does not fit.
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;

 private:
  struct Impl;
  explicit File(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Builds a GGUF v3 file in memory: used by `synapse quantize` and by tests to
// make small and hostile models.
class Writer {
 public:
  explicit Writer(uint64_t alignment = 32);

  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  // Any value, arrays included (copied verbatim from a File's metadata).
  void set_value(std::string key, Value v);

  // Adds a tensor; `data` must hold exactly row_size(type, ne[0]) * ne[1]*ne[2]*ne[3]
  // bytes (Error(invalid_argument) otherwise). Dims beyond n_dims are ignored.
  void add_tensor(std::string name, GgmlType type, std::span<const int64_t> ne,
                  std::span<const uint8_t> data);

  // The whole file image.
  std::vector<uint8_t> bytes() const;
  // Writes bytes() to `path`; Error(io) on failure.
  void write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  uint64_t alignment_;
  std::vector<KeyValue> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace synapse::gguf
