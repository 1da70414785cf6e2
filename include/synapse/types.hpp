// The ggml tensor types, with the ids GGUF files store (ggml.h's enum ggml_type).
//
// Thread-safety: the type table is constant; every function here is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace synapse {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  // 4 and 5 were Q4_2 and Q4_3, removed from ggml.
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  // 31..33 were the Q4_0_4_4 / Q4_0_4_8 / Q4_0_8_8 repacks, removed from ggml.
  TQ1_0 = 34,
  TQ2_0 = 35,
  // 36..38 were the IQ4_NL_4_4 / IQ4_NL_4_8 / IQ4_NL_8_8 repacks, removed from ggml.
  MXFP4 = 39,
};

// Ids 0 .. kGgmlTypeCount - 1 cover every GgmlType: the length of a table
// indexed by type id (the type table below, quant's kernel tables). A new
// type added to the enum past MXFP4 moves this bound with it.
inline constexpr size_t kGgmlTypeCount = static_cast<size_t>(GgmlType::MXFP4) + 1;

// Layout facts of one type: `block_size` elements are stored in `type_size`
// bytes (ggml's blck_size / type_size). `known` is false for ids ggml never
// assigned or removed; `supported` is true where synapse can compute with it.
struct TypeTraits {
  std::string_view name;  // as ggml spells it: "Q4_K", "F16", "IQ4_NL"
  int64_t block_size;
  size_t type_size;
  bool known;
  bool supported;
};

// Traits of a type id as read from a file; an unknown id gives known = false
// (never throws).
const TypeTraits& type_traits(uint32_t id) noexcept;
inline const TypeTraits& type_traits(GgmlType t) noexcept {
  return type_traits(static_cast<uint32_t>(t));
}
inline std::string_view type_name(GgmlType t) noexcept { return type_traits(t).name; }

// Parses a type name ("q4_k", "Q8_0", "f16"; case-insensitive). Returns false
// when the name is no ggml type.
bool type_from_name(std::string_view name, GgmlType& out) noexcept;

// Bytes of one row of `n` elements of type `t`; n must be a multiple of the
// block size (checked by callers).
inline size_t row_size(GgmlType t, int64_t n) noexcept {
  const TypeTraits& tt = type_traits(t);
  return static_cast<size_t>(n / tt.block_size) * tt.type_size;
}

}  // namespace synapse
