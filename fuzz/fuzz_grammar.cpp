// libFuzzer target: arbitrary bytes -> the GBNF parser, the JSON Schema
// converter and the matcher (issue 42).
//
// Input: a mode byte, then text. Mode even: the text is GBNF; odd: a JSON
// Schema, converted to GBNF first. Contracts under test
// (include/synapse/grammar.hpp): parse and convert throw nothing but
// synapse::Error; the converter's output always parses (a schema it accepts
// becomes a grammar, never an error later); a grammar that compiles gives a
// matcher whose mask and allows() agree, driven here for up to 64 steps by
// the input's own bytes over a small vocabulary (single bytes, a few
// multi-byte pieces, an end-of-generation token); the matcher may refuse a
// grammar too ambiguous for GrammarLimits::max_matcher_work (an Error naming
// it), nothing else. Violations trap; ASan, UBSan, stack overflows and
// timeouts are reported by libFuzzer.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/error.hpp"
#include "synapse/grammar.hpp"

using namespace synapse;

namespace {

std::shared_ptr<const TokenVocabulary> vocabulary() {
  static const std::shared_ptr<const TokenVocabulary> v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    for (const char* p : {"{\"", "\": ", "\", \"", "true", "null", "\xc3\xa9", "\xe6\x97", "12", "\\u00"})
      pieces.emplace_back(p);
    pieces.emplace_back("");  // end of generation
    std::vector<bool> eog(pieces.size(), false);
    eog.back() = true;
    return std::make_shared<const TokenVocabulary>(std::move(pieces), std::move(eog));
  }();
  return v;
}

void walk(const std::shared_ptr<const Grammar>& g, std::string_view steer, const std::vector<int32_t>& ids) {
  const int32_t n = vocabulary()->n_vocab();
  GrammarMatcher m(g, vocabulary(), ids);
  std::vector<uint64_t> mask;
  for (size_t step = 0; step < 64 && step < steer.size(); ++step) {
    m.fill_mask(mask);
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < n; ++t) {
      const bool bit = (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
      if (bit != m.allows(t)) __builtin_trap();
      if (bit) allowed.push_back(t);
    }
    if (allowed.empty()) return;
    const int32_t t = allowed[static_cast<uint8_t>(steer[step]) % allowed.size()];
    m.accept(t);
    if (t == n - 1) return;  // the end of generation: nothing follows
    if (m.is_finished() && !m.allows(n - 1)) __builtin_trap();  // finished yet no end allowed
  }
}

void drive(const std::shared_ptr<const Grammar>& g, std::string_view steer) {
  const int32_t n = vocabulary()->n_vocab();
  // Token references resolved as a tokenizer would: some id of the
  // vocabulary (<[id]> beyond it wrapped, <text> by its length).
  std::vector<int32_t> ids;
  for (const GrammarTokenRef& r : g->token_refs())
    ids.push_back(r.text.empty() ? r.id % n : static_cast<int32_t>(r.text.size() % static_cast<size_t>(n)));
  try {
    walk(g, steer, ids);
  } catch (const Error& e) {
    if (std::string_view(e.what()).find("(max_matcher_work)") == std::string_view::npos) throw;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  GrammarLimits lim;
  lim.max_rules = 2000;  // small bounds keep each input fast; the code paths are the same
  lim.max_elements = 20000;
  lim.max_matcher_work = 1u << 16;
  std::string gbnf;
  if (data[0] & 1) {
    try {
      gbnf = json_schema_to_gbnf(text, lim);
    } catch (const Error&) {
      return 0;
    }
    std::shared_ptr<const Grammar> g;
    try {
      g = Grammar::parse(gbnf, "root", lim);
    } catch (const Error& e) {
      // Only a size bound may refuse what the converter wrote.
      if (std::string_view(e.what()).find("more than") == std::string_view::npos) __builtin_trap();
      return 0;
    }
    drive(g, text);
    return 0;
  }
  std::shared_ptr<const Grammar> g;
  try {
    g = Grammar::parse(text, "root", lim);
  } catch (const Error&) {
    return 0;
  }
  drive(g, text);
  return 0;
}
