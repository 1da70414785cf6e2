// tests/data/grammar/schema_cases.json through the whole path: each schema
// converted to GBNF, compiled, and every instance fed byte by byte to a
// matcher: `accept` texts must be sentences of the grammar, `reject` and
// `reject_by_convention` texts must not (README.md beside the file). And
// what lists cannot cover: lengths and item counts at every count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
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

// Counts over the direct limit (min(256, limits.max_repetition)) are written
// in base min(16, limit): one walk adds items one by one and, at every count
// from 0 to past the maximum, the closing quote or bracket is allowed exactly
// when the count is within the bounds, and one more item only below the
// maximum.
TEST(SchemaCounts, DecomposedBoundsExactAtEveryCount) {
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
      GrammarMatcher m(g, test::byte_vocab());
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

// minProperties/maxProperties at every count: each object of the required
// properties, any subset of the optional ones (in order) and 0 to 4
// additional ones (distinct keys x0, x1, ..., or one key repeated) is
// accepted exactly when s optional and k additional ones make
// s + min(k, 1) >= lo (a repeated additional key counts once toward the
// minimum) and s + k <= hi, lo and hi counted beyond the required ones; the
// keys it then holds, distinct ones counted, are always within the bounds.
TEST(SchemaCounts, PropertiesExactAtEveryCount) {
  constexpr size_t kNone = SIZE_MAX;
  struct Case {
    size_t n_required, n_optional;
    bool extra;
    size_t min, max;
  };
  const Case cases[] = {{0, 3, false, 2, kNone}, {0, 3, false, 0, 2},     {0, 3, false, 2, 2},
                        {0, 5, false, 2, 3},     {0, 4, true, 0, 2},      {0, 4, true, 2, 3},
                        {0, 2, true, 3, kNone},  {1, 3, true, 3, 4},      {2, 3, true, 2, 3},
                        {2, 2, false, 4, 4},     {1, 0, true, 1, 5},      {0, 0, true, 0, 3},
                        {0, 0, true, 1, 3},      {0, 3, false, 1, kNone}, {0, 3, true, 0, 1},
                        {1, 2, true, 2, 2}};
  for (const Case& t : cases) {
    std::string props, required;
    for (size_t i = 0; i < t.n_required + t.n_optional; ++i) {
      const std::string key(1, static_cast<char>('a' + i));
      props += std::string(i ? ", " : "") + "\"" + key + "\": {\"type\": \"null\"}";
      if (i < t.n_required) required += std::string(i ? ", " : "") + "\"" + key + "\"";
    }
    std::string schema = R"({"type": "object", "properties": {)" + props + R"(}, "required": [)" + required +
                         R"(], "additionalProperties": )" + (t.extra ? R"({"type": "integer"})" : "false") +
                         R"(, "minProperties": )" + std::to_string(t.min) +
                         (t.max == kNone ? "" : R"(, "maxProperties": )" + std::to_string(t.max)) + "}";
    SCOPED_TRACE(schema);
    const auto g = Grammar::parse(json_schema_to_gbnf(schema));
    const size_t lo = t.min > t.n_required ? t.min - t.n_required : 0;
    const size_t hi = t.max == kNone ? kNone : t.max - t.n_required;
    size_t n_accepted = 0;
    for (size_t subset = 0; subset < (size_t{1} << t.n_optional); ++subset) {
      for (size_t k = 0; k <= (t.extra ? 4 : 0); ++k) {
        for (const bool repeated : {false, true}) {
          if (repeated && k < 2) continue;
          std::vector<std::string> kvs;
          for (size_t i = 0; i < t.n_required; ++i) kvs.push_back("\"" + std::string(1, 'a' + i) + "\":null");
          size_t s = 0;
          for (size_t i = 0; i < t.n_optional; ++i) {
            if (!((subset >> i) & 1)) continue;
            kvs.push_back("\"" + std::string(1, 'a' + t.n_required + i) + "\":null");
            ++s;
          }
          for (size_t j = 0; j < k; ++j)
            kvs.push_back("\"x" + std::to_string(repeated ? 0 : j) + "\":" + std::to_string(j));
          std::string text = "{";
          for (size_t i = 0; i < kvs.size(); ++i) text += (i ? "," : "") + kvs[i];
          text += "}";
          const bool expected = s + std::min<size_t>(k, 1) >= lo && s + k <= hi;
          const bool accepted = test::accepts(g, text);
          EXPECT_EQ(accepted, expected) << text;
          if (accepted) {
            const size_t distinct = t.n_required + s + (repeated ? 1 : k);
            EXPECT_TRUE(distinct >= t.min && distinct <= t.max) << text;
            ++n_accepted;
          }
        }
      }
    }
    EXPECT_GT(n_accepted, 0u);
  }
}

// Exact comparison of two decimal numerals (-?D+(.D+)?): -1, 0 or 1.
int compare_decimal(std::string a, std::string b) {
  auto split = [](std::string& s, bool& neg, std::string& i, std::string& f) {
    neg = !s.empty() && s[0] == '-';
    if (neg) s.erase(0, 1);
    const size_t dot = s.find('.');
    i = s.substr(0, dot);
    f = dot == std::string::npos ? "" : s.substr(dot + 1);
    i.erase(0, std::min(i.find_first_not_of('0'), i.size()));
    while (!f.empty() && f.back() == '0') f.pop_back();
    if (i.empty() && f.empty()) neg = false;  // -0 is 0
  };
  bool na, nb;
  std::string ia, fa, ib, fb;
  split(a, na, ia, fa);
  split(b, nb, ib, fb);
  if (na != nb) return na ? -1 : 1;
  int c = ia.size() != ib.size() ? (ia.size() < ib.size() ? -1 : 1) : ia.compare(ib);
  if (c == 0) {
    const size_t n = std::max(fa.size(), fb.size());
    fa.resize(n, '0');
    fb.resize(n, '0');
    c = fa.compare(fb);
  }
  c = c < 0 ? -1 : c > 0 ? 1 : 0;
  return na ? -c : c;
}

// Bounds on numbers: every text the grammar accepts among ~1,400 around the
// bounds (integers, decimals with 1 to 16 fraction digits, 14- and 15-digit
// integer parts, exponents, -0) is within the bounds, exactly and after
// strtod (as validators read it); and the subset number_range promises is
// there: every integer in range, every I.5 and -I.5 with [I, I+1] in range.
TEST(SchemaNumbers, BoundedNumbersWithinBoundsExactlyAndAsDoubles) {
  struct Case {
    const char* schema;
    const char* lo;  // "" for none
    bool lo_exclusive;
    const char* hi;
    bool hi_exclusive;
  };
  const Case cases[] = {
      {R"({"type": "number", "minimum": 0})", "0", false, "", false},
      {R"({"type": "number", "exclusiveMinimum": 0})", "0", true, "", false},
      {R"({"type": "number", "exclusiveMaximum": 0})", "", false, "0", true},
      {R"({"type": "number", "minimum": -1.5, "maximum": 2.5})", "-1.5", false, "2.5", false},
      {R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})", "0", true, "1", true},
      {R"({"type": "number", "minimum": 99, "exclusiveMaximum": 101})", "99", false, "101", true},
      {R"({"type": "number", "exclusiveMinimum": -3, "maximum": 7})", "-3", true, "7", false},
      {R"({"type": "number", "minimum": 5, "exclusiveMinimum": true, "maximum": 20, "exclusiveMaximum": true})", "5",
       true, "20", true},
      {R"({"type": "number", "exclusiveMinimum": -20.25, "exclusiveMaximum": -2.75})", "-20.25", true, "-2.75", true},
      {R"({"type": "number", "exclusiveMinimum": 12345678901234, "exclusiveMaximum": 12345678901236})",
       "12345678901234", true, "12345678901236", true},
      {R"({"type": "number", "exclusiveMinimum": 123456789012345, "maximum": 123456789012347})", "123456789012345",
       true, "123456789012347", false},
      {R"({"type": "number", "minimum": -999999999999999, "exclusiveMaximum": -999999999999997})",
       "-999999999999999", false, "-999999999999997", true},
  };
  std::vector<std::string> ints;
  for (int i = 0; i <= 25; ++i) ints.push_back(std::to_string(i));
  for (const char* i : {"99", "100", "101", "12345678901233", "12345678901234", "12345678901235", "12345678901236",
                        "123456789012344", "123456789012345", "123456789012346", "123456789012347",
                        "999999999999996", "999999999999997", "999999999999998", "999999999999999",
                        "1000000000000000", "9999999999999999"}) {
    ints.push_back(i);
  }
  const char* const fractions[] = {"0",  "5",  "00", "05", "50", "25", "75", "9", "99", "1",
                                   "0000000000000001", "000000000000001", "00000000000001", "9999999999999999",
                                   "999999999999999", "99999999999999", "4999999999999999"};
  std::vector<std::string> texts;
  // (appends, not const char* + std::string: GCC 12's -Wrestrict misfires on those, bug 105329)
  for (const std::string& i : ints) {
    for (const char* sign : {"", "-"}) {
      const std::string n = std::string(sign).append(i);
      texts.push_back(n);
      for (const char* f : fractions) texts.push_back(std::string(n).append(".").append(f));
      texts.push_back(std::string(n).append("e0"));
      texts.push_back(std::string(n).append(".5E1"));
    }
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schema);
    const auto g = Grammar::parse(json_schema_to_gbnf(c.schema));
    auto in_range = [&](const std::string& t) {  // exactly, t without exponent
      if (*c.lo && compare_decimal(t, c.lo) < (c.lo_exclusive ? 1 : 0)) return false;
      if (*c.hi && compare_decimal(t, c.hi) > (c.hi_exclusive ? -1 : 0)) return false;
      return true;
    };
    size_t n_accepted = 0;
    for (const std::string& t : texts) {
      const bool exponent = t.find_first_of("eE") != std::string::npos;
      const bool accepted = accepts(g, t);
      if (!accepted) {
        // The promised subset.
        if (exponent || !in_range(t)) continue;
        const size_t dot = t.find('.');
        if (dot == std::string::npos && t.size() <= 16 && t != "-0") {
          ADD_FAILURE() << "an integer in range is rejected: " << t;
        } else if (dot != std::string::npos && t.substr(dot) == ".5" && t.size() <= 17) {
          const std::string i = t.substr(0, dot);
          const std::string next = std::to_string(std::stoll(i) + (i[0] == '-' ? -1 : 1));
          if (in_range(i) && in_range(next)) ADD_FAILURE() << "I.5 with [I, I+1] in range is rejected: " << t;
        }
        continue;
      }
      ++n_accepted;
      EXPECT_FALSE(exponent) << t;
      EXPECT_TRUE(in_range(t)) << t;
      const double x = std::strtod(t.c_str(), nullptr);
      if (*c.lo) {
        const double lo = std::strtod(c.lo, nullptr);
        EXPECT_TRUE(c.lo_exclusive ? x > lo : x >= lo) << t << " as a double";
      }
      if (*c.hi) {
        const double hi = std::strtod(c.hi, nullptr);
        EXPECT_TRUE(c.hi_exclusive ? x < hi : x <= hi) << t << " as a double";
      }
    }
    EXPECT_GT(n_accepted, 0u);
  }
}

