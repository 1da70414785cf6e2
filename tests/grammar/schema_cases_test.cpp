// tests/data/grammar/schema_cases.json through the whole path: each schema
// converted to GBNF, compiled, and every instance fed byte by byte to a
// matcher: `accept` texts must be sentences of the grammar, `reject` and
// `reject_by_convention` texts must not (README.md beside the file).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace synapse
