// synapse::json_schema_to_gbnf: the exact grammar of small schemas (checked by
// hand against llama.cpp's converter, common/json-schema-to-grammar.cpp, and
// its tests), the error of every keyword it cannot enforce, its limits, and
// the cases of tests/data/grammar/schema_cases.json (converted and
// well-formed here; their instances are for the GBNF matcher).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "synapse/error.hpp"
#include "synapse/grammar.hpp"
#include "grammar_util.hpp"

namespace synapse {
namespace {

// The fixed rules, as the converter writes them (llama.cpp's, but `char`,
// `date` and `email`: see src/grammar/json_schema.cpp).
const std::map<std::string, std::string>& fixed_rules() {
  static const std::map<std::string, std::string> rules = {
      {"space", R"(| " " | "\n"{1,2} [ \t]{0,20})"},
      {"boolean", R"(("true" | "false"))"},
      {"decimal-part", R"([0-9]{1,16})"},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})"},
      {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?)"},
      {"integer", R"(("-"? integral-part))"},
      {"value", "object | array | string | number | boolean | null"},
      {"object", R"("{" space ( string ":" space value ("," space string ":" space value)* )? space "}")"},
      {"array", R"("[" space ( value ("," space value)* )? space "]")"},
      {"uuid",
       R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"")"},
      {"char", R"([^"\\\x7F\x00-\x1F\uD800-\uDFFF] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | )"
               R"([dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2})))"},
      {"string", R"("\"" char* "\"")"},
      {"null", R"("null")"},
      {"date",
       R"(( [1-9] [0-9]{3} | "0" [1-9] [0-9]{2} | "00" [1-9] [0-9] | "000" [1-9] ) "-" )"
       R"(( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ) | )"
       R"(( "0" [469] | "11" ) "-" ( "0" [1-9] | [1-2] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) ) | )"
       R"(( [0-9]{2} ( "0" [48] | [2468] [048] | [13579] [26] ) | ( "0" [48] | [2468] [048] | [13579] [26] ) "00" ) )"
       R"("-02-29")"},
      {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? )"
               R"(( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
      {"date-time", R"(date "T" time)"},
      {"date-string", R"("\"" date "\"")"},
      {"time-string", R"("\"" time "\"")"},
      {"date-time-string", R"("\"" date-time "\"")"},
      {"email",
       R"([0-9A-Za-z!#$%&'*+/=?\x5E_`{|}~\-]+ ( "." [0-9A-Za-z!#$%&'*+/=?\x5E_`{|}~\-]+ )* "@" )"
       R"([0-9A-Za-z] ( [0-9A-Za-z\-]{0,61} [0-9A-Za-z] )? ( "." [0-9A-Za-z] ( [0-9A-Za-z\-]{0,61} [0-9A-Za-z] )? )+)"},
      {"email-string", R"("\"" email "\"")"},
  };
  return rules;
}

// The grammar of `rules` ("name ::= body" each) and of the fixed rules named
// in `fixed` (space always), in the converter's order: by name.
std::string grammar(const std::vector<std::string>& rules, const std::vector<std::string>& fixed = {}) {
  std::map<std::string, std::string> lines;
  for (const std::string& r : rules) lines[r.substr(0, r.find(" ::= "))] = r;
  for (const std::string& f : fixed) lines[f] = f + " ::= " + fixed_rules().at(f);
  lines["space"] = "space ::= " + fixed_rules().at("space");
  std::string out;
  for (const auto& [name, line] : lines) out += line + "\n";
  return out;
}

std::string convert(const std::string& schema, const GrammarLimits& limits = {}) {
  return json_schema_to_gbnf(schema, limits);
}

// The message of the Error(invalid_argument) the conversion throws.
std::string error_of(const std::string& schema, const GrammarLimits& limits = {}) {
  try {
    json_schema_to_gbnf(schema, limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << schema;
    return e.what();
  }
  ADD_FAILURE() << "no error for " << schema;
  return "";
}

// A cheap check of GBNF text (llama.cpp grammars/README.md): each line is
// "name ::= body"; literals, classes, names, groups and quantifiers are well
// formed; every rule named is defined once; root is. Returns "" or the fault.
std::string check_gbnf(const std::string& text) {
  std::set<std::string> defined, used;
  std::istringstream lines(text);
  std::string line;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; };
  while (std::getline(lines, line)) {
    const size_t sep = line.find(" ::= ");
    if (sep == std::string::npos || sep == 0) return "no \"name ::= \" in: " + line;
    const std::string name = line.substr(0, sep);
    for (char c : name)
      if (!word(c)) return "bad rule name " + name;
    if (!defined.insert(name).second) return "rule defined twice: " + name;
    const std::string body = line.substr(sep + 5);
    int depth = 0;
    bool item = false;  // a quantifier may follow
    auto escape = [&](size_t& i) {
      const char e = body[i + 1];
      const size_t hex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
      if (hex) {
        for (size_t k = 0; k < hex; ++k)
          if (!std::isxdigit(static_cast<unsigned char>(body[i + 2 + k]))) return false;
        i += 2 + hex;
        return true;
      }
      if (std::string("trn\\\"[]-").find(e) == std::string::npos) return false;
      i += 2;
      return true;
    };
    for (size_t i = 0; i < body.size();) {
      const char c = body[i];
      if (c == ' ') {
        ++i;
      } else if (c == '"' || c == '[') {
        const char close = c == '"' ? '"' : ']';
        size_t j = i + 1;
        if (c == '[' && body[j] == '^') ++j;
        if (c == '[' && body[j] == ']') return "empty class in " + name;
        while (j < body.size() && body[j] != close) {
          if (body[j] == '\\') {
            if (!escape(j)) return "bad escape in " + name + " at " + body.substr(j, 6);
          } else {
            ++j;
          }
        }
        if (j >= body.size()) return "unterminated literal or class in " + name;
        i = j + 1;
        item = true;
      } else if (word(c)) {
        size_t j = i;
        while (j < body.size() && word(body[j])) ++j;
        used.insert(body.substr(i, j - i));
        i = j;
        item = true;
      } else if (c == '(') {
        ++depth, ++i, item = false;
      } else if (c == ')') {
        if (--depth < 0) return "unbalanced ')' in " + name;
        ++i, item = true;
      } else if (c == '|') {
        ++i, item = false;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!item) return "quantifier without an item in " + name;
        if (c == '{') {
          const size_t j = body.find('}', i);
          if (j == std::string::npos) return "unterminated {m,n} in " + name;
          const std::string q = body.substr(i + 1, j - i - 1);
          if (q.empty() || q.find_first_not_of("0123456789,") != std::string::npos || q[0] == ',') {
            return "bad repetition {" + q + "} in " + name;
          }
          i = j + 1;
        } else {
          ++i;
        }
        item = false;
      } else {
        return std::string("unexpected '") + c + "' in " + name;
      }
    }
    if (depth != 0) return "unbalanced '(' in " + name;
  }
  if (!defined.count("root")) return "no root rule";
  for (const std::string& u : used)
    if (!defined.count(u)) return "undefined rule " + u;
  return "";
}

// --- the grammar of small schemas ---------------------------------------------

TEST(JsonSchemaToGbnf, Primitives) {
  EXPECT_EQ(convert(R"({"type": "string"})"), grammar({R"(root ::= "\"" char* "\"")"}, {"char"}));
  EXPECT_EQ(convert(R"({"type": "boolean"})"), grammar({R"(root ::= ("true" | "false"))"}));
  EXPECT_EQ(convert(R"({"type": "null"})"), grammar({R"(root ::= "null")"}));
  EXPECT_EQ(convert(R"({"type": "integer"})"), grammar({R"(root ::= ("-"? integral-part))"}, {"integral-part"}));
  EXPECT_EQ(convert(R"({"type": "number"})"),
            grammar({R"(root ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?)"},
                    {"integral-part", "decimal-part"}));
}

TEST(JsonSchemaToGbnf, AnyValue) {
  const std::string any = grammar(
      {"root ::= object | array | string | number | boolean | null"},
      {"array", "boolean", "char", "decimal-part", "integral-part", "null", "number", "object", "string", "value"});
  EXPECT_EQ(convert("{}"), any);
  EXPECT_EQ(convert("true"), any);
  EXPECT_EQ(convert(R"({"description": "no type, no constraint", "$comment": "x", "title": "t"})"), any);
}

TEST(JsonSchemaToGbnf, IntegerBounds) {
  // The same languages as llama.cpp's "min 0", "max 30", "min -123 max 42",
  // "min 25" and "min -10 max 10" cases, written as digit ranges per length.
  EXPECT_EQ(convert(R"({"type": "integer", "minimum": 0})"), grammar({"root ::= ([0] | [1-9] [0-9]{0,15})"}));
  EXPECT_EQ(convert(R"({"type": "integer", "maximum": 30})"),
            grammar({R"(root ::= ("-" [1-9] [0-9]{0,15} | [0-9] | [1-2] [0-9] | [3] "0"))"}));
  EXPECT_EQ(convert(R"({"type": "integer", "minimum": -123, "maximum": 42})"),
            grammar({R"(root ::= ("-" ([1-9] | [1-9] [0-9] | "1" ([0-1] [0-9] | [2] [0-3])) | [0-9] | [1-3] [0-9] | )"
                     R"([4] [0-2]))"}));
  EXPECT_EQ(convert(R"({"type": "integer", "minimum": 25})"),
            grammar({"root ::= ([2] [5-9] | [3-9] [0-9] | [1-9] [0-9]{2,15})"}));
  EXPECT_EQ(convert(R"({"type": "integer", "minimum": -10, "maximum": 10})"),
            grammar({R"(root ::= ("-" ([1-9] | "10") | [0-9] | "10"))"}));
  EXPECT_EQ(convert(R"({"type": "integer", "maximum": -5})"),
            grammar({R"(root ::= ("-" ([5-9] | [1-9] [0-9]{1,15})))"}));
  // Exclusive and fractional bounds admit the integers on their side; draft
  // 4's boolean exclusiveMinimum makes minimum exclusive.
  EXPECT_EQ(convert(R"({"type": "integer", "exclusiveMinimum": 0.5, "exclusiveMaximum": 10})"),
            grammar({"root ::= ([1-9])"}));
  EXPECT_EQ(convert(R"({"type": "integer", "minimum": 0.5, "maximum": 2.5})"), grammar({"root ::= ([1-2])"}));
  EXPECT_EQ(convert(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})"),
            grammar({"root ::= ([6-9] | [1-9] [0-9]{1,15})"}));
  // Both kinds of bound at once: the tighter holds.
  EXPECT_EQ(convert(R"({"type": "integer", "minimum": 1, "exclusiveMinimum": 3, "maximum": 4})"),
            grammar({R"(root ::= ("4"))"}));
  // A bound past the 16 digits of an unbounded side widens it to its own.
  EXPECT_EQ(convert(R"({"type": "integer", "minimum": 1e17})"), grammar({"root ::= ([1-9] [0-9]{17})"}));
}

// Bounds of other numbers: integers in range and decimals I.F (no exponent)
// whose [I, I+1] is in range, or next to an exclusive bound, I.F of at most
// 15 significant digits (with F's last digit not 0 above a lower bound).
TEST(JsonSchemaToGbnf, NumberBounds) {
  EXPECT_EQ(convert(R"({"type": "number", "minimum": 0, "maximum": 100})"),
            grammar({R"(root ::= ([0-9] | [1-9] [0-9] | "100" | ([0-9] | [1-9] [0-9]) "." [0-9]{1,16}))"}));
  EXPECT_EQ(convert(R"({"type": "number", "minimum": 0})"),
            grammar({R"(root ::= ([0] | [1-9] [0-9]{0,15} | ([0] | [1-9] [0-9]{0,14}) "." [0-9]{1,16}))"}));
  EXPECT_EQ(convert(R"({"type": "number", "exclusiveMinimum": 0})"),
            grammar({R"(root ::= ([1-9] [0-9]{0,15} | [1-9] [0-9]{0,14} "." [0-9]{1,16} | "0." [0-9]{0,14} [1-9]))"}));
  EXPECT_EQ(convert(R"({"type": "number", "exclusiveMaximum": 0})"),
            grammar({R"(root ::= ("-" [1-9] [0-9]{0,15} | "-" ([1-9] [0-9]{0,14} "." [0-9]{1,16} | )"
                     R"("0." [0-9]{0,14} [1-9])))"}));
  EXPECT_EQ(convert(R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})"),
            grammar({R"(root ::= ("0." [0-9]{0,14} [1-9]))"}));
  // Fractional bounds round inward: -1.5..2.5 is -1..2 (and -1.5 itself,
  // or 2.25, are left out).
  EXPECT_EQ(convert(R"({"type": "number", "minimum": -1.5, "maximum": 2.5})"),
            grammar({R"(root ::= ("-" "1" | [0-2] | [0-1] "." [0-9]{1,16} | "-" "0" "." [0-9]{1,16}))"}));
  // Next to an exclusive upper bound: 15 significant digits at most.
  EXPECT_EQ(convert(R"({"type": "number", "minimum": 99, "exclusiveMaximum": 101})"),
            grammar({R"(root ::= ("99" | "100" | "99" "." [0-9]{1,16} | "100." [0-9]{1,12}))"}));
  // Draft 4's boolean exclusiveMinimum, and a draft 6 number beside it: the tighter.
  EXPECT_EQ(convert(R"({"type": "number", "minimum": 5, "exclusiveMinimum": true, "maximum": 6})"),
            convert(R"({"type": "number", "exclusiveMinimum": 5, "maximum": 6})"));
  EXPECT_EQ(convert(R"({"type": "number", "minimum": 5, "exclusiveMinimum": 5, "maximum": 6})"),
            convert(R"({"type": "number", "exclusiveMinimum": 5, "maximum": 6})"));
  EXPECT_EQ(convert(R"({"type": ["integer", "number"], "maximum": 10.5, "minimum": 9})"),
            grammar({R"(root ::= ("9" | "10" | "9" "." [0-9]{1,16}))"}));
  // [9, 10] is not within 9.5: 9 alone.
  EXPECT_EQ(convert(R"({"type": "number", "maximum": 9.5, "minimum": 9})"), grammar({R"(root ::= ("9"))"}));
  // Without "type", bounds make it a number.
  EXPECT_EQ(convert(R"({"maximum": 10.5, "minimum": 9})"),
            convert(R"({"type": "number", "maximum": 10.5, "minimum": 9})"));
  EXPECT_EQ(error_of(R"({"type": "number", "minimum": 1, "exclusiveMaximum": 1})"),
            R"(json_schema: keyword "minimum" at the root: no number is within the bounds)");
}

TEST(JsonSchemaToGbnf, StringLengths) {
  EXPECT_EQ(convert(R"({"type": "string", "minLength": 3})"), grammar({R"(root ::= "\"" char{3,} "\"")"}, {"char"}));
  EXPECT_EQ(convert(R"({"type": "string", "minLength": 1})"), grammar({R"(root ::= "\"" char+ "\"")"}, {"char"}));
  EXPECT_EQ(convert(R"({"type": "string", "maxLength": 3})"), grammar({R"(root ::= "\"" char{0,3} "\"")"}, {"char"}));
  EXPECT_EQ(convert(R"({"type": "string", "minLength": 1, "maxLength": 4})"),
            grammar({R"(root ::= "\"" char{1,4} "\"")"}, {"char"}));
  EXPECT_EQ(convert(R"({"type": "string", "maxLength": 0})"), grammar({R"(root ::= "\"" "\"")"}));
  // Without "type", the length keywords make it a string (llama.cpp).
  EXPECT_EQ(convert(R"({"minLength": 2, "maxLength": 2})"), grammar({R"(root ::= "\"" char{2} "\"")"}, {"char"}));
  // Up to 256, GBNF's {m,n}; above, digits in base 16: L <= 300 = 18 * 16 +
  // 12 is L = 16a + b with a <= 17 and b <= 15, or a = 18 and b <= 12; and
  // a <= 17 = 16 + 1 in turn is a = 16c + d with c = 0, or c = 1 and d <= 1.
  // More than 16 choices: a rule shared by every use.
  EXPECT_EQ(convert(R"({"type": "string", "maxLength": 16})"), grammar({R"(root ::= "\"" char{0,16} "\"")"}, {"char"}));
  EXPECT_EQ(convert(R"({"type": "string", "maxLength": 256})"),
            grammar({R"(char-0-256 ::= char{0,256})", R"(root ::= "\"" char-0-256 "\"")"}, {"char"}));
  EXPECT_EQ(convert(R"({"type": "string", "maxLength": 300})"),
            grammar({R"(char-0-300 ::= ((char-x16{0,15} | char-x256 char-x16?) char{0,15} | )"
                     R"(char-x256 char-x16{2} char{0,12}))",
                     R"(char-x16 ::= char{16})", R"(char-x256 ::= char-x16{16})", R"(root ::= "\"" char-0-300 "\"")"},
                    {"char"}));
  EXPECT_EQ(convert(R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": 30},
                        "b": {"type": "string", "maxLength": 30}}, "required": ["a", "b"]})"),
            grammar({R"(a ::= "\"" char-0-30 "\"")", R"(a-kv ::= "\"a\"" space ":" space a)",
                     R"(b ::= "\"" char-0-30 "\"")", R"(b-kv ::= "\"b\"" space ":" space b)",
                     R"(char-0-30 ::= char{0,30})",
                     R"(root ::= "{" space a-kv "," space b-kv space "}")"},
                    {"char"}));
  // 300 = 256 + 2 * 16 + 12 at least, then at most 65535 = 0xFFFF more: four
  // levels of 16 or so elements each.
  EXPECT_EQ(convert(R"({"type": "string", "minLength": 300, "maxLength": 65835})"),
            grammar({"char-300-65835 ::= char-x256 char-x16{2} char{12} (((char-x4096{0,14} char-x256{0,15} | "
                     "char-x4096{15} char-x256{0,14}) char-x16{0,15} | char-x4096{15} char-x256{15} char-x16{0,14}) "
                     "char{0,15} | char-x4096{15} char-x256{15} char-x16{15} char{0,15})",
                     R"(char-x16 ::= char{16})", R"(char-x256 ::= char-x16{16})", R"(char-x4096 ::= char-x256{16})",
                     R"(root ::= "\"" char-300-65835 "\"")"},
                    {"char"}));
  EXPECT_EQ(error_of(R"({"type": "string", "maxLength": 1e18})"),
            R"(json_schema: keyword "maxLength" at the root: 10^18 or more is not supported)");
}

TEST(JsonSchemaToGbnf, EnumAndConst) {
  EXPECT_EQ(convert(R"({"const": "foo"})"), grammar({R"(root ::= "\"foo\"")"}));
  EXPECT_EQ(convert(R"({"const": 123})"), grammar({R"(root ::= "123")"}));
  EXPECT_EQ(convert(R"({"enum": ["red", "amber", "green", null, 42, ["foo"]]})"),
            grammar({R"(root ::= ("\"red\"" | "\"amber\"" | "\"green\"" | "null" | "42" | "[\"foo\"]"))"}));
  // "type" beside enum keeps the values of that type; const picks from enum.
  EXPECT_EQ(convert(R"({"type": "string", "enum": ["a", 1, "b"]})"), grammar({R"(root ::= ("\"a\"" | "\"b\""))"}));
  EXPECT_EQ(convert(R"({"enum": ["a", "b"], "const": "b"})"), grammar({R"(root ::= "\"b\"")"}));
  // llama.cpp's "literal string with escapes".
  EXPECT_EQ(convert(R"({"properties": {"code": {"const": " \r \n \" \\ ", "type": "string"}}, "required": ["code"],
                        "title": "DecoderResponse", "type": "object"})"),
            grammar({R"(code ::= "\" \\r \\n \\\" \\\\ \"")", R"(code-kv ::= "\"code\"" space ":" space code)",
                     R"(root ::= "{" space code-kv space "}")"}));
}

TEST(JsonSchemaToGbnf, PropertiesRequiredFirstInDeclaredOrder) {
  EXPECT_EQ(convert(R"({"type": "object", "properties": {"b": {"type": "string"}, "c": {"type": "string"},
                        "a": {"type": "string"}}, "required": ["a", "b", "c"], "additionalProperties": false,
                        "definitions": {}})"),
            grammar({R"(a-kv ::= "\"a\"" space ":" space string)", R"(b-kv ::= "\"b\"" space ":" space string)",
                     R"(c-kv ::= "\"c\"" space ":" space string)",
                     R"(root ::= "{" space b-kv "," space c-kv "," space a-kv space "}")"},
                    {"char", "string"}));
}

TEST(JsonSchemaToGbnf, OptionalPropertiesChain) {
  EXPECT_EQ(convert(R"({"properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}},
                        "additionalProperties": false})"),
            grammar({R"(a-kv ::= "\"a\"" space ":" space string)", R"(a-rest ::= ( "," space b-kv )? b-rest)",
                     R"(b-kv ::= "\"b\"" space ":" space string)", R"(b-rest ::= ( "," space c-kv )?)",
                     R"(c-kv ::= "\"c\"" space ":" space string)",
                     R"(root ::= "{" space ( a-kv a-rest | b-kv b-rest | c-kv )? space "}")"},
                    {"char", "string"}));
  // Required ones first, then the optional ones; no additionalProperties:
  // none beyond the declared (llama.cpp's default).
  EXPECT_EQ(convert(R"({"properties": {"b": {"type": "string"}, "a": {"type": "string"}, "d": {"type": "string"},
                        "c": {"type": "string"}}, "required": ["a", "b"]})"),
            grammar({R"(a-kv ::= "\"a\"" space ":" space string)", R"(b-kv ::= "\"b\"" space ":" space string)",
                     R"(c-kv ::= "\"c\"" space ":" space string)", R"(d-kv ::= "\"d\"" space ":" space string)",
                     R"(d-rest ::= ( "," space c-kv )?)",
                     R"(root ::= "{" space b-kv "," space a-kv ( "," space ( d-kv d-rest | c-kv ) )? space "}")"},
                    {"char", "string"}));
}