// minLength/maxLength beside a pattern: over a small alphabet, every string
// up to a length is accepted exactly when std::regex (ECMAScript, JSON
// Schema's dialect) finds the pattern in it and its length is within the
// bounds.
TEST(SchemaPatterns, LengthsBesidePatternExactOnEveryShortString) {
  constexpr size_t kNone = SIZE_MAX;
  struct Case {
    const char* pattern;
    size_t min, max;
    const char* alphabet;
    size_t up_to;
  };
  const Case cases[] = {
      {"^a+$", 2, kNone, "ab", 7},
      {"^[a-b]+$|^[0-9]{3}$", 4, 5, "a0b", 6},
      {"^x-", 0, 4, "x-a", 6},
      {"-y$", 4, kNone, "-ya", 6},
      {"[0-9]{3}", 3, 3, "0a", 6},
      {"^(ab|c)[0-9]*$", 3, 4, "abc0", 6},
      {"^(h|hs):.*", 4, 5, "hs:a", 7},
      {"^([a-]|[a][a-]*[a])$", 0, 4, "a-", 7},
      {"^(ab)*c?d+$", 0, 1, "abcd", 4},
      {"^a|b$", 3, 3, "abc", 5},
      {"^[0-9]{2}[a-z]*-[0-9]{2}$", 6, 7, "0a-", 8},
      // The count dropped where the pattern cannot read past maxLength.
      {"^[ab]{1,2}(-[ab]{1,2}){1,2}$", 0, 7, "a-b", 9},
      {"^[ab]{1,3}(-a{1,2})?$", 2, 5, "ab-", 8},
  };
  for (const Case& c : cases) {
    nlohmann::json schema{{"type", "string"}, {"pattern", c.pattern}, {"minLength", c.min}};
    if (c.max != kNone) schema["maxLength"] = c.max;
    SCOPED_TRACE(schema.dump());
    const auto g = Grammar::parse(json_schema_to_gbnf(schema.dump()));
    const std::regex re(c.pattern, std::regex::ECMAScript);
    const std::string alphabet = c.alphabet;
    size_t n_accepted = 0;
    std::vector<size_t> digits;  // the string's letters, as indices into the alphabet
    for (;;) {
      std::string text;
      for (const size_t d : digits) text += alphabet[d];
      const bool expected = std::regex_search(text, re) && text.size() >= c.min && text.size() <= c.max;
      const bool accepted = accepts(g, "\"" + text + "\"");
      EXPECT_EQ(accepted, expected) << text;
      n_accepted += accepted;
      // The next string: shortest first, then in alphabet order.
      size_t i = 0;
      while (i < digits.size() && ++digits[i] == alphabet.size()) digits[i++] = 0;
      if (i == digits.size()) {
        if (digits.size() == c.up_to) break;
        digits.push_back(0);
      }
    }
    EXPECT_GT(n_accepted, 0u);
  }
}

