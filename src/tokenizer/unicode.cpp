// UTF-8 helpers and the GPT-2 byte map (llama.cpp src/unicode.cpp semantics).
#include "tokenizer/unicode.hpp"

#include <algorithm>
#include <array>
#include <unordered_map>

namespace synapse::tokenizer {

namespace {

// llama.cpp's unicode_set_whitespace (the White_Space property).
bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// One decode step of llama.cpp's unicode_cpt_from_utf8; false when malformed.
bool decode_one(std::string_view s, size_t& off, uint32_t& cpt) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t c0 = b(off);
  if (!(c0 & 0x80)) {
    cpt = c0;
    off += 1;
    return true;
  }
  if (!(c0 & 0x40)) return false;
  const auto cont = [&](size_t i) { return (b(i) & 0xC0) == 0x80; };
  if (!(c0 & 0x20)) {
    if (off + 1 >= s.size() || !cont(off + 1)) return false;
    cpt = ((c0 & 0x1Fu) << 6) | (b(off + 1) & 0x3Fu);
    off += 2;
    return true;
  }
  if (!(c0 & 0x10)) {
    if (off + 2 >= s.size() || !cont(off + 1) || !cont(off + 2)) return false;
    cpt = ((c0 & 0x0Fu) << 12) | ((b(off + 1) & 0x3Fu) << 6) | (b(off + 2) & 0x3Fu);
    off += 3;
    return true;
  }
  if (!(c0 & 0x08)) {
    if (off + 3 >= s.size() || !cont(off + 1) || !cont(off + 2) || !cont(off + 3)) return false;
    cpt = ((c0 & 0x07u) << 18) | ((b(off + 1) & 0x3Fu) << 12) | ((b(off + 2) & 0x3Fu) << 6) |
          (b(off + 3) & 0x3Fu);
    off += 4;
    return true;
  }
  return false;
}

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::unordered_map<std::string, uint8_t> to_byte;
  ByteMap() {
    std::array<bool, 256> direct{};
    for (int c = 0x21; c <= 0x7E; ++c) direct[c] = true;
    for (int c = 0xA1; c <= 0xAC; ++c) direct[c] = true;
    for (int c = 0xAE; c <= 0xFF; ++c) direct[c] = true;
    int n = 0;
    for (int c = 0; c < 256; ++c) {
      const uint32_t cpt = direct[c] ? static_cast<uint32_t>(c) : 256u + n++;
      append_utf8(to_unicode[c], cpt);
      to_byte.emplace(to_unicode[c], static_cast<uint8_t>(c));
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

uint16_t cpt_flags(uint32_t cpt) {
  if (cpt >= 0x110000) return kUndefined;
  // The last range whose first code point is <= cpt.
  const CptRange* end = kCptRanges + kCptRangesCount;
  const CptRange* it = std::upper_bound(kCptRanges, end, cpt,
                                        [](uint32_t c, const CptRange& r) { return c < r.first; });
  uint16_t f = (it - 1)->flags;
  if (is_white_space(cpt)) f |= kWhitespace;
  return f;
}

std::vector<uint32_t> cpts_from_utf8(std::string_view utf8) {
  std::vector<uint32_t> out;
  out.reserve(utf8.size());
  size_t off = 0;
  while (off < utf8.size()) {
    uint32_t cpt = 0;
    if (decode_one(utf8, off, cpt)) {
      out.push_back(cpt);
    } else {
      out.push_back(0xFFFD);
      off += 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0x10FFFF) {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    append_utf8(out, 0xFFFD);
  }
}

const std::string& byte_to_unicode(uint8_t b) { return byte_map().to_unicode[b]; }

int unicode_to_byte(std::string_view utf8) {
  const auto& m = byte_map().to_byte;
  auto it = m.find(std::string(utf8));
  return it == m.end() ? -1 : it->second;
}

}  // namespace synapse::tokenizer
