// Helpers shared by the GGUF reader and writer (private to src/gguf/).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "base/strings.hpp"
#include "synapse/gguf.hpp"

namespace synapse::gguf {

// True for the value type ids of ggml's docs/gguf.md (0..12).
inline bool is_known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

// Bytes of one scalar of type `t` as stored in the file; 0 for STRING/ARRAY.
inline uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL: return 1;
    case ValueType::UINT16:
    case ValueType::INT16: return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32: return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64: return 8;
    default: return 0;
  }
}

// "{64, 512}" for the first n dims of ne.
inline std::string shape_str(const std::array<int64_t, 4>& ne, uint32_t n) {
  return join_in("{", std::span(ne.data(), n), ", ", "}");
}

}  // namespace synapse::gguf