// ^(?:\S+\s+){0,29}\S+$ of at most 300 code points: the exact product of
// words and code points read is over 4096 states, so the converter writes
// word_count_automaton's subset: each word with the run after it takes
// ceil(length / 10) slots of 10 (300 / 30), the last word its length, and
// the text at most 300. Random texts of 1 to 34 words (1 to 14 letters, 1 or
// 2 spaces between) are accepted exactly when that holds, and every one
// accepted has at most 30 words and 300 code points (valid).
TEST(SchemaPatterns, WordCountSubsetAsDocumented) {
  const auto g = Grammar::parse(json_schema_to_gbnf(
      R"({"type": "string", "pattern": "^(?:\\S+\\s+){0,29}\\S+$", "minLength": 1, "maxLength": 300})"));
  std::mt19937 rng(7);
  size_t n_accepted = 0, n_valid_left_out = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n_words = 1 + rng() % 34;
    std::string text;
    size_t slots = 0;  // tens taken by the words before the last, with their runs
    for (size_t w = 0; w < n_words; ++w) {
      const size_t len = 1 + rng() % 14, run = w + 1 < n_words ? 1 + rng() % 2 : 0;
      text += std::string(len, 'a') + std::string(run, ' ');
      if (w + 1 < n_words) slots += (len + run + 9) / 10;
    }
    const size_t last = text.size() - text.find_last_of(' ') - 1;
    const bool in_subset = n_words == 1 ? text.size() <= 300 : slots * 10 + last <= 300;
    const bool valid = n_words <= 30 && text.size() <= 300;
    const bool accepted = accepts(g, "\"" + text + "\"");
    EXPECT_EQ(accepted, in_subset) << text;
    EXPECT_TRUE(!accepted || valid) << text;
    n_accepted += accepted;
    n_valid_left_out += valid && !accepted;
  }
  EXPECT_GT(n_accepted, 50u);
  EXPECT_GT(n_valid_left_out, 0u);
}