// An optional part no value satisfies is left out, as no valid value has it:
// an optional property (JSONSchemaBench has {"type": "object", "enum":
// ["A", "B"]} as one), additional properties, the items past a prefix.
TEST(JsonSchemaToGbnf, UnsatisfiableOptionalPartsAreLeftOut) {
  EXPECT_EQ(convert(R"({"properties": {"a": {"type": "object", "enum": ["A"]}, "b": {"type": "null"}}})"),
            grammar({R"(b-kv ::= "\"b\"" space ":" space null)", R"(root ::= "{" space ( b-kv )? space "}")"},
                    {"null"}));
  EXPECT_EQ(convert(R"({"properties": {"a": {"type": "integer", "minimum": 2, "maximum": 1}}})"),
            grammar({R"(root ::= "{" space "}")"}));
  // The key stays shut out of the additional ones.
  EXPECT_EQ(convert(R"({"properties": {"a": {"type": "string", "minLength": 2, "maxLength": 1}},
                        "additionalProperties": {"type": "null"}})"),
            grammar({R"(additional-k ::= "\"" ("a" char+ | ([^\x00-\x1F"\\a\x7F\uD800-\uDFFF] | "\\" ["/\\bfnrt]) )"
                     R"(char*)? "\"")",
                     R"(additional-kv ::= additional-k space ":" space null)",
                     R"(root ::= "{" space ( additional-kv ( "," space additional-kv )* )? space "}")"},
                    {"char", "null"}));
  EXPECT_EQ(convert(R"({"type": "object", "additionalProperties": {"enum": [1], "type": "string"}})"),
            grammar({R"(root ::= "{" space "}")"}));
  EXPECT_EQ(convert(R"({"prefixItems": [{"type": "null"}], "items": {"enum": [1], "type": "string"}})"),
            grammar({R"(root ::= "[" space null space "]")"}, {"null"}));
  EXPECT_EQ(convert(R"({"type": "array", "items": {"enum": [1], "type": "string"}})"),
            grammar({R"(root ::= "[" space "]")"}));
  // Required, the whole object (or array) has no value.
  EXPECT_EQ(error_of(R"({"properties": {"a": {"type": "object", "enum": ["A"]}}, "required": ["a"]})"),
            R"(json_schema: keyword "enum" at /properties/a: no value is left with the keywords beside it)");
  EXPECT_EQ(error_of(R"({"items": {"enum": [1], "type": "string"}, "minItems": 1})"),
            R"(json_schema: keyword "items" at the root: no value satisfies it and minItems asks for more than the )"
            R"(prefix)");
}

// minProperties and maxProperties: where the required properties decide them
// or one more does (at least one, or at most one, of the optional and
// additional properties) a choice among them; other counts as the states
// "c written after the first i" (SchemaCounts.PropertiesExactAtEveryCount
// checks the counts).
TEST(JsonSchemaToGbnf, MinAndMaxProperties) {
  const std::string ab = R"("properties": {"a": {"type": "null"}, "b": {"type": "null"}})";
  const std::vector<std::string> kvs = {R"(a-kv ::= "\"a\"" space ":" space null)",
                                        R"(b-kv ::= "\"b\"" space ":" space null)"};
  auto with = [&](std::vector<std::string> rules) {
    rules.insert(rules.end(), kvs.begin(), kvs.end());
    return grammar(rules, {"null"});
  };
  // Implied: by the required ones, or by all the grammar writes.
  EXPECT_EQ(convert("{" + ab + R"(, "required": ["a"], "minProperties": 1, "maxProperties": 2})"),
            convert("{" + ab + R"(, "required": ["a"]})"));
  EXPECT_EQ(convert("{" + ab + R"(, "minProperties": 0, "maxProperties": 7})"), convert("{" + ab + "}"));
  // At least one.
  EXPECT_EQ(convert("{" + ab + R"(, "minProperties": 1})"),
            with({R"(a-rest ::= ( "," space b-kv )?)", R"(root ::= "{" space ( a-kv a-rest | b-kv ) space "}")"}));
  EXPECT_EQ(convert("{" + ab + R"(, "required": ["b"], "minProperties": 2})"),
            with({R"(root ::= "{" space b-kv ( "," space ( a-kv ) ) space "}")"}));
  // At most one; none beyond the required ones.
  EXPECT_EQ(convert("{" + ab + R"(, "maxProperties": 1})"),
            with({R"(root ::= "{" space ( a-kv | b-kv )? space "}")"}));
  EXPECT_EQ(convert("{" + ab + R"(, "minProperties": 1, "maxProperties": 1})"),
            with({R"(root ::= "{" space ( a-kv | b-kv ) space "}")"}));
  EXPECT_EQ(convert("{" + ab + R"(, "required": ["a"], "maxProperties": 1})"),
            grammar({kvs[0], R"(root ::= "{" space a-kv space "}")"}, {"null"}));
  // Any object with at least one property, or at most one.
  EXPECT_EQ(convert(R"({"type": "object", "minProperties": 1})"),
            grammar({R"(additional-kv ::= string space ":" space value)",
                     R"(root ::= "{" space ( additional-kv ( "," space additional-kv )* ) space "}")"},
                    {"array", "boolean", "char", "decimal-part", "integral-part", "null", "number", "object", "string",
                     "value"}));
  EXPECT_EQ(convert(R"({"type": "object", "additionalProperties": {"type": "null"}, "maxProperties": 1})"),
            grammar({R"(additional-kv ::= string space ":" space null)",
                     R"(root ::= "{" space ( additional-kv )? space "}")"},
                    {"char", "null", "string"}));
  EXPECT_EQ(convert(R"({"type": "object", "maxProperties": 0})"), grammar({R"(root ::= "{" space "}")"}));
  // Counted: all of them; two of three (states a-rest-c: c after "a"); up to
  // two additional ones.
  EXPECT_EQ(convert("{" + ab + R"(, "minProperties": 2})"),
            with({R"(root ::= "{" space a-kv "," space b-kv space "}")"}));
  const std::string abc = R"("properties": {"a": {"type": "null"}, "b": {"type": "null"}, "c": {"type": "null"}})";
  EXPECT_EQ(convert("{" + abc + R"(, "minProperties": 2})"),
            with({R"(a-rest-0 ::= b-kv "," space c-kv)", R"(a-rest-1 ::= "," space b-kv b-rest-2 | "," space c-kv)",
                  R"(b-rest-2 ::= ( "," space c-kv )?)", R"(c-kv ::= "\"c\"" space ":" space null)",
                  R"(root ::= "{" space ( a-kv a-rest-1 | a-rest-0 ) space "}")"}));
  EXPECT_EQ(convert(R"({"type": "object", "maxProperties": 2})"),
            grammar({R"(additional-kv ::= string space ":" space value)",
                     R"(root ::= "{" space ( additional-kv ( "," space additional-kv )? )? space "}")"},
                    {"array", "boolean", "char", "decimal-part", "integral-part", "null", "number", "object", "string",
                     "value"}));
  // Refused: more than the grammar writes with distinct keys (a repeated
  // additional key counts once), or more rules than the limits allow.
  const std::string distinct =
      R"(more properties than the grammar writes with distinct keys (the required and optional ones it writes, )"
      R"(and one additional key: a repeated one counts once) are not supported)";
  EXPECT_EQ(error_of(R"({"type": "object", "minProperties": 2, "maxProperties": 3})"),
            R"(json_schema: keyword "minProperties" at the root: )" + distinct);
  // Without additionalProperties (any other key), llama.cpp's convention
  // writes no other key beside "properties", except where minProperties
  // needs one.
  const auto one_more = Grammar::parse(convert(R"({"properties": {"a": {}}, "required": ["a"], "minProperties": 2})"));
  EXPECT_TRUE(test::accepts(one_more, R"({"a": 1, "b": 2})"));
  EXPECT_FALSE(test::accepts(one_more, R"({"a": 1})"));
  EXPECT_FALSE(test::accepts(
      Grammar::parse(convert(R"({"properties": {"a": {}}, "required": ["a"], "minProperties": 1})")),
      R"({"a": 1, "b": 2})"));
  // More than one additional property needed, no maximum: a stated subset,
  // that many additional keys starting with distinct letters or digits
  // that start no named key, after the required ones.
  EXPECT_EQ(convert(R"({"properties": {"a": {"type": "null"}}, "required": ["a"], "minProperties": 3,
                        "additionalProperties": {"type": "integer"}})"),
            grammar({R"(a-kv ::= "\"a\"" space ":" space null)",
                     R"(additional-b-kv ::= "\"b" char* "\"" space ":" space integer)",
                     R"(additional-c-kv ::= "\"c" char* "\"" space ":" space integer)",
                     R"(additional-k ::= "\"" ("a" char+ | ([^\x00-\x1F"\\a\x7F\uD800-\uDFFF] | "\\" ["/\\bfnrt]) char*)? "\"")",
                     R"(additional-kv ::= additional-k space ":" space integer)",
                     R"(root ::= "{" space a-kv "," space additional-b-kv "," space additional-c-kv )"
                     R"(( "," space additional-kv )* space "}")"},
                    {"char", "integer", "integral-part", "null"}));
  const auto six = Grammar::parse(convert(R"({"type": "object", "minProperties": 6})"));
  EXPECT_TRUE(test::accepts(six, R"({"aa": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "a": 7})"));
  EXPECT_FALSE(test::accepts(six, R"({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})"));
  EXPECT_FALSE(test::accepts(six, R"({"a": 1, "a": 2, "c": 3, "d": 4, "e": 5, "f": 6})"));
  const auto four = Grammar::parse(convert("{" + ab + R"(, "additionalProperties": true, "minProperties": 4})"));
  EXPECT_TRUE(test::accepts(four, R"({"c": 1, "d": 2, "e": 3, "f": 4})"));
  std::string many = R"({"properties": {)";
  for (int i = 0; i < 30; ++i) many += std::string(i ? ", " : "") + "\"p" + std::to_string(i) + "\": {}";
  many += "}, ";
  GrammarLimits small;
  small.max_rules = 200;
  EXPECT_EQ(error_of(many + R"("maxProperties": 15})", small),
            R"(json_schema: keyword "maxProperties" at the root: counting 30 optional properties up to 15 needs )"
            R"(up to 480 rules (about 53760 bytes), over limits.max_rules (200, those already made included) or )"
            R"(limits.max_bytes (1048576))");
  EXPECT_EQ(error_of(many + R"("minProperties": 15})", small),
            R"(json_schema: keyword "minProperties" at the root: counting 30 optional properties up to 15 needs )"
            R"(up to 480 rules (about 53760 bytes), over limits.max_rules (200, those already made included) or )"
            R"(limits.max_bytes (1048576))");
  EXPECT_EQ(check_gbnf(convert(many + R"("minProperties": 2, "maxProperties": 15})")), "");
  EXPECT_EQ(error_of(R"({"required": ["a", "b"], "maxProperties": 1})"),
            R"(json_schema: keyword "maxProperties" at the root: fewer than the required properties)");
  EXPECT_EQ(error_of(R"({"type": "object", "minProperties": 2, "maxProperties": 1})"),
            R"(json_schema: keyword "minProperties" at the root: greater than maxProperties)");
}

// patternProperties: the named properties (with the schemas of the patterns
// they match), and the one pattern's keys (none with several patterns, one
// pattern_to_gbnf cannot write, or one a named property matches);
// additionalProperties then adds nothing (its keys might match).
TEST(JsonSchemaToGbnf, PatternProperties) {
  EXPECT_EQ(convert(R"({"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "integer"}}})"),
            grammar({R"(additional-k ::= "\"" ("x-" [a-z]+) "\"")",
                     R"(additional-kv ::= additional-k space ":" space integer)",
                     R"(root ::= "{" space ( additional-kv ( "," space additional-kv )* )? space "}")"},
                    {"integer", "integral-part"}));
  EXPECT_EQ(convert(R"({"properties": {"a": {"type": "null"}}, "required": ["a"], "patternProperties":
                        {"^x-": {"type": "integer"}}, "additionalProperties": {"type": "string"}})"),
            grammar({R"(a-kv ::= "\"a\"" space ":" space null)", R"(additional-k ::= "\"" ("x-" char*) "\"")",
                     R"(additional-kv ::= additional-k space ":" space integer)",
                     R"(root ::= "{" space a-kv ( "," space ( additional-kv ( "," space additional-kv )* ) )? )"
                     R"(space "}")"},
                    {"char", "integer", "integral-part", "null"}));
  // Any value: still only the pattern's keys.
  EXPECT_EQ(convert(R"({"patternProperties": {"^[0-9]+$": true}, "maxProperties": 1})"),
            grammar({R"(additional-k ::= "\"" ([0-9]+) "\"")", R"(additional-kv ::= additional-k space ":" space value)",
                     R"(root ::= "{" space ( additional-kv )? space "}")"},
                    {"array", "boolean", "char", "decimal-part", "integral-part", "null", "number", "object", "string",
                     "value"}));
  // Several patterns, a pattern's schema false, a pattern pattern_to_gbnf
  // does not write: the named properties alone.
  const std::string only_a = convert(R"({"properties": {"a": {"type": "null"}}})");
  for (const char* pp : {R"({"^x": {}, "^y": {}})", R"({"^x": false})", R"j({"^(?=x)": {}})j"}) {
    EXPECT_EQ(convert(R"({"properties": {"a": {"type": "null"}}, "additionalProperties": true, "patternProperties": )" +
                      std::string(pp) + "}"),
              only_a)
        << pp;
  }
  EXPECT_EQ(convert(R"({"patternProperties": {}, "properties": {"a": {"type": "null"}}})"), only_a);
  // A named property that matches a pattern takes both schemas (merged as
  // allOf's parts are; refused where they cannot be), and the pattern's keys
  // are then left out (they could spell the name).
  EXPECT_EQ(convert(R"({"properties": {"x-a": {}}, "patternProperties": {"^x-": {"type": "integer"}}})"),
            grammar({R"(root ::= "{" space ( x-a-kv )? space "}")", R"(x-a-kv ::= "\"x-a\"" space ":" space integer)"},
                    {"integer", "integral-part"}));
  EXPECT_EQ(convert(R"({"properties": {"x-a": {"type": "object", "properties": {"p": {"type": "null"}}}},
                        "patternProperties": {"^x-": {"required": ["p"]}}})"),
            grammar({R"(root ::= "{" space ( x-a-kv )? space "}")", R"(x-a ::= "{" space x-a-p-kv space "}")",
                     R"(x-a-kv ::= "\"x-a\"" space ":" space x-a)", R"(x-a-p-kv ::= "\"p\"" space ":" space null)"},
                    {"null"}));
  // Two patterns: both (their conjunction, see PatternsInOneConjunction).
  const auto both = Grammar::parse(convert(R"({"properties": {"x-a": {"type": "string", "pattern": "a"}},
                                                "patternProperties": {"^x-": {"pattern": "b"}}})"));
  EXPECT_TRUE(test::accepts(both, R"({"x-a": "ba"})"));
  EXPECT_FALSE(test::accepts(both, R"({"x-a": "aa"})"));
  // A required name not in "properties": the pattern's schema, not
  // additionalProperties'; false forbids it.
  EXPECT_EQ(convert(R"({"required": ["b"], "patternProperties": {"b": {"type": "null"}},
                        "additionalProperties": false})"),
            grammar({R"(b-kv ::= "\"b\"" space ":" space null)", R"(root ::= "{" space b-kv space "}")"}, {"null"}));
  EXPECT_EQ(convert(R"({"properties": {"b": {}}, "patternProperties": {"b": false}})"),
            grammar({R"(root ::= "{" space "}")"}));
  EXPECT_EQ(error_of(R"({"required": ["b"], "patternProperties": {"b": false}})"),
            R"(json_schema: keyword "patternProperties" at the root: property "b" is required but pattern "b" has )"
            R"(schema false)");
  // A pattern std::regex refuses, names and patterns outside printable
  // ASCII: refused.
  EXPECT_EQ(error_of(R"j({"patternProperties": {"(?P<n>x)": {}}})j"),
            R"j(json_schema: keyword "patternProperties" at the root: pattern "(?P<n>x)" is not supported (std::regex))j");
  EXPECT_EQ(error_of(R"({"properties": {"\u00e9": {}}, "patternProperties": {"^x": {}}})"),
            "json_schema: keyword \"patternProperties\" at the root: property \"\u00e9\": names outside printable "
            "ASCII are not supported beside it");
  EXPECT_EQ(error_of(R"({"patternProperties": {"^\u00e9": {}}})"),
            "json_schema: keyword \"patternProperties\" at the root: pattern \"^\u00e9\": only printable ASCII is "
            "supported");
  EXPECT_EQ(error_of(R"({"patternProperties": []})"),
            R"(json_schema: keyword "patternProperties" at the root: must be an object of schemas)");
}

