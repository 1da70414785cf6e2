// UTF-8 and code point helpers with llama.cpp's exact (lenient) semantics
// (llama.cpp src/unicode.cpp, commit c392e509).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace synapse::tokenizer {

// Code point category flags, as llama.cpp's unicode_cpt_flags: one category
// bit from the low byte, plus the White_Space bit.
enum CptFlag : uint16_t {
  kUndefined = 0x01,    // Cn
  kNumber = 0x02,       // \p{N}
  kLetter = 0x04,       // \p{L}
  kSeparator = 0x08,    // \p{Z}
  kMark = 0x10,         // \p{M}
  kPunctuation = 0x20,  // \p{P}
  kSymbol = 0x40,       // \p{S}
  kControl = 0x80,      // \p{C} less Cn
  kCategoryMask = 0xFF,
  kWhitespace = 0x100,  // llama.cpp's White_Space list
};

struct CptRange {
  uint32_t first;
  uint16_t flags;
};
extern const CptRange kCptRanges[];
extern const size_t kCptRangesCount;

// Flags of one code point; kUndefined above U+10FFFF.
uint16_t cpt_flags(uint32_t cpt);

// Byte length of the UTF-8 sequence a lead byte announces (llama.cpp's
// unicode_len_utf8: continuation and invalid bytes count 1, F8-FF count 4).
inline size_t utf8_len(uint8_t lead) {
  static constexpr size_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[lead >> 4];
}

// Decodes like llama.cpp's unicode_cpts_from_utf8: a malformed sequence
// (bad lead byte, truncated, bad continuation) yields U+FFFD and consumes one
// byte. Overlong forms and surrogates are accepted as llama.cpp accepts them.
std::vector<uint32_t> cpts_from_utf8(std::string_view utf8);

// Appends the UTF-8 encoding of `cpt`; values above U+10FFFF append U+FFFD
// (llama.cpp throws there; we never throw on user text).
void append_utf8(std::string& out, uint32_t cpt);

// GPT-2's byte-to-unicode map: byte b -> the UTF-8 text of its stand-in code
// point (printable Latin-1 bytes map to themselves, the rest to U+0100+n).
const std::string& byte_to_unicode(uint8_t b);
// The inverse: the byte of a one-code-point stand-in; -1 if `utf8` is none.
int unicode_to_byte(std::string_view utf8);

}  // namespace synapse::tokenizer
