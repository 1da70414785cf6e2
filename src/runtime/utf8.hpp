// A UTF-8 helper shared by the stop-string filter (stop.cpp) and the reply
// parser (chat_output.cpp): both hold back a character cut between tokens.
#pragma once

#include <cstddef>
#include <string_view>

namespace synapse::runtime {

// Bytes at the end of `s` that start a UTF-8 sequence not yet complete (0 when
// the tail is complete or not UTF-8 at all; invalid bytes are not held).
inline size_t incomplete_utf8_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t need = 0;
    if ((c & 0xE0) == 0xC0) {
      need = 2;
    } else if ((c & 0xF0) == 0xE0) {
      need = 3;
    } else if ((c & 0xF8) == 0xF0) {
      need = 4;
    } else {
      return 0;  // ASCII or invalid lead: nothing to wait for
    }
    return back < need ? back : 0;
  }
  return 0;
}

}  // namespace synapse::runtime