TEST(JsonSchemaToGbnf, AdditionalProperties) {
  EXPECT_EQ(convert(R"({"type": "object", "additionalProperties": {"type": "array", "items": {"type": "number"}}})"),
            grammar({R"(additional-kv ::= string space ":" space additional-value)",
                     R"(additional-value ::= "[" space (number ("," space number)*)? space "]")",
                     R"(root ::= "{" space ( additional-kv ( "," space additional-kv )* )? space "}")"},
                    {"char", "decimal-part", "integral-part", "number", "string"}));
  // Beside named properties, an extra key is any string but those names; a
  // character that leaves a name may be raw or a short escape, not \u.
  const std::string leave_a = R"(([^\x00-\x1F"\\a\x7F\uD800-\uDFFF] | "\\" ["/\\bfnrt]))";
  EXPECT_EQ(convert(R"({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                        "additionalProperties": {"type": "integer"}})"),
            grammar({R"(a-kv ::= "\"a\"" space ":" space string)",
                     R"(additional-k ::= "\"" ("a" char+ | )" + leave_a + R"( char*)? "\"")",
                     R"(additional-kv ::= additional-k space ":" space integer)",
                     R"(root ::= "{" space a-kv ( "," space ( additional-kv ( "," space additional-kv )* ) )? )"
                     R"(space "}")"},
                    {"char", "integer", "integral-part", "string"}));
  EXPECT_EQ(
      convert(R"({"type": "object", "properties": {"and": {"type": "null"}, "also": {"type": "null"}},
                  "required": ["and"], "additionalProperties": {"type": "null"}})"),
      grammar(
          {R"(additional-k ::= "\"" ("a" ("l" ("s" ("o" char+ | ([^\x00-\x1F"\\o\x7F\uD800-\uDFFF] | "\\" )"
           R"(["/\\bfnrt]) char*)? | ([^\x00-\x1F"\\s\x7F\uD800-\uDFFF] | "\\" ["/\\bfnrt]) char*)? | "n" ("d" )"
           R"(char+ | ([^\x00-\x1F"\\d\x7F\uD800-\uDFFF] | "\\" ["/\\bfnrt]) char*)? | ([^\x00-\x1F"\\ln\x7F)"
           R"(\uD800-\uDFFF] | "\\" ["/\\bfnrt]) char*)? | ([^\x00-\x1F"\\a\x7F\uD800-\uDFFF] | "\\" )"
           R"(["/\\bfnrt]) char*)? "\"")",
           R"(additional-kv ::= additional-k space ":" space null)", R"(also-kv ::= "\"also\"" space ":" space null)",
           R"(also-rest ::= ( "," space additional-kv )*)", R"(and-kv ::= "\"and\"" space ":" space null)",
           R"(root ::= "{" space and-kv ( "," space ( also-kv also-rest | additional-kv ( "," space )"
           R"(additional-kv )* ) )? space "}")"},
          {"char", "null"}));
  // true, or no properties at all: any object.
  const std::string object = grammar(
      {R"(root ::= "{" space ( string ":" space value ("," space string ":" space value)* )? space "}")"},
      {"array", "boolean", "char", "decimal-part", "integral-part", "null", "number", "object", "string", "value"});
  EXPECT_EQ(convert(R"({"type": "object", "additionalProperties": true})"), object);
  EXPECT_EQ(convert(R"({"type": "object"})"), object);
  EXPECT_EQ(convert(R"({"type": "object", "additionalProperties": false})"), grammar({R"(root ::= "{" space "}")"}));
}

TEST(JsonSchemaToGbnf, RequiredNameWithoutPropertySchema) {
  // It must appear, with additionalProperties' schema (any value here); the
  // extra keys may not repeat it.
  const std::string g = convert(R"({"type": "object", "required": ["x"]})");
  EXPECT_NE(g.find(R"(x-kv ::= "\"x\"" space ":" space value)"), std::string::npos) << g;
  EXPECT_NE(
      g.find(R"(root ::= "{" space x-kv ( "," space ( additional-kv ( "," space additional-kv )* ) )? space "}")"),
      std::string::npos)
      << g;
  EXPECT_NE(g.find(R"(additional-k ::= "\"" ("x" char+ | )"), std::string::npos) << g;
  // With no additionalProperties beside "properties", only the required name
  // is added.
  const std::string h = convert(R"({"properties": {"a": {"type": "null"}}, "required": ["b"]})");
  EXPECT_NE(h.find(R"(root ::= "{" space b-kv ( "," space ( a-kv ) )? space "}")"), std::string::npos) << h;
  EXPECT_EQ(h.find("additional"), std::string::npos) << h;
}

TEST(JsonSchemaToGbnf, RuleNamesAvoidFixedRules) {
  // llama.cpp's "conflicting names".
  EXPECT_EQ(convert(R"({"type": "object", "properties": {"number": {"type": "object", "properties": {"number": {
                  "type": "object", "properties": {"root": {"type": "number"}}, "required": ["root"],
                  "additionalProperties": false}}, "required": ["number"], "additionalProperties": false}},
                  "required": ["number"], "additionalProperties": false, "definitions": {}})"),
            grammar({R"(number- ::= "{" space number-number-kv space "}")",
                     R"(number-kv ::= "\"number\"" space ":" space number-)",
                     R"(number-number ::= "{" space number-number-root-kv space "}")",
                     R"(number-number-kv ::= "\"number\"" space ":" space number-number)",
                     R"(number-number-root-kv ::= "\"root\"" space ":" space number)",
                     R"(root ::= "{" space number-kv space "}")"},
                    {"decimal-part", "integral-part", "number"}));
}

TEST(JsonSchemaToGbnf, Arrays) {
  EXPECT_EQ(convert(R"({"prefixItems": [{"type": "string"}]})"),
            grammar({R"(root ::= "[" space string space "]")"}, {"char", "string"}));
  EXPECT_EQ(convert(R"({"prefixItems": [{"type": "string"}, {"type": "null"}]})"),
            grammar({R"(root ::= "[" space string "," space null space "]")"}, {"char", "null", "string"}));
  EXPECT_EQ(convert(R"({"items": {"type": "boolean"}, "minItems": 2})"),
            grammar({R"(root ::= "[" space boolean ("," space boolean)+ space "]")"}, {"boolean"}));
  EXPECT_EQ(convert(R"({"items": {"type": "boolean"}, "maxItems": 0})"), grammar({R"(root ::= "[" space "]")"}));
  EXPECT_EQ(convert(R"({"items": {"type": "boolean"}, "maxItems": 1})"),
            grammar({R"(root ::= "[" space (boolean)? space "]")"}, {"boolean"}));
  EXPECT_EQ(convert(R"({"items": {"type": "boolean"}, "maxItems": 2})"),
            grammar({R"(root ::= "[" space (boolean ("," space boolean)?)? space "]")"}, {"boolean"}));
  EXPECT_EQ(convert(R"({"items": {"type": ["number", "integer"]}, "minItems": 3, "maxItems": 5})"),
            grammar({R"(root ::= "[" space number ("," space number){2,4} space "]")"},
                    {"decimal-part", "integral-part", "number"}));
  // items {} constrains nothing: any array.
  EXPECT_EQ(convert(R"({"type": "array", "items": {}})"),
            grammar({R"(root ::= "[" space ( value ("," space value)* )? space "]")"},
                    {"array", "boolean", "char", "decimal-part", "integral-part", "null", "number", "object", "string",
                     "value"}));
  // A tuple: all its items unless minItems says fewer; more only with items.
  EXPECT_EQ(convert(R"({"prefixItems": [{"type": "null"}, {"type": "boolean"}], "items": {"type": "string"}})"),
            grammar({R"(root ::= "[" space null "," space boolean ("," space string)* space "]")"},
                    {"boolean", "char", "null", "string"}));
  EXPECT_EQ(convert(R"({"prefixItems": [{"type": "null"}, {"type": "boolean"}], "minItems": 0})"),
            grammar({R"(root ::= "[" space ( null ( "," space boolean )? )? space "]")"}, {"boolean", "null"}));
  EXPECT_EQ(convert(R"({"prefixItems": [{"type": "null"}, {"type": "boolean"}], "minItems": 1, "items": true,
                        "maxItems": 4})"),
            grammar({R"(root ::= "[" space null ( "," space boolean ("," space value){0,2} )? space "]")"},
                    {"array", "boolean", "char", "decimal-part", "integral-part", "null", "number", "object", "string",
                     "value"}));
  EXPECT_EQ(convert(R"({"prefixItems": [{"type": "null"}], "minItems": 3, "items": {"type": "boolean"}})"),
            grammar({R"(root ::= "[" space null ("," space boolean){2,} space "]")"}, {"boolean", "null"}));
  // The older form, items as an array, is a tuple too.
  EXPECT_EQ(convert(R"({"items": [{"const": 1}, {"const": 2}]})"),
            grammar({R"(root ::= "[" space tuple-0 "," space tuple-1 space "]")", R"(tuple-0 ::= "1")",
                     R"(tuple-1 ::= "2")"}));
  EXPECT_EQ(convert(R"({"type": "array", "items": false})"), grammar({R"(root ::= "[" space "]")"}));
  // additionalItems constrains the items past an items array, and none are
  // written: it changes nothing (nor beside items as one schema, or alone).
  for (const char* base : {R"({"items": [{"const": 1}, {"const": 2}], "minItems": 1)",
                           R"({"items": {"type": "string"}, "maxItems": 3)", R"({"type": "array")"}) {
    for (const char* extra : {"false", "true", R"({"type": "null"})"}) {
      EXPECT_EQ(convert(std::string(base) + R"(, "additionalItems": )" + extra + "}"), convert(std::string(base) + "}"))
          << base << " " << extra;
    }
  }
  // It makes a schema without "type" an array.
  EXPECT_EQ(convert(R"({"additionalItems": false})"), convert(R"({"type": "array"})"));
  EXPECT_EQ(error_of(R"({"type": "array", "additionalItems": 1})"),
            R"(json_schema: keyword "additionalItems" at the root: must be a boolean or a schema)");
}

TEST(JsonSchemaToGbnf, FormatsAsLlamaCpp) {
  // llama.cpp's "exotic formats", with email.
  EXPECT_EQ(convert(R"({"items": [{"format": "date"}, {"format": "uuid"}, {"format": "time"},
                        {"format": "date-time"}, {"format": "email"}]})"),
            grammar({R"(root ::= "[" space date-string "," space uuid "," space time-string "," space )"
                     R"(date-time-string "," space email-string space "]")"},
                    {"date", "date-string", "date-time", "date-time-string", "email", "email-string", "time",
                     "time-string", "uuid"}));
  // format applies to strings only: beside another type it constrains nothing.
  EXPECT_EQ(convert(R"({"type": "integer", "format": "int32"})"),
            grammar({R"(root ::= ("-"? integral-part))"}, {"integral-part"}));
}

TEST(JsonSchemaToGbnf, UnionsAndAnyOf) {
  EXPECT_EQ(convert(R"({"type": ["array", "null"], "items": {"type": "string"}})"),
            grammar({R"(alternative-0 ::= "[" space (string ("," space string)*)? space "]")",
                     "root ::= alternative-0 | null"},
                    {"char", "null", "string"}));
  // llama.cpp's "anyOf": a "type" every alternative has is no constraint.
  EXPECT_EQ(convert(R"({"anyOf": [{"$ref": "#/definitions/foo"}, {"$ref": "#/definitions/bar"}],
                        "definitions": {"foo": {"properties": {"a": {"type": "number"}}},
                                        "bar": {"properties": {"b": {"type": "number"}}}}, "type": "object"})"),
            grammar({R"(ref-definitions-bar ::= "{" space ( ref-definitions-bar-b-kv )? space "}")",
                     R"(ref-definitions-bar-b-kv ::= "\"b\"" space ":" space number)",
                     R"(ref-definitions-foo ::= "{" space ( ref-definitions-foo-a-kv )? space "}")",
                     R"(ref-definitions-foo-a-kv ::= "\"a\"" space ":" space number)",
                     "root ::= ref-definitions-foo | ref-definitions-bar"},
                    {"decimal-part", "integral-part", "number"}));
  // A "type" that does narrow them: the alternatives of other types go.
  EXPECT_EQ(convert(R"({"oneOf": [{"type": "string"}, {"type": "integer"}], "type": "string"})"),
            grammar({"root ::= string"}, {"char", "string"}));
  // An alternative no value satisfies is dropped.
  EXPECT_EQ(convert(R"({"anyOf": [{"type": "integer", "minimum": 3, "maximum": 2}, {"type": "null"}]})"),
            grammar({"root ::= null"}, {"null"}));
}

// oneOf is an alternation only where no value can match two alternatives:
// a value valid against both is invalid, and the grammar would produce it.
TEST(JsonSchemaToGbnf, OneOfOnlyWhereExclusive) {
  const std::string overlap = "are not provably exclusive";
  // Exclusive: types (integer and non-integer numbers are apart), const and
  // enum values (1 == 1.0 in JSON Schema), a required discriminator behind
  // $ref, a required property the other forbids, and beside siblings.
  for (const char* ok : {
           R"({"oneOf": [{"type": "string"}, {"type": "array"}, {"type": "null"}]})",
           R"({"oneOf": [{"const": 1}, {"const": 2}, {"enum": ["1", true]}]})",
           R"({"oneOf": [{"$ref": "#/$defs/cat"}, {"$ref": "#/$defs/dog"}], "$defs": {
                 "cat": {"type": "object", "properties": {"kind": {"const": "cat"}, "n": {"type": "integer"}},
                         "required": ["kind"]},
                 "dog": {"type": "object", "properties": {"kind": {"enum": ["dog", "wolf"]}}, "required": ["kind"]}}})",
           R"({"oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                          "additionalProperties": false},
                         {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"],
                          "additionalProperties": false}]})",
           R"({"type": "object", "properties": {"k": {"type": "string"}},
               "oneOf": [{"properties": {"k": {"const": "x"}}, "required": ["k"]},
                         {"properties": {"k": {"type": "integer"}}, "required": ["k"]}]})",
           R"({"oneOf": [{"type": "object", "allOf": [{"properties": {"t": {"const": 1}}, "required": ["t"]}]},
                         {"type": "object", "properties": {"t": {"const": 2}}}]})",
           // Every alternative of a nested oneOf exclusive with the other; a
           // property's schema from additionalProperties.
           R"({"oneOf": [{"type": "object", "oneOf": [{"properties": {"t": {"const": "a"}}, "required": ["t"]},
                                                      {"properties": {"t": {"const": "b"}}, "required": ["t"]}]},
                         {"type": "object", "properties": {"t": {"const": "c"}}, "required": ["t"]}]})",
           R"({"oneOf": [{"type": "object", "properties": {"t": {"type": "string"}}, "required": ["t"]},
                         {"type": "object", "additionalProperties": {"type": "boolean"}}]})",
           // Strings told apart by their patterns, lengths and values.
           R"({"oneOf": [{"type": "string", "pattern": "^https?://.+$"}, {"type": "string", "pattern": "^\\./.+$"},
                         {"type": "string", "maxLength": 0}, {"type": "string", "pattern": "^a", "enum": ["ab", "b"]}]})",
           // Not exclusive ({} matches both) but guarded: each branch requires its own property.
           R"({"type": "object", "oneOf": [{"additionalProperties": false, "properties": {"next": {"type": "string"}}},
                                           {"additionalProperties": false, "properties": {"prev": {"type": "string"}}}]})",
           // Not exclusive but guarded by a pattern's complement: each
           // branch's strings fail the other's pattern (or value).
           R"({"oneOf": [{"type": "string", "pattern": "^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$"},
                         {"type": "string", "pattern": "^[0-9A-F]{8}-([0-9A-F]{4}-){3}[0-9A-F]{12}$"}]})",
           R"({"oneOf": [{"type": "string", "pattern": "customer"}, {"type": "string", "pattern": "maker"}]})",
           R"({"oneOf": [{"type": "string", "pattern": "^a"}, {"enum": ["b", "ab"]}]})",
           R"({"oneOf": [{"enum": ["linux"]}, {"type": "string"}]})",
           R"({"oneOf": [{"pattern": "customer"}, {"pattern": "maker"}]})"}) {
    EXPECT_NO_THROW(convert(ok)) << ok;
  }
  // Not provably exclusive: refused, naming oneOf and the two alternatives.
  EXPECT_EQ(error_of(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})"),
            "json_schema: keyword \"oneOf\" at the root: alternatives 0 and 1 are not provably exclusive (a value "
            "valid against both is invalid, and the grammar, an alternation, would produce it); supported: "
            "alternatives of different types, of different const/enum values, strings no pattern, length and value "
            "of both admit, or objects told apart by a property (one requires it, or both give it exclusive "
            "schemas)");
  for (const char* bad : {
           R"({"oneOf": [{"const": 1}, {"enum": [2, 1.0]}]})",
           // No negation of either side within the other's types: a format
           // (an annotation to validators by default: every string is valid
           // against both), integers beside numbers.
           R"({"oneOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}]})"}) {
    EXPECT_NE(error_of(bad).find(overlap), std::string::npos) << bad;
  }
  // Negations that leave neither branch anything: no value is valid.
  EXPECT_EQ(error_of(R"({"oneOf": [{"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]},
                                   {"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]}]})"),
            "json_schema: keyword \"oneOf\" at the root: no alternative accepts a value");
  EXPECT_NE(error_of(R"({"properties": {"x": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}})")
                .find("keyword \"oneOf\" at /properties/x: alternatives 0 and 1"),
            std::string::npos);
  // Not exclusive, but each branch restricted to values that fail the other
  // (a negation of one of its keywords; the branch dropped where none is
  // left): what tests/data/grammar/schema_cases.json's "oneOf guarded by
  // negations" cases check value by value.
  for (const char* ok : {
           R"({"oneOf": [{"type": "string", "maxLength": 2}, {"type": "string", "minLength": 2}]})",
           R"({"oneOf": [false, {"type": "null"}, {"properties": {"a": {"type": "string"}}}]})",
           R"({"properties": {"x": {"oneOf": [{"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]},
                                              {"type": "object", "properties": {"a": {"const": 1}}}]}}})",
           R"({"properties": {"x": {"oneOf": [{"type": "object", "properties": {"a": {"const": 1}},
                                               "required": ["a"]}, {"type": "object"}]}}})"}) {
    EXPECT_NO_THROW(convert(ok)) << ok;
  }
}

TEST(JsonSchemaToGbnf, AnyOfBesideProperties) {
  // "at least one of a and b": anyOf distributed over the object.
  EXPECT_EQ(
      convert(R"({"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "null"}},
                        "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})"),
      grammar({R"(alternative-0 ::= "{" space alternative-0-a-kv ( "," space ( alternative-0-b-kv ) )? space "}")",
               R"(alternative-0-a-kv ::= "\"a\"" space ":" space null)",
               R"(alternative-0-b-kv ::= "\"b\"" space ":" space null)",
               R"(alternative-1 ::= "{" space alternative-1-b-kv ( "," space ( alternative-1-a-kv ) )? space "}")",
               R"(alternative-1-a-kv ::= "\"a\"" space ":" space null)",
               R"(alternative-1-b-kv ::= "\"b\"" space ":" space null)", "root ::= alternative-0 | alternative-1"},
              {"null"}));
}

