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
  EXPECT_EQ(error_of("root ::= !x\n"), "grammar: line 1, column 11: expecting '<' after '!' (a token reference !<...>)");
  EXPECT_EQ(error_of("root ::= <[x]>\n"), "grammar: line 1, column 12: expecting a token id in <[id]>");
  EXPECT_EQ(error_of("root ::= <[12>\n"), "grammar: line 1, column 14: expecting ']' in <[id]>");
  EXPECT_EQ(error_of("root ::= <[12]x\n"), "grammar: line 1, column 15: expecting '>' in <[id]>");
  EXPECT_EQ(error_of("root ::= <[2147483648]>\n"), "grammar: line 1, column 10: a token id over 2147483647");
  EXPECT_EQ(error_of("root ::= \"a\" <think\n"), "grammar: line 1, column 14: unterminated token reference (no '>')");
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

// Random walks of `runs` x up to `steps` tokens through g over a vocabulary
// whose last piece is its end of generation: in every state the mask equals
// allows() token by token. Each step takes a uniform allowed token, or with
// long_half the last allowed one half the time when it is over 8 bytes (so
// that walks reach the ends of bounded counts).
void expect_mask_equals_allows(const std::shared_ptr<const Grammar>& g, const std::shared_ptr<TokenVocabulary>& vocab,
                               const std::vector<std::string>& pieces, std::mt19937& rng, int runs, int steps,
                               bool long_half) {
  const int32_t n = static_cast<int32_t>(pieces.size());
  for (int run = 0; run < runs; ++run) {
    GrammarMatcher m(g, vocab);
    for (int step = 0; step < steps; ++step) {
      std::vector<uint64_t> mask;
      m.fill_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < n; ++t) {
        const bool bit = (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
        ASSERT_EQ(bit, m.allows(t)) << "run " << run << " step " << step << " token " << t;
        if (bit && t != n - 1) allowed.push_back(t);
      }
      if (allowed.empty()) break;
      const int32_t t = allowed[rng() % allowed.size()];
      const bool take_long = long_half && rng() % 2 && pieces[static_cast<size_t>(allowed.back())].size() > 8;
      m.accept(take_long ? allowed.back() : t);
    }
  }
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
  auto vocab = std::make_shared<TokenVocabulary>(pieces, eog);
  std::mt19937 rng(7);
  expect_mask_equals_allows(g, vocab, pieces, rng, 20, 40, false);
}

