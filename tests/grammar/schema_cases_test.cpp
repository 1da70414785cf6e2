// tests/data/grammar/schema_cases.json through the whole path: each schema
// converted to GBNF, compiled, and every instance fed byte by byte to a
// matcher: `accept` texts must be sentences of the grammar, `reject` and
// `reject_by_convention` texts must not (README.md beside the file). And
// what lists cannot cover: lengths and item counts at every count.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "synapse/grammar.hpp"

namespace synapse {
namespace {

std::shared_ptr<const TokenVocabulary> byte_vocab() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  pieces.emplace_back("");
  std::vector<bool> eog(257, false);
  eog[256] = true;
  return std::make_shared<TokenVocabulary>(std::move(pieces), std::move(eog));
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::shared_ptr<const TokenVocabulary>& v,
             const std::string& text) {
  GrammarMatcher m(g, v);
  for (const char c : text) {
    const int32_t t = static_cast<uint8_t>(c);
    if (!m.allows(t)) return false;
    m.accept(t);
  }
  return m.allows(256);
}

TEST(SchemaCases, EveryInstanceAsListed) {
  std::ifstream f(std::string(SYNAPSE_TEST_DATA) + "/grammar/schema_cases.json");
  ASSERT_TRUE(f) << "tests/data/grammar/schema_cases.json is missing";
  const nlohmann::json j = nlohmann::json::parse(f);
  const auto vocab = byte_vocab();
  size_t n_cases = 0, n_texts = 0;
  for (const auto& c : j.at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const auto g = Grammar::parse(json_schema_to_gbnf(c.at("schema").dump()));
    for (const auto& t : c.at("accept")) {
      EXPECT_TRUE(accepts(g, vocab, t.get<std::string>())) << "should accept: " << t.get<std::string>();
      ++n_texts;
    }
    for (const char* key : {"reject", "reject_by_convention"})
      for (const auto& t : c.at(key)) {
        EXPECT_FALSE(accepts(g, vocab, t.get<std::string>())) << key << ": " << t.get<std::string>();
        ++n_texts;
      }
    ++n_cases;
  }
  EXPECT_GE(n_cases, 20u);
  EXPECT_GE(n_texts, 200u);
}

// Counts over the direct limit (min(256, limits.max_repetition)) are written
// in base min(16, limit): one walk adds items one by one and, at every count
// from 0 to past the maximum, the closing quote or bracket is allowed exactly
// when the count is within the bounds, and one more item only below the
// maximum.
TEST(SchemaCounts, DecomposedBoundsExactAtEveryCount) {
  const auto vocab = byte_vocab();
  constexpr size_t kNone = SIZE_MAX;
  struct Bounds {
    size_t max_repetition, min, max;
  };
  const Bounds cases[] = {{5, 0, 6},     {5, 0, 12},    {5, 3, 30},       {5, 7, 200},     {5, 0, 131},
                          {5, 26, 26},   {5, 13, kNone}, {5, 31, 31},      {2, 0, 37},      {3, 5, 100},
                          {300, 0, 300}, {10000, 0, 40}, {10000, 257, 700}, {10000, 0, 4369}, {10000, 300, kNone}};
  // One code point each, as JSON text: raw ASCII, raw 2- and 3-byte UTF-8, escapes.
  const char* const chars[] = {"a", "\u00e9", "\\n", "\u263a", "\\u00e9"};
  for (const Bounds& b : cases) {
    GrammarLimits limits;
    limits.max_repetition = b.max_repetition;
    const std::string max_text = b.max == kNone ? "" : std::to_string(b.max);
    const size_t last = (b.max == kNone ? b.min + 40 : b.max + 1);
    for (const char* what : {"string", "array", "tuple"}) {
      std::string schema;
      if (what[0] == 's') {
        schema = R"({"type": "string", "minLength": )" + std::to_string(b.min) +
                 (b.max == kNone ? "" : R"(, "maxLength": )" + max_text) + "}";
      } else {
        // The tuple's first item is null, the others true.
        schema = std::string(what[0] == 'a' ? R"({"items": {"type": "boolean"})"
                                            : R"({"prefixItems": [{"type": "null"}], "items": {"type": "boolean"})") +
                 R"(, "minItems": )" + std::to_string(b.min) + (b.max == kNone ? "" : R"(, "maxItems": )" + max_text) +
                 "}";
      }
      SCOPED_TRACE(schema + " with max_repetition " + std::to_string(b.max_repetition));
      const auto g = Grammar::parse(json_schema_to_gbnf(schema, limits));  // (`space` has {0,20})
      GrammarMatcher m(g, vocab);
      auto take = [&](const std::string& text) {
        for (const char c : text) {
          if (!m.allows(static_cast<uint8_t>(c))) return false;
          m.accept(static_cast<uint8_t>(c));
        }
        return true;
      };
      ASSERT_TRUE(take(what[0] == 's' ? "\"" : "["));
      const int32_t close = what[0] == 's' ? '"' : ']';
      for (size_t n = 0;; ++n) {
        EXPECT_EQ(m.allows(close), n >= b.min && n <= b.max) << n;
        if (n == last) break;
        const std::string item = what[0] == 's'
                                     ? chars[n % 5]
                                     : std::string(n ? "," : "") + (what[0] == 't' && n == 0 ? "null" : "true");
        const bool more = take(item);
        EXPECT_EQ(more, n < b.max) << n;
        if (!more) break;
      }
    }
  }
}

// The largest maxLength of JSONSchemaBench's Github_medium: a small grammar.
TEST(SchemaCounts, MaxLength65535IsSmall) {
  const auto g = Grammar::parse(json_schema_to_gbnf(R"({"type": "string", "maxLength": 65535})"));
  EXPECT_LT(g->n_rules(), 400u);
}

}  // namespace
}  // namespace synapse