// A known format beside a pattern is the format's rule written as a pattern
// (format_pattern) in the pattern's automaton: beside "" (every string) it
// accepts exactly what the format's own rule does, over dates of edge years,
// months 00-13 and days 00-32, times of edge fields, and date-times of both.
TEST(SchemaPatterns, FormatsAsPatternsAreTheirRules) {
  auto both = [](const char* format) {
    const std::string own = nlohmann::json{{"type", "string"}, {"format", format}}.dump();
    const std::string with = nlohmann::json{{"type", "string"}, {"format", format}, {"pattern", ""}}.dump();
    return std::pair{Grammar::parse(json_schema_to_gbnf(own)), Grammar::parse(json_schema_to_gbnf(with))};
  };
  std::vector<std::string> dates, times;
  for (const char* y : {"0000", "0001", "0099", "0400", "1900", "2000", "2023", "2024", "9999", "199"})
    for (int m = 0; m <= 13; ++m)
      for (int d = 0; d <= 32; ++d) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s-%02d-%02d", y, m, d);
        dates.push_back(buf);
      }
  for (const char* h : {"00", "09", "19", "20", "23", "24"})
    for (const char* mi : {"00", "59", "60"})
      for (const char* sec : {"00", "59", "60"})
        for (const char* frac : {"", ".123", ".12"})
          for (const char* off : {"Z", "+00:00", "-23:59", "+24:00", "z", ""})
            times.push_back(std::string(h) + ":" + mi + ":" + sec + frac + off);
  size_t n_accepted = 0;
  for (const char* format : {"date", "time", "date-time"}) {
    SCOPED_TRACE(format);
    const auto [own, with] = both(format);
    std::vector<std::string> texts;
    if (std::string(format) == "date") texts = dates;
    if (std::string(format) == "time") texts = times;
    if (std::string(format) == "date-time")
      for (size_t i = 0; i < dates.size(); i += 37)
        for (size_t j = 0; j < times.size(); j += 13) texts.push_back(dates[i] + "T" + times[j]);
    for (const std::string& t : texts) {
      const bool a = accepts(own, "\"" + t + "\"");
      EXPECT_EQ(accepts(with, "\"" + t + "\""), a) << t;
      n_accepted += a;
    }
  }
  EXPECT_GT(n_accepted, 1000u);
}

// The largest maxLength of JSONSchemaBench's Github_medium: a small grammar.
TEST(SchemaCounts, MaxLength65535IsSmall) {
  const auto g = Grammar::parse(json_schema_to_gbnf(R"({"type": "string", "maxLength": 65535})"));
  EXPECT_LT(g->n_rules(), 400u);
}

}  // namespace
}  // namespace synapse