// The mask takes whole the subtrees of the vocabulary trie whose characters
// all step along a chain of uniform steps (a string's characters, counted
// when its length is bounded). A vocabulary of the 256 single bytes, ASCII
// runs up to 40 characters, 2-, 3- and 4-byte characters whole, cut short
// and mixed with ASCII, escapes, quotes and invalid UTF-8: in every state of
// random walks through bounded, unbounded and patterned strings, the mask
// equals allows() per token.
TEST(Gbnf, MaskOfCountedStringsEqualsTokenByTokenChecks) {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  const std::vector<std::string> chars = {"a", "Z", "7", " ", "-", "\xc3\xa9", "\xd0\xbf", "\xe6\x97\xa5",
                                          "\xe0\xa4\x85", "\xed\x9f\xbf", "\xf0\x9f\x98\x80",
                                          "\xf4\x8f\xbf\xbf"};
  std::mt19937 gen(3);
  for (int i = 0; i < 400; ++i) {
    std::string p;
    const size_t len = 2 + gen() % (i < 40 ? 40 : 8);
    for (size_t k = 0; k < len; ++k) p += chars[gen() % (i < 40 ? 5 : chars.size())];
    pieces.push_back(p);
  }
  for (const char* p : {"\xe6", "\xe6\x97", "a\xf0\x9f", "\xc3\xa9\xc3", "\"", "\",", "ab\"", "\\", "\\n", "\\u00e9x",
                        "\\ud83d", "\xc0\x80", "\xed\xa0\x80", "a\x80", "\x80" "a", "\xff", "\t", "\n", "}", "{\""})
    pieces.emplace_back(p);
  std::vector<bool> eog(pieces.size() + 1, false);
  pieces.emplace_back("");
  eog.back() = true;
  auto vocab = std::make_shared<TokenVocabulary>(pieces, eog);
  const char* schemas[] = {
      R"({"type": "object", "properties": {"s": {"type": "string", "maxLength": 30}, "t": {"type": "string",
          "minLength": 3, "maxLength": 5}}, "required": ["s", "t"]})",
      R"({"type": "string", "minLength": 20, "maxLength": 40})",
      R"({"type": "array", "items": {"type": "string"}})",
      R"({"type": "string", "pattern": "^[a-z -]{2,30}$"})",
  };
  for (const char* schema : schemas) {
    SCOPED_TRACE(schema);
    const auto g = Grammar::parse(json_schema_to_gbnf(schema));
    std::mt19937 rng(5);
    expect_mask_equals_allows(g, vocab, pieces, rng, 12, 30, true);
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

// Repetitions of repetitions compose where the counts leave no gap (S++ is
// S+, (S?)* is S*, S{2}{2} is S{4}) and stay nested where they do (S{2}* is
// an even count): every text over {x, y} up to 7 bytes is accepted by the
// nested form exactly when by the flat one.
TEST(Gbnf, NestedRepetitionsKeepTheirLanguage) {
  const std::pair<const char*, const char*> same[] = {
      {"\"x\"++++", "\"x\"+"},
      {"\"x\"+*", "\"x\"*"},
      {"\"x\"*+", "\"x\"*"},
      {"\"x\"?+", "\"x\"*"},
      {"\"x\"+?", "\"x\"*"},
      {"\"x\"??", "\"x\"?"},
      {"((\"x\")+)+", "\"x\"+"},
      {"(\"x\"?)*", "\"x\"*"},  // a left recursion before: (x?)'s rule is nullable
      {"((\"x\"?)+ )?", "\"x\"*"},
      {"\"x\"{2}{2}", "\"x\"{4}"},
      {"\"x\"{0,1}{3}", "\"x\"{0,3}"},
      {"\"x\"{2,}+", "\"x\"{2,}"},
      {"\"x\"+{2}", "\"x\"{2,}"},
      {"\"x\"{2}*", "(\"xx\")*"},        // gaps: 0, 2, 4, ...
      {"\"x\"{2,3}{2}", "\"x\"{4,6}"},   // no gap but bounded: expanded in turn
      {"(\"xy\"+)+ \"x\"", "(\"xy\")+ \"x\""},
      {"(\"x\" \"y\"?)+", "\"x\" (\"x\" | \"yx\")* \"y\"?"},
      {"(\"x\"+ | \"y\")+", "(\"x\" | \"y\")+"},
      {"(\"x\" | )+", "\"x\"*"},  // alternations of empties: S?
      {"( | \"x\"+ | )", "\"x\"*"},
      {"(( | \"x\"){2})*", "\"x\"*"},
      {"(\"x\"{2} | )", "(\"xx\")?"},  // S{2} or nothing: a group of its own
  };
  std::vector<std::string> texts{""};
  for (size_t i = 0; i < texts.size() && texts[i].size() < 7; ++i)
    for (const char c : {'x', 'y'}) texts.push_back(texts[i] + c);
  for (const auto& [nested, flat] : same) {
    SCOPED_TRACE(nested);
    const auto a = Grammar::parse(std::string("root ::= ") + nested + "\n");
    const auto b = Grammar::parse(std::string("root ::= ") + flat + "\n");
    for (const std::string& t : texts) ASSERT_EQ(accepts(a, t), accepts(b, t)) << "'" << t << "'";
  }
  // A repetition of what may be empty, other than S? and S*, is still a left recursion (as in llama.cpp).
  EXPECT_EQ(error_of("root ::= (\"x\" \"y\"? | )+\n"), "grammar: line 1, column 23: left recursion in rule 'root-3'");
}

// fuzz_grammar's timeout: 115 nested `+` on a literal, 58 on a rule
// reference. They compose into one `+` each, so each byte leaves a single
// stack: the literal's two bytes (U+06E0, \xdb\xa0) in turn, forever (item
// needs a root which needs an item: no sentence ends).
TEST(Gbnf, FuzzerNestedPlusIsBounded) {
  const auto g = Grammar::parse(read_file(std::string(SYNAPSE_TEST_DATA) + "/grammar/fuzz_nested_plus.gbnf"));
  GrammarMatcher m(g, byte_vocab());
  std::vector<uint64_t> mask;
  for (int step = 0; step < 64; ++step) {
    m.fill_mask(mask);
    const uint32_t want = step % 2 == 0 ? 0xdb : 0xa0;
    std::vector<uint64_t> expect(5, 0);
    expect[want >> 6] = uint64_t{1} << (want & 63);
    ASSERT_EQ(mask, expect) << "step " << step;
    m.accept(static_cast<int32_t>(want));
  }
}

// Nested repetitions through rules do not compose: x1 ::= "x"+, x2 ::= x1+,
// ... x30 ::= x29+ is the language "x"+ with 2^29 parses of 30 bytes, and
// as many stacks. Past max_matcher_work a call throws (before 64 bytes),
// naming the grammar, instead of hanging; "x"+ itself walks on.
TEST(Gbnf, AmbiguousGrammarHitsTheWorkLimit) {
  std::string text = "root ::= x30\nx1 ::= \"x\"+\n";
  for (int i = 2; i <= 30; ++i)
    text.append("x").append(std::to_string(i)).append(" ::= x").append(std::to_string(i - 1)).append("+\n");
  GrammarLimits lim;
  lim.max_matcher_work = 1u << 16;
  for (const bool ambiguous : {true, false}) {
    SCOPED_TRACE(ambiguous);
    GrammarMatcher m(Grammar::parse(ambiguous ? text : "root ::= \"x\"+\n", "root", lim), byte_vocab());
    std::vector<uint64_t> mask;
    std::string error;
    int steps = 0;
    try {
      for (; steps < 64; ++steps) {
        m.fill_mask(mask);
        ASSERT_EQ(mask[1], uint64_t{1} << ('x' - 64));
        m.accept('x');
      }
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      error = e.what();
    }
    if (!ambiguous) {
      EXPECT_EQ(steps, 64);
      EXPECT_EQ(error, "");
      continue;
    }
    EXPECT_LT(steps, 64);
    EXPECT_EQ(error.rfind("grammar: more than 65536 parser steps for one token (max_matcher_work)", 0), 0u) << error;
    // The state is unchanged: the step fails again.
    EXPECT_THROW(
        {
          m.fill_mask(mask);
          m.accept('x');
        },
        Error);
  }
}

// Token references (llama.cpp's LLAMA_GRETYPE_TOKEN / TOKEN_NOT): a vocabulary
// of text tokens 0-5, tokens 6-9 rendered as "" (control tokens) and 10, an
// end of generation. The cases are llama.cpp v0.5.0's
// tests/test-grammar-integration.cpp "simple/complex grammar with tokens",
// on ids 6-9 for its 10-14 and 20-21.
std::shared_ptr<const TokenVocabulary> token_vocab() {
  std::vector<std::string> pieces = {"a", "b", "ab", " x", "<t>", "\xc3", "", "", "", "", ""};
  std::vector<bool> eog(pieces.size(), false);
  eog.back() = true;
  return std::make_shared<const TokenVocabulary>(std::move(pieces), std::move(eog));
}

bool accepts_tokens(const std::shared_ptr<const Grammar>& g, const std::vector<int32_t>& ids) {
  GrammarMatcher m(g, token_vocab());
  for (const int32_t t : ids) {
    if (!m.allows(t)) return false;
    m.accept(t);
  }
  return m.allows(10);
}

TEST(GbnfTokens, ParsedAsReferences) {
  const auto g = Grammar::parse("root ::= <[6]> (!<[7]>)* <[7]> !<think>? <think> <[6]>\n");
  ASSERT_EQ(g->token_refs().size(), 3u);
  EXPECT_EQ(g->token_refs()[0].id, 6);
  EXPECT_EQ(g->token_refs()[1].id, 7);
  EXPECT_EQ(g->token_refs()[2].id, -1);
  EXPECT_EQ(g->token_refs()[2].text, "<think>");
  EXPECT_TRUE(Grammar::parse("root ::= \"a\"\n")->token_refs().empty());
}

TEST(GbnfTokens, MatcherRefusesUnresolvedOrOutOfRange) {
  const auto text = Grammar::parse("root ::= <think>\n");
  try {
    GrammarMatcher m(text, token_vocab());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "grammar: the token reference <think> needs the model's tokenizer");
  }
  const std::vector<int32_t> six{6};
  GrammarMatcher resolved(text, token_vocab(), six);
  EXPECT_TRUE(resolved.allows(6));
  EXPECT_FALSE(resolved.allows(4));  // "<t>" has the bytes of no token terminal
  const std::vector<int32_t> two{6, 7};
  EXPECT_THROW(GrammarMatcher(text, token_vocab(), two), Error);
  try {
    GrammarMatcher m(Grammar::parse("root ::= <[11]>\n"), token_vocab());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "grammar: the token reference <[11]> is token 11, outside the vocabulary of 11 tokens");
  }
}

