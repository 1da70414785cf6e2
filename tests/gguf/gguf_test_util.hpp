// Helpers for the GGUF tests: file bytes, a raw little-endian builder for
// hand-made (often hostile) files, byte surgery, and error assertions.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/error.hpp"
#include "synapse/gguf.hpp"

namespace gguf_test {

inline std::string data_path(const std::string& rel) {
  return std::string(SYNAPSE_TEST_DATA) + "/" + rel;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Builds a GGUF image field by field (little-endian), independent of Writer.
struct Raw {
  std::vector<uint8_t> b;
  Raw& u8(uint8_t v) { b.push_back(v); return *this; }
  Raw& u32(uint32_t v) { return put(&v, 4); }
  Raw& u64(uint64_t v) { return put(&v, 8); }
  Raw& f32(float v) { return put(&v, 4); }
  Raw& str(std::string_view s) { u64(s.size()); return put(s.data(), s.size()); }
  Raw& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  Raw& zeros_to(size_t n) { if (b.size() < n) b.resize(n, 0); return *this; }
  Raw& put(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
};

// Offset of the first occurrence of `s` in `b` (fails the test if absent).
inline size_t find_bytes(const std::vector<uint8_t>& b, std::string_view s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  EXPECT_NE(it, b.end()) << "'" << s << "' not found";
  return static_cast<size_t>(it - b.begin());
}
inline void poke_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
inline void poke_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }
inline uint32_t peek_u32(const std::vector<uint8_t>& b, size_t at) { uint32_t v; std::memcpy(&v, b.data() + at, 4); return v; }

// Field offsets of tensor `name`'s info in a GGUF image: n_dims, ne[0],
// type and offset (the name is found by its bytes after its length).
struct TensorFields {
  size_t n_dims, ne0, type, offset;
};
inline TensorFields tensor_fields(const std::vector<uint8_t>& b, const std::string& name) {
  // The name string is preceded by its uint64 length: search for both.
  std::string pat(8, '\0');
  const uint64_t len = name.size();
  std::memcpy(pat.data(), &len, 8);
  pat += name;
  const size_t at = find_bytes(b, pat) + pat.size();
  const uint32_t nd = peek_u32(b, at);
  return {at, at + 4, at + 4 + 8 * nd, at + 8 + 8 * nd};
}

// Runs f, expects a synapse::Error of `code` whose message contains every
// substring; returns the message.
template <typename F>
std::string expect_error(F&& f, synapse::Errc code, std::initializer_list<std::string_view> subs) {
  try {
    f();
  } catch (const synapse::Error& e) {
    const std::string msg = e.what();
    if (std::getenv("GGUF_TEST_PRINT")) std::printf("  [%s] %s\n", synapse::errc_name(e.code()), msg.c_str());
    EXPECT_EQ(e.code(), code) << "errc " << synapse::errc_name(e.code()) << ": " << msg;
    for (std::string_view s : subs) EXPECT_NE(msg.find(s), std::string::npos) << "'" << s << "' not in: " << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-synapse exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

inline synapse::gguf::File parse(const std::vector<uint8_t>& b, const std::string& label = "hostile.gguf") {
  return synapse::gguf::File::from_bytes(b, label);
}

}  // namespace gguf_test
