// The GBNF parser and the matcher: syntax errors with their position, limits,
// the accepted language (byte by byte and token by token), and the mask
// against token-by-token checks.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "synapse/error.hpp"
#include "grammar_util.hpp"
#include "synapse/grammar.hpp"

namespace synapse {
namespace {

using test::accepts;
using test::byte_vocab;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}



std::string error_of(std::string_view text, const GrammarLimits& lim = {}) {
  try {
    Grammar::parse(text, "root", lim);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(Gbnf, ErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("root ::= foo\n"), "grammar: line 1, column 10: undefined rule 'foo'");
  EXPECT_EQ(error_of("a ::= \"x\"\n"), "grammar: line 2, column 1: the grammar has no rule 'root' to start from");
  EXPECT_EQ(error_of("root ::= \"x\"\nb := \"y\"\n"), "grammar: line 2, column 3: expecting ::=");
  EXPECT_EQ(error_of("root ::= \"\\q\"\n"), "grammar: line 1, column 11: unknown escape \"\\q\"");
  EXPECT_EQ(error_of("root ::= \"abc\n"), "grammar: line 1, column 10: unterminated string literal");
  EXPECT_EQ(error_of("root ::= [a-z\n"), "grammar: line 1, column 10: unterminated character class");
  EXPECT_EQ(error_of("root ::= (\"a\" \n"), "grammar: line 2, column 1: expecting ')'");
  EXPECT_EQ(error_of("root ::= * \"a\"\n"), "grammar: line 1, column 10: '*' with nothing before it to repeat");
  EXPECT_EQ(error_of("root ::= \"a\"{3,1}\n"), "grammar: line 1, column 13: a repetition {m,n} with n < m");
  EXPECT_EQ(error_of("root ::= \"a\"{x}\n"), "grammar: line 1, column 14: expecting a number");
  EXPECT_EQ(error_of("root ::= \"a\" ) \n"), "grammar: line 1, column 14: expecting a newline or the end, found ')'");
  EXPECT_EQ(error_of("root ::= <[12]>\n"),
            "grammar: line 1, column 10: token references (<[id]>, <text>, !<...>) are not supported");
}

TEST(Gbnf, LeftRecursionIsRefused) {
  EXPECT_EQ(error_of("root ::= root \"a\" | \"b\"\n"), "grammar: line 1, column 1: left recursion in rule 'root'");
  // Through a nullable prefix and another rule.
  EXPECT_EQ(error_of("root ::= x\nx ::= e y\ne ::= \"\" | \"q\"\ny ::= x \"a\" | \"b\"\n"),
            "grammar: line 1, column 10: left recursion in rule 'x'");
  // Right recursion is fine.
  EXPECT_EQ(error_of("root ::= \"a\" root | \"b\"\n"), "");
}

TEST(Gbnf, LimitsAreErrorsNotCrashes) {
  // llama.cpp #26600: tens of thousands of nested groups overflowed its stack.
  const std::string deep = "root ::= " + std::string(60000, '(') + "\"a\"" + std::string(60000, ')') + "\n";
  EXPECT_EQ(error_of(deep), "grammar: line 1, column 266: groups nested more than 256 deep");
  GrammarLimits small;
  small.max_bytes = 10;
  EXPECT_EQ(error_of("root ::= \"abcdef\"\n", small),
            "grammar: line 1, column 1: the grammar is 18 bytes, more than the limit of 10");
  EXPECT_EQ(error_of("root ::= \"a\"{20000}\n"),
            "grammar: line 1, column 18: a repetition count over the limit of 10000");
  GrammarLimits few;
  few.max_elements = 100;
  EXPECT_NE(error_of("root ::= (\"ab\"{100}){100}\n", few).find("grammar elements after expanding repetitions"),
            std::string::npos);
  // A long chain of rules, each the first element of the last: no recursion in the checks.
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 15000; ++i) {
    chain.append("r").append(std::to_string(i)).append(" ::= r");
    chain.append(std::to_string(i + 1)).append("\n");
  }
  chain += "r15000 ::= \"z\"\n";
  const auto g = Grammar::parse(chain);
  EXPECT_TRUE(accepts(g, "z"));
  EXPECT_FALSE(accepts(g, "zz"));
}

TEST(Gbnf, EveryLlamaCppGrammarParses) {
  for (const char* name : {"arithmetic", "c", "chess", "english", "japanese", "json", "json_arr", "list"}) {
    SCOPED_TRACE(name);
    const auto g = Grammar::parse(read_file(std::string(SYNAPSE_TEST_DATA) + "/grammar/gbnf/" + name + ".gbnf"));
    EXPECT_GT(g->n_rules(), 1u);
  }
}

TEST(Gbnf, JsonLanguage) {
  const auto g = Grammar::parse(read_file(std::string(SYNAPSE_TEST_DATA) + "/grammar/gbnf/json.gbnf"));
  for (const char* ok : {"{}", "{\"a\": 1}", "{\"a\":[1, 2.5, -3e5, true, null, \"x\\n\\u00e9\"]}",
                         "{\"k\": {\"n\": {}}}\n", "{\"é\": \"日本\"}", "{ \"a\" : \"\\\"\" }"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  // json.gbnf's exponent is [0-9] [1-9]{0,15}: "1e10" is outside its language (llama.cpp's too).
  for (const char* bad : {"", "[]", "{", "{\"a\": 1e10}", "{\"a\"}", "{\"a\": 01}", "{\"a\": tru}", "{\"a\": \"\x01\"}",
                          "{\"a\": 1,}", "{'a': 1}", "{\"a\": \"\\x\"}", "{}}"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(Gbnf, ClassesRepetitionsAndUtf8) {
  // "\\-" is a hyphen (v0.5.0's parse_char escapes it), not a range.
  const auto q = Grammar::parse("root ::= [a\\-c]\n");
  EXPECT_TRUE(accepts(q, "-"));
  EXPECT_FALSE(accepts(q, "b"));
  const auto g = Grammar::parse("root ::= [a-c]{2,3} [^a-z\\u00e9]+ . \"!\"?\n");
  EXPECT_TRUE(accepts(g, "abXY\xe6\x97\xa5"));            // . takes the 3-byte 日
  EXPECT_TRUE(accepts(g, "cccZ\xf0\x9f\x98\x80!"));        // U+1F600 in both classes' ranges
  EXPECT_FALSE(accepts(g, "aX\xe6\x97\xa5"));              // one of [a-c]
  EXPECT_FALSE(accepts(g, "aaaaX."));                      // four of [a-c]
  EXPECT_FALSE(accepts(g, "ab\xc3\xa9Y."));                // é is excluded
  EXPECT_TRUE(accepts(g, "ab\xc3\xa8Y."));                 // è is not
  EXPECT_FALSE(accepts(g, "abXY\xe6\x97"));                // a character cut short
  EXPECT_FALSE(accepts(g, "abXY\xff"));                    // not UTF-8
  // {m}, {m,}, {,n}, nested groups and alternation; comments and newlines in groups.
  const auto h = Grammar::parse(
      "root ::= ( \"x\"{2} | \"y\"{1,} # a comment\n"
      "  | \"z\"{,2} ) \"-\"\n");
  for (const char* ok : {"xx-", "y-", "yyyy-", "-", "z-", "zz-"}) EXPECT_TRUE(accepts(h, ok)) << ok;
  for (const char* bad : {"x-", "xxx-", "zzz-", "xy-"}) EXPECT_FALSE(accepts(h, bad)) << bad;
}

// An empty class is a dead end: a token leading only into it is not allowed
// (found by fuzz_grammar: the matcher was left with no byte and no end).
TEST(Gbnf, EmptyClassIsADeadEnd) {
  const auto g = Grammar::parse("root ::= \"a\" [^\\x00-\\U0010FFFF] | \"b\"\n");
  GrammarMatcher m(g, byte_vocab());
  EXPECT_FALSE(m.allows('a'));
  EXPECT_TRUE(m.allows('b'));
  EXPECT_FALSE(accepts(g, "a"));
  EXPECT_TRUE(accepts(g, "b"));
}

TEST(Gbnf, EndOfGenerationExactlyWhenComplete) {
  const auto g = Grammar::parse("root ::= \"ab\" | \"abcd\"\n");
  GrammarMatcher m(g, byte_vocab());
  EXPECT_FALSE(m.allows(256));
  EXPECT_FALSE(m.is_complete());
  m.accept('a');
  m.accept('b');
  EXPECT_TRUE(m.allows(256));
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.is_finished());
  EXPECT_TRUE(m.allows('c'));
  EXPECT_FALSE(m.allows('d'));
  EXPECT_THROW(m.accept('d'), Error);
  m.accept('c');
  EXPECT_FALSE(m.allows(256));
  m.accept('d');
  EXPECT_TRUE(m.is_finished());
  std::vector<uint64_t> mask;
  m.fill_mask(mask);
  ASSERT_EQ(mask.size(), 5u);
  EXPECT_EQ(mask[0] | mask[1] | mask[2] | mask[3], 0u);
  EXPECT_EQ(mask[4], 1u);  // only token 256, end of generation
  m.accept(256);
  EXPECT_FALSE(m.allows('a'));
  EXPECT_THROW(m.allows(257), Error);
}

// A vocabulary of multi-byte tokens (pieces that split UTF-8 characters,
// duplicates, prefixes of each other): the mask equals allows() per token in
// every state of a random walk through the JSON grammar.
TEST(Gbnf, MaskEqualsTokenByTokenChecks) {
  const auto g = Grammar::parse(read_file(std::string(SYNAPSE_TEST_DATA) + "/grammar/gbnf/json.gbnf"));
  std::vector<std::string> pieces = {"{", "}", "\"", "\":", "\": ", "{\"", "\"}", ",", ", \"", "[", "]", "1",
                                     "12", "-", ".5", "e", "true", "tru", "null", "\\", "\\n", "\\u00", "e9",
                                     "a", "ab", "abc", " ", "\n", "\n  ", "\xc3", "\xa9", "\xc3\xa9", "\xe6\x97",
                                     "\xa5", "x\"", "0", "00", "\"a\"", "ab", ""};
  std::vector<bool> eog(pieces.size() + 1, false);
  pieces.emplace_back("");
  eog.back() = true;
  const int32_t n = static_cast<int32_t>(pieces.size());
  auto vocab = std::make_shared<TokenVocabulary>(pieces, eog);
  std::mt19937 rng(7);
  for (int run = 0; run < 20; ++run) {
    GrammarMatcher m(g, vocab);
    for (int step = 0; step < 40; ++step) {
      std::vector<uint64_t> mask;
      m.fill_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < n; ++t) {
        const bool bit = (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
        ASSERT_EQ(bit, m.allows(t)) << "run " << run << " step " << step << " token " << t;
        if (bit && t != n - 1) allowed.push_back(t);
      }
      if (allowed.empty()) break;
      m.accept(allowed[rng() % allowed.size()]);
    }
  }
}

// A matcher that drops its caches every few states answers exactly as one
// that keeps them (they are caches of pure functions of the grammar).
TEST(Gbnf, CompactedMatcherAnswersTheSame) {
  const std::string text = read_file(std::string(SYNAPSE_TEST_DATA) + "/grammar/gbnf/json.gbnf");
  GrammarLimits tight;
  tight.max_matcher_states = 4;
  const auto keep = Grammar::parse(text);
  const auto drop = Grammar::parse(text, "root", tight);
  std::vector<std::string> pieces = {"{\"", "\": ", "\"", "[", "]", "}", ", ", "1", "ab", "\xc3\xa9", " ", "\n"};
  std::vector<bool> eog(pieces.size() + 1, false);
  pieces.emplace_back("");
  eog.back() = true;
  auto vocab = std::make_shared<TokenVocabulary>(pieces, eog);
  std::mt19937 rng(11);
  for (int run = 0; run < 10; ++run) {
    GrammarMatcher a(keep, vocab), b(drop, vocab);
    for (int step = 0; step < 60; ++step) {
      std::vector<uint64_t> ma, mb;
      a.fill_mask(ma);
      b.fill_mask(mb);
      ASSERT_EQ(ma, mb) << "run " << run << " step " << step;
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t + 1 < static_cast<int32_t>(pieces.size()); ++t)
        if ((ma[0] >> t) & 1) allowed.push_back(t);
      if (allowed.empty()) break;
      const int32_t t = allowed[rng() % allowed.size()];
      a.accept(t);
      b.accept(t);
      ASSERT_EQ(a.is_complete(), b.is_complete());
    }
  }
}

}  // namespace
}  // namespace synapse