TEST(JsonSchemaToGbnf, AllOf) {
  // Objects merged; each part's properties stay optional unless required.
  EXPECT_EQ(convert(R"({"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]},
                                  {"properties": {"b": {"type": "null"}}}]})"),
            grammar({R"(a-kv ::= "\"a\"" space ":" space string)", R"(b-kv ::= "\"b\"" space ":" space null)",
                     R"(root ::= "{" space a-kv ( "," space ( b-kv ) )? space "}")"},
                    {"char", "null", "string"}));
  // llama.cpp's "allOf with multiple enum schemas".
  EXPECT_EQ(convert(R"({"allOf": [{"$ref": "#/definitions/foo"}, {"$ref": "#/definitions/bar"}], "definitions": {
                        "foo": {"type": "string", "enum": ["a", "b", "c"]},
                        "bar": {"type": "string", "enum": ["b", "c", "d"]}}})"),
            grammar({R"(root ::= ("\"b\"" | "\"c\""))"}));
  // A part's additionalProperties holds for the others' properties.
  EXPECT_EQ(
      convert(R"({"allOf": [{"properties": {"a": {"type": "null"}}, "additionalProperties": false},
                                  {"properties": {"a": {}, "b": {"type": "null"}}}]})"),
      grammar({R"(a-kv ::= "\"a\"" space ":" space null)", R"(root ::= "{" space ( a-kv )? space "}")"}, {"null"}));
  // allOf [{"$ref"}] keeps the reference's rule (recursion included).
  EXPECT_EQ(convert(R"({"allOf": [{"$ref": "#/$defs/n"}], "description": "x", "$defs": {"n": {"type": "object",
                        "properties": {"c": {"$ref": "#/$defs/n"}}}}})"),
            grammar({R"(ref-defs-n ::= "{" space ( ref-defs-n-c-kv )? space "}")",
                     R"(ref-defs-n-c-kv ::= "\"c\"" space ":" space ref-defs-n)", "root ::= ref-defs-n"}));
  // $ref beside other keywords: both hold.
  EXPECT_EQ(convert(R"({"$ref": "#/$defs/a", "properties": {"y": {"type": "null"}}, "$defs": {"a": {
                        "properties": {"x": {"type": "null"}}, "required": ["x"]}}})"),
            grammar({R"(root ::= "{" space x-kv ( "," space ( y-kv ) )? space "}")",
                     R"(x-kv ::= "\"x\"" space ":" space null)", R"(y-kv ::= "\"y\"" space ":" space null)"},
                    {"null"}));
  // Arrays merged; additionalItems beside a schema of items (or none)
  // constrains nothing; beside an items array it is refused in a merge.
  const auto arrays = Grammar::parse(convert(R"({"allOf": [{"type": "array", "items": {"type": "integer"},
                                                            "additionalItems": false}, {"minItems": 1}]})"));
  EXPECT_TRUE(test::accepts(arrays, "[1,2]"));
  EXPECT_FALSE(test::accepts(arrays, "[]"));
  EXPECT_FALSE(test::accepts(arrays, R"(["a"])"));
  EXPECT_NE(error_of(R"({"allOf": [{"type": "array", "items": [{"type": "integer"}], "additionalItems": false},
                                   {"minItems": 1}]})"),
            "");
}

TEST(JsonSchemaToGbnf, References) {
  // llama.cpp's "top-level $ref".
  EXPECT_EQ(convert(R"({"$ref": "#/definitions/foo", "definitions": {"foo": {"type": "object", "properties": {
                        "a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}}})"),
            grammar({R"(ref-definitions-foo ::= "{" space ref-definitions-foo-a-kv space "}")",
                     R"(ref-definitions-foo-a-kv ::= "\"a\"" space ":" space string)", "root ::= ref-definitions-foo"},
                    {"char", "string"}));
  // Recursion: one rule per definition, referred to while it is made.
  EXPECT_EQ(convert(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
                        "next": {"$ref": "#/$defs/node"}, "leaf": {"type": "null"}}, "additionalProperties": false}}})"),
            grammar({R"(ref-defs-node ::= "{" space ( ref-defs-node-next-kv ref-defs-node-next-rest | )"
                     R"(ref-defs-node-leaf-kv )? space "}")",
                     R"(ref-defs-node-leaf-kv ::= "\"leaf\"" space ":" space null)",
                     R"(ref-defs-node-next-kv ::= "\"next\"" space ":" space ref-defs-node)",
                     R"(ref-defs-node-next-rest ::= ( "," space ref-defs-node-leaf-kv )?)", "root ::= ref-defs-node"},
                    {"null"}));
  // llama.cpp's "anyOf $ref": a pointer anywhere in the document.
  const std::string g = convert(R"({"properties": {"a": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                                     "b": {"anyOf": [{"$ref": "#/properties/a/anyOf/0"}, {"type": "boolean"}]}},
                                     "type": "object"})");
  EXPECT_NE(g.find("b ::= ref-properties-a-anyOf-0 | boolean\n"), std::string::npos) << g;
  EXPECT_NE(g.find(R"(ref-properties-a-anyOf-0 ::= "\"" char* "\"")"), std::string::npos) << g;
  // JSON pointer escapes in the reference.
  EXPECT_EQ(convert(R"({"$ref": "#/$defs/a~1b%20c", "$defs": {"a/b c": {"type": "null"}}})"),
            grammar({R"(ref-defs-a-1b-c ::= "null")", "root ::= ref-defs-a-1b-c"}));
}

// A schema whose resource http://e/x/ (/$defs/x, its id spelled `id`)
// holds a string /$defs/x/$defs/s (with `decl`'s members) and a resource
// y.json (a boolean), and whose root holds an integer /$defs/s: an object
// with one property p, {"$ref": ref}. `dialect` is the $schema ("" none).
std::string id_doc(const std::string& dialect, const std::string& id, const std::string& decl, const std::string& ref) {
  return std::string("{") + (dialect.empty() ? "" : R"("$schema": ")" + dialect + R"(", )") +
         R"("$defs": {"s": {"type": "integer"}, "x": {")" + id + R"(": "http://e/x/", "$defs": {"s": {"type": "string")" +
         (decl.empty() ? "" : ", " + decl) + R"(}, "y": {")" + id + R"(": "y.json", "type": "boolean"}},
          "type": "object", "properties": {"p": {"$ref": ")" + ref + R"("}}, "required": ["p"],
          "additionalProperties": false}}, "$ref": "#/$defs/x"})";
}
// id_doc's grammar where p's reference reads `target` ("s": /$defs/x/$defs/s,
// "y": /$defs/x/$defs/y, "root s": the root's /$defs/s).
std::string id_doc_grammar(const std::string& target) {
  const std::string rule = target == "root s" ? "ref-defs-s" : "ref-defs-x-defs-" + target;
  const std::string body = target == "s"   ? R"("\"" char* "\"")"
                           : target == "y" ? R"(("true" | "false"))"
                                           : R"(("-"? integral-part))";
  return grammar({R"(ref-defs-x ::= "{" space ref-defs-x-p-kv space "}")", rule + " ::= " + body,
                  R"(ref-defs-x-p-kv ::= "\"p\"" space ":" space )" + rule, "root ::= ref-defs-x"},
                 {target == "s" ? "char" : target == "y" ? "space" : "integral-part"});
}