TEST(GbnfTokens, SimpleGrammarWithTokens) {
  const auto g = Grammar::parse("root ::= <[6]> content <[7]>\ncontent ::= (!<[7]>)*\n");
  for (const std::vector<int32_t>& ok : std::vector<std::vector<int32_t>>{
           {6, 0, 3, 7}, {6, 0, 8, 1, 9, 2, 7}, {6, 7}, {6, 8, 9, 8, 7}, {6, 0, 7}, {6, 5, 7}})
    EXPECT_TRUE(accepts_tokens(g, ok)) << ok.size();
  for (const std::vector<int32_t>& bad : std::vector<std::vector<int32_t>>{
           {6, 0, 3}, {6}, {0, 1, 7}, {6, 7, 7}, {7, 0, 6}})
    EXPECT_FALSE(accepts_tokens(g, bad)) << bad.size();
  GrammarMatcher m(g, token_vocab());
  EXPECT_FALSE(m.is_finished());  // a token terminal is on top: not finished, no byte allowed
  EXPECT_FALSE(m.allows(10));
  m.accept(6);
  EXPECT_FALSE(m.allows(10));  // !<[7]> never takes the end of generation
}

TEST(GbnfTokens, ComplexGrammarWithTokens) {
  // llama.cpp's reasoning/content/tool-call grammar: 10, 11, 20, 21, 12, 13, 14
  // here 6, 7, 8, 9, 0, 1, 2 (tokens 3-5 are text).
  const auto g = Grammar::parse(
      "root ::= reasoning+ content tool-call*\n"
      "reasoning ::= <[6]> (!<[7]>)* <[7]>\n"
      "content ::= <[8]> (!<[9]>)* <[9]>\n"
      "tool-call ::= <[0]> name <[1]> args <[2]>\n"
      "name ::= (!<[1]>)+\n"
      "args ::= (!<[2]>)*\n");
  for (const std::vector<int32_t>& ok : std::vector<std::vector<int32_t>>{
           {6, 3, 7, 8, 3, 4, 9, 0, 3, 1, 4, 2},
           {6, 3, 7, 6, 4, 7, 8, 9, 0, 3, 1, 2},
           {6, 7, 8, 3, 9},
           {6, 3, 0, 3, 7, 8, 6, 3, 9, 0, 3, 1, 3, 2, 0, 4, 1, 2}})
    EXPECT_TRUE(accepts_tokens(g, ok));
  for (const std::vector<int32_t>& bad : std::vector<std::vector<int32_t>>{
           {8, 3, 9}, {6, 3}, {6, 7, 8, 3}, {6, 7, 8, 9, 0, 3}, {6, 7, 7, 8, 9}})
    EXPECT_FALSE(accepts_tokens(g, bad));
}

