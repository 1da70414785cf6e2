// tests/data/grammar/schema_cases.json through the whole path: each schema
// converted to GBNF, compiled, and every instance fed byte by byte to a
// matcher: `accept` texts must be sentences of the grammar, `reject` and
// `reject_by_convention` texts must not (README.md beside the file).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar_util.hpp"
#include "synapse/grammar.hpp"

namespace synapse {
namespace {

using test::accepts;

TEST(SchemaCases, EveryInstanceAsListed) {
  std::ifstream f(std::string(SYNAPSE_TEST_DATA) + "/grammar/schema_cases.json");
  ASSERT_TRUE(f) << "tests/data/grammar/schema_cases.json is missing";
  const nlohmann::json j = nlohmann::json::parse(f);
  size_t n_cases = 0, n_texts = 0;
  for (const auto& c : j.at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const auto g = Grammar::parse(json_schema_to_gbnf(c.at("schema").dump()));
    for (const auto& t : c.at("accept")) {
      EXPECT_TRUE(accepts(g, t.get<std::string>())) << "should accept: " << t.get<std::string>();
      ++n_texts;
    }
    for (const char* key : {"reject", "reject_by_convention"})
      for (const auto& t : c.at(key)) {
        EXPECT_FALSE(accepts(g, t.get<std::string>())) << key << ": " << t.get<std::string>();
        ++n_texts;
      }
    ++n_cases;
  }
  EXPECT_GE(n_cases, 20u);
  EXPECT_GE(n_texts, 200u);
}

}  // namespace
}  // namespace synapse