// JSON Schema core, drafts 4 to 2020-12: a reference resolves against the
// base URI its resource's id sets (draft 4 spells it "id"), a URI names an
// embedded resource, a plain-name fragment names a schema by its anchor in
// each draft's spelling; what does not resolve within the document throws.
TEST(JsonSchemaToGbnf, ReferencesByIdAndAnchor) {
  const std::string d4 = "http://json-schema.org/draft-04/schema#", d7 = "http://json-schema.org/draft-07/schema#",
                    d2019 = "https://json-schema.org/draft/2019-09/schema",
                    d2020 = "https://json-schema.org/draft/2020-12/schema";
  // "#/..." inside http://e/x/ is a pointer from /$defs/x, not from the root.
  for (const std::string& dialect : {d7, d2019, d2020, std::string()})
    EXPECT_EQ(convert(id_doc(dialect, "$id", "", "#/$defs/s")), id_doc_grammar("s")) << dialect;
  EXPECT_EQ(convert(id_doc(d4, "id", "", "#/$defs/s")), id_doc_grammar("s"));
  // Draft 4 reads "id" only, drafts 6 on "$id" only: the other is an
  // annotation, and the pointer reads from the root.
  EXPECT_EQ(convert(id_doc(d4, "$id", "", "#/$defs/s")), id_doc_grammar("root s"));
  EXPECT_EQ(convert(id_doc(d7, "id", "", "#/$defs/s")), id_doc_grammar("root s"));
  // Absolute and relative URIs of the embedded resources, with and without
  // a fragment.
  for (const std::string ref : {"http://e/x/#/$defs/s", "http://e/x/y.json", "y.json", "y.json#", "/x/y.json",
                                "../x/y.json", "./y.json"})
    EXPECT_EQ(convert(id_doc(d2020, "$id", "", ref)),
              id_doc_grammar(ref.find("y.json") != std::string::npos ? "y" : "s"))
        << ref;
  // Plain names, in each draft's spelling.
  EXPECT_EQ(convert(id_doc(d4, "id", R"("id": "#name")", "#name")), id_doc_grammar("s"));
  EXPECT_EQ(convert(id_doc(d7, "$id", R"("$id": "#name")", "#name")), id_doc_grammar("s"));
  EXPECT_EQ(convert(id_doc(d7, "$id", R"("$id": "http://e/x/#name")", "http://e/x/#name")), id_doc_grammar("s"));
  EXPECT_EQ(convert(id_doc(d7, "$id", R"("$id": "z.json#name")", "z.json#name")), id_doc_grammar("s"));
  EXPECT_EQ(convert(id_doc(d2019, "$id", R"("$anchor": "name")", "#name")), id_doc_grammar("s"));
  EXPECT_EQ(convert(id_doc(d2020, "$id", R"("$anchor": "name")", "#name")), id_doc_grammar("s"));
  EXPECT_EQ(convert(id_doc(d2020, "$id", R"("$dynamicAnchor": "name")", "#name")), id_doc_grammar("s"));
  EXPECT_EQ(convert(id_doc("", "$id", R"("$anchor": "name")", "http://e/x/#name")), id_doc_grammar("s"));
  // Drafts 4 to 7 ignore an id beside $ref (and so resolve it from the
  // parent's base); 2019-09 on resolve it against that id.
  const std::string beside = R"({"$schema": "D", "$defs": {"s": {"type": "integer"}, "x": {"$id": "http://e/x/",
      "$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}}, "$ref": "#/$defs/x"})";
  auto with = [](std::string s, const std::string& dialect) {
    return s.replace(s.find("\"D\""), 3, "\"" + dialect + "\"");
  };
  EXPECT_EQ(convert(with(beside, d7)), grammar({R"(ref-defs-s ::= ("-"? integral-part))", "ref-defs-x ::= ref-defs-s",
                                                "root ::= ref-defs-x"},
                                               {"integral-part"}));
  EXPECT_EQ(convert(with(beside, d2020)),
            grammar({R"(ref-defs-x ::= ref-defs-x-defs-s)", R"(ref-defs-x-defs-s ::= "\"" char* "\"")",
                     "root ::= ref-defs-x"},
                    {"char"}));

  // Not resolvable within the document.
  const std::string at = R"(json_schema: keyword "$ref" at /$defs/x/properties/p: )";
  EXPECT_EQ(error_of(id_doc(d2020, "$id", "", "#/$defs/missing")),
            at + R"(cannot resolve "#/$defs/missing" ("http://e/x/#/$defs/missing") within the document (other documents are not read))");
  EXPECT_EQ(error_of(id_doc(d2020, "$id", "", "z.json")),
            at + R"(cannot resolve "z.json" ("http://e/x/z.json") within the document (other documents are not read))");
  // A name in another draft's spelling, or in another resource, names nothing.
  for (const std::string& schema : {id_doc(d7, "$id", R"("$anchor": "name")", "#name"),
                                    id_doc(d2020, "$id", R"("$id": "#name")", "#name"),
                                    id_doc(d2019, "$id", R"("$dynamicAnchor": "name")", "#name"),
                                    id_doc(d4, "id", R"("$id": "#name")", "#name")})
    EXPECT_EQ(error_of(schema), at + R"(cannot resolve "#name" ("http://e/x/#name") within the document (other documents are not read))")
        << schema;
  EXPECT_EQ(error_of(R"({"$defs": {"x": {"$id": "http://e/x/", "type": "object", "properties": {"p": {"$ref": "#name"}}},
                                   "s": {"$anchor": "name"}}, "$ref": "#/$defs/x"})"),
            at + R"(cannot resolve "#name" ("http://e/x/#name") within the document (other documents are not read))");
  // In the root resource (no base URI): a name no schema has, or two have.
  EXPECT_EQ(error_of(R"({"$ref": "#name", "$defs": {"n": {"$anchor": "other"}}})"),
            R"(json_schema: keyword "$ref" at the root: cannot resolve "#name": no subschema is named "name")");
  EXPECT_EQ(error_of(R"({"$ref": "#dup", "$defs": {"a": {"$anchor": "dup"}, "b": {"$anchor": "dup", "type": "null"}}})"),
            R"(json_schema: keyword "$ref" at the root: cannot resolve "#dup": no subschema is named "dup")");
  EXPECT_EQ(convert(R"({"$ref": "#one", "$defs": {"a": {"$anchor": "one", "type": "null"}}})"),
            grammar({R"(ref-defs-a ::= "null")", "root ::= ref-defs-a"}));
}

// References read the document as written, not as the converter rewrites
// if/then/else and `not` before converting it.
TEST(JsonSchemaToGbnf, ReferencesIntoRewrittenSubschemas) {
  // `then` becomes part of an allOf: its pointer still names it.
  EXPECT_EQ(convert(R"({"type": "object", "properties": {"b": {"$ref": "#/then/properties/a"}},
                        "additionalProperties": false, "if": {"required": ["b"]},
                        "then": {"properties": {"a": {"type": "integer"}}}})"),
            grammar({R"(alternative-0 ::= "{" space alternative-0-b-kv space "}")",
                     R"(alternative-0-b-kv ::= "\"b\"" space ":" space ref-then-properties-a)",
                     R"(alternative-1 ::= "{" space "}")", R"(ref-then-properties-a ::= ("-"? integral-part))",
                     "root ::= alternative-0 | alternative-1"},
                    {"integral-part"}));
  // not {"required": ["a"]} makes a's schema false where it is; b still
  // reads a's string.
  EXPECT_EQ(convert(R"({"type": "object", "properties": {"a": {"type": "string"}, "b": {"$ref": "#/properties/a"}},
                        "not": {"required": ["a"]}})"),
            grammar({R"(b-kv ::= "\"b\"" space ":" space ref-properties-a)", R"(ref-properties-a ::= "\"" char* "\"")",
                     R"(root ::= "{" space ( b-kv )? space "}")"},
                    {"char"}));
}

// An allOf of k if/then on one property's const distributes into 2^k
// branches, all but about k of them contradictory (two ifs want two values
// of "kind", a not-if of a const excludes the one an if wants): those end
// as soon as the property's allowed values are none (merge_parts'
// property_contradiction), where the 2^30 of them passed limits.max_elements.
TEST(JsonSchemaToGbnf, IfThenOnOneDiscriminatorIsNotExponential) {
  std::string all_of;
  for (int i = 0; i < 30; ++i) {
    const std::string k = std::to_string(i);
    all_of += std::string(i ? ", " : "") + R"({"if": {"properties": {"kind": {"const": "k)" + k +
              R"("}}}, "then": {"required": ["v)" + k + R"("], "properties": {"v)" + k +
              R"(": {"type": "integer"}}}})";
  }
  const std::string schema = R"({"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string"}},
                                 "allOf": [)" + all_of + "]}";
  const auto g = Grammar::parse(convert(schema));
  EXPECT_TRUE(test::accepts(g, R"({"kind": "k3", "v3": 5})"));
  EXPECT_TRUE(test::accepts(g, R"({"kind": "k29", "v29": -1})"));
  EXPECT_FALSE(test::accepts(g, R"({"kind": "k3"})"));  // then's v3 is required
  EXPECT_FALSE(test::accepts(g, R"({"kind": "k3", "v4": 5})"));  // v4 is k4's, not k3's
  EXPECT_FALSE(test::accepts(g, R"({"kind": "k3", "v3": "x"})"));  // not an integer
  // ifs of "type" object and "required" too: not-if is an anyOf of a
  // non-object (whose type no part shares), an object without "kind" and
  // one whose "kind" is another.
  std::string typed = all_of;
  for (size_t at = 0; (at = typed.find(R"("if": {)", at)) != std::string::npos; ++at)
    typed.insert(at + 7, R"("type": "object", "required": ["kind"], )");
  const auto h = Grammar::parse(convert(R"({"type": "object", "properties": {"kind": {"type": "string"}},
                                            "allOf": [)" + typed + "]}"));
  EXPECT_TRUE(test::accepts(h, R"({"kind": "k5", "v5": 1})"));
  EXPECT_TRUE(test::accepts(h, R"({})"));  // no kind: no then applies
  EXPECT_FALSE(test::accepts(h, R"({"kind": "k5"})"));
  EXPECT_FALSE(test::accepts(h, R"({"kind": "k5", "v6": 1})"));
}

// A recursive definition merged with its siblings (allOf, a $ref beside
// other keywords) is expanded once and then referred to as a rule: before,
// each expansion met the same conjunction again and nested until
// max_nesting (corpus: Github_easy/o17683, Github_hard/o61026,
// JsonSchemaStore/resjson, renovate-schema).
TEST(JsonSchemaToGbnf, RecursiveConjunctionsAreRules) {
  // allOf [$ref to the enclosing definition, more]: the conjunction is
  // met again inside its own "child" property and refers to itself.
  EXPECT_EQ(convert(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
                        "name": {"type": "string"},
                        "child": {"allOf": [{"$ref": "#/$defs/node"}, {"required": ["name"]}]}}}}})"),
            grammar({R"(ref-defs-node ::= "{" space ( ref-defs-node-name-kv ref-defs-node-name-rest | )"
                     R"(ref-defs-node-child-kv )? space "}")",
                     R"(ref-defs-node-child ::= "{" space ref-defs-node-child-name-kv ( "," space ( )"
                     R"(ref-defs-node-child-child-kv ) )? space "}")",
                     R"(ref-defs-node-child-child-kv ::= "\"child\"" space ":" space ref-defs-node-child)",
                     R"(ref-defs-node-child-kv ::= "\"child\"" space ":" space ref-defs-node-child)",
                     R"(ref-defs-node-child-name-kv ::= "\"name\"" space ":" space string)",
                     R"(ref-defs-node-name-kv ::= "\"name\"" space ":" space string)",
                     R"(ref-defs-node-name-rest ::= ( "," space ref-defs-node-child-kv )?)", "root ::= ref-defs-node"},
                    {"char", "string"}));
  // A oneOf's guard is made anew at every use: equal guards are one schema,
  // so the conjunction of a branch and its guard is met again too.
  EXPECT_EQ(convert(R"({"$ref": "#/$defs/not", "$defs": {
                        "pat": {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]},
                        "not": {"type": "object", "required": ["not"], "properties": {
                          "not": {"oneOf": [{"$ref": "#/$defs/pat"}, {"$ref": "#/$defs/not"}]}}}}})"),
            grammar({R"(ref-defs-not ::= "{" space ref-defs-not-not-kv space "}")",
                     "ref-defs-not-not ::= ref-defs-not-not-0 | ref-defs-not-not-1",
                     R"(ref-defs-not-not-0 ::= "{" space ref-defs-not-not-0-p-kv space "}")",
                     R"(ref-defs-not-not-0-p-kv ::= "\"p\"" space ":" space string)",
                     R"(ref-defs-not-not-1 ::= "{" space ref-defs-not-not-1-not-kv space "}")",
                     "ref-defs-not-not-1-not ::= ref-defs-not-not-1-not-0 | ref-defs-not-not-1",
                     R"(ref-defs-not-not-1-not-0 ::= "{" space ref-defs-not-not-1-not-0-p-kv space "}")",
                     R"(ref-defs-not-not-1-not-0-p-kv ::= "\"p\"" space ":" space string)",
                     R"(ref-defs-not-not-1-not-kv ::= "\"not\"" space ":" space ref-defs-not-not-1-not)",
                     R"(ref-defs-not-not-kv ::= "\"not\"" space ":" space ref-defs-not-not)",
                     "root ::= ref-defs-not"},
                    {"char", "string"}));
  // Arrays merged with a recursive array: the merged items are one schema
  // at every depth.
  const std::string arrays = convert(R"({"$ref": "#/$defs/params", "$defs": {"params": {"type": "array",
      "items": {"type": "object", "additionalProperties": false, "properties": {"name": {"type": "string"},
        "callback": {"$ref": "#/$defs/params", "type": "array", "minItems": 0}}}}}})");
  EXPECT_EQ(check_gbnf(arrays), "");
  EXPECT_NE(arrays.find(R"(ref-defs-params-item-callback-item-callback-item-callback-kv ::= "\"callback\"" space ":" )"
                        R"(space ref-defs-params-item-callback-item-callback)" "\n"),
            std::string::npos)
      << arrays;
  // {"type": "object", "$ref": "#"} at 40 properties is one conjunction (a
  // "type" beside it is part of its key), made once: not one per property
  // inside each other (40! of them).
  std::string props;
  for (int i = 0; i < 40; ++i) props += "\"p" + std::to_string(i) + R"(": {"type": "object", "$ref": "#"}, )";
  const std::string many = convert(R"({"type": "object", "additionalProperties": false, "properties": {)" + props +
                                   R"("leaf": {"type": "null"}}})");
  EXPECT_EQ(check_gbnf(many), "");
  EXPECT_NE(many.find(R"(p0-p39-kv ::= "\"p39\"" space ":" space p0)" "\n"), std::string::npos) << many;
  EXPECT_NE(many.find(R"(p39-kv ::= "\"p39\"" space ":" space p0)" "\n"), std::string::npos) << many;
  EXPECT_EQ(many.find("p1 ::="), std::string::npos) << many;
}

// minLength and maxLength beside a pattern: implied by its lengths, or
// taken by its one variable part, or every variable part at its least.
TEST(JsonSchemaToGbnf, PatternsWithLengths) {
  auto with = [](const std::string& p, size_t min, size_t max) {
    nlohmann::json s{{"type", "string"}, {"pattern", p}, {"minLength", min}};
    if (max != SIZE_MAX) s["maxLength"] = max;
    return convert(s.dump());
  };
  auto plain = [](const std::string& p) { return convert(nlohmann::json{{"type", "string"}, {"pattern", p}}.dump()); };
  // Implied.
  EXPECT_EQ(with("^[0-9]{9}$", 0, 9), plain("^[0-9]{9}$"));
  EXPECT_EQ(with("^[0-9a-z][0-9a-z.@_-]{0,30}[0-9a-z]$", 2, 64), plain("^[0-9a-z][0-9a-z.@_-]{0,30}[0-9a-z]$"));
  EXPECT_EQ(with(R"(^(?:\S+\s+){0,99}\S+$)", 1, SIZE_MAX), plain(R"(^(?:\S+\s+){0,99}\S+$)"));
  // The one variable part.
  EXPECT_EQ(with("^a+$", 2, SIZE_MAX), grammar({R"(root ::= "\"" ("a"{2,}) "\"")"}));
  EXPECT_EQ(with(R"(^[A-Za-z0-9:_\-]+$)", 0, 255), grammar({R"(root ::= "\"" ([\-0-:A-Z_a-z]{1,255}) "\"")"}));
  EXPECT_EQ(with("^x-[a-z]*-y$", 5, 8), grammar({R"(root ::= "\"" ("x-" [a-z]{1,4} "-y") "\"")"}));
  EXPECT_EQ(with("^x-", 0, 6), grammar({R"(root ::= "\"" ("x-" char{0,4}) "\"")"}, {"char"}));
  EXPECT_EQ(with("-y$", 4, SIZE_MAX), grammar({R"(root ::= "\"" (char{2,} "-y") "\"")"}, {"char"}));
  // Every variable part at its least: unanchored ends empty.
  EXPECT_EQ(with("[0-9]{10}", 10, 10), grammar({R"(root ::= "\"" ([0-9]{10}) "\"")"}));
  EXPECT_EQ(with("^(ab)*c?d+$", 0, 1), grammar({R"(root ::= "\"" ("d") "\"")"}));
  // Per alternative; one with no string of those lengths is dropped.
  EXPECT_EQ(with("^[a-z]+$|^[0-9]{3}$", 4, 8), grammar({R"(root ::= "\"" ([a-z]{4,8}) "\"")"}));
  EXPECT_EQ(with("^a|b$", 3, 3), grammar({R"(root ::= "\"" ("a" char{2} | char{2} "b") "\"")"}, {"char"}));
  // Alternations taken apart where that leaves one variable part each; a
  // repetition next to an unanchored end takes its least (R{m,n} any* is
  // R{m} any*).
  EXPECT_EQ(with("^(http|https)://.*", 10, SIZE_MAX),
            grammar({R"(root ::= "\"" ("http://" char{3,} | "https://" char{2,}) "\"")"}, {"char"}));
  EXPECT_EQ(with("^(ab|c)[0-9]*$", 3, 4), grammar({R"(root ::= "\"" ("ab" [0-9]{1,2} | "c" [0-9]{2,3}) "\"")"}));
  EXPECT_EQ(with(R"(^([\w\/-]|[\w-][\w\/-]*[\w-])$)", 0, 255),
            grammar({R"(root ::= "\"" ([\-/-9A-Z_a-z] | [\-0-9A-Z_a-z] [\-/-9A-Z_a-z]{0,253} [\-0-9A-Z_a-z]) "\"")"}));
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^ab$", "minLength": 3})"),
            R"(json_schema: keyword "minLength" at the root: no string the pattern matches has such a length)");
}

// Lengths beside a format whose lengths imply them change nothing.
TEST(JsonSchemaToGbnf, FormatsWithLengths) {
  EXPECT_EQ(convert(R"({"type": "string", "format": "date", "minLength": 10, "maxLength": 10})"),
            convert(R"({"type": "string", "format": "date"})"));
  EXPECT_EQ(convert(R"({"type": "string", "format": "time", "minLength": 9, "maxLength": 18})"),
            convert(R"({"type": "string", "format": "time"})"));
  EXPECT_EQ(convert(R"({"type": "string", "format": "date-time", "minLength": 1, "maxLength": 29})"),
            convert(R"({"type": "string", "format": "date-time"})"));
  EXPECT_EQ(convert(R"({"type": "string", "format": "uuid", "maxLength": 36})"),
            convert(R"({"type": "string", "format": "uuid"})"));
  EXPECT_EQ(convert(R"({"type": "string", "format": "email", "minLength": 5})"),
            convert(R"({"type": "string", "format": "email"})"));
  EXPECT_EQ(error_of(R"({"type": "string", "format": "uuid", "maxLength": 35})"),
            R"(json_schema: keyword "maxLength" at the root: no uuid has such a length)");
}

TEST(JsonSchemaToGbnf, Patterns) {
  auto pattern = [](const std::string& p) {
    return convert(nlohmann::json{{"type", "string"}, {"pattern", p}}.dump());
  };
  // llama.cpp's pattern cases.
  EXPECT_EQ(pattern("^abc?d*efg+(hij)?kl$"),
            grammar({R"(root ::= "\"" ("ab" "c"? "d"* "ef" "g"+ ("hij")? "kl") "\"")"}));
  EXPECT_EQ(pattern(R"(^\[\]\{\}\(\)\|\+\*\?$)"), grammar({R"(root ::= "\"" ("[]{}()|+*?") "\"")"}));
  EXPECT_EQ(pattern("^(?:foo|bar)baz$"), grammar({R"(root ::= "\"" (("foo" | "bar") "baz") "\"")"}));
  EXPECT_EQ(pattern("^(?:(?:ab)+c)?d$"), grammar({R"(root ::= "\"" ((("ab")+ "c")? "d") "\"")"}));
  EXPECT_EQ(pattern(R"(^[a-z\-]+$)"), grammar({R"(root ::= "\"" ([\-a-z]+) "\"")"}));
  EXPECT_EQ(pattern(R"(^a\-b$)"), grammar({R"(root ::= "\"" ("a-b") "\"")"}));
  EXPECT_EQ(pattern(R"(^\d{3}\.\w+$)"), grammar({R"(root ::= "\"" ([0-9]{3} "." [0-9A-Z_a-z]+) "\"")"}));
  // A '"' or '\' of the pattern is written as JSON writes it.
  EXPECT_EQ(pattern("^\"$"), grammar({R"(root ::= "\"" ("\\\"") "\"")"}));
  EXPECT_EQ(pattern(R"(^a"b\\c$)"), grammar({R"(root ::= "\"" ("a\\\"b\\\\c") "\"")"}));
  // So do '.' and negated classes: raw where JSON allows, else escaped.
  const std::string dot =
      R"(([^\x00-\x1F"\\\x7F\u2028\u2029\uD800-\uDFFF] | "\\" ["\\bft] | "\\u00" ("0" [0-7bef] | "1" [0-9a-f] | "7f")))";
  EXPECT_EQ(pattern("^a.$"), grammar({R"(root ::= "\"" ("a" )" + dot + R"() "\"")"}));
  EXPECT_EQ(pattern("^[^a-c]$"), grammar({R"(root ::= "\"" (([^\x00-\x1F"\\a-c\x7F\uD800-\uDFFF] | "\\" ["\\bfnrt] | )"
                                          R"("\\u00" ("0" [0-7bef] | "1" [0-9a-f] | "7f"))) "\"")"}));
  EXPECT_EQ(pattern(R"(^\s$)"), grammar({R"(root ::= "\"" (([ \xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000] )"
                                         R"(| "\\" [fnrt] | "\\u00" "0b")) "\"")"}));
  // Unanchored ends match anything; each top-level alternative has its own
  // anchors (llama.cpp reads "^A|B|C|D$" as A|B|C|D, ECMA-262 does not).
  EXPECT_EQ(pattern("[0-9]+"), grammar({R"(root ::= "\"" (char* [0-9]+ char*) "\"")"}, {"char"}));
  EXPECT_EQ(pattern("^A|B|C|D$"),
            grammar({R"(root ::= "\"" ("A" char* | char* "B" char* | char* "C" char* | char* "D") "\"")"}, {"char"}));
  // Anchors inside groups: the alternative is the union of its variants,
  // each anchored at the start, the end, both or neither (what must match ""
  // before a '^' or after a '$' is dropped; a variant it cannot be is dead).
  EXPECT_EQ(pattern("^$|(^(?:a+ )?b$)"), grammar({R"(root ::= "\"" ((("a"+ " ")? "b")?) "\"")"}));
  EXPECT_EQ(pattern("^([^,]|$)"),
            grammar({R"(root ::= "\"" ((([^\x00-\x1F",\\\x7F\uD800-\uDFFF] | "\\" ["\\bfnrt] | )"
                     R"("\\u00" ("0" [0-7bef] | "1" [0-9a-f] | "7f")) char*)?) "\"")"},
                    {"char"}));
  EXPECT_EQ(pattern("(^a|b)c"), grammar({R"(root ::= "\"" ("ac" char* | char* "bc" char*) "\"")"}, {"char"}));
  EXPECT_EQ(pattern("x?(^y|z$)"), grammar({R"(root ::= "\"" ("y" char* | char* "x"? "z") "\"")"}, {"char"}));
  EXPECT_EQ(pattern("^(a|b$)?c$"), grammar({R"(root ::= "\"" (("a")? "c") "\"")"}));
  // In x* and x+, one iteration anchored at the start (the first) and one at
  // the end (the last).
  EXPECT_EQ(pattern("^(a|^b)+$"), grammar({R"(root ::= "\"" ("a"+ | "b" "a"*) "\"")"}));
  EXPECT_EQ(pattern("^(/?(x|y*)($|/))*$"),
            grammar({R"(root ::= "\"" (("/"? ("x" | "y"*) "/")* | ("/"? ("x" | "y"*) "/")* "/"? ("x" | "y"*)) "\"")"}));
  // Repeated parts that can match nothing are rewritten (GBNF's x* of such
  // an x is left-recursive).
  EXPECT_EQ(pattern("^(a?)*b$"), grammar({R"(root ::= "\"" ("a"* "b") "\"")"}));
  EXPECT_EQ(pattern("^(a*b*)+$"), grammar({R"(root ::= "\"" (("a"+ "b"* | "b"+)*) "\"")"}));
  EXPECT_EQ(pattern("^(a|)$"), grammar({R"(root ::= "\"" (("a")?) "\"")"}));
  EXPECT_EQ(pattern("^$"), grammar({R"(root ::= "\"" "\"")"}));
  // Lazy quantifiers: the same strings.
  EXPECT_EQ(pattern("^a+?b{2,3}?$"), grammar({R"(root ::= "\"" ("a"+ "b"{2,3}) "\"")"}));
  // Escapes of code points.
  EXPECT_EQ(pattern(R"(^\x41\u00e9\t$)"), grammar({R"(root ::= "\"" ("Aé\\t") "\"")"}));
}

// --- what throws --------------------------------------------------------------

TEST(JsonSchemaToGbnf, UnsupportedKeywordsThrowNamingKeywordAndPointer) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "object", "propertyNames": {"format": "email"}})",
       R"(json_schema: keyword "propertyNames" at /propertyNames: "format" is not supported in it)"},
      {R"({"type": "object", "required": ["A"], "propertyNames": {"pattern": "^[a-z]+$"}})",
       R"(json_schema: keyword "propertyNames" at the root: property "A" is required but its name does not )"
       R"(satisfy it)"},
      {R"j({"not": {"pattern": "(?=(?!x))"}})j",
       R"(json_schema: keyword "not" at the root: of "pattern": a lookaround assertion inside another is not )"
       R"(supported (at character 6))"},
      {R"({"not": {"pattern": "a$\\n"}})",
       R"(json_schema: keyword "not" at the root: of "pattern": a '$' followed by what cannot match "" is not )"
       R"(supported here)"},
      {R"({"type": "number", "not": {"type": "integer"}})", R"(json_schema: unsupported keyword "not" at the root)"},
      {R"({"not": {"anyOf": [{"required": ["a"]}, {"pattern": "x"}]}})",
       R"(json_schema: unsupported keyword "not" at the root)"},
      {R"({"type": "null", "not": {"type": "null"}})",
       R"(json_schema: the schema false (no value is valid) at the root)"},
      {R"({"if": {"properties": {"a": {"const": 1}}}, "then": {"unevaluatedItems": {}}})",
       R"(json_schema: unsupported keyword "unevaluatedItems" at /allOf/0/anyOf/0/allOf/1)"},
      {R"({"not": {"enum": [1, 2]}})",
       R"(json_schema: keyword "not" at the root: of enum/const beside no enum/const that lists the values allowed )"
       R"((not): the grammar writes no value but these only where it lists them)"},
      // dependencies in their sound forms; what they cannot be.
      {R"({"type": "object", "dependentRequired": {"a": "b"}})",
       R"(json_schema: keyword "dependentRequired" at /dependentRequired: "a" must be an array of property names)"},
      {R"({"type": "object", "dependentSchemas": {"a": ["b"]}})",
       R"(json_schema: keyword "dependentSchemas" at /dependentSchemas: "a" must be a schema)"},
      {R"({"type": "object", "dependencies": {"a": 1}})",
       R"(json_schema: keyword "dependencies" at /dependencies: "a" must be an array of property names or a schema)"},
      {R"({"type": "object", "dependencies": {"a": {"minProperties": 2}, "b": {"minProperties": 2}, )"
       R"("c": {"minProperties": 2}, "d": {"minProperties": 2}, "e": {"minProperties": 2}, )"
       R"("f": {"minProperties": 2}, "g": {"minProperties": 2}}})",
       R"(json_schema: keyword "dependencies" at the root: more than 64 cases of the properties whose presence )"
       R"(requires more are not supported)"},
      {R"({"type": "object", "unevaluatedProperties": false})",
       R"(json_schema: unsupported keyword "unevaluatedProperties" at the root)"},
      {R"({"items": {"type": "array", "uniqueItems": "yes"}})",
       R"(json_schema: unsupported keyword "uniqueItems" at /items)"},
      {R"({"items": {"type": "array", "uniqueItems": true, "minItems": 2}})",
       R"(json_schema: keyword "uniqueItems" at /items: true beside minItems over 1 is not supported (only arrays )"
       R"(of at most one item are written, which are unique))"},
      // contains where the grammar cannot place the matching items exactly.
      {R"({"type": "array", "contains": {"type": "null"}, "maxContains": 2})",
       R"(json_schema: keyword "maxContains" at the root: below maxItems is supported only where contains is an )"
       R"(enum/const, items lists its values and minItems/maxItems do not bind)"},
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}, "maxContains": 2, "minItems": 3})",
       R"(json_schema: keyword "maxContains" at the root: below maxItems is supported only where contains is an )"
       R"(enum/const, items lists its values and minItems/maxItems do not bind)"},
      {R"({"prefixItems": [{"type": "null"}], "items": {}, "contains": {"type": "null"}})",
       R"(json_schema: keyword "contains" at the root: beside prefixItems (or an items array) is not supported)"},
      {R"({"type": "array", "contains": {"type": "null"}, "minContains": 2, "maxItems": 5})",
       R"(json_schema: keyword "minContains" at the root: over 1 beside minItems or maxItems is not supported)"},
      {R"({"type": "array", "contains": {"type": "null"}, "minItems": 40})",
       R"(json_schema: keyword "contains" at the root: beside minItems/maxItems that leave 32 or more items )"
       R"(around the matching one is not supported)"},
      {R"({"type": "array", "contains": {"type": "null"}, "minContains": 2, "uniqueItems": true})",
       R"(json_schema: keyword "uniqueItems" at the root: true beside minContains over 1 is not supported (only )"
       R"(arrays of at most one item are written, which are unique))"},
      {R"({"allOf": [{"contains": {"type": "null"}}, {"contains": {"type": "string"}}]})",
       R"(json_schema: keyword "contains" at /allOf/1: in more than one part of allOf is not supported)"},
      {R"({"type": "array", "not": {"contains": {"type": "array", "items": {"format": "date"}}}})",
       R"(json_schema: unsupported keyword "not" at the root)"},
      {R"({"type": "array", "unevaluatedItems": false})",
       R"(json_schema: unsupported keyword "unevaluatedItems" at the root)"},
      {R"({"type": "integer", "multipleOf": 997})",
       R"(json_schema: keyword "multipleOf" at the root: the numerals of the multiples of 997 within the bounds )"
       R"(need more than 1024 rules)"},
      {R"({"type": "integer", "multipleOf": 10, "minimum": 1, "maximum": 9})",
       R"(json_schema: keyword "multipleOf" at the root: no multiple of 10 is within the bounds)"},
      {R"({"type": "integer", "multipleOf": 0})",
       R"(json_schema: keyword "multipleOf" at the root: must be a number over 0)"},
      {R"({"type": ["number", "null"], "multipleOf": 0.3})",
       R"(json_schema: keyword "multipleOf" at the root: only whole numbers up to 10^15 and fractions 1/k (0.5, )"
       R"(0.25, 0.1, 0.01, ..., 0.001) whose floating-point quotients are whole for every integer are supported, )"
       R"(not 0.3)"},
      {R"({"type": "number", "multipleOf": 0.0001})",
       R"(json_schema: keyword "multipleOf" at the root: only whole numbers up to 10^15 and fractions 1/k (0.5, )"
       R"(0.25, 0.1, 0.01, ..., 0.001) whose floating-point quotients are whole for every integer are supported, )"
       R"(not 0.0001)"},
      {R"({"$defs": {"a": {"$dynamicRef": "#x"}}, "$ref": "#/$defs/a"})",
       R"(json_schema: unsupported keyword "$dynamicRef" at /$defs/a)"},
      // Bounds of numbers with no integer and no [I, I+1] between them.
      {R"({"type": "number", "minimum": 0.5, "maximum": 0.9})",
       R"(json_schema: keyword "minimum" at the root: bounds that hold no integer, nor an interval from one integer to the next, are not supported)"},
      {R"({"properties": {"x": {"exclusiveMinimum": 1.2, "maximum": 1.9}}, "required": ["x"]})",
       R"(json_schema: keyword "exclusiveMinimum" at /properties/x: bounds that hold no integer, nor an interval from one integer to the next, are not supported)"},
      // Combinations that cannot be enforced together.
      {R"({"type": "string", "pattern": "^a+$", "format": "date"})",
       R"(json_schema: keyword "format" at the root: no string the pattern matches is a date)"},
      {R"({"type": "string", "pattern": "^[0-9-]+$", "format": "date", "maxLength": 9})",
       R"(json_schema: keyword "format" at the root: no string the pattern matches is a date of such a length)"},
      {R"({"type": "string", "format": "email", "minLength": 68})",
       R"(json_schema: keyword "minLength" at the root: over 67 is not supported together with "format" "email")"},
      {R"({"type": "string", "format": "date-time", "minLength": 21})",
       R"(json_schema: keyword "minLength" at the root: not supported together with "format" "date-time" unless )"
       R"(its lengths imply it)"},
      {R"({"enum": [1, {"a": 1}], "properties": {"a": {"type": "integer"}}})",
       R"(json_schema: keyword "properties" at the root: not supported beside "enum" for an object value)"},
      {R"({"enum": [[1], 2], "minItems": 1})",
       R"(json_schema: keyword "minItems" at the root: not supported beside "enum" for an array value)"},
      {R"({"const": "a@b.c", "format": "email"})",
       R"(json_schema: keyword "format" at the root: not supported beside "const" for a string value)"},
      {R"({"enum": [4, 9007199254740993], "minimum": 0})",
       R"(json_schema: keyword "minimum" at the root: not supported beside "enum" for numbers past 2^53)"},
      {R"({"enum": [4, 6], "multipleOf": 0.5})",
       R"(json_schema: keyword "multipleOf" at the root: not supported beside "enum" but for whole numbers)"},
      {R"({"allOf": [{"minLength": 1}, {"items": {}}]})",
       R"(json_schema: keyword "allOf" at the root: merges only objects (properties, required, additionalProperties, patternProperties, minProperties, maxProperties, propertyNames) or enums; the schema at /allOf/0 is neither)"},
      {R"j({"allOf": [{"type": "string", "pattern": "^(?!a)"}, {"pattern": "b"}, {"pattern": "(?=c)"}]})j",
       R"(json_schema: keyword "pattern" at /allOf/2: with a lookahead, beside another with one in one )"
       R"(conjunction ("allOf"), is not supported)"},
      {R"j({"allOf": [{"type": "string", "pattern": "a"}, {"pattern": "b)(c"}]})j",
       R"(json_schema: keyword "pattern" at /allOf/1: unbalanced ')' (at character 1))"},
      {R"({"allOf": [{"type": "integer", "multipleOf": 2}, {"multipleOf": 3}]})",
       R"(json_schema: keyword "multipleOf" at /allOf/1: two different values in one conjunction ("allOf") are not supported)"},
      {R"({"allOf": [{"type": "string"}, {"not": {"format": "date"}}]})",
       R"(json_schema: unsupported keyword "not" at /allOf/1)"},
  };
  for (const auto& [schema, message] : cases) EXPECT_EQ(error_of(schema), message) << schema;
}

TEST(JsonSchemaToGbnf, UnsupportedPatternsThrow) {
  auto error = [](const std::string& p) {
    return error_of(nlohmann::json{{"properties", {{"p", {{"type", "string"}, {"pattern", p}}}}}}.dump());
  };
  const std::string at = R"(json_schema: keyword "pattern" at /properties/p: )";
  EXPECT_EQ(error("^(?=(?=a))a$"), at + "a lookaround assertion inside another is not supported (at character 7)");
  EXPECT_EQ(error("^(?=a)*a$"), at + "a quantifier after a lookaround assertion is not supported (at character 6)");
  EXPECT_EQ(error("(a|(?=b))^b"),
            at + "a lookaround assertion inside a group before a '^' or after a '$' is not supported");
  EXPECT_EQ(error("^(?<!a)b$"), at + "lookbehind assertions are not supported (at character 3)");
  EXPECT_EQ(error("^(?<n>a)$"),
            at + "named groups are not supported (Python's re writes them (?P<name>...)) (at character 3)");
  EXPECT_EQ(error("^(?i)a$"), at + "unsupported group syntax \"(?\" (at character 3)");
  EXPECT_EQ(error(R"(^(a)\1$)"), at + "backreferences are not supported (at character 6)");
  EXPECT_EQ(error(R"(^\bword$)"), at + "word boundaries (\\b) are not supported (at character 3)");
  EXPECT_EQ(error(R"(^\p{L}$)"), at + "Unicode property escapes are not supported (at character 3)");
  EXPECT_EQ(error(R"(^\ud83d\ude00$)"),
            at + "surrogate escapes are not supported (write the character itself) (at character 7)");
  EXPECT_EQ(error(R"(^\q$)"), at + "unknown escape \"\\q\" (at character 3)");
  // Anchors anywhere; a pattern whose every alternative needs "" before a
  // '^' or after a '$' that cannot be empty matches no string.
  const std::string none = at + "no string matches the pattern (a '^' after what cannot be empty, or a '$' before it)";
  EXPECT_EQ(error("^a^b$"), none);
  EXPECT_EQ(error("^a$b$"), none);
  EXPECT_EQ(error("(a|b)^c|d$e"), none);
  const std::string repeated = at + "'^' or '$' inside a group repeated a bounded number of times or at least twice is "
                                    "not supported (at character ";
  EXPECT_EQ(error("^(a|^b){2}$"), repeated + "10)");
  EXPECT_EQ(error("^(a$){2,}"), repeated + "9)");
  EXPECT_EQ(error("^(a$"), at + "missing ')' (at character 4)");
  EXPECT_EQ(error("^(a"), at + "missing ')' (at character 3)");
  EXPECT_EQ(error("^a)$"), at + "unbalanced ')' (at character 2)");
  EXPECT_EQ(error("^[ab$"), at + "unterminated character class (at character 5)");
  EXPECT_EQ(error("^[z-a]$"), at + "range out of order in character class (at character 5)");
  EXPECT_EQ(error("^[]$"), at + "a character class that matches no character (at character 3)");
  EXPECT_EQ(error("^*a$"), at + "nothing to repeat before '*' (at character 1)");
  EXPECT_EQ(error("^a**$"), at + "nothing to repeat before '*' (at character 3)");
  EXPECT_EQ(error("^a{2,1}$"), at + "repetition {2,1} out of order (at character 7)");
  EXPECT_EQ(error("^a{,3}$"), at + "'{' that does not start a quantifier {n}, {n,} or {n,m} (at character 3)");
  EXPECT_EQ(error("^a{20000}$"), at + "repetition count 20000 over limits.max_repetition (10000) (at character 9)");
  // A ']' or '}' that closes nothing is itself (Python's re, ECMA-262's Annex B).
  EXPECT_EQ(check_gbnf(convert(R"({"type": "string", "pattern": "^[[a-z]*]*\\{d}$"})")), "");
  const auto closing = Grammar::parse(convert(R"({"type": "string", "pattern": "^[[a-z]*]*\\{d}$"})"));
  EXPECT_TRUE(test::accepts(closing, R"("[ab]]{d}")"));
  EXPECT_FALSE(test::accepts(closing, R"("[ab]]d}")"));
}

TEST(JsonSchemaToGbnf, BadValuesAndEmptySchemasThrow) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "kaboom"})", R"(json_schema: keyword "type" at the root: unknown type "kaboom")"},
      {R"({"type": 123})", R"(json_schema: keyword "type" at the root: must be a string or an array of strings)"},
      {R"({"type": []})", R"(json_schema: keyword "type" at the root: must not be an empty array)"},
      {R"({"properties": {"a": 1}})", R"(json_schema: a schema must be an object or a boolean at /properties/a)"},
      {R"({"properties": []})", R"(json_schema: keyword "properties" at the root: must be an object)"},
      {R"({"type": "object", "required": "a"})",
       R"(json_schema: keyword "required" at the root: must be an array of strings)"},
      {R"({"type": "string", "minLength": -1})",
       R"(json_schema: keyword "minLength" at the root: must be a non-negative integer)"},
      {R"({"type": "array", "maxItems": 1.5})",
       R"(json_schema: keyword "maxItems" at the root: must be a non-negative integer)"},
      {R"({"type": "integer", "minimum": "0"})", R"(json_schema: keyword "minimum" at the root: must be a number)"},
      {R"({"enum": []})", R"(json_schema: keyword "enum" at the root: must be a non-empty array)"},
      {R"({"anyOf": []})", R"(json_schema: keyword "anyOf" at the root: must be a non-empty array of schemas)"},
      {R"({"allOf": {}})", R"(json_schema: keyword "allOf" at the root: must be a non-empty array of schemas)"},
      {R"({"type": "array", "prefixItems": {"type": "string"}})",
       R"(json_schema: keyword "prefixItems" at the root: must be an array of schemas)"},
      {R"({"type": "object", "additionalProperties": 1})",
       R"(json_schema: keyword "additionalProperties" at the root: must be a boolean or a schema)"},
      {R"({"type": "string", "pattern": 1})", R"(json_schema: keyword "pattern" at the root: must be a string)"},
      {R"({"$ref": 1})", R"(json_schema: keyword "$ref" at the root: must be a string)"},
      {R"({"$ref": "other.json#/a"})",
       R"(json_schema: keyword "$ref" at the root: cannot resolve "other.json#/a" within the document (other documents are not read))"},
      {R"({"$ref": "#/$defs/missing"})",
       R"(json_schema: keyword "$ref" at the root: cannot resolve "#/$defs/missing")"},
      {R"({"$ref": "#node", "$defs": {"n": {"$anchor": "other"}}})",
       R"(json_schema: keyword "$ref" at the root: cannot resolve "#node": no subschema is named "node")"},
      {R"({"$defs": {"x": {"$id": "http://e/x", "properties": {"y": {"$ref": "#/$defs/z"}}}}, "$ref": "#/$defs/x"})",
       R"(json_schema: keyword "$ref" at /$defs/x/properties/y: cannot resolve "#/$defs/z" ("http://e/x#/$defs/z") within the document (other documents are not read))"},
      // Schemas no value satisfies.
      {"false", "json_schema: the schema false (no value is valid) at the root"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})",
       R"(json_schema: keyword "minimum" at the root: no integer is within the bounds)"},
      {R"({"type": "string", "minLength": 5, "maxLength": 4})",
       R"(json_schema: keyword "minLength" at the root: greater than maxLength)"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})",
       R"(json_schema: keyword "minItems" at the root: greater than maxItems)"},
      {R"({"prefixItems": [{}], "minItems": 2})",
       R"(json_schema: keyword "minItems" at the root: more items than the tuple allows)"},
      {R"({"type": "string", "enum": [1, 2]})",
       R"(json_schema: keyword "enum" at the root: no value is left with the keywords beside it)"},
      {R"({"type": "object", "required": ["x"], "additionalProperties": false})",
       R"(json_schema: keyword "required" at the root: property "x" is required but not in "properties" and additionalProperties is false)"},
      {R"({"properties": {"a": false}, "required": ["a"]})",
       R"(json_schema: keyword "required" at the root: property "a" is required but its schema is false)"},
      {R"({"anyOf": [false, {"type": "integer", "minimum": 1, "maximum": 0}]})",
       R"(json_schema: keyword "anyOf" at the root: no alternative accepts a value)"},
      {R"({"allOf": [{"type": "string"}, {"type": "null"}]})",
       R"(json_schema: keyword "allOf" at the root: the "type"s of its parts have no type in common)"},
      {R"({"allOf": [{"enum": [1, 2]}, {"enum": [3]}]})",
       R"(json_schema: keyword "allOf" at the root: no value is in every enum)"},
      {R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false}, {"required": ["b"]}]})",
       R"(json_schema: keyword "allOf" at the root: property "b" is required by one part and forbidden by another)"},
      // References that never reach an object or array.
      {R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})",
       R"(json_schema: keyword "$ref" at /$defs/b: "#/$defs/a" refers back to itself without an object or array in between (it would never end))"},
      {R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"})",
       R"(json_schema: keyword "$ref" at /$defs/a/anyOf/0: "#/$defs/a" refers back to itself without an object or array in between (it would never end))"},
      {R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}, {"type": "object"}]}}, "$ref": "#/$defs/a"})",
       R"(json_schema: keyword "$ref" at /$defs/a/allOf/0: "#/$defs/a" is part of its own conjunction)"},
      // A conjunction that is part of itself through an anyOf, with no
      // object or array in between.
      {R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}, {"minProperties": 1}]},
                     "b": {"anyOf": [{"type": "object", "properties": {"x": {"type": "null"}}},
                                     {"$ref": "#/$defs/a"}]}},
           "$ref": "#/$defs/a"})",
       R"(json_schema: keyword "allOf" at /$defs/a: refers back to the same conjunction without an object or array in )"
       R"(between (it would never end))"},
  };
  for (const auto& [schema, message] : cases) EXPECT_EQ(error_of(schema), message) << schema;
}

TEST(JsonSchemaToGbnf, InvalidJsonThrowsNamingThePosition) {
  EXPECT_EQ(error_of(R"({"type": "string",})"),
            "json_schema: the schema is not valid JSON: parse error at line 1, column 19: syntax error while parsing "
            "object key - unexpected '}'; expected string literal");
  EXPECT_EQ(error_of("{\n  \"a\":"),
            "json_schema: the schema is not valid JSON: parse error at line 2, column 7: syntax error while parsing "
            "value - unexpected end of input; expected '[', '{', or a literal");
  EXPECT_EQ(error_of(""),
            "json_schema: the schema is not valid JSON: parse error at line 1, column 1: syntax error while parsing "
            "value - unexpected end of input; expected '[', '{', or a literal");
}

// --- limits ---------------------------------------------------------------------

// A schema nested `n` deep, from `open` and `close` around {}.
std::string nested(size_t n, const std::string& open, const std::string& close) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += open;
  s += "{}";
  for (size_t i = 0; i < n; ++i) s += close;
  return s;
}

TEST(JsonSchemaToGbnf, DeepNestingThrowsWithoutOverflowingTheStack) {
  constexpr size_t kDeep = 100000;
  for (const auto& [open, close] :
       std::vector<std::pair<std::string, std::string>>{{R"({"items": )", "}"},
                                                        {R"({"anyOf": [)", "]}"},
                                                        {R"({"allOf": [)", "]}"},
                                                        {R"({"properties": {"a": )", "}}"},
                                                        {R"({"type": "object", "additionalProperties": )", "}"},
                                                        {R"({"prefixItems": [)", "]}"}}) {
    const std::string message = error_of(nested(kDeep, open, close));
    EXPECT_EQ(message.rfind("json_schema: nesting deeper than limits.max_nesting (256) at /", 0), 0u) << message;
  }
  // Values and patterns nest too.
  EXPECT_EQ(error_of(R"({"const": )" + std::string(kDeep, '[') + std::string(kDeep, ']') + "}"),
            R"(json_schema: keyword "const" at the root: a value nested deeper than limits.max_nesting (256))");
  EXPECT_EQ(error_of(R"({"pattern": "^)" + std::string(kDeep, '(') + std::string(kDeep, ')') + R"($"})"),
            R"(json_schema: keyword "pattern" at the root: groups nested deeper than limits.max_nesting (256) )"
            "(at character 258)");
  // Within the limit it converts.
  EXPECT_EQ(check_gbnf(convert(nested(200, R"({"items": )", "}"))), "");
}

// A large grammar (over a quarter of limits.max_bytes or of max_rules) has
// rules of the same body merged, repeatedly: the same language in fewer
// rules; a small one keeps a rule per place.
TEST(JsonSchemaToGbnf, LargeGrammarsMergeTheirSameRules) {
  const std::string two = R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": 30},
                              "b": {"type": "string", "maxLength": 30}}, "required": ["a", "b"]})";
  const std::vector<std::string> apart = {R"(a ::= "\"" char-0-30 "\"")", R"(a-kv ::= "\"a\"" space ":" space a)",
                                          R"(b ::= "\"" char-0-30 "\"")", R"(b-kv ::= "\"b\"" space ":" space b)",
                                          R"(char-0-30 ::= char{0,30})",
                                          R"(root ::= "{" space a-kv "," space b-kv space "}")"};
  EXPECT_EQ(convert(two), grammar(apart, {"char"}));
  GrammarLimits limits;
  limits.max_bytes = 4 * convert(two).size() - 4;
  EXPECT_EQ(convert(two, limits),
            grammar({R"(a ::= "\"" char-0-30 "\"")", R"(a-kv ::= "\"a\"" space ":" space a)",
                     R"(b-kv ::= "\"b\"" space ":" space a)", R"(char-0-30 ::= char{0,30})",
                     R"(root ::= "{" space a-kv "," space b-kv space "}")"},
                    {"char"}));
  // Forty properties of one inline shape (as dereferenced schemas repeat
  // them): its rules once, so the grammar fits a bound it was over.
  nlohmann::json many = {{"type", "object"}, {"required", nlohmann::json::array()}};
  for (int i = 0; i < 40; ++i) {
    const std::string key = "p" + std::to_string(i);
    many["properties"][key] = {{"type", "object"},
                               {"properties", {{"x", {{"type", "array"}, {"items", {{"enum", {"on", "off"}}}}}}}},
                               {"required", {"x"}}};
    many["required"].push_back(key);
  }
  const std::string whole = convert(many.dump());
  limits.max_bytes = whole.size() - 1;
  const std::string merged = convert(many.dump(), limits);
  EXPECT_LT(merged.size() * 2, whole.size()) << merged;
  EXPECT_EQ(check_gbnf(merged), "") << merged;
  std::string doc = "{";  // in the dump's order of keys: p0, p1, p10, ...
  for (const auto& [key, value] : many["properties"].items())
    doc += std::string(doc.size() > 1 ? "," : "") + "\"" + key + R"(":{"x":["on","off"]})";
  const std::string bad = doc.substr(0, doc.size() - 6) + R"("of"]})";
  doc += "}";
  for (const std::string& g : {whole, merged}) {
    const auto parsed = Grammar::parse(g);
    EXPECT_TRUE(test::accepts(parsed, doc));
    EXPECT_FALSE(test::accepts(parsed, bad + "}"));
  }
  limits.max_bytes = merged.size() - 1;
  EXPECT_EQ(error_of(many.dump(), limits), "json_schema: the grammar is " + std::to_string(merged.size()) +
                                                " bytes, over limits.max_bytes (" + std::to_string(merged.size() - 1) +
                                                ")");
}

TEST(JsonSchemaToGbnf, LimitsAreTheCallers) {
  GrammarLimits limits;
  limits.max_nesting = 3;
  // nested(n) has n - 1 levels below the root: its innermost items is {}.
  EXPECT_EQ(error_of(nested(5, R"({"items": )", "}"), limits),
            "json_schema: nesting deeper than limits.max_nesting (3) at /items/items/items/items");
  EXPECT_EQ(check_gbnf(convert(nested(4, R"({"items": )", "}"), limits)), "");

  limits = {};
  limits.max_repetition = 5;
  EXPECT_EQ(convert(R"({"type": "string", "maxLength": 5})", limits),
            grammar({R"(root ::= "\"" char{0,5} "\"")"}, {"char"}));
  // Counts over it are written in base min(16, max_repetition) (the
  // languages are checked at every length in schema_cases_test.cpp).
  EXPECT_EQ(convert(R"({"type": "string", "maxLength": 6})", limits),
            grammar({R"(char-x5 ::= char{5})", R"(root ::= "\"" (char{0,4} | char-x5 char?) "\"")"}, {"char"}));
  EXPECT_EQ(convert(R"({"type": "array", "minItems": 6, "items": {"type": "null"}})", limits),
            grammar({R"(root ::= "[" space null ("," space null){5,} space "]")"}, {"null"}));
  EXPECT_EQ(convert(R"({"type": "array", "minItems": 7, "items": {"type": "null"}})", limits),
            grammar({R"(items-x5 ::= ("," space null){5})",
                     R"(root ::= "[" space null items-x5 ("," space null) ("," space null)* space "]")"},
                    {"null"}));
  // Below 2 there is no base: refused.
  limits.max_repetition = 1;
  EXPECT_EQ(error_of(R"({"type": "string", "maxLength": 2})", limits),
            R"(json_schema: keyword "maxLength" at the root: over limits.max_repetition (1))");

  limits = {};
  limits.max_bytes = 100;
  const size_t bytes = convert(R"({"type": "string"})").size();
  EXPECT_EQ(error_of(R"({"type": "string"})", limits),
            "json_schema: the grammar is " + std::to_string(bytes) + " bytes, over limits.max_bytes (100)");
  limits = {};
  limits.max_rules = 2;
  EXPECT_EQ(error_of(R"({"type": "string"})", limits),
            "json_schema: the grammar needs 3 rules, over limits.max_rules (2)");
  limits = {};
  limits.max_elements = 10;
  EXPECT_EQ(error_of(R"({"anyOf": [{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}]})", limits),
            "json_schema: the schema expands to more than limits.max_elements (10) subschemas at /anyOf/9");
}

// --- properties of every output ---------------------------------------------------

TEST(JsonSchemaToGbnf, SameTextFromEveryThread) {
  const std::string schema = R"({"type": "object", "properties": {"id": {"type": "integer", "minimum": 1},
      "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "maxItems": 8},
      "when": {"format": "date-time"}}, "required": ["id"], "additionalProperties": {"type": "boolean"}})";
  const std::string expected = convert(schema);
  EXPECT_EQ(check_gbnf(expected), "");
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) got[t] = convert(schema);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& g : got) EXPECT_EQ(g, expected);
}

// tests/data/grammar/schema_cases.json: every schema converts to well-formed
// GBNF. (Whether each grammar accepts the "accept" texts and rejects the
// others is the GBNF matcher's test.)
TEST(JsonSchemaToGbnf, CasesConvertToWellFormedGrammars) {
  std::ifstream in(std::string(SYNAPSE_TEST_DATA) + "/grammar/schema_cases.json");
  ASSERT_TRUE(in) << "tests/data/grammar/schema_cases.json";
  const nlohmann::json doc = nlohmann::json::parse(in);
  const nlohmann::json& cases = doc.at("cases");
  ASSERT_GE(cases.size(), 50u);
  std::set<std::string> names;
  for (const nlohmann::json& c : cases) {
    const std::string name = c.at("name");
    EXPECT_TRUE(names.insert(name).second) << "two cases named " << name;
    std::string g;
    ASSERT_NO_THROW(g = convert(c.at("schema").dump())) << name;
    EXPECT_EQ(check_gbnf(g), "") << name << "\n" << g;
    EXPECT_FALSE(c.at("accept").empty()) << name;
    for (const char* key : {"accept", "reject", "reject_by_convention"}) {
      for (const nlohmann::json& t : c.at(key)) EXPECT_TRUE(t.is_string()) << name << " " << key;
    }
    // What must be accepted is JSON.
    for (const nlohmann::json& t : c.at("accept")) {
      EXPECT_TRUE(nlohmann::json::accept(t.get<std::string>())) << name << ": " << t;
    }
  }
}

// The automaton of a pattern's lengths counts code points only where that
// decides something. A state whose every move returns to itself is a counted
// tail, its set repeated through repetition(): ^[a-z]+$ of at most 20000
// (over limits.max_repetition for the rewriting) is one [a-z] and then 0 to
// 19999 more in base 16; ^(a|bc)d?:[a-z]*$ of 3 to 70 enters its tail after
// "a:" (1 to 68 more), "ad:" or "bc:" (0 to 67), "bcd:" (0 to 66). A count
// that cannot bind is dropped: ^[a-z]{1,2}(\.[a-z]{1,2}){1,2}$ reads at most
// 8, so of at most 7 only the states that can still reach 8 keep a count.
TEST(JsonSchemaToGbnf, PatternLengthsCountOnlyWhereTheyBind) {
  EXPECT_EQ(convert(R"({"type": "string", "pattern": "^[a-z]+$", "maxLength": 20000})"),
            grammar({R"(root ::= "\"" (pattern-len-0) "\"")", R"(pattern-len-0 ::= [a-z] pattern-len-1)",
                     R"(pattern-len-1 ::= pattern-char-0-19999)", R"(pattern-char ::= [a-z])",
                     R"(pattern-char-0-19999 ::= (((pattern-char-x4096{0,3} pattern-char-x256{0,15} | )"
                     R"(pattern-char-x4096{4} pattern-char-x256{0,13}) pattern-char-x16{0,15} | )"
                     R"(pattern-char-x4096{4} pattern-char-x256{14}) pattern-char{0,15} | pattern-char-x4096{4} )"
                     R"(pattern-char-x256{14} pattern-char-x16 pattern-char{0,15}))",
                     R"(pattern-char-x16 ::= pattern-char{16})", R"(pattern-char-x256 ::= pattern-char-x16{16})",
                     R"(pattern-char-x4096 ::= pattern-char-x256{16})"}));
  EXPECT_EQ(convert(R"({"type": "string", "pattern": "^(a|bc)d?:[a-z]*$", "minLength": 3, "maxLength": 70})"),
            grammar({R"(root ::= "\"" (pattern-len-0) "\"")", R"(pattern-char ::= [a-z])",
                     R"(pattern-char-0-66 ::= pattern-char{0,66})", R"(pattern-char-0-67 ::= pattern-char{0,67})",
                     R"(pattern-char-1-68 ::= pattern-char{1,68})",
                     R"(pattern-len-0 ::= "a" pattern-len-1 | "b" pattern-len-2)",
                     R"(pattern-len-1 ::= ":" pattern-len-3 | "d" pattern-len-4)",
                     R"(pattern-len-2 ::= "c" pattern-len-5)", R"(pattern-len-3 ::= pattern-char-1-68)",
                     R"(pattern-len-4 ::= ":" pattern-len-6)", R"(pattern-len-5 ::= ":" pattern-len-6 | "d" pattern-len-7)",
                     R"(pattern-len-6 ::= pattern-char-0-67)", R"(pattern-len-7 ::= ":" pattern-len-8)",
                     R"(pattern-len-8 ::= pattern-char-0-66)"}));
  // 14 states: the count is kept only on paths that could reach 8.
  EXPECT_EQ(convert(R"({"type": "string", "pattern": "^[a-z]{1,2}(\\.[a-z]{1,2}){1,2}$", "maxLength": 7})"),
            grammar({R"(root ::= "\"" (pattern-len-0) "\"")", R"(pattern-len-0 ::= [a-z] pattern-len-1)",
                     R"(pattern-len-1 ::= [a-z] pattern-len-2 | "." pattern-len-3)",
                     R"(pattern-len-2 ::= "." pattern-len-4)", R"(pattern-len-3 ::= [a-z] pattern-len-5)",
                     R"(pattern-len-4 ::= [a-z] pattern-len-6)",
                     R"(pattern-len-5 ::= ([a-z] pattern-len-7 | "." pattern-len-8)?)",
                     R"(pattern-len-6 ::= ("." pattern-len-8 | [a-z] pattern-len-9)?)",
                     R"(pattern-len-7 ::= ("." pattern-len-8)?)", R"(pattern-len-8 ::= [a-z] pattern-len-10)",
                     R"(pattern-len-9 ::= ("." pattern-len-11)?)", R"(pattern-len-10 ::= ([a-z] pattern-len-12)?)",
                     R"(pattern-len-11 ::= [a-z] pattern-len-13)", R"(pattern-len-12 ::= "")",
                     R"(pattern-len-13 ::= "")"}));
}

// A pattern of at most K + 1 words whose exact automaton would be over 4096
// states is word_count_automaton's subset (its strings:
// SchemaPatterns.WordCountSubsetAsDocumented): ^(?:[a-z]+ +){0,9}[a-z]+$ of
// at most 300 code points, 10 slots of 30, 570 states. An automaton whose
// rules would pass limits.max_bytes is refused naming the keyword.
TEST(JsonSchemaToGbnf, WordCountPatternsBeyondTheExactBoundAreASubset) {
  const std::string g = convert(R"({"type": "string", "pattern": "^(?:[a-z]+ +){0,9}[a-z]+$", "maxLength": 300})");
  EXPECT_EQ(check_gbnf(g), "") << g;
  std::istringstream lines(g);
  size_t n_states = 0;
  for (std::string line; std::getline(lines, line);) n_states += line.rfind("pattern-len-", 0) == 0;
  EXPECT_EQ(n_states, 570u);
  // JSONSchemaBench's largest (o21053): 100 words, 5000 code points, 9950
  // states (the subset's maxLength is under the automata's 8192).
  const std::string large = convert(
      R"x({"type": "string", "pattern": "^$|(^(?:\\S+\\s+){0,99}\\S+$)", "minLength": 1, "maxLength": 5000})x");
  std::istringstream large_lines(large);
  n_states = 0;
  for (std::string line; std::getline(large_lines, line);) n_states += line.rfind("pattern-len-", 0) == 0;
  EXPECT_EQ(n_states, 9950u);
  GrammarLimits small;
  small.max_bytes = 4000;
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^[a-z]+/[a-z]+$", "maxLength": 60})", small),
            R"(json_schema: keyword "maxLength" at the root: with "pattern": its automaton of 175 states is over )"
            R"(limits.max_bytes (4000))");
}

// minLength/maxLength beside a pattern that no single variable part can
// bound: the product of the pattern's minimal DFA with a count of the code
// points read, one rule per state: "^[a-z]+/[a-z]+$" of at most 4 code
// points is a/b, ab/c or a/bc, each state (DFA state, code points read).
TEST(JsonSchemaToGbnf, PatternLengthsBeyondOneVariablePartAreAnAutomaton) {
  EXPECT_EQ(convert(R"({"type": "string", "pattern": "^[a-z]+/[a-z]+$", "maxLength": 4})"),
            grammar({R"(root ::= "\"" (pattern-len-0) "\"")", R"(pattern-len-0 ::= [a-z] pattern-len-1)",
                     R"(pattern-len-1 ::= [a-z] pattern-len-2 | "/" pattern-len-3)",
                     R"(pattern-len-2 ::= "/" pattern-len-4)", R"(pattern-len-3 ::= [a-z] pattern-len-5)",
                     R"(pattern-len-4 ::= [a-z] pattern-len-6)", R"(pattern-len-5 ::= ([a-z] pattern-len-6)?)",
                     R"(pattern-len-6 ::= "")"}));
  // Unanchored, several variable parts, lengths 2..3: the digits anywhere.
  const std::string g = convert(R"({"type": "string", "pattern": "\\d-?\\d", "minLength": 2, "maxLength": 3})");
  EXPECT_EQ(check_gbnf(g), "") << g;
  // No string of such a length; an automaton over its bound of states.
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^(ab|abc)(de|d)$", "minLength": 6})"),
            R"(json_schema: keyword "minLength" at the root: no string the pattern matches has such a length)");
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^(a|b[a-z]*b)+$", "maxLength": 9000})"),
            R"(json_schema: keyword "maxLength" at the root: with "pattern": the lengths of its strings need more )"
            R"(than 8192 automaton states (minLength/maxLength))");
  // Hostile patterns are bounded: a DFA of 2^13 states (the 13th symbol
  // before the c's is an a); with limits.max_rules 256 (the automata's bound
  // of states, and 256^2 / 4 steps for all of them), 200 distinct classes in a
  // row (the atoms refined 200 times, 20,000 steps).
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^[ab]*a[ab]{12}c*$", "minLength": 20, "maxLength": 30})"),
            R"(json_schema: keyword "minLength" at the root: with "pattern": the lengths of its strings need more )"
            R"(than 8192 DFA states (minLength/maxLength))");
  auto utf8 = [](uint32_t cp) {  // three bytes: U+0800 to U+FFFF
    return std::string{static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                       static_cast<char>(0x80 | (cp & 0x3F))};
  };
  std::string many = "^a*";
  for (uint32_t cp = 0x4E00; cp < 0x4E00 + 200; ++cp) many += "[" + utf8(cp) + "]";
  many += "b*$";
  const std::string hostile = nlohmann::json{{"type", "string"}, {"pattern", many}, {"minLength", 200},
                                             {"maxLength", 205}}.dump();
  GrammarLimits small;
  small.max_rules = 256;
  EXPECT_EQ(error_of(hostile, small),
            R"(json_schema: keyword "minLength" at the root: with "pattern": the schema's pattern automata need )"
            R"(more than 16384 steps to build (minLength/maxLength))");
}

// `not` of patterns: the strings none of them matches, in either dialect
// (the wide reading's complement: Python's '$' also before a final '\n'), as
// one rule per state of the product automaton.
TEST(JsonSchemaToGbnf, NotPatternIsTheComplementAutomaton) {
  const std::string ch = R"([^\x00-\x1F"\\\x7F\uD800-\uDFFF] | "\\" ["\\bfnrt] | "\\u00" ("0" [0-7bef] | "1" [0-9a-f] | "7f"))";
  const std::string no_newline =
      R"([^\x00-\x1F"\\\x7F\uD800-\uDFFF] | "\\" ["\\bfrt] | "\\u00" ("0" [0-7bef] | "1" [0-9a-f] | "7f"))";
  // (Each set of a long JSON text is a rule of its own, pattern-char*.)
  EXPECT_EQ(convert(R"({"type": "string", "not": {"pattern": "^a$"}})"),
            grammar({R"(pattern-char ::= ([^\x00-\x1F"\\a\x7F\uD800-\uDFFF] | "\\" ["\\bfnrt] | )"
                     R"("\\u00" ("0" [0-7bef] | "1" [0-9a-f] | "7f")))",
                     "pattern-char0 ::= (" + no_newline + ")", "pattern-char1 ::= (" + ch + ")",
                     R"(pattern-len-0 ::= ("a" pattern-len-1 | pattern-char pattern-len-2)?)",
                     R"(pattern-len-1 ::= pattern-char0 pattern-len-2 | "\\n" pattern-len-3)",
                     "pattern-len-2 ::= (pattern-char1 pattern-len-2)?", "pattern-len-3 ::= pattern-char1 pattern-len-2",
                     R"(root ::= "\"" pattern-len-0 "\"")"}));
  // Beside a pattern, lengths and another `not`: one product automaton.
  const std::string g = convert(R"({"type": "string", "pattern": "^[a-z]+$", "maxLength": 8,
                                    "allOf": [{"not": {"pattern": "plugin"}}, {"not": {"pattern": "^x"}}]})");
  EXPECT_EQ(check_gbnf(g), "") << g;
  // Nothing left; a complement over the automata's bound of states.
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^ab", "not": {"pattern": "^a"}})"),
            R"(json_schema: keyword "not" at the root: no string the keywords beside it allow is left)");
  EXPECT_EQ(error_of(R"({"type": "string", "not": {"pattern": "^[ab]*a[ab]{12}$"}})"),
            R"(json_schema: keyword "not" at the root: of "pattern": the lengths of its strings need more than 8192 )"
            R"(DFA states (minLength/maxLength))");
}

// A schema whose required parts require themselves again has no finite
// value: refused, not a grammar whose replies can only be cut.
TEST(JsonSchemaToGbnf, NoFiniteValueIsRefused) {
  const std::string message =
      "json_schema: no finite value satisfies the schema (a part it requires requires itself again) at the root";
  EXPECT_EQ(error_of(R"({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}},
                                       "required": ["next"]}}, "$ref": "#/$defs/n"})"),
            message);
  EXPECT_EQ(error_of(R"({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}},
                       "$ref": "#/$defs/a"})"),
            message);
  // Optional, or an alternative that ends: fine.
  EXPECT_EQ(check_gbnf(convert(R"({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}},
                                   "$ref": "#/$defs/n"})")),
            "");
  EXPECT_EQ(check_gbnf(convert(R"({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}}},
                                   "$ref": "#/$defs/a"})")),
            "");
  EXPECT_EQ(check_gbnf(convert(R"({"$defs": {"n": {"anyOf": [{"type": "null"}, {"type": "object",
                                   "properties": {"next": {"$ref": "#/$defs/n"}}, "required": ["next"]}]}},
                                   "$ref": "#/$defs/n"})")),
            "");
}

// Patterns of the parts of one conjunction (allOf, $ref beside keywords,
// patternProperties beside a property): every string matches each,
// anywhere, as a validator tests them one by one.
TEST(JsonSchemaToGbnf, PatternsInOneConjunction) {
  const std::vector<std::string> a = {"^[ab.-]*$", "^[^-]", "ab|ba", "-$", "^((?!--).)*$"};
  std::vector<std::regex> re;
  for (const std::string& p : a) re.emplace_back(p);
  nlohmann::json parts = nlohmann::json::array();
  for (const std::string& p : a) parts.push_back({{"type", "string"}, {"pattern", p}});
  const auto g = Grammar::parse(convert(nlohmann::json{{"allOf", parts}, {"maxLength", 5}}.dump()));
  std::vector<std::string> texts{""};
  for (size_t i = 0; i < texts.size() && texts[i].size() < 6; ++i)
    for (const char c : std::string("ab.-")) texts.push_back(texts[i] + c);
  size_t matched = 0;
  for (const std::string& t : texts) {
    bool m = t.size() <= 5;
    for (const std::regex& r : re) m = m && std::regex_search(t, r);
    matched += m;
    EXPECT_EQ(test::accepts(g, "\"" + t + "\""), m) << t;
  }
  EXPECT_GT(matched, 10u);
}

// multipleOf where neither a list of the multiples nor the last digits
// (divisors of 1000 with no bound, or one near 0) write it: the numerals
// digit by digit with the remainder still needed and the bounds' digits.
// Every integer around the bounds, and 16- and 17-digit ones where a side
// is open (the integer rule's 16 digits), against the arithmetic.
TEST(JsonSchemaToGbnf, MultiplesDigitByDigitAreExact) {
  struct Case {
    int64_t m;
    std::optional<int64_t> lo, hi;
  };
  const std::vector<Case> cases = {
      {3, {}, {}},         {12, 0, {}},         {16, -2032, 4096}, {16, 0, 4096},     {10, {}, 99},
      {7, -1000, -13},     {256, 1024, 70000},  {9, 1, {}},        {11, {}, -5},      {64, -99999, 99999},
  };
  for (const Case& c : cases) {
    nlohmann::json schema = {{"type", "integer"}, {"multipleOf", c.m}};
    if (c.lo) schema["minimum"] = *c.lo;
    if (c.hi) schema["maximum"] = *c.hi;
    const std::string text = convert(schema.dump());
    const auto g = Grammar::parse(text);
    std::vector<int64_t> values;
    for (int64_t edge : {c.lo.value_or(0), c.hi.value_or(0), int64_t{0}})
      for (int64_t v = edge - 300; v <= edge + 300; ++v) values.push_back(v);
    for (int64_t v : {int64_t{9999999999999998}, int64_t{9999999999999999}, int64_t{1000000000000002},
                      int64_t{123456789012345}})
      values.insert(values.end(), {v, -v});
    for (int64_t v : values) {
      const bool in = (!c.lo || v >= *c.lo) && (!c.hi || v <= *c.hi) && v % c.m == 0;
      EXPECT_EQ(test::accepts(g, std::to_string(v)), in) << schema.dump() << " on " << v;
    }
    // Past 16 digits, leading zeros, -0: never.
    for (const char* bad : {"10000000000000002", "-10000000000000002", "012", "-0", "00"})
      EXPECT_FALSE(test::accepts(g, bad)) << schema.dump() << " on " << bad;
  }
}

// Lookaheads, (?=X) and (?!X) anywhere but inside another, through the
// pattern's automaton: a grammar accepts exactly the strings ECMA-262
// (std::regex's ECMAScript grammar) matches, every string of up to six
// characters over an alphabet the patterns tell apart (plain JSON
// characters, so the JSON text is the string). `not` of one is its
// complement.
TEST(JsonSchemaToGbnf, LookaheadsMatchAsEcmaScript) {
  const std::vector<std::string> patterns = {
      "^(?!ab)[ab.-]*$",             // at the start
      "^(?=.*a)(?=.*b)[ab.-]{2,}$",  // two, to the end
      "^((?!ab).)*$",                // at every character: no "ab" anywhere
      "^[a-]((?!.*--)[a-]*b)?$",     // in a group, reading to the end
      "a(?=b)",                      // unanchored, at the end
      "-(?!a)",                      // a "-" at the end too
      "^(?!^a|b)",                   // a '^' inside, at position 0
      "^(?=[^-]+$)(?!\\.+$).+$",     // '$' inside both kinds
      "b(?!a$)",                     // unanchored, '$' inside a negative one
      "(?=a.)^[ab]",                 // before a '^': at position 0
      "^a$(?!b)|^b(?=$)",            // after a '$', and '$' alone: at the end
      "^(a(?=b)|b(?!a))+$",          // inside a repetition
      "^(?:(?!-)[ab-])*-$",          // a repeated body that may not start with '-'
  };
  std::vector<std::string> texts{""};
  for (size_t i = 0; i < texts.size() && texts[i].size() < 6; ++i)
    for (const char c : std::string("ab.-")) texts.push_back(texts[i] + c);
  for (const std::string& p : patterns) {
    const std::regex re(p, std::regex::ECMAScript);
    const auto yes = Grammar::parse(convert(nlohmann::json{{"type", "string"}, {"pattern", p}}.dump()));
    const auto no = Grammar::parse(convert(nlohmann::json{{"type", "string"}, {"not", {{"pattern", p}}}}.dump()));
    size_t matched = 0;
    for (const std::string& t : texts) {
      const bool m = std::regex_search(t, re);
      matched += m;
      EXPECT_EQ(test::accepts(yes, "\"" + t + "\""), m) << p << " on \"" << t << "\"";
      EXPECT_EQ(test::accepts(no, "\"" + t + "\""), !m) << "not " << p << " on \"" << t << "\"";
    }
    EXPECT_GT(matched, 0u) << p;
    EXPECT_LT(matched, texts.size()) << p;
  }
  // Beside lengths: one product automaton.
  const auto g = Grammar::parse(convert(R"({"type": "string", "pattern": "^(?!a)[ab]*$", "minLength": 2, "maxLength": 3})"));
  EXPECT_TRUE(test::accepts(g, "\"ba\""));
  EXPECT_TRUE(test::accepts(g, "\"bab\""));
  EXPECT_FALSE(test::accepts(g, "\"ab\""));
  EXPECT_FALSE(test::accepts(g, "\"b\""));
  EXPECT_FALSE(test::accepts(g, "\"baba\""));
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^(?=a)b"})"),
            R"(json_schema: keyword "pattern" at the root: no string matches the pattern)");
}

// enum and const beside keywords of a type: the values those keywords allow,
// as a validator tests them (each keyword on values of its own type only).
TEST(JsonSchemaToGbnf, EnumValuesAreFilteredByTheKeywordsBesideThem) {
  EXPECT_EQ(convert(R"({"enum": ["ab", "abcd", "x1", "été", 3, 12, 12.5, null, true], "maxLength": 3,)"
                    R"( "pattern": "^[a-zé]+$", "minimum": 5, "multipleOf": 4, "format": "uri",)"
                    R"( "properties": {"a": {"type": "integer"}}, "minItems": 2})"),
            convert(R"({"enum": ["ab", "été", 12, null, true]})"));
  EXPECT_EQ(convert(R"({"enum": [0, 1, 2, 3], "exclusiveMinimum": 0, "exclusiveMaximum": 3})"),
            convert(R"({"enum": [1, 2]})"));
  EXPECT_EQ(convert(R"({"$schema": "http://json-schema.org/draft-04/schema#", "enum": [0, 1, 2, 3],)"
                    R"( "minimum": 0, "exclusiveMinimum": true, "maximum": 3})"),
            convert(R"({"enum": [1, 2, 3]})"));
  EXPECT_EQ(convert(R"({"const": "abc", "minLength": 3})"), convert(R"({"const": "abc"})"));
  EXPECT_EQ(error_of(R"({"const": "abc", "minLength": 4})"),
            R"(json_schema: keyword "const" at the root: no value is left with the keywords beside it)");
  // One pattern beside the enums of many alternatives is built once: with
  // limits.max_rules 256 (256^2 / 4 steps for all automata) 200 alternatives
  // fit, as one does.
  nlohmann::json alts = nlohmann::json::array();
  for (int i = 0; i < 200; ++i) {
    alts.push_back({{"enum", {"ab" + std::to_string(100 + i), "x" + std::to_string(i)}},
                    {"pattern", "^(ab|cd)[0-9]{3}$"}});
  }
  GrammarLimits small;
  small.max_rules = 256;
  EXPECT_EQ(check_gbnf(convert(nlohmann::json{{"anyOf", {alts[0]}}}.dump(), small)), "");
  EXPECT_EQ(check_gbnf(convert(nlohmann::json{{"anyOf", alts}}.dump(), small)), "");
}

// contains: the grammar accepts exactly the arrays a validator does, every
// array of up to six items of "x", "y" (and 1) checked.
TEST(JsonSchemaToGbnf, ContainsIsExact) {
  EXPECT_EQ(convert(R"({"type": "array", "items": {"type": "boolean"}, "contains": {"const": true}})"),
            grammar({R"(contains ::= "true")",
                     R"(root ::= "[" space (boolean "," space )* contains ("," space boolean)* space "]")"},
                    {"boolean"}));
  struct Case {
    std::string schema;
    std::function<bool(const std::vector<std::string>&)> valid;
  };
  auto xs = [](const std::vector<std::string>& a) { return std::count(a.begin(), a.end(), "\"x\""); };
  const std::vector<Case> cases = {
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}})", [&](auto& a) { return xs(a) >= 1; }},
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}, "minContains": 2})",
       [&](auto& a) { return xs(a) >= 2; }},
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}, "minContains": 0})",
       [&](auto&) { return true; }},
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}, "minItems": 2, "maxItems": 4})",
       [&](auto& a) { return xs(a) >= 1 && a.size() >= 2 && a.size() <= 4; }},
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}, "minItems": 3})",
       [&](auto& a) { return xs(a) >= 1 && a.size() >= 3; }},
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}, "maxItems": 3, "maxContains": 3})",
       [&](auto& a) { return xs(a) >= 1 && a.size() <= 3; }},
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}, "uniqueItems": true})",
       [&](auto& a) { return a.size() == 1 && xs(a) == 1; }},
      // maxContains: the other items fail contains.
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}, "maxContains": 2})",
       [&](auto& a) { return xs(a) >= 1 && xs(a) <= 2; }},
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}, "minContains": 2, "maxContains": 3})",
       [&](auto& a) { return xs(a) >= 2 && xs(a) <= 3; }},
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"const": "x"}, "minContains": 0, "maxContains": 1})",
       [&](auto& a) { return xs(a) <= 1; }},
      {R"({"items": {"enum": ["x", "y"]}, "contains": {"enum": ["x", "z"]}, "minContains": 0, "maxContains": 0})",
       [&](auto& a) { return xs(a) == 0; }},
      {R"({"items": {"const": "x"}, "contains": {"const": "x"}, "maxContains": 2})",
       [&](auto& a) { return xs(a) >= 1 && xs(a) <= 2 && xs(a) == static_cast<long>(a.size()); }},
      {R"({"items": {"const": "x"}, "contains": {"const": "x"}, "minContains": 0, "maxContains": 2})",
       [&](auto& a) { return xs(a) <= 2 && xs(a) == static_cast<long>(a.size()); }},
      // Merged: items from one part, contains from the other.
      {R"({"allOf": [{"items": {"enum": ["x", "y"]}}, {"contains": {"enum": ["x", 1]}, "maxItems": 2}]})",
       [&](auto& a) { return xs(a) >= 1 && a.size() <= 2; }},
      // not contains (as if/then/else writes it): no item matches.
      {R"({"type": "array", "items": {"enum": ["x", "y"]}, "not": {"contains": {"const": "x"}}})",
       [&](auto& a) { return xs(a) == 0; }},
  };
  for (const Case& c : cases) {
    const auto g = Grammar::parse(convert(c.schema));
    std::vector<std::vector<std::string>> arrays = {{}};
    for (size_t n = 0; n < arrays.size(); ++n) {
      if (arrays[n].size() < 6)
        for (const char* v : {"\"x\"", "\"y\""}) {
          arrays.push_back(arrays[n]);
          arrays.back().push_back(v);
        }
    }
    for (const auto& a : arrays) {
      std::string text = "[";
      for (size_t i = 0; i < a.size(); ++i) text += (i ? ", " : "") + a[i];
      text += "]";
      EXPECT_EQ(test::accepts(g, text), c.valid(a)) << c.schema << " on " << text;
    }
  }
  // A value of the items only, not of contains, is no match.
  EXPECT_FALSE(test::accepts(Grammar::parse(convert(R"({"items": {"enum": ["x", 1]}, "contains": {"type": "integer"}})")),
                             R"(["x"])"));
  EXPECT_TRUE(test::accepts(Grammar::parse(convert(R"({"items": {"enum": ["x", 1]}, "contains": {"type": "integer"}})")),
                            R"(["x", 1, "x"])"));
  // if contains then required, else forbidden.
  const auto g = Grammar::parse(convert(
      R"({"type": "object", "properties": {"a": {"type": "array", "items": {"enum": ["p", "q"]}}, "b": {"type": "null"}},)"
      R"( "if": {"properties": {"a": {"contains": {"const": "p"}}}}, "then": {"required": ["b"]},)"
      R"( "else": {"properties": {"b": false}}})"));
  EXPECT_TRUE(test::accepts(g, R"({"b": null, "a": ["q", "p"]})"));
  EXPECT_TRUE(test::accepts(g, R"({"a": ["q", "q"]})"));
  EXPECT_FALSE(test::accepts(g, R"({"a": ["q", "p"]})"));
  EXPECT_FALSE(test::accepts(g, R"({"b": null, "a": ["q"]})"));
}