// A token's bytes never cross a token terminal; a token ending exactly at one
// leaves it for the next token. <[10]> (the end of generation) matches
// nothing: a dead end.
TEST(GbnfTokens, BytesStopAtTokenTerminals) {
  const auto g = Grammar::parse("root ::= \"a\" <[1]> \"b\" | \"a\" <[10]>\n");
  GrammarMatcher m(g, token_vocab());
  EXPECT_TRUE(m.allows(0));   // "a", then <[1]>
  EXPECT_FALSE(m.allows(2));  // "ab": its "b" would cross <[1]>
  m.accept(0);
  EXPECT_TRUE(m.allows(1));
  EXPECT_FALSE(m.allows(10));
  EXPECT_FALSE(m.allows(0));
  m.accept(1);
  EXPECT_TRUE(m.allows(1));  // now the byte "b"
  m.accept(1);
  EXPECT_TRUE(m.is_complete());
  EXPECT_TRUE(m.is_finished());
  const auto dead = Grammar::parse("root ::= \"a\" <[10]> | \"b\"\n");
  GrammarMatcher d(dead, token_vocab());
  EXPECT_FALSE(d.allows(0));
  EXPECT_TRUE(d.allows(1));
}

// Token terminals beside bytes, through the mask: a token allowed both by
// its bytes and by a terminal (<t> is token 4 and the text "<t>"), negations
// that agree and disagree; the mask equals allows() in every state of random
// walks, and accept() follows both ways at once.
TEST(GbnfTokens, MaskEqualsTokenByTokenChecks) {
  const auto g = Grammar::parse(
      "root ::= (item \" x\")* end\n"
      "item ::= \"<t>\" | <[4]> \"a\" | !<[6]> | (!<[7]> | !<[7]>) \"b\" | \"a\"+ <[8]> | <[9]> !<[0]>\n"
      "end ::= <[7]> | \"\\xc3\\xa9\"\n");
  std::vector<std::string> pieces = {"a", "b", "ab", " x", "<t>", "\xc3", "", "", "", "", "", " x<t>", "\xa9", "<"};
  std::vector<bool> eog(pieces.size(), false);
  eog[10] = true;
  const auto vocab = std::make_shared<const TokenVocabulary>(pieces, eog);
  const int32_t n = static_cast<int32_t>(pieces.size());
  std::mt19937 rng(5);
  int n_steps = 0;
  for (int run = 0; run < 40; ++run) {
    GrammarMatcher m(g, vocab);
    for (int step = 0; step < 30; ++step, ++n_steps) {
      std::vector<uint64_t> mask;
      m.fill_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < n; ++t) {
        const bool bit = (mask[0] >> t) & 1;
        ASSERT_EQ(bit, m.allows(t)) << "run " << run << " step " << step << " token " << t;
        if (bit && t != 10) allowed.push_back(t);
      }
      if (allowed.empty()) break;
      m.accept(allowed[rng() % allowed.size()]);
    }
  }
  EXPECT_GT(n_steps, 400);
  // The negations disagree at the start: every token but the end of
  // generation. After <[9]> (taken by <[9]> and by both negations) only
  // !<[0]>, " x" and "b" go on: every token but 0 and the end.
  GrammarMatcher m(g, vocab);
  std::vector<uint64_t> mask;
  m.fill_mask(mask);
  const uint64_t all = (uint64_t{1} << n) - 1;
  EXPECT_EQ(mask[0], all - (uint64_t{1} << 10));
  m.accept(9);
  m.fill_mask(mask);
  EXPECT_EQ(mask[0], all - (uint64_t{1} << 10) - 1);
}

}  // namespace
}  // namespace synapse