// Dependencies of more than 4 optional properties, as cases: the grammar
// accepts an object (in some order of its properties) exactly where a
// validator does, every set of the properties checked.
TEST(JsonSchemaToGbnf, ManyDependenciesAreExact) {
  struct Case {
    std::string schema;
    std::vector<std::string> keys;
    std::vector<std::vector<std::string>> kinds;  // values of "kind" tried (absent: none)
    std::function<bool(const std::set<std::string>&, const std::string&)> valid;
  };
  const std::string nulls = R"("a": {"type": "null"}, "b": {"type": "null"}, "c": {"type": "null"}, )"
                            R"("d": {"type": "null"}, "e": {"type": "null"})";
  const std::vector<Case> cases = {
      // Clauses (not required, names, anyOf of required) and a schema kept whole.
      {R"({"type": "object", "additionalProperties": false, "properties": {)" + nulls + R"(},)"
       R"( "dependencies": {"a": {"not": {"required": ["b", "c"]}}, "b": ["c"],)"
       R"( "c": {"anyOf": [{"required": ["d"]}, {"required": ["e"]}]}, "d": {"not": {"required": ["a"]}},)"
       R"( "e": {"required": ["a"], "minProperties": 3}}})",
       {"a", "b", "c", "d", "e"},
       {{}},
       [](const std::set<std::string>& s, const std::string&) {
         auto in = [&](const char* k) { return s.count(k) > 0; };
         return (!in("a") || !(in("b") && in("c"))) && (!in("b") || in("c")) && (!in("c") || in("d") || in("e")) &&
                (!in("d") || !in("a")) && (!in("e") || (in("a") && s.size() >= 3));
       }},
      // One property named by all: two cases, not 32.
      {R"({"type": "object", "additionalProperties": false, "properties": {"x": {"type": "null"}, )" + nulls + R"(},)"
       R"( "dependencies": {"a": ["x"], "b": ["x"], "c": ["x"], "d": ["x"], "e": ["x"]}})",
       {"x", "a", "b", "c", "d", "e"},
       {{}},
       [](const std::set<std::string>& s, const std::string&) { return s.count("x") || s.size() == 0; }},
      // Values of a property that lists them.
      {R"({"type": "object", "additionalProperties": false, "properties": {"kind": {"enum": ["p", "q", "r"]}, )" +
           nulls + R"(}, "dependentSchemas": {"a": {"properties": {"kind": {"enum": ["p"]}}},)"
                   R"( "b": {"properties": {"kind": {"const": "q"}}}, "c": {"properties": {"kind": {"enum": ["p", "q"]}}},)"
                   R"( "d": {"properties": {"kind": {"enum": ["r", "s"]}}},)"
                   R"( "e": {"properties": {"kind": {"enum": ["q", "r"]}}, "required": ["kind"]}}})",
       {"a", "b", "c", "d", "e"},
       {{}, {"p"}, {"q"}, {"r"}},
       [](const std::set<std::string>& s, const std::string& kind) {
         auto in = [&](const char* k) { return s.count(k) > 0; };
         auto is = [&](std::initializer_list<const char*> v) {
           return kind.empty() || std::any_of(v.begin(), v.end(), [&](const char* x) { return kind == x; });
         };
         return (!in("a") || is({"p"})) && (!in("b") || is({"q"})) && (!in("c") || is({"p", "q"})) &&
                (!in("d") || is({"r"})) && (!in("e") || (!kind.empty() && is({"q", "r"})));
       }},
  };
  for (const Case& c : cases) {
    const auto g = Grammar::parse(convert(c.schema));
    for (const auto& kind : c.kinds) {
      for (unsigned mask = 0; mask < (1u << c.keys.size()); ++mask) {
        std::vector<std::string> keys;
        for (size_t i = 0; i < c.keys.size(); ++i)
          if (mask & (1u << i)) keys.push_back(c.keys[i]);
        const std::set<std::string> present(keys.begin(), keys.end());
        if (!kind.empty()) keys.push_back("kind");
        std::sort(keys.begin(), keys.end());
        bool accepted = false;
        std::string shown;
        do {
          std::string text = "{";
          for (size_t i = 0; i < keys.size(); ++i)
            text += (i ? ", \"" : "\"") + keys[i] + "\": " + (keys[i] == "kind" ? "\"" + kind[0] + "\"" : "null");
          text += "}";
          if (shown.empty()) shown = text;
          accepted = accepted || test::accepts(g, text);
        } while (!accepted && std::next_permutation(keys.begin(), keys.end()));
        EXPECT_EQ(accepted, c.valid(present, kind.empty() ? "" : kind[0])) << c.schema << " on " << shown;
      }
    }
  }
}

// propertyNames beside parts merged: the merged object's names satisfy it.
TEST(JsonSchemaToGbnf, PropertyNamesInAMerge) {
  const auto g = Grammar::parse(convert(
      R"({"type": "object", "propertyNames": {"enum": ["a", "b"]}, "allOf": [{"properties": )"
      R"({"a": {"type": "null"}, "c": {"type": "null"}}}, {"properties": {"b": {"type": "boolean"}}}]})"));
  EXPECT_TRUE(test::accepts(g, R"({"a": null, "b": true})"));
  EXPECT_TRUE(test::accepts(g, R"({"b": false})"));
  EXPECT_FALSE(test::accepts(g, R"({"c": null})"));
  EXPECT_FALSE(test::accepts(g, R"({"a": null, "c": null})"));
  const auto extra = Grammar::parse(convert(
      R"({"propertyNames": {"enum": ["x", "y"]}, "allOf": [{"additionalProperties": {"type": "integer"}},)"
      R"( {"properties": {"x": {"minimum": 0}}}]})"));
  EXPECT_TRUE(test::accepts(extra, R"({"x": 1, "y": -5})"));
  EXPECT_TRUE(test::accepts(extra, R"({"y": 5})"));
  EXPECT_FALSE(test::accepts(extra, R"({"z": 5})"));
  EXPECT_FALSE(test::accepts(extra, R"({"x": -1})"));
}

TEST(JsonSchemaToGbnf, CheckGbnfCatchesFaults) {
  // The checker above is itself checked.
  EXPECT_EQ(check_gbnf("root ::= a\n"), "undefined rule a");
  EXPECT_EQ(check_gbnf("root ::= (\"a\"\n"), "unbalanced '(' in root");
  EXPECT_EQ(check_gbnf("root ::= * \"a\"\n"), "quantifier without an item in root");
  EXPECT_EQ(check_gbnf("a ::= \"a\"\n"), "no root rule");
  EXPECT_EQ(check_gbnf("root ::= [\\q]\n"), "bad escape in root at \\q]");
  EXPECT_EQ(check_gbnf("root ::= \"a\"\nroot ::= \"b\"\n"), "rule defined twice: root");
}

// Keywords outside JSON Schema's validation vocabulary are annotations (the
// specification's rule, and every validator's): the grammar is the one of the
// schema without them. So is a format other than the five written as
// grammars (formats assert nothing by default in 2020-12).
TEST(JsonSchema, UnknownKeywordsAndFormatsAreAnnotations) {
  const std::pair<const char*, const char*> same[] = {
      {R"({"type": "string", "nullable": true})", R"({"type": "string"})"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "maxlength": 3}}})",
       R"({"type": "object", "properties": {"a": {"type": "string"}}})"},
      {R"({"oneOf": [{"type": "null"}], "discriminator": {"propertyName": "x"}})", R"({"oneOf": [{"type": "null"}]})"},
      {R"({"anyOf": [{"type": "null"}, {"$anchor": "x", "type": "integer"}]})",
       R"({"anyOf": [{"type": "null"}, {"type": "integer"}]})"},
      {R"({"id": "http://x", "type": "boolean", "x-kubernetes-list-type": "atomic", "_format": 3})",
       R"({"type": "boolean"})"},
      {R"({"type": "string", "format": "ipv4"})", R"({"type": "string"})"},
      {R"({"type": "string", "format": "uri", "maxLength": 5})", R"({"type": "string", "maxLength": 5})"},
      {R"({"type": "string", "format": "hostname", "pattern": "^a+$"})", R"({"type": "string", "pattern": "^a+$"})"},
      {R"({"type": "object", "propertyNames": {"format": "regex", "maxLength": 3}})",
       R"({"type": "object", "propertyNames": {"maxLength": 3}})"},
  };
  for (const auto& [with, without] : same) EXPECT_EQ(json_schema_to_gbnf(with), json_schema_to_gbnf(without)) << with;
}

// A number beyond a double is an Error like any malformed JSON, not
// nlohmann's exception (found by fuzz_grammar).
TEST(JsonSchema, NumberOverflowIsAnError) {
  try {
    json_schema_to_gbnf(R"({"maxLength": 9999e999})");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("json_schema: the schema is not valid JSON"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace synapse
