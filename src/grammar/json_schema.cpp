// JSON Schema to GBNF: synapse::json_schema_to_gbnf (synapse/grammar.hpp).
//
// The grammar's shape follows llama.cpp's converter (common/json-schema-to-
// grammar.cpp and json-schema.cpp): its `space` rule between tokens, its
// primitive rules, the rule names (`a-kv`, `a-rest`, `item`, `tuple-0`,
// `ref-defs-x`, ...), required properties first in declared order and the
// optional ones after them as a chain of optional rules, no properties beyond
// the declared ones unless additionalProperties says so, prefixItems as a
// tuple, integer bounds as alternations of digit ranges.
//
// Where that converter ignores a keyword or accepts more than the schema,
// this one throws or is exact: a keyword outside the supported set throws
// (never silently ignored); $ref and anyOf/oneOf with constraining siblings
// are conjunctions, and allOf distributes over anyOf; enum and const keep
// the values the keywords beside them allow (a string's lengths and pattern,
// a number's bounds and whole multipleOf; keywords of other types than the
// values' hold) and throw where that cannot be told (a known format on a
// string, an object's or array's keywords on such a value); `pattern` is translated in full or throws, is unanchored
// where it has no ^ or $, and its characters are written as JSON text (a '"'
// in a pattern is \" in the reply); minLength/maxLength beside format
// throw unless the format's lengths imply them, beside pattern they are
// enforced exactly (pattern_to_gbnf's rewriting, else the product of the
// pattern's DFA with a count of code points, one rule per state, up to
// kMaxPatternStates); `char` takes a \u escape of a surrogate only as a pair (so
// lengths count code points); `date` knows the days of each month; required
// names missing from `properties` are required; allOf keeps its parts'
// optional properties optional (llama.cpp makes them required).
//
// The grammar accepts less than the schema only by these conventions (a
// reply is always valid): property order, no properties beyond the declared
// ones unless additionalProperties is given, tuples of all their items
// unless minItems or items say otherwise, whitespace only where `space` is,
// numbers of at most 16 integral digits, bounded numbers as number_range
// writes them (bounds rounded inward to integers; integers, and decimals
// without exponent whose value is in range even as a double), enum values in
// their compact form, emails beside minLength/maxLength of at most 67 code
// points, pattern characters raw where JSON allows it, arrays
// of at most one item under uniqueItems true, oneOf's
// branches narrowed so that each value matches one alternative only
// (one_of_guards: a tag property made required, or a property another
// alternative requires left out; a oneOf with no such guard throws),
// numbers under a fractional multipleOf 1/k as integers
// (integers_are_multiples), if/then/else's not-if as the negations of the
// keywords of if that negate (rewrite_if), strings other than a string
// enum's values also without each value followed by '\n' (literal_pattern's
// wide reading). `not` of patterns is exact: the complement of each
// pattern's wide reading (json_schema_text.hpp's StringLanguage).
//
// Thread-safety: each call builds its own Converter; no shared state. Stack:
// the visitor recurses once per level of schema nesting, about 3 KB a level
// (under 1 MB at the default limits.max_nesting of 256). Recursion in the
// schema is not nesting: a $ref (ref_rule) and a conjunction met again
// inside itself (merge) are rules, made once and referred to.

#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <unordered_map>
#include <string_view>
#include <vector>

#include "base/strings.hpp"
#include "grammar/json_schema_refs.hpp"
#include "grammar/json_schema_text.hpp"
#include "synapse/error.hpp"
#include "synapse/grammar.hpp"

namespace synapse {

namespace {

using Json = nlohmann::ordered_json;  // keeps `properties` in declared order
namespace schema = grammar::schema;   // json_schema_text.hpp
using schema::gbnf_class;
using schema::gbnf_literal;
using schema::json_string_text;

// --- fixed rules ------------------------------------------------------------
// The bodies are llama.cpp's (SPACE_RULE, PRIMITIVE_RULES and
// STRING_FORMAT_RULES), except: `char` also takes \/ and takes a \u escape of
// a surrogate only as a high-low pair (JSON text that parses), raw surrogates
// are not characters; `date` is exact (days per month, 29 February in leap
// years only) and starts at year 0001 (RFC 3339 allows 0000, Python's
// datetime, which python-jsonschema checks with, does not); `email` is ours
// (llama.cpp treats it as any string).

struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> deps;
};

constexpr const char* kSpaceRule = R"(| " " | "\n"{1,2} [ \t]{0,20})";

const std::vector<Primitive>& primitive_table() {
  static const std::vector<Primitive> table = {
      {"boolean", R"(("true" | "false"))", {}},
      {"decimal-part", R"([0-9]{1,16})", {}},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})", {}},
      {"number",
       R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?)",
       {"integral-part", "decimal-part"}},
      {"integer", R"(("-"? integral-part))", {"integral-part"}},
      {"value",
       "object | array | string | number | boolean | null",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object",
       R"("{" space ( string ":" space value ("," space string ":" space value)* )? space "}")",
       {"string", "value"}},
      {"array", R"("[" space ( value ("," space value)* )? space "]")", {"value"}},
      {"uuid",
       R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"")",
       {}},
      {"char",
       R"([^"\\\x7F\x00-\x1F\uD800-\uDFFF] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | )"
       R"([dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2})))",
       {}},
      {"string", R"("\"" char* "\"")", {"char"}},
      {"null", R"("null")", {}},
      {"date",
       R"(( [1-9] [0-9]{3} | "0" [1-9] [0-9]{2} | "00" [1-9] [0-9] | "000" [1-9] ) "-" )"
       R"(( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ) | )"
       R"(( "0" [469] | "11" ) "-" ( "0" [1-9] | [1-2] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) ) | )"
       R"(( [0-9]{2} ( "0" [48] | [2468] [048] | [13579] [26] ) | ( "0" [48] | [2468] [048] | [13579] [26] ) "00" ) )"
       R"("-02-29")",
       {}},
      {"time",
       R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? )"
       R"(( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
       {}},
      {"date-time", R"(date "T" time)", {"date", "time"}},
      {"date-string", R"("\"" date "\"")", {"date"}},
      {"time-string", R"("\"" time "\"")", {"time"}},
      {"date-time-string", R"("\"" date-time "\"")", {"date-time"}},
      // RFC 5321's dot-string local part and a domain of LDH labels (the
      // addresses most validators take; quoted local parts and address
      // literals are left out).
      {"email",
       R"([0-9A-Za-z!#$%&'*+/=?\x5E_`{|}~\-]+ ( "." [0-9A-Za-z!#$%&'*+/=?\x5E_`{|}~\-]+ )* "@" )"
       R"([0-9A-Za-z] ( [0-9A-Za-z\-]{0,61} [0-9A-Za-z] )? ( "." [0-9A-Za-z] ( [0-9A-Za-z\-]{0,61} [0-9A-Za-z] )? )+)",
       {}},
      {"email-string", R"("\"" email "\"")", {"email"}},
  };
  return table;
}

const Primitive& primitive(std::string_view name) {
  for (const Primitive& p : primitive_table())
    if (name == p.name) return p;
  throw Error(Errc::invalid_argument, "json_schema: internal: no primitive rule " + std::string(name));
}

bool is_reserved(std::string_view name) {
  if (name == "root" || name == "space") return true;
  for (const Primitive& p : primitive_table())
    if (name == p.name) return true;
  return false;
}

// --- keywords -----------------------------------------------------------------

// The most states a pattern's automaton bounded by minLength/maxLength may
// have (each a rule of tens of bytes, long sets named: kInlineSetBytes): the
// product of a few states with maxLength 1024 fits, a grammar of megabytes
// does not (and limits.max_rules and max_bytes bound it too).
constexpr size_t kMaxPatternStates = 8192;
// The most rules multiples_by_digits writes for one multipleOf (16 digits
// times m remainders at worst: m up to 64 always fits).
constexpr size_t kMaxMultipleRules = 1024;
uint64_t power_of_10(int n) {
  uint64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}
// The most states of an exact automaton where word_count_automaton's subset
// is there instead (the bound before kMaxPatternStates was raised).
constexpr size_t kMaxExactBesideSubset = 4096;
// The longest JSON text of a set an automaton's edge writes in place; a
// longer one is a rule (`pattern-char`) the edges name.
constexpr size_t kInlineSetBytes = 32;
// The `email` rule's language as a pattern, without its labels' bound of 63
// characters: for minLength/maxLength or a pattern beside format email,
// where emails are kept within kEmailMaxLength code points (so no label is
// over 63).
constexpr const char* kEmailPattern =
    R"(^[0-9A-Za-z!#$%&'*+/=?^_`{|}~\-]+(\.[0-9A-Za-z!#$%&'*+/=?^_`{|}~\-]+)*@)"
    R"([0-9A-Za-z]([0-9A-Za-z\-]*[0-9A-Za-z])?(\.[0-9A-Za-z]([0-9A-Za-z\-]*[0-9A-Za-z])?)+$)";
constexpr uint64_t kEmailMaxLength = 67;
// The `date` and `time` rules' languages as patterns (unanchored bodies),
// for a pattern beside those formats and date-time (date "T" time).
constexpr const char* kDateBody =
    "(?:(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-"
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"
    "02-(?:0[1-9]|1[0-9]|2[0-8]))|"
    "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29)";
constexpr const char* kTimeBody =
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{3})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
// The `uuid` rule's language as a pattern (for a `not` of patterns beside
// format uuid).
constexpr const char* kUuidPattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

// Keywords that constrain nothing (JSON Schema's annotations), and those
// that hold subschemas only reached through $ref.
constexpr std::string_view kAnnotations[] = {"title",     "description", "examples",         "default",
                                             "$schema",   "$id",         "$comment",         "readOnly",
                                             "writeOnly", "deprecated",  "contentMediaType", "contentEncoding"};
constexpr std::string_view kContainers[] = {"$defs", "definitions"};
// The keywords of each type, and those of any schema.
constexpr std::string_view kObjectKeys[] = {"properties",       "required",          "additionalProperties",
                                            "minProperties",    "maxProperties",     "patternProperties",
                                            "dependencies",     "dependentRequired", "dependentSchemas",
                                            "propertyNames"};
constexpr std::string_view kDependencyKeys[] = {"dependencies", "dependentRequired", "dependentSchemas"};
constexpr std::string_view kArrayKeys[] = {"items",           "prefixItems", "minItems",   "maxItems",
                                           "additionalItems", "contains",    "minContains", "maxContains"};
constexpr std::string_view kStringKeys[] = {"pattern", "minLength", "maxLength", "format"};
constexpr std::string_view kNumberKeys[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
constexpr std::string_view kGeneralKeys[] = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"};

template <size_t N>
bool in(const std::string_view (&set)[N], std::string_view k) {
  return std::find(std::begin(set), std::end(set), k) != std::end(set);
}
// The validation keywords of JSON Schema (drafts 4 to 2020-12) this converter
// cannot enforce: refused by name. Any keyword outside the vocabulary
// (OpenAPI's "nullable", "x-..." extensions, draft 4's "id", typos) is an
// annotation, as the specification and every validator treat it: ignoring
// it loses no constraint.
constexpr std::string_view kUnenforceable[] = {
    "not",           "if",          "then",        "else",
    "unevaluatedProperties",
    "uniqueItems",   "unevaluatedItems",
    "$dynamicRef", "$recursiveRef"};
bool is_container(std::string_view k) { return in(kContainers, k); }
bool is_supported(std::string_view k) {
  return in(kGeneralKeys, k) || in(kObjectKeys, k) || in(kArrayKeys, k) || in(kStringKeys, k) || in(kNumberKeys, k);
}
bool is_annotation(std::string_view k) {
  return in(kAnnotations, k) || (!is_container(k) && !is_supported(k) && !in(kUnenforceable, k));
}

// JSON value types as bits; "number" is kInteger | kFraction.
constexpr unsigned kNull = 1, kBoolean = 2, kInteger = 4, kFraction = 8, kString = 16, kArray = 32, kObject = 64;
constexpr unsigned kNumber = kInteger | kFraction;
constexpr unsigned kAllTypes = 127;
const Json kFalseSchema = false;  // a guard that drops a oneOf branch

unsigned type_bits(std::string_view name) {
  if (name == "null") return kNull;
  if (name == "boolean") return kBoolean;
  if (name == "integer") return kInteger;
  if (name == "number") return kNumber;
  if (name == "string") return kString;
  if (name == "array") return kArray;
  if (name == "object") return kObject;
  return 0;
}

unsigned json_type(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return kNull;
    case Json::value_t::boolean: return kBoolean;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return kInteger;
    case Json::value_t::number_float: {
      const double d = v.get<double>();
      return std::floor(d) == d ? kInteger : kFraction;
    }
    case Json::value_t::string: return kString;
    case Json::value_t::array: return kArray;
    default: return kObject;
  }
}

// The patterns `not` excludes where it is of patterns only ({"not":
// {"pattern": P}}, or an anyOf of such schemas, annotations aside), else
// nullopt. Such a `not` admits exactly the strings none of them matches
// (a value of another type satisfies {"pattern": P}, so fails the `not`):
// the converter writes it as a string keyword (schema::StringLanguage's
// excluded patterns), not through negations.
std::optional<std::vector<std::string>> excluded_patterns(const Json& n) {
  if (!n.is_object()) return std::nullopt;
  std::vector<std::string> keys;
  for (const auto& [k, v] : n.items())
    if (!is_annotation(k)) keys.push_back(k);
  if (keys.size() != 1) return std::nullopt;
  if (keys[0] == "pattern") {
    if (!n["pattern"].is_string()) return std::nullopt;
    return std::vector<std::string>{n["pattern"].get<std::string>()};
  }
  if (keys[0] != "anyOf" || !n["anyOf"].is_array() || n["anyOf"].empty()) return std::nullopt;
  std::vector<std::string> out;
  for (const Json& alt : n["anyOf"]) {
    const auto inner = excluded_patterns(alt);
    if (!inner) return std::nullopt;
    out.insert(out.end(), inner->begin(), inner->end());
  }
  return out;
}

// The values `not` excludes where it is of enum/const ({"not": {"enum":
// [...]}} or {"not": {"const": x}}, annotations aside), else nullopt.
std::optional<std::vector<const Json*>> excluded_values(const Json& n) {
  if (!n.is_object()) return std::nullopt;
  std::vector<std::string> keys;
  for (const auto& [k, v] : n.items())
    if (!is_annotation(k)) keys.push_back(k);
  if (keys.size() != 1) return std::nullopt;
  if (keys[0] == "const") return std::vector<const Json*>{&n["const"]};
  if (keys[0] != "enum" || !n["enum"].is_array()) return std::nullopt;
  std::vector<const Json*> out;
  for (const Json& v : n["enum"]) out.push_back(&v);
  return out;
}

// Types a schema without "type" constrains, from its keywords (llama.cpp
// reads {"properties": ...} as an object, {"items": ...} as an array,
// {"pattern": ...} as a string; a `not` of patterns only admits strings);
// kAllTypes when none.
unsigned implied_types(const Json& s) {
  unsigned t = 0;
  if (s.contains("not") && excluded_patterns(s["not"])) return kString;
  for (const auto& [k, v] : s.items()) {
    if (in(kObjectKeys, k)) t |= kObject;
    if (in(kArrayKeys, k) || (k == "uniqueItems" && v == true)) t |= kArray;
    if (in(kStringKeys, k)) t |= kString;
    if (in(kNumberKeys, k)) t |= kNumber;
  }
  return t ? t : kAllTypes;
}

// A schema that accepts every value: true, or only annotations.
bool is_trivial(const Json& s) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return false;
  for (const auto& [k, v] : s.items())
    if (!is_annotation(k) && !is_container(k)) return false;
  return true;
}

// --- names and pointers -------------------------------------------------------

std::string where(const std::string& ptr) { return ptr.empty() ? "the root" : ptr; }

using schema::pointer_child;
std::string pointer_child(const std::string& ptr, size_t index) { return ptr + "/" + std::to_string(index); }

// GBNF rule names are [a-zA-Z0-9-]+: other runs become one '-'.
std::string sanitize(std::string_view name) {
  std::string out;
  bool dash = false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (ok) {
      out += c;
      dash = false;
    } else if (!dash) {
      out += '-';
      dash = true;
    }
  }
  return out;
}

// The name of a part of the schema named `name` (the root's parts have bare
// names, as in llama.cpp: "a-kv", not "root-a-kv").
std::string child_name(const std::string& name, std::string_view part) {
  if (name == "root" || name.empty()) return std::string(part);
  std::string out = name;
  out += '-';
  out += part;
  return out;
}
std::string alternative_name(const std::string& name, size_t i) {
  if (name == "root" || name.empty()) return "alternative-" + std::to_string(i);
  return name + "-" + std::to_string(i);
}

std::string identity(const std::string& s) { return s; }

constexpr size_t kNoMax = SIZE_MAX;
// The largest count written as GBNF's {m,n} (its n - m nested rules); larger
// counts are decomposed (Converter::repetition).
constexpr size_t kDirectRepetition = 256;

// `atom` repeated min..max times (kNoMax: no bound), as GBNF.
std::string repeat(const std::string& atom, size_t min, size_t max) {
  if (max == 0) return "";
  if (min == 1 && max == 1) return atom;
  if (min == 0 && max == 1) return atom + "?";
  if (min == 0 && max == kNoMax) return atom + "*";
  if (min == 1 && max == kNoMax) return atom + "+";
  std::string q = atom + "{" + std::to_string(min);
  if (max == kNoMax) return q + ",}";
  if (max != min) q += "," + std::to_string(max);
  return q + "}";
}

// --- the converter --------------------------------------------------------------

// A subschema and where it is. `skip`: keywords of the node already taken
// apart into other parts of a conjunction (the node's own keywords beside its
// allOf, $ref or anyOf are one part, each of those the others).
constexpr unsigned kSkipRef = 1, kSkipAllOf = 2, kSkipAnyOf = 4, kSkipOneOf = 8, kSkipDependencies = 16,
                   kSkipNot = 32;

struct Sub {
  const Json* s;
  std::string ptr;
  unsigned skip = 0;
};

bool is_skipped(const Sub& sub, std::string_view k) {
  return (k == "$ref" && (sub.skip & kSkipRef)) || (k == "allOf" && (sub.skip & kSkipAllOf)) ||
         (k == "anyOf" && (sub.skip & kSkipAnyOf)) || (k == "oneOf" && (sub.skip & kSkipOneOf)) ||
         (in(kDependencyKeys, k) && (sub.skip & kSkipDependencies)) || (k == "not" && (sub.skip & kSkipNot));
}
// Whether the node has `k` and it is not skipped.
bool has(const Sub& sub, std::string_view k) { return sub.s->is_object() && sub.s->contains(k) && !is_skipped(sub, k); }
// Whether the node has a `not` of patterns only (excluded_patterns): a
// string keyword, which visit_string writes.
bool has_string_not(const Sub& sub) { return has(sub, "not") && excluded_patterns((*sub.s)["not"]).has_value(); }

// The keywords of a node that constrain: not annotations, not skipped.
std::vector<std::string> own_keys(const Sub& sub) {
  std::vector<std::string> keys;
  if (!sub.s->is_object()) return keys;
  for (const auto& [k, v] : sub.s->items())
    if (!is_annotation(k) && !is_container(k) && !is_skipped(sub, k)) keys.push_back(k);
  return keys;
}
// Whether the node constrains something and only with keywords of `allowed`.
bool keys_within(const Sub& sub, std::initializer_list<std::string_view> allowed) {
  const std::vector<std::string> keys = own_keys(sub);
  if (keys.empty()) return false;
  for (const std::string& k : keys)
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) return false;
  return true;
}

// A character of a GBNF rule name.
bool gbnf_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// The end of the GBNF token of a rule body as the converter writes it that
// starts at `i`: a "..." literal or [...] class (backslash escapes inside),
// a name, else one byte.
size_t gbnf_token_end(std::string_view body, size_t i) {
  size_t j = i + 1;
  if (body[i] == '"' || body[i] == '[') {
    const char close = body[i] == '"' ? '"' : ']';
    while (j < body.size() && body[j] != close) j += body[j] == '\\' ? 2 : 1;
    return std::min(j + 1, body.size());
  }
  if (gbnf_word_char(body[i]))
    while (j < body.size() && gbnf_word_char(body[j])) ++j;
  return j;
}

// Rules with the same body, once the rules they name are merged, made one
// (the first by name; `root` stays root), and every reference to them the
// one kept: the same language, since a rule is its body. Repeated until
// nothing merges (a merge can make the bodies that name its rules equal).
// Rules whose languages are equal but bodies differ are left apart. A body
// is read as GBNF's tokens: "..." and [...] (backslash escapes inside),
// names ([A-Za-z0-9_-]), anything else one byte; a name that is no rule's
// (a word inside nothing: none in the converter's output) is kept as is.
void merge_same_rules(std::map<std::string, std::string>& rules) {
  const size_t n = rules.size();
  std::vector<std::string> names;
  std::unordered_map<std::string, uint32_t> index;
  for (const auto& [name, body] : rules) {
    index.emplace(name, static_cast<uint32_t>(names.size()));
    names.push_back(name);
  }
  // Each body as pieces of text between references (-1: text, else a rule).
  struct Piece {
    int64_t rule = -1;
    std::string text;
  };
  std::vector<std::vector<Piece>> bodies(n);
  {
    size_t r = 0;
    for (const auto& [name, body] : rules) {
      std::vector<Piece>& out = bodies[r++];
      auto text = [&](std::string_view t) {
        if (out.empty() || out.back().rule >= 0) out.push_back({});
        out.back().text += t;
      };
      for (size_t i = 0; i < body.size();) {
        const size_t j = gbnf_token_end(body, i);
        auto it = gbnf_word_char(body[i]) ? index.find(body.substr(i, j - i)) : index.end();
        if (it != index.end()) {
          out.push_back({static_cast<int64_t>(it->second), {}});
        } else {
          text(std::string_view(body).substr(i, j - i));
        }
        i = j;
      }
    }
  }
  std::vector<uint32_t> rep(n);
  for (uint32_t r = 0; r < n; ++r) rep[r] = r;
  const auto root = index.find("root");
  for (bool merged = true; merged;) {
    merged = false;
    std::unordered_map<std::string, uint32_t> first;  // body, references as their kept rules' numbers
    // root first, so it is the one kept.
    std::vector<uint32_t> order;
    if (root != index.end()) order.push_back(root->second);
    for (uint32_t r = 0; r < n; ++r)
      if (root == index.end() || r != root->second) order.push_back(r);
    for (uint32_t r : order) {
      if (rep[r] != r) continue;
      std::string key;
      for (const Piece& p : bodies[r]) {
        if (p.rule < 0) {
          key += '\x01';
          key += p.text;
        } else {
          key += '\x02';
          key += std::to_string(rep[static_cast<size_t>(p.rule)]);
        }
      }
      auto [it, added] = first.emplace(std::move(key), r);
      if (!added) {
        rep[r] = it->second;
        merged = true;
      }
    }
    // Chains (a merged into b merged into c) point at the last.
    for (uint32_t r = 0; r < n; ++r)
      while (rep[rep[r]] != rep[r]) rep[r] = rep[rep[r]];
  }
  std::map<std::string, std::string> out;
  for (uint32_t r = 0; r < n; ++r) {
    if (rep[r] != r) continue;
    std::string body;
    for (const Piece& p : bodies[r]) body += p.rule < 0 ? p.text : names[rep[static_cast<size_t>(p.rule)]];
    out.emplace(names[r], std::move(body));
  }
  rules = std::move(out);
}

// Whether rule `root` of `rules` (GBNF bodies as the converter writes them:
// "..." literals, [...] classes, names, ( ), |, ? * + {m,n}) derives some
// finite text: the least fixed point of "a sequence derives text when each
// of its parts that must appear does, an alternation when one of its
// alternatives does", in linear time (each sequence counts its parts still
// open; a part that may be left out, a literal or a class, is none). A name
// that is no rule's counts as deriving text.
bool derives_text(const std::map<std::string, std::string>& rules) {
  struct Node {
    bool any = false;  // an alternation (one part suffices), else a sequence (all)
    size_t open = 0;   // parts not yet known to derive text
    bool done = false;
    std::vector<uint32_t> parents;
  };
  std::vector<Node> nodes;
  std::unordered_map<std::string, uint32_t> rule_node;
  auto add = [&](bool any) {
    nodes.push_back({any, 0, false, {}});
    return static_cast<uint32_t>(nodes.size() - 1);
  };
  for (const auto& [name, body] : rules) rule_node.emplace(name, add(true));
  auto link = [&](uint32_t parent, uint32_t child) {
    nodes[child].parents.push_back(parent);
    ++nodes[parent].open;
  };
  for (const auto& [name, body] : rules) {
    size_t i = 0;
    auto skip_space = [&] {
      while (i < body.size() && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n')) ++i;
    };
    // Whether a quantifier follows that allows zero repetitions (consumed).
    auto optional_after = [&] {
      skip_space();
      if (i >= body.size()) return false;
      if (body[i] == '*' || body[i] == '?') return ++i, true;
      if (body[i] == '+') return ++i, false;
      if (body[i] != '{') return false;
      const bool zero = i + 2 < body.size() && body[i + 1] == '0' && (body[i + 2] == ',' || body[i + 2] == '}');
      while (i < body.size() && body[i] != '}') ++i;
      ++i;
      return zero;
    };
    std::function<uint32_t()> alternation = [&]() -> uint32_t {
      const uint32_t alt = add(true);
      for (;;) {
        const uint32_t seq = add(false);
        link(alt, seq);
        for (;;) {
          skip_space();
          if (i >= body.size() || body[i] == '|' || body[i] == ')') break;
          std::optional<uint32_t> part;
          if (body[i] == '(') {
            ++i;
            part = alternation();
            ++i;  // ')'
          } else {
            const size_t j = gbnf_token_end(body, i);
            if (gbnf_word_char(body[i]))
              if (auto it = rule_node.find(body.substr(i, j - i)); it != rule_node.end()) part = it->second;
            i = j;
          }
          if (!optional_after() && part) link(seq, *part);
        }
        if (i < body.size() && body[i] == '|') {
          ++i;
          continue;
        }
        return alt;
      }
    };
    link(rule_node.at(name), alternation());
  }
  std::vector<uint32_t> ready;
  for (uint32_t n = 0; n < nodes.size(); ++n)
    if (!nodes[n].any && nodes[n].open == 0) ready.push_back(n);
  while (!ready.empty()) {
    const uint32_t n = ready.back();
    ready.pop_back();
    if (nodes[n].done) continue;
    nodes[n].done = true;
    for (uint32_t p : nodes[n].parents) {
      Node& up = nodes[p];
      if (up.done) continue;
      if (up.any || --up.open == 0) ready.push_back(p);
    }
  }
  const auto root = rule_node.find("root");
  return root == rule_node.end() || nodes[root->second].done;
}

// An object to write: its properties in order and what else it may hold.
struct PropSpec {
  std::string key;
  std::vector<Sub> schemas;  // all must hold; none: any value
  bool required = false;
  bool forbidden = false;  // a false schema: the key may not appear
};
struct ObjectSpec {
  std::vector<PropSpec> props;
  enum { kNone, kAny, kSchemas } extra = kNone;
  std::vector<Sub> extra_schemas;
  std::string extra_key;                       // the extra keys' rule body; empty: any key but the named ones
  size_t min_props = 0, max_props = SIZE_MAX;  // minProperties, maxProperties
  std::string ptr;                             // where they are, for errors
};

class Converter {
 public:
  // unresolved and moved: see resolve().
  Converter(const Json& root, const GrammarLimits& limits, const schema::RefIndex& refs,
            const std::map<std::string, Json>& moved)
      : root_(root), limits_(limits), refs_(refs), moved_(moved) {
    rules_["space"] = kSpaceRule;
    automata_.max_states = std::min<size_t>(limits_.max_rules, kMaxPatternStates);
    automata_.max_work = automata_.max_states * automata_.max_states / 4;
  }

  std::string run() {
    visit({&root_, ""}, "root", 0, true);
    // A large grammar has its same rules merged: schemas that repeat a
    // subschema inline (dereferenced ones) shrink about tenfold, within the
    // limits (the parser counts groups and repetitions as rules too, hence
    // a quarter of each bound). A small one keeps a rule per place, as
    // llama.cpp's converter writes it.
    if (rules_.size() > limits_.max_rules / 4 || text_bytes() > limits_.max_bytes / 4) merge_same_rules(rules_);
    // A required part that requires itself again (an object whose required
    // property is that object) has no finite value: a reply could only be
    // cut, never complete.
    if (!derives_text(rules_)) {
      fail_empty("", "", "no finite value satisfies the schema (a part it requires requires itself again)");
    }
    if (rules_.size() > limits_.max_rules) {
      throw Error(Errc::invalid_argument, "json_schema: the grammar needs " + std::to_string(rules_.size()) +
                                              " rules, over limits.max_rules (" + std::to_string(limits_.max_rules) +
                                              ")");
    }
    std::string out;
    for (const auto& [name, body] : rules_) {
      out += name;
      out += " ::= ";
      out += body;
      out += '\n';
    }
    if (out.size() > limits_.max_bytes) {
      throw Error(Errc::invalid_argument, "json_schema: the grammar is " + std::to_string(out.size()) +
                                              " bytes, over limits.max_bytes (" + std::to_string(limits_.max_bytes) +
                                              ")");
    }
    return out;
  }

 private:
  // The grammar's text size as run() writes it.
  size_t text_bytes() const {
    size_t n = 0;
    for (const auto& [name, body] : rules_) n += name.size() + body.size() + 6;  // "name ::= body\n"
    return n;
  }

  // --- errors ---
  [[noreturn]] static void fail(const std::string& ptr, const std::string& what) {
    throw Error(Errc::invalid_argument, "json_schema: " + what + " at " + where(ptr));
  }
  [[noreturn]] static void fail_keyword(std::string_view key, const std::string& ptr, const std::string& what) {
    throw Error(Errc::invalid_argument,
                "json_schema: keyword \"" + std::string(key) + "\" at " + where(ptr) + ": " + what);
  }

  // A schema no value satisfies (bounds that cross, types with nothing in
  // common, ...): an alternative of anyOf or of a type list is dropped, an
  // error elsewhere. `key` empty: about the schema as a whole.
  class Unsatisfiable : public Error {
   public:
    explicit Unsatisfiable(const std::string& m) : Error(Errc::invalid_argument, m) {}
  };
  [[noreturn]] static void fail_empty(std::string_view key, const std::string& ptr, const std::string& what) {
    if (key.empty()) throw Unsatisfiable("json_schema: " + what + " at " + where(ptr));
    throw Unsatisfiable("json_schema: keyword \"" + std::string(key) + "\" at " + where(ptr) + ": " + what);
  }

  // Runs `f`, an alternative; nullopt, and the rules it made undone, when
  // its schema accepts no value, or (any_error) on any error: a oneOf branch
  // guarded by a string negation, which was dropped before there were such
  // negations (dropping one is sound: the other branches' guards keep their
  // values out of it), so a branch whose own keywords the converter cannot
  // write is dropped as before, not refused.
  template <typename F>
  std::optional<std::string> attempt(F&& f, bool any_error = false) {
    const Mark mark = this->mark();
    try {
      try {
        return f();
      } catch (const Unsatisfiable&) {
        throw;
      } catch (const Error&) {
        if (!any_error) throw;
        throw Unsatisfiable("json_schema: a guarded oneOf branch dropped");
      }
    } catch (const Unsatisfiable&) {
      undo(mark);
      return std::nullopt;
    }
  }

  // What undo takes the conversion back to: the rules, $ref rules and
  // merge rules made by then, and the objects and arrays entered.
  struct Mark {
    size_t rules, refs, merges, struct_depth;
  };
  Mark mark() const { return {added_.size(), added_refs_.size(), added_merges_.size(), struct_depth_}; }
  void undo(const Mark& m) {
    for (; added_.size() > m.rules; added_.pop_back()) rules_.erase(added_.back());
    for (; added_refs_.size() > m.refs; added_refs_.pop_back()) {
      ref_rules_.erase(added_refs_.back());
      refs_open_.erase(added_refs_.back());
    }
    for (; added_merges_.size() > m.merges; added_merges_.pop_back()) merge_rules_.erase(added_merges_.back());
    struct_depth_ = m.struct_depth;
  }

  // Counts one step of work at nesting `depth`; both are bounded.
  void enter(const std::string& ptr, size_t depth) {
    if (depth > limits_.max_nesting) {
      fail(ptr, "nesting deeper than limits.max_nesting (" + std::to_string(limits_.max_nesting) + ")");
    }
    if (++work_ > limits_.max_elements) {
      fail(ptr, "the schema expands to more than limits.max_elements (" + std::to_string(limits_.max_elements) +
                    ") subschemas");
    }
  }

  // Every keyword is supported or an annotation; `uniqueItems` as a boolean.
  static void check_keywords(const Json& s, const std::string& ptr) {
    for (const auto& [k, v] : s.items()) {
      if (is_annotation(k) || is_container(k) || is_supported(k)) continue;
      if (k == "uniqueItems" && v.is_boolean()) continue;  // true: see visit_array
      if (k == "not") continue;  // of enum/const: see visit_all_of; other forms: flatten
      throw Error(Errc::invalid_argument, "json_schema: unsupported keyword \"" + k + "\" at " + where(ptr));
    }
  }

  // Keywords of the node that constrain, beside `main` and `allowed`, throw.
  static void only_beside(const Sub& sub, std::string_view main, std::initializer_list<std::string_view> allowed) {
    for (const std::string& k : own_keys(sub)) {
      if (k == main || std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
      fail_keyword(k, sub.ptr, "not supported beside \"" + std::string(main) + "\"");
    }
  }

  // --- rules ---
  std::string add_rule(const std::string& name, const std::string& body) {
    std::string key = sanitize(name);
    if (key.empty()) key = "p";
    if (is_reserved(key)) key += '-';
    for (int i = -1;; ++i) {
      const std::string k = i < 0 ? key : key + std::to_string(i);
      auto it = rules_.find(k);
      if (it == rules_.end()) {
        rules_[k] = body;
        added_.push_back(k);
        return k;
      }
      if (it->second == body) return k;
    }
  }
  // A name no rule has yet (for a $ref's rule, reserved before its schema).
  std::string fresh_name(const std::string& name) {
    std::string key = sanitize(name);
    if (is_reserved(key)) key += '-';
    for (int i = -1;; ++i) {
      const std::string k = i < 0 ? key : key + std::to_string(i);
      if (!rules_.count(k)) return k;
    }
  }
  // The rule for a node: `name` itself when exact (the root, a $ref's rule),
  // else a rule named after it.
  std::string define(const std::string& name, bool exact, const std::string& body) {
    if (!exact) return add_rule(name, body);
    rules_[name] = body;
    return name;
  }
  void add_primitive(std::string_view prim) {
    const Primitive& p = primitive(prim);
    if (rules_.emplace(p.name, p.body).second) added_.push_back(p.name);
    for (const char* dep : p.deps)
      if (!rules_.count(dep)) add_primitive(dep);
  }
  std::string use_primitive(std::string_view prim, const std::string& name, bool exact) {
    if (!exact) {
      add_primitive(prim);
      return std::string(prim);
    }
    const Primitive& p = primitive(prim);
    for (const char* dep : p.deps)
      if (!rules_.count(dep)) add_primitive(dep);
    return define(name, true, p.body);
  }

  // --- types ---
  static std::vector<unsigned> parse_types(const Json& t, const std::string& ptr) {
    std::vector<unsigned> out;
    auto one = [&](const Json& v) {
      if (!v.is_string()) fail_keyword("type", ptr, "must be a string or an array of strings");
      const unsigned bits = type_bits(v.get<std::string>());
      if (!bits) fail_keyword("type", ptr, "unknown type \"" + v.get<std::string>() + "\"");
      if (std::find(out.begin(), out.end(), bits) == out.end()) out.push_back(bits);
    };
    if (t.is_array()) {
      if (t.empty()) fail_keyword("type", ptr, "must not be an empty array");
      for (const Json& v : t) one(v);
    } else {
      one(t);
    }
    return out;
  }
  static unsigned type_mask(const Json& t, const std::string& ptr) {
    unsigned m = 0;
    for (unsigned b : parse_types(t, ptr)) m |= b;
    return m;
  }

  // The types the grammar of `sub` can produce (an over-estimate is fine:
  // used to check that a "type" beside anyOf or allOf constrains nothing).
  // implied false: the types of the values `sub` validates (an over-estimate
  // too), without llama.cpp's types implied by keywords ({"properties": ...}
  // validates a string as well).
  unsigned value_types(const Sub& sub, size_t depth, std::set<std::string>& open, bool implied = true) {
    enter(sub.ptr, depth);
    const Json& s = *sub.s;
    if (s.is_boolean()) return s.get<bool>() ? kAllTypes : 0;
    if (!s.is_object()) return kAllTypes;
    unsigned t = kAllTypes;
    if (has(sub, "$ref")) {
      const auto [target, tptr] = resolve(s["$ref"], sub.ptr);
      if (open.insert(tptr).second) {  // (on a cycle: no narrowing known, still an over-estimate)
        t &= value_types({target, tptr}, depth + 1, open, implied);
        open.erase(tptr);
      }
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!has(sub, key) || !s[key].is_array()) continue;
      unsigned any = 0;
      for (size_t i = 0; i < s[key].size(); ++i)
        any |= value_types({&s[key][i], pointer_child(pointer_child(sub.ptr, key), i)}, depth + 1, open, implied);
      t &= any;
    }
    if (has(sub, "allOf") && s["allOf"].is_array()) {
      for (size_t i = 0; i < s["allOf"].size(); ++i)
        t &= value_types({&s["allOf"][i], pointer_child(pointer_child(sub.ptr, "allOf"), i)}, depth + 1, open,
                         implied);
    }
    if (s.contains("enum") && s["enum"].is_array()) {
      unsigned e = 0;
      for (const Json& v : s["enum"]) e |= json_type(v);
      t &= e;
    }
    if (s.contains("const")) t &= json_type(s["const"]);
    if (has_string_not(sub)) t &= kString;
    t &= s.contains("type") ? type_mask(s["type"], sub.ptr) : implied ? implied_types(s) : kAllTypes;
    return t;
  }

  // --- oneOf ---
  // oneOf is generated as an alternation, sound only when no value a branch
  // produces is valid against another alternative. Returns, per alternative
  // of `alts` (the keyword's array at `ptr`), the parts to add to its branch
  // (a conjunction) so that this holds: none for a pair proved exclusive
  // (exclusive()); else, for a branch i against an alternative j of objects,
  // a guard that makes i's values fail j: {"required": [k]} where i and j
  // give property k exclusive schemas (a tag), or {"properties": {k: false}}
  // where j requires k (a branch that requires k itself becomes
  // unsatisfiable and is dropped: its values would all match j), with
  // {"type": "object"} where the two meet in other types too. Throws naming
  // oneOf for a pair with neither. `within`: the types its siblings allow (a
  // value of other types is refused by them whatever the alternatives say).
  std::vector<std::vector<Sub>> one_of_guards(const Json& alts, const std::string& ptr, unsigned within,
                                              size_t depth) {
    const std::string key_ptr = pointer_child(ptr, "oneOf");
    std::vector<Sub> subs;
    std::vector<unsigned> types;
    for (size_t i = 0; i < alts.size(); ++i) {
      subs.push_back({&alts[i], pointer_child(key_ptr, i)});
      std::set<std::string> open;
      types.push_back(value_types(subs.back(), depth + 1, open, false) & within);  // 0 for false
    }
    std::vector<std::vector<Sub>> guards(alts.size());
    exclusive_budget_ = 100000;
    for (size_t i = 0; i < subs.size(); ++i)
      for (size_t j = i + 1; j < subs.size(); ++j) {
        const unsigned common = types[i] & types[j];
        if (!common || exclusive(subs[i], subs[j], common, kExclusiveLevels, depth + 1)) continue;
        std::optional<Sub> gi = guard(subs[i], subs[j], common, depth), gj = guard(subs[j], subs[i], common, depth);
        // Else the values of i that fail j, by j's negations; none: i is
        // dropped (a guard `false`), unless j would be dropped too.
        if (!gi) gi = negation_guard(subs[j], types[i], types[j], subs[i].ptr, depth);
        if (!gj) gj = negation_guard(subs[i], types[j], types[i], subs[j].ptr, depth);
        if (gi || gj) {
          if (!gi) gi = Sub{&kFalseSchema, subs[i].ptr};
          if (!gj) gj = Sub{&kFalseSchema, subs[j].ptr};
        }
        if (!gi || !gj) {
          fail_keyword("oneOf", ptr,
                       "alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                           " are not provably exclusive (a value valid against both is invalid, and the grammar, "
                           "an alternation, would produce it); supported: alternatives of different types, of "
                           "different const/enum values, strings no pattern, length and value of both admit, "
                           "or objects told apart by a property (one requires it, or both give it exclusive "
                           "schemas)");
        }
        guards[i].push_back(*gi);
        guards[j].push_back(*gj);
      }
    return guards;
  }

  // Whether a branch's guards include one of string negations (attempt).
  bool by_string_guard(const std::vector<Sub>& guards) const {
    return std::any_of(guards.begin(), guards.end(), [&](const Sub& g) { return string_guards_.count(g.s) > 0; });
  }

  // The guard for the branch of alternative a against alternative b, whose
  // types meet in `common` (see one_of_guards), or nullopt.
  std::optional<Sub> guard(const Sub& a, const Sub& b, unsigned common, size_t depth) {
    std::vector<Sub> pa, pb;
    std::set<const Json*> seen;
    parts_of(a, pa, depth + 1, seen);
    seen.clear();
    parts_of(b, pb, depth + 1, seen);
    Json g = Json::object();
    // A tag: a property of a whose schema b forbids or makes exclusive, made required.
    for (const Sub& x : pa) {
      if (!x.s->contains("properties") || !(*x.s)["properties"].is_object() || g.contains("required")) continue;
      for (const auto& item : (*x.s)["properties"].items()) {
        const std::string& key = item.key();  // (a lambda below captures it: not a structured binding)
        const Json& vx = item.value();
        if (vx.is_boolean() && !vx.get<bool>()) continue;  // forbidden in a: no tag
        const Sub ux{&vx, pointer_child(pointer_child(x.ptr, "properties"), key)};
        const bool tag = std::any_of(pb.begin(), pb.end(), [&](const Sub& y) {
          const std::optional<Sub> uy = property_schema(y, key);
          return uy && schemas_exclusive(ux, *uy, kExclusiveLevels - 1, depth);
        });
        if (tag) {
          g["required"] = Json::array({key});
          break;
        }
      }
    }
    // Else a property b requires, forbidden; one a does not require first.
    if (!g.contains("required")) {
      std::set<std::string> a_requires;
      for (const Sub& x : pa)
        if (x.s->contains("required") && (*x.s)["required"].is_array())
          for (const Json& r : (*x.s)["required"])
            if (r.is_string()) a_requires.insert(r.get<std::string>());
      std::optional<std::string> key;
      for (const Sub& y : pb) {
        if (!y.s->contains("required") || !(*y.s)["required"].is_array()) continue;
        for (const Json& r : (*y.s)["required"]) {
          if (!r.is_string()) continue;
          if (!key || (a_requires.count(*key) && !a_requires.count(r.get<std::string>()))) key = r.get<std::string>();
        }
      }
      if (!key) return array_guard(pa, pb, common, depth);
      g["properties"] = Json::object({{*key, false}});
    }
    if (common & ~kObject) g["type"] = "object";
    return Sub{&interned(std::move(g)), a.ptr};
  }

  // The guard of a branch (of types `ta`, as value_types over-estimates
  // them) against an alternative b (of types `tb`) that no proof tells
  // apart: {"anyOf": [N...]}, each N a schema whose every value fails b
  // (negations()), with {"type": ta less tb} where that is nameable; nullopt
  // when there is none. The branch's values then fail b; those it loses
  // (valid against both, or failing b in a way no N states) are not written.
  std::optional<Sub> negation_guard(const Sub& b, unsigned ta, unsigned tb, const std::string& ptr, size_t depth) {
    Json alts = Json::array();
    bool by_strings = false;
    for (const bool strings : {false, true}) {  // (strings: see negations)
      by_strings = strings;
      std::vector<Json> ns;
      negations(b, ns, kNegationLevels, depth + 1, strings);
      for (Json& n : ns) {
        std::set<std::string> open;
        if (value_types({&n, ptr}, depth + 1, open, false) & ta) alts.push_back(std::move(n));
      }
      if (const std::optional<Json> other = type_schema(ta & ~tb)) alts.push_back(*other);
      if (!alts.empty()) break;
    }
    if (alts.empty()) return std::nullopt;
    const Json& g = interned(alts.size() == 1 ? std::move(alts[0]) : Json{{"anyOf", std::move(alts)}});
    if (by_strings) string_guards_.insert(&g);
    return Sub{&g, ptr};
  }

  // {"type": [...]} naming exactly the types of `bits`, or nullopt where
  // they are none or not nameable (numbers that are not integers).
  static std::optional<Json> type_schema(unsigned bits) {
    if (!bits || ((bits & kFraction) && !(bits & kInteger))) return std::nullopt;
    Json names = Json::array();
    for (const auto& [name, bit] : {std::pair<const char*, unsigned>{"null", kNull}, {"boolean", kBoolean},
                                    {"number", kNumber}, {"integer", kInteger}, {"string", kString},
                                    {"array", kArray}, {"object", kObject}}) {
      if ((bits & bit) == bit && !(bit == kInteger && (bits & kNumber) == kNumber)) names.push_back(name);
    }
    return Json{{"type", names.size() == 1 ? names[0] : names}};
  }

  // Appends to `out` schemas each of whose values fails `b` (a sound subset
  // of not-b, in JSON Schema's reading: no type implied by keywords). A value
  // failing one part of b (b itself, what its $ref and allOf name) fails b;
  // per keyword of a part:
  //   type T: the other types (an integer-less number has no name: none);
  //   enum/const: the types none of its values has, and the strings none
  //     of its string values is (a `not` of their literal_pattern);
  //   pattern P: the strings P does not match ({"type": "string", "not":
  //     {"pattern": P}}, which visit_string writes through P's complement);
  //     this and the strings of enum/const only where `strings` is set, and
  //     only for patterns whose complement can be built (callers ask for
  //     them where no other negation is left: an automaton costs states);
  //   required [r...]: an object without r;
  //   properties {p: S}: an object with p whose value is in a negation of S
  //     (S false: any value), `levels` properties deep at most;
  //   minimum m (maximum, exclusive forms, draft 4's boolean ones): a number
  //     below (above) the bound, its end the bound's complement;
  //   minLength/maxLength, minItems/maxItems: a string (array) of a length
  //     (count) outside them;
  //   anyOf/oneOf [A...]: allOf [negations of each A] (failing every
  //     alternative fails both keywords), where every A has one: an anyOf
  //     of all of A's where the branches stay within kMaxNegationBranches
  //     (each a conjunction to write: more would grow grammars past their
  //     limits), else the first;
  //   not S: S itself (as a $ref to it).
  // Other keywords (format, additionalProperties, items, ...) add nothing:
  // values failing them only are not written. At most
  // kMaxNegations schemas.
  static constexpr int kNegationLevels = 3;
  static constexpr size_t kMaxNegations = 16;
  static constexpr size_t kMaxNegationBranches = 4;
  void negations(const Sub& b, std::vector<Json>& out, int levels, size_t depth, bool strings) {
    if (levels <= 0) return;
    if (b.s->is_boolean()) {
      if (b.s->get<bool>()) return;
      out.push_back(Json::object());  // every value fails false
      return;
    }
    std::vector<Sub> parts;
    std::set<const Json*> seen;
    parts_of(b, parts, depth, seen);
    auto add = [&](Json n) {
      if (out.size() < kMaxNegations && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
    };
    auto add_not_pattern = [&](const std::string& pattern) {
      schema::AutomatonBudget trial{automata_.max_states, automata_.max_work, 0};  // the schema's own is not spent
      try {
        schema::pattern_dfa(pattern, limits_.max_nesting, limits_.max_repetition, trial, schema::PatternReading::kWide);
      } catch (const schema::PatternError&) {
        return;  // no complement here: the pattern adds no negation
      }
      add(not_pattern(pattern));
    };
    auto count = [](const Json& v) -> std::optional<uint64_t> {
      if (v.is_number_unsigned()) return v.get<uint64_t>();
      if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
      if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() < 1e15 && std::floor(v.get<double>()) == v.get<double>())
        return static_cast<uint64_t>(v.get<double>());
      return std::nullopt;
    };
    for (const Sub& x : parts) {
      const Json& s = *x.s;
      if (s.contains("type")) {
        unsigned t = 0;
        try {
          t = type_mask(s["type"], x.ptr);
        } catch (const Error&) {
          t = 0;  // malformed: the converter says so where it writes it
        }
        if (t) {
          if (const auto n = type_schema(kAllTypes & ~t & ~((t & kInteger) ? kFraction : 0U))) add(*n);
        }
      }
      if (const auto values = finite_values(x)) {
        unsigned t = 0;
        std::vector<std::string> values_text;
        for (const Json* v : *values) {
          t |= (json_type(*v) & kNumber) ? kNumber : json_type(*v);
          if (v->is_string()) values_text.push_back(v->get<std::string>());
        }
        if (const auto n = type_schema(kAllTypes & ~t)) add(*n);
        if (strings && !values_text.empty()) add_not_pattern(schema::literal_pattern(values_text));
      }
      if (strings && s.contains("pattern") && s["pattern"].is_string())
        add_not_pattern(s["pattern"].get<std::string>());
      if (s.contains("required") && s["required"].is_array())
        for (const Json& r : s["required"])
          if (r.is_string()) add(Json{{"type", "object"}, {"properties", Json{{r.get<std::string>(), false}}}});
      if (s.contains("properties") && s["properties"].is_object()) {
        for (const auto& item : s["properties"].items()) {
          std::vector<Json> inner;
          negations({&item.value(), pointer_child(pointer_child(x.ptr, "properties"), item.key())}, inner, levels - 1,
                    depth + 1, strings);
          if (inner.empty()) continue;
          Json n = Json{{"type", "object"}, {"required", Json::array({item.key()})}};
          const bool any = std::any_of(inner.begin(), inner.end(), [](const Json& u) { return u.empty(); });
          if (!any) n["properties"][item.key()] = inner.size() == 1 ? std::move(inner[0]) : Json{{"anyOf", std::move(inner)}};
          add(std::move(n));
        }
      }
      const auto draft4 = [&](const char* k) { return s.contains(k) && s[k].is_boolean() && s[k].get<bool>(); };
      for (const auto& [key, lower, excl] :
           {std::tuple{"minimum", true, draft4("exclusiveMinimum")}, {"maximum", false, draft4("exclusiveMaximum")},
            {"exclusiveMinimum", true, true}, {"exclusiveMaximum", false, true}}) {
        if (!s.contains(key) || !s[key].is_number()) continue;
        // Below a lower bound: < m where m is allowed, <= m where it is not.
        const char* beyond = lower ? (excl ? "maximum" : "exclusiveMaximum") : (excl ? "minimum" : "exclusiveMinimum");
        add(Json{{"type", "number"}, {beyond, s[key]}});
      }
      for (const auto& [lo, hi, type] : {std::tuple{"minLength", "maxLength", "string"}, {"minItems", "maxItems", "array"}}) {
        if (s.contains(lo))
          if (const auto n = count(s[lo]); n && *n > 0) add(Json{{"type", type}, {hi, *n - 1}});
        if (s.contains(hi))
          if (const auto n = count(s[hi])) add(Json{{"type", type}, {lo, *n + 1}});
      }
      for (const char* key : {"anyOf", "oneOf"}) {
        if (!s.contains(key) || !s[key].is_array() || s[key].empty()) continue;
        std::vector<std::vector<Json>> each;
        size_t product = 1;
        for (size_t i = 0; i < s[key].size(); ++i) {
          std::vector<Json> inner;
          negations({&s[key][i], pointer_child(pointer_child(x.ptr, key), i)}, inner, levels - 1, depth + 1, strings);
          if (inner.empty()) break;
          product = std::min(product * inner.size(), kMaxNegationBranches + 1);
          each.push_back(std::move(inner));
        }
        if (each.size() != s[key].size()) continue;
        // Every negation of each alternative (an anyOf) where the branches
        // they make stay within kMaxNegationBranches, else the first of each.
        Json all = Json::array();
        for (std::vector<Json>& inner : each) {
          if (inner.size() == 1 || product > kMaxNegationBranches) {
            all.push_back(std::move(inner[0]));
          } else {
            Json any = Json::array();
            for (Json& n : inner) any.push_back(std::move(n));
            all.push_back(Json{{"anyOf", std::move(any)}});
          }
        }
        add(all.size() == 1 ? std::move(all[0]) : Json{{"allOf", std::move(all)}});
      }
      if (s.contains("not")) {
        const std::string at = pointer_child(x.ptr, "not");
        try {
          if (at.find('%') == std::string::npos && resolve(Json("#" + at), x.ptr).first == &s["not"])
            add(Json{{"$ref", "#" + at}});
        } catch (const Error&) {
          // not where the pointer says (a schema made here): no negation from it
        }
      }
    }
  }

  // The strings `pattern` does not match: {"type": "string", "not":
  // {"pattern": pattern}}.
  static Json not_pattern(const std::string& pattern) {
    return Json{{"type", "string"}, {"not", Json{{"pattern", pattern}}}};
  }

  // The guard of a branch of arrays against an alternative of arrays whose
  // items are exclusive with its own: {"minItems": 1} (with {"type":
  // "array"} where the two meet in other types too): the branch's first item
  // then fails the other's items. (The empty array, valid against both, is
  // invalid against the oneOf: dropping it loses nothing.)
  std::optional<Sub> array_guard(const std::vector<Sub>& pa, const std::vector<Sub>& pb, unsigned common, size_t depth) {
    if (!(common & kArray)) return std::nullopt;
    for (const Sub& x : pa) {
      if (!x.s->contains("items") || (*x.s)["items"].is_array()) continue;
      for (const Sub& y : pb) {
        if (!y.s->contains("items") || (*y.s)["items"].is_array()) continue;
        if (!schemas_exclusive({&(*x.s)["items"], pointer_child(x.ptr, "items")},
                               {&(*y.s)["items"], pointer_child(y.ptr, "items")}, kExclusiveLevels - 1, depth))
          continue;
        Json g = Json::object({{"minItems", 1}});
        if (common & ~kArray) g["type"] = "array";
        return Sub{&interned(std::move(g)), x.ptr};
      }
    }
    return std::nullopt;
  }

  // Whether no value validates both a and b, whose types meet in `common`:
  // proved from parts of each (a part accepts at least what the whole does,
  // so exclusive parts make exclusive wholes; the parts of a schema are
  // itself and what its $ref and allOf name): both finite (const, enum)
  // without a scalar in common, or (meeting only in objects) a property one
  // requires that the other forbids or gives an exclusive schema.
  // levels: how many properties deep the proof may look (a recursive schema
  // would otherwise recurse without end); exclusive_budget_ bounds the pairs
  // of parts one one_of_guards compares (no proof found: not exclusive).
  static constexpr int kExclusiveLevels = 4;
  size_t exclusive_budget_ = 0;
  bool exclusive(const Sub& a, const Sub& b, unsigned common, int levels, size_t depth) {
    enter(a.ptr, depth);
    if (levels <= 0) return false;
    std::vector<Sub> pa, pb;
    std::set<const Json*> seen;
    parts_of(a, pa, depth, seen);
    seen.clear();
    parts_of(b, pb, depth, seen);
    for (const Sub& x : pa)
      for (const Sub& y : pb) {
        if (exclusive_budget_ == 0) return false;
        --exclusive_budget_;
        const auto fx = finite_values(x), fy = finite_values(y);
        if (fx && fy && std::none_of(fx->begin(), fx->end(), [&](const Json* u) {
              return std::any_of(fy->begin(), fy->end(), [&](const Json* w) { return may_equal(*u, *w); });
            }))
          return true;
        if (common == kObject &&
            (excludes_by_property(x, y, levels, depth) || excludes_by_property(y, x, levels, depth)))
          return true;
        if (common == kString && strings_disjoint(x, y)) return true;
        if (!(common & ~kNumber) && numbers_disjoint(x, y)) return true;
        if (common == kArray && arrays_disjoint(x, y, levels, depth)) return true;
      }
    for (const auto& [parts, other] : {std::pair{&pa, &b}, std::pair{&pb, &a}})
      for (const Sub& x : *parts)
        if (every_alternative_exclusive(x, *other, common, levels, depth)) return true;
    return false;
  }

  // Whether x has an anyOf or oneOf each of whose alternatives is exclusive
  // with y (then a value valid against x, valid against one of them, is not
  // valid against y).
  bool every_alternative_exclusive(const Sub& x, const Sub& y, unsigned common, int levels, size_t depth) {
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!x.s->contains(key) || !(*x.s)[key].is_array()) continue;
      const Json& alts = (*x.s)[key];
      bool all = true;
      for (size_t i = 0; i < alts.size() && all; ++i) {
        const Sub alt{&alts[i], pointer_child(pointer_child(x.ptr, key), i)};
        std::set<std::string> open;
        const unsigned meet = value_types(alt, depth + 1, open, false) & common;
        all = meet == 0 || exclusive(alt, y, meet, levels - 1, depth + 1);
      }
      if (all) return true;
    }
    return false;
  }

  // sub, and the schemas its $ref and allOf name (each holds for every value
  // sub validates), each once.
  void parts_of(const Sub& sub, std::vector<Sub>& out, size_t depth, std::set<const Json*>& seen) {
    enter(sub.ptr, depth);
    if (!seen.insert(sub.s).second || !sub.s->is_object()) return;
    out.push_back(sub);
    const Json& s = *sub.s;
    if (s.contains("$ref")) {
      const auto [target, tptr] = resolve(s["$ref"], sub.ptr);
      parts_of({target, tptr}, out, depth + 1, seen);
    }
    if (s.contains("allOf") && s["allOf"].is_array())
      for (size_t i = 0; i < s["allOf"].size(); ++i)
        parts_of({&s["allOf"][i], pointer_child(pointer_child(sub.ptr, "allOf"), i)}, out, depth + 1, seen);
  }

  // Whether no string is valid against both x's and y's own string keywords
  // (pattern, minLength, maxLength, and string values of enum/const; format
  // and the rest left out, an over-estimate of each side): a value of one
  // side against the other's, else the patterns' automata within the common
  // lengths (schema::patterns_disjoint). False where that is not proven.
  bool strings_disjoint(const Sub& x, const Sub& y) const {
    struct Strings {
      std::string pattern;  // "" when none: every string
      uint64_t min = 0, max = UINT64_MAX;
      std::optional<std::vector<std::string>> values;
    };
    auto read = [](const Json& s) -> std::optional<Strings> {
      Strings out;
      if (s.contains("pattern")) {
        if (!s["pattern"].is_string()) return std::nullopt;
        out.pattern = s["pattern"].get<std::string>();
      }
      for (const char* k : {"minLength", "maxLength"}) {
        if (!s.contains(k)) continue;
        if (!s[k].is_number_unsigned() && !s[k].is_number_integer()) return std::nullopt;
        if (s[k].is_number_integer() && s[k].get<int64_t>() < 0) return std::nullopt;
        (k[1] == 'i' ? out.min : out.max) = s[k].get<uint64_t>();
      }
      if (const auto f = finite_values({&s, ""})) {
        out.values.emplace();
        for (const Json* v : *f)
          if (v->is_string()) out.values->push_back(v->get<std::string>());
      }
      return out;
    };
    const std::optional<Strings> a = read(*x.s), b = read(*y.s);
    if (!a || !b) return false;
    try {
      // A value of one side valid against the other's keywords.
      for (const auto& [one, other] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
        if (!(*one)->values) continue;
        const Strings& t = **other;
        // (Wide: a value the grammar writes must fail the pattern in every dialect.)
        const schema::PatternDfa dfa = schema::pattern_dfa(t.pattern, limits_.max_nesting, limits_.max_repetition,
                                                           automata_, schema::PatternReading::kWide);
        const std::vector<std::string>& vs = *(*one)->values;
        return std::none_of(vs.begin(), vs.end(), [&](const std::string& v) {
          if (t.values && std::find(t.values->begin(), t.values->end(), v) == t.values->end()) return false;
          const size_t n = schema::codepoint_count(v);
          return n >= t.min && n <= t.max && dfa.matches(v);
        });
      }
      const uint64_t lo = std::max(a->min, b->min), hi = std::min(a->max, b->max);
      if (lo > hi) return true;
      return schema::patterns_disjoint(a->pattern, b->pattern, lo, hi, limits_.max_nesting, limits_.max_repetition,
                                       automata_);
    } catch (const schema::PatternError&) {
      return false;  // the converter names the pattern where it writes it
    }
  }

  // A node's own bounds on numbers, as (value, exclusive) (draft 4's boolean
  // exclusiveMinimum/exclusiveMaximum included); nullopt sides are open.
  struct Interval {
    std::optional<std::pair<long double, bool>> lo, hi;
  };
  static std::optional<Interval> interval(const Json& s) {
    Interval out;
    auto side = [&](const char* key, bool lower, bool exclusive) {
      if (!s.contains(key) || s[key].is_boolean()) return true;
      if (!s[key].is_number()) return false;
      const long double x = s[key].get<long double>();
      auto& b = lower ? out.lo : out.hi;
      if (!b || (lower ? x > b->first : x < b->first) || (x == b->first && exclusive)) b = {x, exclusive};
      return true;
    };
    auto draft4 = [&](const char* key) { return s.contains(key) && s[key].is_boolean() && s[key].get<bool>(); };
    if (!side("minimum", true, draft4("exclusiveMinimum")) || !side("maximum", false, draft4("exclusiveMaximum")) ||
        !side("exclusiveMinimum", true, true) || !side("exclusiveMaximum", false, true))
      return std::nullopt;
    return out;
  }
  // Whether no number is within both x's and y's own bounds.
  static bool numbers_disjoint(const Sub& x, const Sub& y) {
    const auto a = interval(*x.s), b = interval(*y.s);
    if (!a || !b) return false;
    auto below = [](const Interval& u, const Interval& w) {  // u entirely below w
      return u.hi && w.lo && (u.hi->first < w.lo->first || (u.hi->first == w.lo->first && (u.hi->second || w.lo->second)));
    };
    return below(*a, *b) || below(*b, *a);
  }
  // Whether no array is valid against both x's and y's own array keywords:
  // their minItems/maxItems leave no count in common, or both admit only
  // arrays of at least one item and their items (schemas) are exclusive.
  bool arrays_disjoint(const Sub& x, const Sub& y, int levels, size_t depth) {
    auto count = [](const Json& s, const char* k, uint64_t absent) {
      if (!s.contains(k) || !s[k].is_number() || s[k].get<double>() < 0) return absent;
      return static_cast<uint64_t>(std::min(s[k].get<double>(), 1e18));
    };
    const Json &sx = *x.s, &sy = *y.s;
    const uint64_t lo = std::max(count(sx, "minItems", 0), count(sy, "minItems", 0));
    const uint64_t hi = std::min(count(sx, "maxItems", UINT64_MAX), count(sy, "maxItems", UINT64_MAX));
    if (lo > hi) return true;
    if (lo == 0 || !sx.contains("items") || !sy.contains("items")) return false;
    if (sx["items"].is_array() || sy["items"].is_array()) return false;  // tuples (draft 4's items array)
    return schemas_exclusive({&sx["items"], pointer_child(x.ptr, "items")}, {&sy["items"], pointer_child(y.ptr, "items")},
                             levels - 1, depth);
  }

  // The values a schema's own const or enum allows (an over-estimate), or
  // nullopt when it has neither.
  static std::optional<std::vector<const Json*>> finite_values(const Sub& sub) {
    const Json& s = *sub.s;
    if (s.contains("const")) return std::vector<const Json*>{&s["const"]};
    if (s.contains("enum") && s["enum"].is_array()) {
      std::vector<const Json*> v;
      for (const Json& e : s["enum"]) v.push_back(&e);
      return v;
    }
    return std::nullopt;
  }

  // Whether two JSON values may be equal in JSON Schema's sense (1 == 1.0):
  // scalars compared, arrays and objects of a kind assumed equal.
  static bool may_equal(const Json& u, const Json& w) {
    if (json_type(u) != json_type(w)) return false;
    if (u.is_number()) return u.get<double>() == w.get<double>();
    if (u.is_structured()) return true;
    return u == w;
  }

  // Whether an object valid against x cannot be valid against y: x requires
  // a property whose schema in x (from properties) and in y (from properties,
  // else additionalProperties where y has no patternProperties) are
  // exclusive, or that y forbids (that schema false).
  bool excludes_by_property(const Sub& x, const Sub& y, int levels, size_t depth) {
    const Json& sx = *x.s;
    if (!sx.contains("required") || !sx["required"].is_array()) return false;
    const Json* px = sx.contains("properties") && sx["properties"].is_object() ? &sx["properties"] : nullptr;
    for (const Json& r : sx["required"]) {
      if (!r.is_string()) continue;
      const std::string key = r.get<std::string>();
      const std::optional<Sub> uy = property_schema(y, key);
      if (!uy) continue;
      if (uy->s->is_boolean() && !uy->s->get<bool>()) return true;
      if (!px || !px->contains(key)) continue;
      const Sub ux{&(*px)[key], pointer_child(pointer_child(x.ptr, "properties"), key)};
      if (schemas_exclusive(ux, *uy, levels - 1, depth)) return true;
    }
    return false;
  }

  // The schema y gives property `key`: from properties, else from
  // additionalProperties where y has no patternProperties; nullopt for none.
  static std::optional<Sub> property_schema(const Sub& y, const std::string& key) {
    const Json& sy = *y.s;
    if (sy.contains("properties") && sy["properties"].is_object() && sy["properties"].contains(key))
      return Sub{&sy["properties"][key], pointer_child(pointer_child(y.ptr, "properties"), key)};
    if (sy.contains("additionalProperties") && !sy.contains("patternProperties"))
      return Sub{&sy["additionalProperties"], pointer_child(y.ptr, "additionalProperties")};
    return std::nullopt;
  }

  // exclusive() for two schemas of one property, their types found first.
  bool schemas_exclusive(const Sub& u, const Sub& w, int levels, size_t depth) {
    std::set<std::string> ou, ow;
    const unsigned meet = value_types(u, depth + 1, ou, false) & value_types(w, depth + 1, ow, false);
    return meet == 0 || exclusive(u, w, meet, levels, depth + 1);
  }

  // --- $ref ---
  // The schema a reference names, and its pointer. References were resolved
  // before the rewrites (schema::resolve_refs): each that resolved is a
  // pointer from the root, read in the rewritten document unless its
  // target moved there (moved_: the target rewritten on its own); the
  // converter's own references (negations(), to a `not`) point into the
  // rewritten document.
  std::pair<const Json*, std::string> resolve(const Json& ref, const std::string& ptr) const {
    if (!ref.is_string()) fail_keyword("$ref", ptr, "must be a string");
    const std::string r = ref.get<std::string>();
    // As the user wrote it, where resolve_refs rewrote it to the URI it names.
    const auto it = refs_.written.find(r);
    const std::string as_written = it == refs_.written.end() ? r : it->second;
    const std::string what = "cannot resolve \"" + as_written + "\"" + (as_written == r ? "" : " (\"" + r + "\")");
    if (r.empty() || r[0] != '#') {
      fail_keyword("$ref", ptr, what + " within the document (other documents are not read)");
    }
    const std::string frag = schema::percent_decode(std::string_view(r).substr(1));
    if (!frag.empty() && frag[0] != '/') fail_keyword("$ref", ptr, what + ": no subschema is named \"" + frag + "\"");
    if (refs_.unresolved.count(frag)) fail_keyword("$ref", ptr, what);
    // The longest prefix of the pointer that names a moved target.
    for (size_t end = frag.size();; end = frag.rfind('/', end - 1)) {
      if (auto it = moved_.find(frag.substr(0, end)); it != moved_.end()) {
        std::string rest;
        const Json* target = schema::walk_pointer(it->second, std::string_view(frag).substr(end), rest);
        if (!target) fail_keyword("$ref", ptr, what);
        return {target, it->first + rest};
      }
      if (end == 0 || end == std::string::npos) break;
    }
    std::string tptr;
    const Json* target = schema::walk_pointer(root_, frag, tptr);
    if (!target) fail_keyword("$ref", ptr, what);
    return {target, tptr};
  }

  // The rule for the schema a $ref names: one rule per target, made on first
  // use (so recursive schemas refer to it while it is being made).
  std::string ref_rule(const Sub& site, size_t depth) {
    const Json& ref = (*site.s)["$ref"];
    const auto [target, tptr] = resolve(ref, site.ptr);
    if (auto it = ref_rules_.find(tptr); it != ref_rules_.end()) {
      if (auto open = refs_open_.find(tptr); open != refs_open_.end() && open->second == struct_depth_) {
        fail_keyword("$ref", site.ptr,
                     "\"" + ref.get<std::string>() +
                         "\" refers back to itself without an object or array in between (it would never end)");
      }
      return it->second;
    }
    const std::string name = fresh_name("ref" + sanitize(tptr));
    rules_[name] = "";  // reserved while its schema is converted
    added_.push_back(name);
    ref_rules_[tptr] = name;
    refs_open_[tptr] = struct_depth_;
    added_refs_.push_back(tptr);
    visit({target, tptr}, name, depth + 1, true);
    refs_open_.erase(tptr);
    return name;
  }

  // --- the visitor ---
  // Returns the name of a rule matching exactly the values `sub` accepts
  // (within the conventions above). exact: the rule must be `name` itself.
  std::string visit(const Sub& sub, const std::string& name, size_t depth, bool exact) {
    enter(sub.ptr, depth);
    const Json& s = *sub.s;
    if (s.is_boolean()) {
      if (s.get<bool>()) return use_primitive("value", name, exact);
      fail_empty("", sub.ptr, "the schema false (no value is valid)");
    }
    if (!s.is_object()) fail(sub.ptr, "a schema must be an object or a boolean");
    check_keywords(s, sub.ptr);
    // $ref, anyOf/oneOf and allOf with constraining siblings are
    // conjunctions (for $ref: draft 2019-09's reading; draft 7 ignores the
    // siblings, and a value that satisfies both satisfies either reading).
    const std::vector<std::string> keys = own_keys(sub);
    for (const std::string_view k : kDependencyKeys)
      if (has(sub, k)) return visit_all_of({sub}, sub.ptr, k, name, depth, exact);
    if (has(sub, "$ref")) {
      if (keys.size() > 1) return visit_all_of({sub}, sub.ptr, "$ref", name, depth, exact);
      const std::string target = ref_rule(sub, depth);
      return exact ? define(name, true, target) : target;
    }
    if (has(sub, "anyOf") || has(sub, "oneOf")) {
      if (const char* key = plain_any_of(sub, depth)) return visit_any_of(sub, key, name, depth, exact);
      return visit_all_of({sub}, sub.ptr, has(sub, "anyOf") ? "anyOf" : "oneOf", name, depth, exact);
    }
    if (has(sub, "allOf")) return visit_all_of({sub}, sub.ptr, "allOf", name, depth, exact);
    if (has(sub, "not") && !has_string_not(sub)) return visit_all_of({sub}, sub.ptr, "not", name, depth, exact);
    if (s.contains("enum") || s.contains("const")) return visit_enum(sub, name, exact);
    return visit_types(sub, name, depth, exact);
  }

  // The key of an anyOf or oneOf that visit_any_of takes alone (beside
  // nothing but a "type" every alternative has anyway), else null.
  const char* plain_any_of(const Sub& sub, size_t depth) {
    for (const char* key : {"anyOf", "oneOf"}) {
      if (has(sub, key)) return keys_within(sub, {key, "type"}) && types_cover(sub, key, depth) ? key : nullptr;
    }
    return nullptr;
  }
  // An anyOf/oneOf with siblings: a conjunction to distribute.
  bool is_compound(const Sub& sub, size_t depth) {
    return ((has(sub, "anyOf") || has(sub, "oneOf")) && !plain_any_of(sub, depth)) ||
           (has(sub, "not") && !has_string_not(sub));
  }

  // Whether a "type" beside anyOf/oneOf `key` constrains nothing: every
  // alternative is of that type already.
  bool types_cover(const Sub& sub, const char* key, size_t depth) {
    const Json& s = *sub.s;
    if (!s.contains("type")) return true;
    const unsigned allowed = type_mask(s["type"], sub.ptr);
    if (!s[key].is_array()) return true;  // visit_any_of reports it
    for (size_t i = 0; i < s[key].size(); ++i) {
      std::set<std::string> open;
      if (value_types({&s[key][i], pointer_child(pointer_child(sub.ptr, key), i)}, depth + 1, open) & ~allowed) {
        return false;
      }
    }
    return true;
  }

  // The alternatives of anyOf/oneOf `key` (oneOf as an alternation too, each
  // branch with one_of_guards' parts, so that no value matches two).
  std::string visit_any_of(const Sub& sub, const char* key, const std::string& name, size_t depth, bool exact) {
    const Json& alts = (*sub.s)[key];
    if (!alts.is_array() || alts.empty()) fail_keyword(key, sub.ptr, "must be a non-empty array of schemas");
    std::vector<std::vector<Sub>> guards(alts.size());
    if (key[0] == 'o') {
      Sub siblings = sub;
      siblings.skip |= kSkipOneOf;
      std::set<std::string> open;
      guards = one_of_guards(alts, sub.ptr, value_types(siblings, depth + 1, open, false), depth);
    }
    std::vector<std::string> rules;
    for (size_t i = 0; i < alts.size(); ++i) {
      if (alts[i].is_boolean() && !alts[i].get<bool>()) continue;  // accepts nothing: adds nothing
      const Sub alt{&alts[i], pointer_child(pointer_child(sub.ptr, key), i)};
      const auto rule = attempt(
          [&] {
            if (guards[i].empty()) return visit(alt, alternative_name(name, i), depth + 1, false);
            std::vector<Sub> parts{alt};
            parts.insert(parts.end(), guards[i].begin(), guards[i].end());
            return visit_all_of(parts, alt.ptr, "oneOf", alternative_name(name, i), depth + 1, false);
          },
          by_string_guard(guards[i]));
      if (rule && std::find(rules.begin(), rules.end(), *rule) == rules.end()) rules.push_back(*rule);
    }
    if (rules.empty()) fail_empty(key, sub.ptr, "no alternative accepts a value");
    return define(name, exact, join(rules, " | ", identity));
  }

  // enum and const: the values themselves, in compact JSON (those the
  // keywords beside them allow: enum_values).
  std::string visit_enum(const Sub& sub, const std::string& name, bool exact) {
    std::vector<std::string> literals;
    for (const Json* v : enum_values(sub)) {
      const std::string lit = gbnf_literal(v->dump());
      if (std::find(literals.begin(), literals.end(), lit) == literals.end()) literals.push_back(lit);
    }
    const std::string body = literals.size() == 1 ? literals[0] : join_in("(", literals, " | ", ")", identity);
    return define(name, exact, body);
  }

  // The values an enum/const schema allows: enum's, those equal to const,
  // of the types "type" names. Throws when none is left.
  std::vector<const Json*> enum_values(const Sub& sub) const {
    const Json& s = *sub.s;
    std::vector<const Json*> values;
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) fail_keyword("enum", sub.ptr, "must be a non-empty array");
      for (const Json& v : e) {
        check_value_depth(v, "enum", sub.ptr);
        values.push_back(&v);
      }
    }
    if (s.contains("const")) {
      const Json& c = s["const"];
      check_value_depth(c, "const", sub.ptr);
      if (s.contains("enum")) {
        std::erase_if(values, [&](const Json* v) { return !(*v == c); });
      } else {
        values.push_back(&c);
      }
    }
    if (s.contains("type")) {
      const unsigned mask = type_mask(s["type"], sub.ptr);
      std::erase_if(values, [&](const Json* v) { return !(json_type(*v) & mask); });
    }
    if (has_string_not(sub)) {
      // Strings none of the patterns matches in either dialect (their wide
      // readings); values of other types satisfy the patterns, so fail it.
      const std::vector<std::string> excluded = *excluded_patterns(s["not"]);
      for (const std::string& x : excluded) {
        const schema::PatternDfa* dfa = nullptr;
        try {
          dfa = &cached_dfa(x, schema::PatternReading::kWide);
        } catch (const schema::PatternError& e) {
          fail_keyword("not", sub.ptr, std::string("of \"pattern\": ") + e.what());
        }
        std::erase_if(values, [&](const Json* v) { return !v->is_string() || dfa->matches(v->get<std::string>()); });
      }
    }
    for (const std::string& k : own_keys(sub)) {
      if (k == "type" || k == "enum" || k == "const" || (k == "not" && has_string_not(sub))) continue;
      const schema::PatternDfa* dfa = nullptr;  // built once for the values
      if (k == "pattern" && std::any_of(values.begin(), values.end(), [](const Json* v) { return v->is_string(); })) {
        if (!s[k].is_string()) fail_keyword(k, sub.ptr, "must be a string");
        try {
          dfa = &cached_dfa(s[k].get<std::string>(), schema::PatternReading::kNarrow);
        } catch (const schema::PatternError& e) {
          fail_keyword(k, sub.ptr, e.what());
        }
      }
      std::erase_if(values, [&](const Json* v) { return !value_satisfies(sub, k, *v, dfa); });
    }
    if (values.empty()) {
      fail_empty(s.contains("enum") ? "enum" : "const", sub.ptr, "no value is left with the keywords beside it");
    }
    return values;
  }

  // pattern_dfa(pattern, reading) over the schema's budget, built once per
  // conversion (dfas_). Throws PatternError as pattern_dfa does.
  const schema::PatternDfa& cached_dfa(const std::string& pattern, schema::PatternReading reading) const {
    const std::pair<std::string, int> key{pattern, reading == schema::PatternReading::kWide ? 1 : 0};
    if (auto it = dfas_.find(key); it != dfas_.end()) return it->second;
    schema::PatternDfa dfa = schema::pattern_dfa(pattern, limits_.max_nesting, limits_.max_repetition, automata_, reading);
    return dfas_.emplace(key, std::move(dfa)).first->second;
  }

  // Whether the enum/const value `v` satisfies keyword `k` of the node (as
  // python-jsonschema tests it; a keyword of another type than v's holds, as
  // JSON Schema applies each to its own type). Throws "not supported beside
  // enum" where the converter cannot tell: a known format, an object's or an
  // array's keywords on such a value, a number past 2^53 or a multipleOf
  // other than whole numbers on integers, keywords of no type (anyOf, $ref).
  // `dfa`: the pattern's, for k "pattern" and a string v.
  bool value_satisfies(const Sub& sub, const std::string& k, const Json& v, const schema::PatternDfa* dfa) const {
    const Json& s = *sub.s;
    const char* main = s.contains("enum") ? "enum" : "const";
    auto refuse = [&](const std::string& why) -> bool {
      fail_keyword(k, sub.ptr, "not supported beside \"" + std::string(main) + "\"" + why);
    };
    if (in(kStringKeys, k)) {
      if (!v.is_string()) return true;
      const std::string& text = v.get_ref<const std::string&>();
      if (k == "minLength") return schema::codepoint_count(text) >= count(sub, "minLength");
      if (k == "maxLength") return schema::codepoint_count(text) <= count(sub, "maxLength");
      if (k == "pattern") return dfa->matches(text);
      if (!s[k].is_string()) fail_keyword(k, sub.ptr, "must be a string");
      if (is_known_format(s[k])) refuse(" for a string value");
      return true;  // a format outside the five is an annotation
    }
    if (in(kNumberKeys, k)) {
      if (!v.is_number()) return true;
      const Json& b = s[k];
      if (b.is_boolean() && (k == "exclusiveMinimum" || k == "exclusiveMaximum")) return true;  // draft 4: see below
      if (!b.is_number()) fail_keyword(k, sub.ptr, "must be a number");
      // Integers past 2^53 are not all doubles: compared exactly only below.
      auto exact = [](const Json& x) {
        constexpr uint64_t k2p53 = uint64_t{1} << 53;
        if (x.is_number_unsigned()) return x.get<uint64_t>() <= k2p53;
        if (x.is_number_integer()) {
          const int64_t i = x.get<int64_t>();
          return i >= -static_cast<int64_t>(k2p53) && i <= static_cast<int64_t>(k2p53);
        }
        return true;
      };
      if (!exact(v) || !exact(b)) refuse(" for numbers past 2^53");
      const double x = v.get<double>(), y = b.get<double>();
      if (k == "multipleOf") {
        if (!(y > 0)) fail_keyword(k, sub.ptr, "must be a number over 0");
        if (std::floor(y) != y) refuse(" but for whole numbers");
        return json_type(v) == kInteger && std::fmod(x, y) == 0;  // a fraction is no whole number's multiple
      }
      auto draft4 = [&](const char* e) { return s.contains(e) && s[e].is_boolean() && s[e].get<bool>(); };
      if (k == "minimum") return draft4("exclusiveMinimum") ? x > y : x >= y;
      if (k == "maximum") return draft4("exclusiveMaximum") ? x < y : x <= y;
      return k == "exclusiveMinimum" ? x > y : x < y;
    }
    if (in(kObjectKeys, k)) return v.is_object() ? refuse(" for an object value") : true;
    if (in(kArrayKeys, k) || k == "uniqueItems") return v.is_array() ? refuse(" for an array value") : true;
    return refuse("");
  }

  // dump() and == recurse: a value nested past the limit is refused first.
  void check_value_depth(const Json& v, const char* key, const std::string& ptr) const {
    if (value_depth(v, limits_.max_nesting + 1) > limits_.max_nesting) {
      fail_keyword(key, ptr,
                   "a value nested deeper than limits.max_nesting (" + std::to_string(limits_.max_nesting) + ")");
    }
  }
  static size_t value_depth(const Json& v, size_t cap) {
    if (cap == 0 || !v.is_structured()) return 0;
    size_t d = 0;
    for (const Json& x : v) d = std::max(d, value_depth(x, cap - 1));
    return d + 1;
  }

  // By "type", or by the keywords present (llama.cpp's reading of a schema
  // without "type"): one branch per type.
  std::string visit_types(const Sub& sub, const std::string& name, size_t depth, bool exact) {
    const Json& s = *sub.s;
    std::vector<unsigned> types;
    if (s.contains("type")) {
      types = parse_types(s["type"], sub.ptr);
    } else {
      const unsigned implied = implied_types(s);
      if (implied == kAllTypes) return use_primitive("value", name, exact);
      for (unsigned t : {kObject, kArray, kString, kNumber})
        if (implied & t) types.push_back(t);
    }
    if (std::find(types.begin(), types.end(), kNumber) != types.end()) std::erase(types, kInteger);
    if (has_string_not(sub)) {  // every value of another type satisfies the patterns, so fails the `not`
      std::erase_if(types, [](unsigned t) { return t != kString; });
      if (types.empty()) fail_empty("not", sub.ptr, "of patterns admits only strings, which \"type\" excludes");
    }
    if (types.size() == 1) return visit_type(sub, types[0], name, depth, exact);
    std::vector<std::string> rules;
    for (size_t i = 0; i < types.size(); ++i) {
      const auto rule = attempt([&] { return visit_type(sub, types[i], alternative_name(name, i), depth, false); });
      if (rule) rules.push_back(*rule);
    }
    if (rules.empty()) fail_empty("type", sub.ptr, "no type of the list accepts a value");
    return define(name, exact, join(rules, " | ", identity));
  }

  std::string visit_type(const Sub& sub, unsigned type, const std::string& name, size_t depth, bool exact) {
    switch (type) {
      case kNull: return use_primitive("null", name, exact);
      case kBoolean: return use_primitive("boolean", name, exact);
      case kNumber: {
        const uint64_t m = multiple_of(sub);
        return m ? visit_integer(sub, name, exact, m) : visit_number(sub, name, exact);
      }
      case kInteger: return visit_integer(sub, name, exact, std::max<uint64_t>(multiple_of(sub), 1));
      case kString: return visit_string(sub, name, exact);
      case kArray: return visit_array(sub, name, depth, exact);
      default: return visit_object(sub, name, depth, exact);
    }
  }

  // minimum, maximum, exclusiveMinimum, exclusiveMaximum (and draft 4's
  // boolean exclusive forms) rounded inward to integers: a fractional bound
  // admits what is on its side of the next integer, inclusively; an integral
  // one keeps its exclusivity; of two on one side, the tighter. A side past
  // +-9e18 is no bound where it admits everything we write, and no value
  // where it admits nothing.
  struct Bounds {
    std::optional<schema::NumberBound> lo, hi;
    bool empty = false;  // before rounding: no number is within them
  };
  Bounds number_bounds(const Sub& sub) const {
    const Json& s = *sub.s;
    Bounds out;
    std::optional<std::pair<long double, bool>> raw_lo, raw_hi;  // the tightest, as written
    auto bound = [&](const char* key, bool lower, bool exclusive) {
      const Json& v = s[key];
      if (!v.is_number()) fail_keyword(key, sub.ptr, "must be a number");
      const long double x = v.get<long double>();
      auto& raw = lower ? raw_lo : raw_hi;
      if (!raw || (lower ? x > raw->first : x < raw->first) || (x == raw->first && exclusive)) raw = {x, exclusive};
      const bool integral = std::floor(x) == x;
      const long double b = integral ? x : lower ? std::ceil(x) : std::floor(x);
      constexpr long double kFar = 9e18L;
      if (lower ? b < -kFar : b > kFar) return;
      if (lower ? b > kFar : b < -kFar) fail_empty(key, sub.ptr, "no number of magnitude under 9e18 satisfies it");
      const schema::NumberBound nb{static_cast<int64_t>(b), integral && exclusive};
      std::optional<schema::NumberBound>& side = lower ? out.lo : out.hi;
      const bool tighter = !side || (lower ? nb.value > side->value : nb.value < side->value) ||
                           (nb.value == side->value && nb.exclusive);
      if (tighter) side = nb;
    };
    // Draft 4 wrote exclusiveMinimum: true beside minimum.
    auto draft4 = [&](const char* key) { return s.contains(key) && s[key].is_boolean() && s[key].get<bool>(); };
    if (s.contains("minimum")) bound("minimum", true, draft4("exclusiveMinimum"));
    if (s.contains("maximum")) bound("maximum", false, draft4("exclusiveMaximum"));
    if (s.contains("exclusiveMinimum") && !s["exclusiveMinimum"].is_boolean()) bound("exclusiveMinimum", true, true);
    if (s.contains("exclusiveMaximum") && !s["exclusiveMaximum"].is_boolean()) bound("exclusiveMaximum", false, true);
    out.empty = raw_lo && raw_hi &&
                (raw_lo->first > raw_hi->first ||
                 (raw_lo->first == raw_hi->first && (raw_lo->second || raw_hi->second)));
    return out;
  }
  const char* lower_key(const Sub& sub) const {
    return sub.s->contains("minimum") ? "minimum" : sub.s->contains("exclusiveMinimum") ? "exclusiveMinimum" : "type";
  }

  // multipleOf: a whole number m (0 when absent). Its multiples are
  // integers, so a number with it is written as an integer (m 1: the
  // integers). A fraction 1/k (0.5, 0.25, 0.1, 0.01, 0.001, ...:
  // integers_are_multiples) is written as the integers, a sound subset:
  // validators test fractions in floating point (0.07 / 0.01 is not 7 in
  // IEEE doubles), so the grammar cannot promise the fractional multiples,
  // but it can promise every integer. Other fractions throw.
  static uint64_t multiple_of(const Sub& sub) {
    if (!sub.s->contains("multipleOf")) return 0;
    const Json& m = (*sub.s)["multipleOf"];
    if (!m.is_number() || !(m.get<double>() > 0)) fail_keyword("multipleOf", sub.ptr, "must be a number over 0");
    const double v = m.get<double>();
    if (std::floor(v) != v && integers_are_multiples(v)) return 1;
    if (std::floor(v) != v || v > 1e15) {
      fail_keyword("multipleOf", sub.ptr,
                   "only whole numbers up to 10^15 and fractions 1/k (0.5, 0.25, 0.1, 0.01, ..., 0.001) whose "
                   "floating-point quotients are whole for every integer are supported, not " + m.dump());
    }
    return static_cast<uint64_t>(v);
  }

  // Whether every integer n is a multiple of v as validators test it in
  // IEEE doubles (python-jsonschema: int(n / v) == n / v; ajv likewise),
  // proved for v the double nearest 1/k, k whole in 2..1000, from its
  // relative error e = v*k - 1 (exact, in integers): the exact quotient
  // n/v = nk/(1 + e) is within |nk| * 2^-54 of nk when 0 <= e <= 2^-54 or
  // -2^-54 < e < 0, under half the spacing of doubles at nk, so it rounds
  // to nk exactly while |nk| <= 2^53; past 2^53 every double is whole.
  // Holds for 734 of those k, 0.1, 0.2, 0.05, 0.01 and 0.001 among them
  // (not 1/3: its error is over 2^-54; 0.3 is no 1/k). A validator testing with fmod
  // (7 mod 0.01 is not 0 in doubles) refuses most of them anyway.
  static bool integers_are_multiples(double v) {
    if (!(v >= 0.001 && v < 1)) return false;
    const double kd = std::round(1 / v);
    if (kd < 2 || kd > 1000) return false;
    const auto k = static_cast<int64_t>(kd);
    int e = 0;
    const double frac = std::frexp(v, &e);  // v = frac * 2^e, frac in [0.5, 1); e in [-9, 0]
    if (e < -9) return false;
    const auto mant = static_cast<int64_t>(std::ldexp(frac, 53));  // v = mant * 2^(e - 53), exactly
    // v*k - 1 = d * 2^(e - 53), and 2^-54 = t * 2^(e - 53): mant * k < 2^63, 2^(53 - e) <= 2^62.
    const int64_t d = mant * k - (int64_t{1} << (53 - e));
    if (e == 0) return d == 0;
    const int64_t t = int64_t{1} << (-1 - e);
    return d == 0 || (d > 0 && d <= t) || (d < 0 && -d < t);
  }

  std::string visit_integer(const Sub& sub, const std::string& name, bool exact, uint64_t multiple) {
    const Bounds b = number_bounds(sub);
    const std::optional<int64_t> lo = b.lo ? std::optional<int64_t>(b.lo->value + b.lo->exclusive) : std::nullopt;
    const std::optional<int64_t> hi = b.hi ? std::optional<int64_t>(b.hi->value - b.hi->exclusive) : std::nullopt;
    if (lo && hi && *lo > *hi) fail_empty(lower_key(sub), sub.ptr, "no integer is within the bounds");
    if (multiple > 1) return define(name, exact, "(" + multiples(sub, lo, hi, static_cast<int64_t>(multiple)) + ")");
    if (!lo && !hi) return use_primitive("integer", name, exact);
    return define(name, exact, "(" + schema::integer_range(lo, hi) + ")");
  }

  // The multiples of m > 1 in [lo, hi] (a side absent: unbounded), as GBNF
  // alternatives, exactly: written out where the bounds hold at most 256 of
  // them; else, for m dividing 10^d (d <= 3: 2, 4, 5, 8, 10, 20, 25, 40, 50,
  // 100, 125, ..., 1000) where no bound or only one within m of 0 (the sign
  // then fixed), the numerals of at most 16 digits (the integer rule's
  // convention) whose last d digits are a multiple of m (10^d is one, so
  // divisibility by m depends on them alone). Other cases:
  // multiples_by_digits.
  std::string multiples(const Sub& sub, std::optional<int64_t> lo, std::optional<int64_t> hi, int64_t m) {
    const std::string ms = std::to_string(m);
    if (lo && hi) {
      // Quotients of the first and last multiples (|lo|, |hi| < 9.3e18 and m >= 2: no overflow).
      const int64_t q_lo = *lo / m + (*lo > 0 && *lo % m != 0 ? 1 : 0);
      const int64_t q_hi = *hi / m - (*hi < 0 && *hi % m != 0 ? 1 : 0);
      if (q_lo > q_hi) fail_empty("multipleOf", sub.ptr, "no multiple of " + ms + " is within the bounds");
      if (q_hi - q_lo < 256) {
        std::vector<std::string> alts;
        for (int64_t q = q_lo; q <= q_hi; ++q) alts.push_back("\"" + std::to_string(q * m) + "\"");
        return join(alts, " | ", identity);
      }
    }
    const bool non_negative = lo && !hi && *lo <= 0 && *lo > -m;
    const bool non_positive = hi && !lo && *hi >= 0 && *hi < m;
    int d = 1;
    uint64_t p = 10;
    while (d <= 3 && p % static_cast<uint64_t>(m) != 0) {
      ++d;
      p *= 10;
    }
    if (((lo || hi) && !non_negative && !non_positive) || d > 3) return multiples_by_digits(sub, lo, hi, m);
    std::vector<std::string> alts, endings;
    for (uint64_t k = 0; k < p; k += static_cast<uint64_t>(m)) {
      std::string digits = std::to_string(k);
      if (k > 0) alts.push_back("\"" + digits + "\"");  // the multiples of at most d digits
      digits.insert(0, static_cast<size_t>(d) - digits.size(), '0');
      endings.push_back("\"" + digits + "\"");
    }
    const std::string ending = add_rule("multiple-" + ms + "-ending", join(endings, " | ", identity));
    alts.push_back("[1-9] [0-9]{0," + std::to_string(15 - d) + "} " + ending);
    const std::string positive = add_rule("multiple-" + ms, join(alts, " | ", identity));
    if (non_negative) return "\"0\" | " + positive;
    if (non_positive) return "\"0\" | \"-\" " + positive;
    return "\"0\" | \"-\"? " + positive;
  }

  // The multiples of m > 1 in [lo, hi] as multiples() writes them where
  // neither of its forms applies: the numerals read digit by digit, tracking
  // the value still needed modulo m (a number's remainder is that of its
  // digits, each times its power of 10) and, along the bounds' own digits,
  // whether the prefix equals theirs (the usual digit-by-digit range test),
  // per numeral length; magnitudes of at most 16 digits where a side is
  // unbounded (the integer rule's convention), no leading zeros, no -0.
  // Exact. A rule per (digits left, remainder needed) once off the bounds,
  // named multiple-M-K-T, and per position on them; refused naming
  // multipleOf where that passes kMaxMultipleRules.
  std::string multiples_by_digits(const Sub& sub, std::optional<int64_t> lo, std::optional<int64_t> hi, int64_t m) {
    const std::string ms = std::to_string(m);
    const auto um = static_cast<uint64_t>(m);
    constexpr uint64_t kCap = 9999999999999999;  // 16 digits
    std::vector<uint64_t> pow10_mod{1 % um};     // 10^k mod m
    for (int k = 1; k <= 16; ++k) pow10_mod.push_back(pow10_mod.back() * 10 % um);
    size_t made = 0;
    auto spend = [&] {
      if (++made > kMaxMultipleRules) {
        fail_keyword("multipleOf", sub.ptr,
                     "the numerals of the multiples of " + ms + " within the bounds need more than " +
                         std::to_string(kMaxMultipleRules) + " rules");
      }
    };
    // Digits that take a numeral from needing t (mod m) with k digits left
    // to needing (t - digit * 10^(k-1)) mod m, grouped by that target.
    auto by_target = [&](uint64_t t, int k, int d_lo, int d_hi) {
      std::map<uint64_t, std::string> classes;
      for (int dg = d_lo; dg <= d_hi; ++dg) {
        const uint64_t step = static_cast<uint64_t>(dg) * pow10_mod[static_cast<size_t>(k - 1)] % um;
        const uint64_t target = (t + um - step) % um;
        classes[target] += static_cast<char>('0' + dg);
      }
      return classes;
    };
    auto digit_class = [](const std::string& digits) {
      if (digits.size() == 1) return "\"" + digits + "\"";
      if (digits.size() == 10) return std::string("[0-9]");
      std::string c = "[";
      for (size_t i = 0; i < digits.size();) {
        size_t j = i;
        while (j + 1 < digits.size() && digits[j + 1] == digits[j] + 1) ++j;
        c += digits[i];
        if (j > i + 1) c += '-';
        if (j > i) c += digits[j];
        i = j + 1;
      }
      return c + "]";
    };
    // Any k digits whose value is t modulo m ("" when k is 0 and t is 0;
    // nullopt when none).
    std::map<std::pair<int, uint64_t>, std::optional<std::string>> free_rules;
    std::function<std::optional<std::string>(int, uint64_t)> any_digits = [&](int k, uint64_t t) {
      if (k == 0) return t == 0 ? std::optional<std::string>(R"("")") : std::nullopt;
      auto it = free_rules.find({k, t});
      if (it != free_rules.end()) return it->second;
      std::vector<std::string> alts;
      for (const auto& [target, digits] : by_target(t, k, 0, 9)) {
        const std::optional<std::string> rest = any_digits(k - 1, target);
        if (rest) alts.push_back(digit_class(digits) + (k == 1 ? "" : " " + *rest));
      }
      std::optional<std::string> rule;
      if (!alts.empty()) {
        spend();
        rule = add_rule("multiple-" + ms + "-" + std::to_string(k) + "-" + std::to_string(t), join(alts, " | ", identity));
      }
      free_rules[{k, t}] = rule;
      return rule;
    };
    // Numerals of magnitudes in [a, b] (a <= b), multiples of m.
    auto magnitudes = [&](uint64_t a, uint64_t b, std::vector<std::string>& out) {
      for (int len = 1; len <= 16; ++len) {
        const uint64_t first = len == 1 ? 0 : power_of_10(len - 1), last = power_of_10(len) - 1;
        const uint64_t x = std::max(a, first), y = std::min(b, last);
        if (x > y) continue;
        const std::string xs = std::to_string(x), ys = std::to_string(y);  // both len digits
        // Position i with the prefix equal to x's (tl) and/or y's (th), t
        // needed; a first digit of several is 1 to 9.
        std::function<std::optional<std::string>(size_t, bool, bool, uint64_t)> on_bounds =
            [&](size_t i, bool tl, bool th, uint64_t t) -> std::optional<std::string> {
          const int k = len - static_cast<int>(i);
          if (!tl && !th && (i > 0 || len == 1)) return any_digits(k, t);
          if (k == 0) return t == 0 ? std::optional<std::string>(R"("")") : std::nullopt;
          const int d_lo = tl ? xs[i] - '0' : (i == 0 && len > 1 ? 1 : 0), d_hi = th ? ys[i] - '0' : 9;
          std::vector<std::string> alts;
          for (int dg = d_lo; dg <= d_hi;) {
            // A run of digits with the same tightness: the bounds' own digits alone.
            const bool ntl = tl && dg == d_lo, nth = th && dg == d_hi;
            int end = dg;
            if (!ntl && !nth) end = (th ? d_hi - 1 : d_hi);
            for (const auto& [target, digits] : by_target(t, k, dg, end)) {
              const std::optional<std::string> rest = on_bounds(i + 1, ntl, nth, target);
              if (rest) alts.push_back(digit_class(digits) + (k == 1 ? "" : " " + *rest));
            }
            dg = end + 1;
          }
          if (alts.empty()) return std::nullopt;
          if (alts.size() == 1 && k == len) return alts[0];
          spend();
          return add_rule("multiple-" + ms + "-len" + std::to_string(len) + "-" + std::to_string(i),
                          join(alts, " | ", identity));
        };
        // A bound at the length's own end (10...0, 9...9) is no bound on its digits.
        if (const std::optional<std::string> r = on_bounds(0, x != first || len == 1, y != last, 0)) out.push_back(*r);
      }
    };
    std::vector<std::string> alts;
    const uint64_t top = std::min<uint64_t>(hi ? (*hi < 0 ? 0 : static_cast<uint64_t>(*hi)) : kCap, kCap);
    if (!hi || *hi >= 0) {  // 0 and up
      const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
      if (from <= top) magnitudes(from, top, alts);
    }
    if (!lo || *lo < 0) {  // below 0: "-" and magnitudes
      const uint64_t from = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
      const uint64_t to = std::min<uint64_t>(lo ? static_cast<uint64_t>(-(*lo + 1)) + 1 : kCap, kCap);
      std::vector<std::string> negative;
      if (from <= to) magnitudes(from, to, negative);
      for (const std::string& n : negative) alts.push_back("\"-\" " + (n.find(" | ") != std::string::npos ? "(" + n + ")" : n));
    }
    if (alts.empty()) fail_empty("multipleOf", sub.ptr, "no multiple of " + ms + " is within the bounds");
    return join(alts, " | ", identity);
  }

  // Bounded: number_range's subset (integers, and decimals whose value is
  // in range even as a double), no exponent.
  std::string visit_number(const Sub& sub, const std::string& name, bool exact) {
    const Bounds b = number_bounds(sub);
    if (!b.lo && !b.hi) return use_primitive("number", name, exact);
    if (b.empty) fail_empty(lower_key(sub), sub.ptr, "no number is within the bounds");
    const std::string alts = schema::number_range(b.lo, b.hi);
    if (alts.empty()) {
      fail_keyword(lower_key(sub), sub.ptr,
                   "bounds that hold no integer, nor an interval from one integer to the next, are not supported");
    }
    return define(name, exact, "(" + alts + ")");
  }

  // minLength, maxLength, minItems, maxItems: a count (any size repetition()
  // can write; 10^18 and more are refused).
  size_t count(const Sub& sub, const char* key) const {
    const Json& v = (*sub.s)[key];
    if (!v.is_number_integer() && !(v.is_number_float() && json_type(v) == kInteger)) {
      fail_keyword(key, sub.ptr, "must be a non-negative integer");
    }
    const long double x = v.get<long double>();
    if (x < 0) fail_keyword(key, sub.ptr, "must be a non-negative integer");
    if (x >= 1e18L) fail_keyword(key, sub.ptr, "10^18 or more is not supported");
    const auto n = static_cast<size_t>(x);
    if (n > limits_.max_repetition && std::min(limits_.max_repetition, kDirectRepetition) < 2) {
      fail_keyword(key, sub.ptr, "over limits.max_repetition (" + std::to_string(limits_.max_repetition) + ")");
    }
    return n;
  }

  // --- repetitions ---
  // `atom` (a rule name or a parenthesized group) repeated min..max times
  // (kNoMax: no bound), as a GBNF sequence. Counts up to kDirectRepetition
  // (and limits.max_repetition) are GBNF's {m,n}, which the parser expands
  // into n - m nested rules; larger ones are written in base K = 16 with
  // rules named `base`-x16, -x256, ... (B = atom{K}), O(K log_K n) elements
  // in all: exactly c times is B^(c / K) atom{c % K}, and at most n times is
  //   at most q - 1 times B, then atom{0,K-1}  |  B{q} atom{0,r}
  // (q = n / K, r = n % K: lengths aK + b with a < q, or with a = q and
  // b <= r), both applied again to B while a count is over K.
  // A bounded repetition of more than 16 choices is a rule of its own,
  // `base`-min-max, shared by its uses (GBNF expands every {m,n} it reads).
  std::string repetition(const std::string& atom, size_t min, size_t max, const std::string& base) {
    const size_t direct = std::min(limits_.max_repetition, kDirectRepetition);
    const size_t k = std::min<size_t>(16, direct);
    std::string out;
    if ((max == kNoMax ? min : max) <= direct) {
      out = repeat(atom, min, max);
    } else {
      out = seq(exactly(atom, min, k, base), max == kNoMax ? atom + "*" : up_to(atom, max - min, k, base));
    }
    if (max == kNoMax || max - min <= 16) return out;
    return add_rule(base + "-" + std::to_string(min) + "-" + std::to_string(max), out);
  }
  // atom{K} as a rule (atom being `scale` atoms of the first level).
  std::string block(const std::string& atom, size_t k, const std::string& base, size_t scale) {
    return add_rule(base + "-x" + std::to_string(scale * k), repeat(atom, k, k));
  }
  static std::string seq(const std::string& a, const std::string& b) {
    return a.empty() ? b : b.empty() ? a : a + " " + b;
  }
  std::string exactly(const std::string& atom, size_t c, size_t k, const std::string& base, size_t scale = 1) {
    if (c <= k) return repeat(atom, c, c);
    const std::string b = block(atom, k, base, scale);
    return seq(exactly(b, c / k, k, base, scale * k), repeat(atom, c % k, c % k));
  }
  std::string up_to(const std::string& atom, size_t n, size_t k, const std::string& base, size_t scale = 1) {
    if (n < k) return repeat(atom, 0, n);
    const std::string b = block(atom, k, base, scale);
    const size_t q = n / k, r = n % k;
    return "(" + seq(up_to(b, q - 1, k, base, scale * k), repeat(atom, 0, k - 1)) + " | " +
           seq(exactly(b, q, k, base, scale * k), repeat(atom, 0, r)) + ")";
  }

  // The language of a known format's rule (primitive_table) as a pattern.
  static std::string format_pattern(const std::string& format) {
    if (format == "date") return std::string("^") + kDateBody + "$";
    if (format == "time") return std::string("^") + kTimeBody + "$";
    if (format == "date-time") return std::string("^") + kDateBody + "T" + kTimeBody + "$";
    if (format == "uuid") return kUuidPattern;
    return kEmailPattern;
  }

  // date, time, date-time, uuid, email: the formats written as grammars.
  static bool is_known_format(const Json& f) {
    if (!f.is_string()) return false;
    const std::string& v = f.get_ref<const std::string&>();
    return v == "date" || v == "time" || v == "date-time" || v == "uuid" || v == "email";
  }

  // The strings of `lang` (the content of a JSON string: each code point as
  // a JSON character, escapes included) as rules, one per state of
  // schema::string_automaton (named pattern-len-N): each state's edges are a
  // JSON character of the edge's set and the target state's rule, an
  // accepting state may end there; a counted tail is its set (a rule
  // `pattern-char`) repeated its counts, through repetition(). The same
  // language gets the same rules in one schema. nullopt when no string is
  // left; throws naming `key` when the automaton would be over its states'
  // bound or its rules over limits.max_bytes.
  // How an error of bounded_pattern's automaton names the pattern after
  // `key`, the keyword blamed.
  static std::string about_pattern(std::string_view key) {
    if (key == "pattern") return "";
    return std::string(key == "not" ? "of" : "with") + " \"pattern\": ";
  }

  std::optional<std::string> bounded_pattern(const schema::StringLanguage& lang, const char* key,
                                             const std::string& ptr) {
    Json id = Json::array({lang.min_len, lang.max_len, lang.patterns, lang.excluded});
    const std::string cache_key = id.dump();
    if (auto it = bounded_patterns_.find(cache_key); it != bounded_patterns_.end()) {
      const auto rule = rules_.find(it->second.first);
      if (rule != rules_.end() && rule->second == it->second.second) return it->second.first;
    }
    // A pattern of at most K + 1 words has a stated subset
    // (word_count_automaton), taken where the exact product would be over
    // kMaxExactBesideSubset states (several such properties make a grammar
    // of megabytes); any other pattern over the bound is refused.
    std::optional<schema::PatternAutomaton> a, subset;
    try {
      subset = schema::word_count_automaton(lang, limits_.max_nesting, limits_.max_repetition, automata_);
    } catch (const schema::PatternError&) {
      subset.reset();
    }
    const size_t max_states = automata_.max_states;
    if (subset) automata_.max_states = std::min(max_states, kMaxExactBesideSubset);
    try {
      a = schema::string_automaton(lang, limits_.max_nesting, limits_.max_repetition, automata_);
    } catch (const schema::PatternError& e) {
      automata_.max_states = max_states;
      if (!subset) {
        fail_keyword(key, ptr, about_pattern(key) + e.what());
      }
      a = std::move(subset);
    }
    automata_.max_states = max_states;
    if (!a) return std::nullopt;
    std::vector<std::string> names;
    for (size_t i = 0; i < a->states.size(); ++i) {
      names.push_back(fresh_name("pattern-len-" + std::to_string(i)));
      rules_[names.back()] = "";
      added_.push_back(names.back());
    }
    // A set whose JSON text is long (\S, a negated class: escapes and
    // alternatives) is a rule of its own, so each state's rule stays short.
    std::map<std::string, std::string> sets;
    auto set_expr = [&](const schema::CodepointSet& chars) {
      std::string expr = schema::json_char_expr(chars);
      if (expr.size() <= kInlineSetBytes) return expr;
      auto [it, added] = sets.emplace(expr, "");
      if (added) it->second = add_rule("pattern-char", expr);
      return it->second;
    };
    size_t bytes = 0;
    for (size_t i = 0; i < a->states.size(); ++i) {
      const schema::PatternAutomaton::State& st = a->states[i];
      if (st.counted) {  // a counted tail: its set as a rule, repeated (O(K log n) rules for any count)
        const std::string atom = add_rule("pattern-char", schema::json_char_expr(st.loop));
        const std::string body =
            repetition(atom, static_cast<size_t>(st.loop_min),
                       st.loop_max == UINT64_MAX ? kNoMax : static_cast<size_t>(st.loop_max), atom);
        rules_[names[i]] = body.empty() ? R"("")" : body;
        continue;
      }
      std::vector<std::string> alts;
      for (const auto& e : st.edges) alts.push_back(set_expr(e.chars) + " " + names[e.to]);
      std::string body = join(alts, " | ", identity);
      if (st.accepting) body = alts.empty() ? R"("")" : "(" + body + ")?";
      bytes += names[i].size() + body.size() + 6;  // "name ::= body\n"
      if (bytes > limits_.max_bytes) {
        fail_keyword(key, ptr,
                     about_pattern(key) + "its automaton of " + std::to_string(a->states.size()) +
                         " states is over limits.max_bytes (" + std::to_string(limits_.max_bytes) + ")");
      }
      rules_[names[i]] = body;
    }
    bounded_patterns_[cache_key] = {names[0], rules_[names[0]]};
    return names[0];
  }

  std::string visit_string(const Sub& sub, const std::string& name, bool exact) {
    const Json& s = *sub.s;
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    const char* length_key = s.contains("minLength") ? "minLength" : "maxLength";
    if (s.contains("format") && !s["format"].is_string()) fail_keyword("format", sub.ptr, "must be a string");
    if (has_string_not(sub)) return visit_string_not(sub, name, exact);
    if (s.contains("pattern")) {
      const Json& p = s["pattern"];
      if (!p.is_string()) fail_keyword("pattern", sub.ptr, "must be a string");
      if (s.contains("format") && is_known_format(s["format"])) {
        // The strings of both: the format's rule as a pattern (the same
        // language; email within kEmailMaxLength code points, as beside
        // lengths) in one product automaton with the pattern and lengths.
        const std::string& format = s["format"].get_ref<const std::string&>();
        schema::StringLanguage lang{{p.get<std::string>(), format_pattern(format)}, {}, 0, UINT64_MAX};
        if (s.contains("minLength")) lang.min_len = count(sub, "minLength");
        if (s.contains("maxLength")) lang.max_len = count(sub, "maxLength");
        if (lang.max_len < lang.min_len) fail_empty("minLength", sub.ptr, "greater than maxLength");
        if (format == "email") lang.max_len = std::min<uint64_t>(lang.max_len, kEmailMaxLength);
        const std::optional<std::string> rule = bounded_pattern(lang, "format", sub.ptr);
        if (!rule) {
          fail_empty("format", sub.ptr,
                     "no string the pattern matches is a " + format + (lengths ? " of such a length" : ""));
        }
        return define(name, exact, R"("\"" )" + *rule + R"( "\"")");
      }
      std::string expr;
      bool uses_char = false;
      const uint64_t min = s.contains("minLength") ? count(sub, "minLength") : 0;
      const uint64_t max = s.contains("maxLength") ? count(sub, "maxLength") : UINT64_MAX;
      if (max < min) fail_empty("minLength", sub.ptr, "greater than maxLength");
      try {
        expr = schema::pattern_to_gbnf(p.get<std::string>(), "char", limits_.max_nesting, limits_.max_repetition,
                                       uses_char);
      } catch (const schema::PatternNeedsAutomaton&) {
        // A lookahead: only the pattern's automaton writes it (with the
        // lengths, if any, in the same product).
        const std::optional<std::string> rule =
            bounded_pattern({{p.get<std::string>()}, {}, min, max}, lengths ? length_key : "pattern", sub.ptr);
        if (!rule) {
          fail_empty(lengths ? length_key : "pattern", sub.ptr,
                     lengths ? "no string the pattern matches has such a length" : "no string matches the pattern");
        }
        return define(name, exact, R"("\"" )" + *rule + R"( "\"")");
      } catch (const schema::PatternError& e) {
        fail_keyword("pattern", sub.ptr, e.what());
      }
      // minLength/maxLength beside it: pattern_to_gbnf's rewriting where
      // that bounds them, else the pattern's automaton (bounded_pattern).
      if (lengths) {
        std::optional<std::string> within;
        try {
          within = schema::pattern_to_gbnf(p.get<std::string>(), "char", limits_.max_nesting, limits_.max_repetition,
                                           uses_char, min, max);
        } catch (const schema::PatternUnbounded&) {
          // Where one rewriting of the pattern cannot bound the lengths, the
          // product of its automaton with a count of code points can.
          uses_char = false;
          within = bounded_pattern({{p.get<std::string>()}, {}, min, max}, length_key, sub.ptr);
        } catch (const schema::PatternError& e) {
          fail_keyword(length_key, sub.ptr, std::string("with \"pattern\": ") + e.what());
        }
        if (!within) fail_empty(length_key, sub.ptr, "no string the pattern matches has such a length");
        expr = *within;
      }
      if (uses_char) add_primitive("char");  // an unanchored end
      return define(name, exact, expr.empty() ? R"("\"" "\"")" : R"("\"" ()" + expr + R"() "\"")");
    }
    // A format outside these five is an annotation, as JSON Schema 2020-12
    // has every format by default (validators assert none unless asked):
    // the value is then a plain string.
    if (s.contains("format") && is_known_format(s["format"])) {
      const std::string format = s["format"].get<std::string>();
      if (lengths) {
        // Supported where the format's lengths imply them (all ASCII: bytes
        // are code points): date 10, time 9 to 18 (HH:MM:SS, .sss, Z or
        // +HH:MM), date-time 20 to 29, uuid 36, email 5 or more (a@b.c).
        const std::pair<uint64_t, uint64_t> span = format == "date"        ? std::pair<uint64_t, uint64_t>{10, 10}
                                                   : format == "time"      ? std::pair<uint64_t, uint64_t>{9, 18}
                                                   : format == "date-time" ? std::pair<uint64_t, uint64_t>{20, 29}
                                                   : format == "uuid"      ? std::pair<uint64_t, uint64_t>{36, 36}
                                                                           : std::pair<uint64_t, uint64_t>{5, UINT64_MAX};
        const uint64_t min = s.contains("minLength") ? count(sub, "minLength") : 0;
        const uint64_t max = s.contains("maxLength") ? count(sub, "maxLength") : UINT64_MAX;
        if (min > span.second || max < span.first || min > max) {
          fail_empty(length_key, sub.ptr, "no " + format + " has such a length");
        }
        if (format == "email" && (min > span.first || max < span.second)) {
          // The email rule as a pattern (the same language, but for labels
          // over 63 characters, which kEmailMaxLength shuts out: a label has
          // at most that less "a@" and ".b"), through the automaton of the
          // lengths: emails of min..max code points, up to kEmailMaxLength.
          if (min > kEmailMaxLength) {
            fail_keyword(length_key, sub.ptr,
                         "over " + std::to_string(kEmailMaxLength) + " is not supported together with \"format\" \"" +
                             format + "\"");
          }
          const std::optional<std::string> rule =
              bounded_pattern({{kEmailPattern}, {}, min, std::min<uint64_t>(max, kEmailMaxLength)}, length_key, sub.ptr);
          if (!rule) fail_empty(length_key, sub.ptr, "no email has such a length");
          return define(name, exact, R"("\"" )" + *rule + R"( "\"")");
        }
        if (min > span.first || max < span.second) {
          fail_keyword(length_key, sub.ptr,
                       "not supported together with \"format\" \"" + format + "\" unless its lengths imply it");
        }
      }
      if (format == "uuid") return use_primitive("uuid", name, exact);
      return use_primitive(format + "-string", name, exact);
    }
    if (!lengths) return use_primitive("string", name, exact);
    const size_t min = s.contains("minLength") ? count(sub, "minLength") : 0;
    const size_t max = s.contains("maxLength") ? count(sub, "maxLength") : kNoMax;
    if (max < min) fail_empty("minLength", sub.ptr, "greater than maxLength");
    const std::string chars = repetition("char", min, max, "char");
    if (!chars.empty()) add_primitive("char");
    return define(name, exact, chars.empty() ? R"("\"" "\"")" : R"("\"" )" + chars + R"( "\"")");
  }

  // A string with a `not` of patterns (excluded_patterns): the strings of
  // the node's pattern, its known format (format_pattern; email up to
  // kEmailMaxLength code points) and lengths that none of the excluded
  // patterns matches, through bounded_pattern (the excluded patterns'
  // complements, exact).
  std::string visit_string_not(const Sub& sub, const std::string& name, bool exact) {
    const Json& s = *sub.s;
    schema::StringLanguage lang;
    lang.excluded = *excluded_patterns(s["not"]);
    if (s.contains("minLength")) lang.min_len = count(sub, "minLength");
    if (s.contains("maxLength")) lang.max_len = count(sub, "maxLength");
    if (lang.max_len < lang.min_len) fail_empty("minLength", sub.ptr, "greater than maxLength");
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) fail_keyword("pattern", sub.ptr, "must be a string");
      lang.patterns.push_back(s["pattern"].get<std::string>());
    }
    if (s.contains("format") && is_known_format(s["format"])) {
      const std::string& format = s["format"].get_ref<const std::string&>();
      lang.patterns.push_back(format_pattern(format));
      if (format == "email") lang.max_len = std::min<uint64_t>(lang.max_len, kEmailMaxLength);
    }
    const std::optional<std::string> rule = bounded_pattern(lang, "not", sub.ptr);
    if (!rule) fail_empty("not", sub.ptr, "no string the keywords beside it allow is left");
    return define(name, exact, R"("\"" )" + *rule + R"( "\"")");
  }

  // items, prefixItems (or the older items array), minItems, maxItems. As in
  // llama.cpp, a tuple holds all its items and no more unless "items" (a
  // schema) or "minItems" say otherwise.
  std::string visit_array(const Sub& sub, const std::string& name, size_t depth, bool exact) {
    const Json& s = *sub.s;
    const Json* prefix = nullptr;
    std::string prefix_ptr;
    std::optional<Sub> rest;  // the schema of items after the prefix
    bool rest_any = false;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail_keyword("prefixItems", sub.ptr, "must be an array of schemas");
      prefix = &s["prefixItems"];
      prefix_ptr = pointer_child(sub.ptr, "prefixItems");
    }
    if (s.contains("items")) {
      const Json& items = s["items"];
      if (items.is_array()) {
        if (prefix) fail_keyword("items", sub.ptr, "an array of schemas is not supported beside \"prefixItems\"");
        prefix = &items;
        prefix_ptr = pointer_child(sub.ptr, "items");
      } else if (is_trivial(items)) {
        rest_any = true;
      } else if (!items.is_boolean()) {
        rest = Sub{&items, pointer_child(sub.ptr, "items")};
      }
    } else if (!prefix) {
      rest_any = true;
    }
    // additionalItems constrains only the items past an items array (drafts
    // 4 to 2019-09; 2020-12 has no such keyword), and no more are written
    // past one: it always holds.
    if (s.contains("additionalItems") && !s["additionalItems"].is_boolean() && !s["additionalItems"].is_object()) {
      fail_keyword("additionalItems", sub.ptr, "must be a boolean or a schema");
    }
    const bool has_rest = rest || rest_any;
    const size_t k = prefix ? prefix->size() : 0;
    size_t max = s.contains("maxItems") ? count(sub, "maxItems") : has_rest ? kNoMax : k;
    // uniqueItems true: arrays of at most one item, which are unique whatever
    // their items (the grammar cannot compare items); more is refused.
    const bool unique = s.contains("uniqueItems") && s["uniqueItems"] == true;
    if (unique) {
      if (s.contains("minItems") && count(sub, "minItems") > 1)
        fail_keyword("uniqueItems", sub.ptr, "true beside minItems over 1 is not supported (only arrays of at most "
                                             "one item are written, which are unique)");
      max = std::min<size_t>(max, 1);
    }
    const size_t min = s.contains("minItems") ? count(sub, "minItems") : std::min(k, max);
    if (min > max) {
      fail_empty("minItems", sub.ptr,
                 s.contains("maxItems") ? "greater than maxItems" : "more items than the tuple allows");
    }
    if (s.contains("contains")) {
      const size_t least = s.contains("minContains") ? count(sub, "minContains") : 1;
      // maxContains binds only below the count of items allowed.
      const size_t most =
          s.contains("maxContains") && count(sub, "maxContains") < max ? count(sub, "maxContains") : kNoMax;
      if (least > 0 || most != kNoMax) {
        if (prefix)
          fail_keyword("contains", sub.ptr, "beside prefixItems (or an items array) is not supported");
        if (unique && least > 1)
          fail_keyword("uniqueItems", sub.ptr, "true beside minContains over 1 is not supported (only arrays of at "
                                               "most one item are written, which are unique)");
        return contains_array(sub, rest, rest_any, min, max, least, most, name, depth, exact);
      }
    }
    if (!prefix && rest_any && min == 0 && max == kNoMax) return use_primitive("array", name, exact);

    // Required prefix items [0, qk), optional ones [qk, kk), then the rest
    // items, rest_min to rest_max of them.
    const size_t kk = std::min(k, max);
    const size_t qk = std::min(min, k);
    const size_t rest_min = min > k ? min - k : 0;
    const size_t rest_max = !has_rest ? 0 : max == kNoMax ? kNoMax : max > k ? max - k : 0;
    std::vector<std::string> items;
    std::string rest_rule;
    ++struct_depth_;
    for (size_t i = 0; i < kk; ++i) {
      items.push_back(visit({&(*prefix)[i], pointer_child(prefix_ptr, i)},
                            child_name(name, "tuple-" + std::to_string(i)), depth + 1, false));
    }
    if (rest && rest_max > 0) {
      // Items no value satisfies: none past the prefix.
      const auto r = attempt([&] { return visit(*rest, child_name(name, "item"), depth + 1, false); });
      if (!r && rest_min > 0) {
        --struct_depth_;
        fail_empty("items", sub.ptr, "no value satisfies it and minItems asks for more than the prefix");
      }
      if (r) rest_rule = *r;
    } else if (rest_any && rest_max > 0) {
      rest_rule = use_primitive("value", "", false);
    }
    --struct_depth_;

    const std::string comma = "\",\" space ";
    // After at least one item: the rest items, each with its comma.
    const std::string items_base = child_name(name, "items");
    std::string suffix = rest_rule.empty() || kk == 0
                             ? ""
                             : repetition("(" + comma + rest_rule + ")", rest_min, rest_max, items_base);
    if (rest_min == 1 && rest_max == 1) suffix = comma + rest_rule;
    const size_t first_optional = qk == 0 ? 1 : qk;
    for (size_t j = kk; j-- > first_optional;) {
      suffix = "( " + comma + items[j] + (suffix.empty() ? "" : " " + suffix) + " )?";
    }
    std::string inner;
    if (qk > 0) {
      inner =
          join(std::vector<std::string>(items.begin(), items.begin() + static_cast<long>(qk)), " " + comma, identity);
      if (!suffix.empty()) inner += " " + suffix;
    } else if (kk > 0) {
      inner = "( " + items[0] + (suffix.empty() ? "" : " " + suffix) + " )?";
    } else if (!rest_rule.empty()) {
      // No prefix: rest_rule (comma rest_rule){min-1, max-1}.
      const size_t more = rest_max == kNoMax ? kNoMax : rest_max - 1;
      const std::string tail =
          repetition("(" + comma + rest_rule + ")", rest_min > 0 ? rest_min - 1 : 0, more, items_base);
      inner = rest_rule + (tail.empty() ? "" : " " + tail);
      if (rest_min == 0) inner = "(" + inner + ")?";
    }
    return define(name, exact, inner.empty() ? R"("[" space "]")" : R"("[" space )" + inner + R"( space "]")");
  }

  // contains with minContains `least` and maxContains `most` (kNoMax where
  // it cannot bind: see visit_array), least or most binding, without a
  // prefix: min..max items, each valid under `rest` (items; any value when
  // rest_any), `least` of them also under contains (the item rule: allOf
  // [items, contains], visit_all_of's merge). Without most, items before,
  // between and after the matching ones are any items:
  //   pre match (mid "," match){least - 1} mid
  // (pre = (item ",")*, mid = ("," item)*). Where minItems/maxItems bind,
  // only least 1, written as one alternative per count a of items before
  // the match: (item ","){a} match ("," item){lo - a, hi - a} (lo..hi: the
  // other items' counts), a up to hi (or lo when unbounded, the last
  // alternative's prefix then unbounded), at most kMaxContainsSpread of them.
  // With most, the other items are those of items that fail contains,
  // written exactly only where contains is an enum/const and items lists
  // its values (allOf [items, not contains]: those values without
  // contains'), and minItems/maxItems do not bind:
  //   pre match mid ("," match mid){least - 1, most - 1}
  // (pre and mid of the other items), or with least 0 also (other ("," other)*)?.
  static constexpr size_t kMaxContainsSpread = 32;
  std::string contains_array(const Sub& sub, const std::optional<Sub>& rest, bool rest_any, size_t min, size_t max,
                             size_t least, size_t most, const std::string& name, size_t depth, bool exact) {
    const Json& s = *sub.s;
    if (most != kNoMax) return contains_at_most(sub, rest, min, max, least, most, name, depth, exact);
    if (max < least) fail_empty("contains", sub.ptr, "minContains over maxItems");
    if (!rest && !rest_any) fail_empty("contains", sub.ptr, "no item is allowed (items false)");
    const size_t lo = min > least ? min - least : 0;
    const size_t hi = max == kNoMax ? kNoMax : max - least;
    const size_t spread = hi == kNoMax ? lo : hi;
    if ((lo > 0 || hi != kNoMax) && least > 1)
      fail_keyword("minContains", sub.ptr, "over 1 beside minItems or maxItems is not supported");
    if ((lo > 0 || hi != kNoMax) && spread >= kMaxContainsSpread)
      fail_keyword("contains", sub.ptr, "beside minItems/maxItems that leave " + std::to_string(kMaxContainsSpread) +
                                            " or more items around the matching one is not supported");
    const Sub c{&s["contains"], pointer_child(sub.ptr, "contains")};
    ++struct_depth_;
    const std::string match =
        rest ? visit_all_of({*rest, c}, c.ptr, "contains", child_name(name, "contains"), depth + 1, false)
             : visit(c, child_name(name, "contains"), depth + 1, false);
    const std::string item =
        rest ? visit(*rest, child_name(name, "item"), depth + 1, false) : use_primitive("value", "", false);
    --struct_depth_;
    const std::string comma = "\",\" space ";
    const std::string base = child_name(name, "items");
    const std::string before = "(" + item + " " + comma + ")", after = "(" + comma + item + ")";
    std::string inner;
    if (lo == 0 && hi == kNoMax) {
      const std::string mid = after + "*";
      inner = before + "* " + match;
      if (least > 1) inner += " " + repetition("(" + mid + " " + comma + match + ")", least - 1, least - 1, base);
      inner += " " + mid;
    } else {
      std::vector<std::string> alts;
      for (size_t a = 0; a <= spread; ++a) {
        const bool open = hi == kNoMax && a == lo;
        const std::string pre = repetition(before, a, open ? kNoMax : a, base);
        const std::string post = repetition(after, lo > a ? lo - a : 0, hi == kNoMax ? kNoMax : hi - a, base);
        alts.push_back(seq(seq(pre, match), post));
      }
      inner = alts.size() == 1 ? alts[0] : join_in("(", alts, " | ", ")", identity);
    }
    return define(name, exact, R"("[" space )" + inner + R"( space "]")");
  }

  std::string contains_at_most(const Sub& sub, const std::optional<Sub>& rest, size_t min, size_t max, size_t least,
                               size_t most, const std::string& name, size_t depth, bool exact) {
    const Json& s = *sub.s;
    if (most < least) fail_empty("maxContains", sub.ptr, "below minContains");
    if (!excluded_values(s["contains"]) || !rest || !finite_values(*rest) || min > least || max != kNoMax)
      fail_keyword("maxContains", sub.ptr, "below maxItems is supported only where contains is an enum/const, items "
                                           "lists its values and minItems/maxItems do not bind");
    const Sub c{&s["contains"], pointer_child(sub.ptr, "contains")};
    synthetic_.push_back(Json::object({{"not", s["contains"]}}));
    const Sub not_c{&synthetic_.back(), c.ptr};
    ++struct_depth_;
    const auto match = attempt([&] {
      return visit_all_of({*rest, c}, c.ptr, "contains", child_name(name, "contains"), depth + 1, false);
    });
    const auto other = attempt([&] {
      return visit_all_of({*rest, not_c}, c.ptr, "maxContains", child_name(name, "item"), depth + 1, false);
    });
    --struct_depth_;
    if (!match && least > 0) fail_empty("contains", sub.ptr, "no item is valid against items and contains");
    const std::string comma = "\",\" space ";
    // Some matches (1..most of them, least at least), and where least is 0
    // none: only other items, or the empty array.
    std::string some, none;
    if (match && most > 0) {
      const std::string pre = other ? "(" + *other + " " + comma + ")* " : "";
      const std::string mid = other ? " (" + comma + *other + ")*" : "";
      const std::string more = repetition("(" + comma + *match + mid + ")", least > 0 ? least - 1 : 0, most - 1,
                                          child_name(name, "matches"));
      some = pre + *match + mid + (more.empty() ? "" : " " + more);
    }
    if (least == 0 && other) none = "(" + *other + " (" + comma + *other + ")*)?";
    std::string inner = some;
    if (least == 0 && !some.empty()) inner = none.empty() ? "(" + some + ")?" : "(" + none + " | " + some + ")";
    if (least == 0 && some.empty()) inner = none;
    return define(name, exact, inner.empty() ? R"("[" space "]")" : R"("[" space )" + inner + R"( space "]")");
  }

  // patternProperties: each pattern with its schema. Names are matched with
  // std::regex's ECMAScript (JSON Schema's dialect); only printable ASCII
  // names and patterns (std::regex reads bytes; Python's re and ECMA-262
  // part on what else there is).
  struct PatternProperty {
    std::string pattern;
    std::regex re;
    Sub schema;
  };
  std::vector<PatternProperty> pattern_properties(const Sub& sub) const {
    std::vector<PatternProperty> out;
    if (!sub.s->contains("patternProperties")) return out;
    const Json& pp = (*sub.s)["patternProperties"];
    if (!pp.is_object()) fail_keyword("patternProperties", sub.ptr, "must be an object of schemas");
    for (const auto& [pattern, schema] : pp.items()) {
      if (!printable(pattern)) {
        fail_keyword("patternProperties", sub.ptr, "pattern \"" + pattern + "\": only printable ASCII is supported");
      }
      try {
        out.push_back({pattern, std::regex(pattern, std::regex::ECMAScript),
                       {&schema, pointer_child(pointer_child(sub.ptr, "patternProperties"), pattern)}});
      } catch (const std::regex_error&) {
        fail_keyword("patternProperties", sub.ptr, "pattern \"" + pattern + "\" is not supported (std::regex)");
      }
    }
    return out;
  }
  static bool printable(const std::string& t) {
    return std::all_of(t.begin(), t.end(), [](char c) { return c >= 0x20 && c < 0x7F; });
  }
  // The patterns `key` matches.
  std::vector<const PatternProperty*> matching(const std::vector<PatternProperty>& patterns, const std::string& key,
                                               const Sub& sub) const {
    std::vector<const PatternProperty*> out;
    if (patterns.empty()) return out;
    if (!printable(key)) {
      fail_keyword("patternProperties", sub.ptr,
                   "property \"" + key + "\": names outside printable ASCII are not supported beside it");
    }
    for (const PatternProperty& p : patterns)
      if (search(key, p, sub)) out.push_back(&p);
    return out;
  }
  // std::regex_search, whose errors (a match too complex) are ours.
  static bool search(const std::string& key, const PatternProperty& p, const Sub& sub) {
    try {
      return std::regex_search(key, p.re);
    } catch (const std::regex_error&) {
      fail_keyword("patternProperties", sub.ptr, "pattern \"" + p.pattern + "\" is too complex to match (std::regex)");
    }
  }
  // Adds the schemas of the patterns a named property matches to its own
  // (all must hold); a false one forbids it.
  void add_pattern_schemas(PropSpec& p, const std::vector<const PatternProperty*>& matches, const Sub& sub) {
    for (const PatternProperty* m : matches) {
      const Json& schema = *m->schema.s;
      if (schema.is_boolean() && !schema.get<bool>()) {
        if (p.required) {
          fail_empty("patternProperties", sub.ptr,
                     "property \"" + p.key + "\" is required but pattern \"" + m->pattern + "\" has schema false");
        }
        p.forbidden = true;
        p.schemas.clear();
      } else if (!is_trivial(schema) && !p.forbidden) {
        p.schemas.push_back(m->schema);
      }
    }
  }
  // The properties beside the named ones, with patternProperties: those of
  // the one pattern when there is one, no named property matches it and
  // pattern_to_gbnf writes it (keys it matches, values of its schema); else
  // none (as if additionalProperties were false: a key it would take might
  // match a pattern).
  void pattern_extra(const std::vector<PatternProperty>& patterns, ObjectSpec& spec, const Sub& sub) {
    spec.extra = ObjectSpec::kNone;
    spec.extra_schemas.clear();
    if (patterns.size() != 1) return;
    const PatternProperty& p = patterns[0];
    for (const PropSpec& prop : spec.props)
      if (search(prop.key, p, sub)) return;
    const Json& schema = *p.schema.s;
    if (schema.is_boolean() && !schema.get<bool>()) return;
    std::string expr;
    bool uses_char = false;
    try {
      expr = schema::pattern_to_gbnf(p.pattern, "char", limits_.max_nesting, limits_.max_repetition, uses_char);
    } catch (const schema::PatternError&) {
      return;  // none: still sound
    }
    if (uses_char) add_primitive("char");
    spec.extra_key = expr.empty() ? R"("\"" "\"")" : R"("\"" ()" + expr + R"() "\"")";
    if (is_trivial(schema)) {
      spec.extra = ObjectSpec::kAny;
    } else {
      spec.extra = ObjectSpec::kSchemas;
      spec.extra_schemas.push_back(p.schema);
    }
  }

  // propertyNames: every key, a string, satisfies its schema N (through
  // $ref): N's keywords among type, enum, const, pattern, minLength and
  // maxLength, else it throws. A named property whose name fails N is
  // forbidden (required: no value). Additional keys are N's strings: enum's
  // and const's values but the named ones; pattern and lengths as
  // visit_string writes them, where no named property's name satisfies N
  // (else, and beside patternProperties' keys, no additional key: a sound
  // subset, as the grammar cannot subtract names from a pattern).
  void property_names(ObjectSpec& spec, const Sub& sub, const std::string& name) {
    Sub n{&(*sub.s)["propertyNames"], pointer_child(sub.ptr, "propertyNames")};
    for (size_t hops = 0; n.s->is_object() && n.s->contains("$ref"); ++hops) {
      if (hops > limits_.max_nesting) fail_keyword("propertyNames", sub.ptr, "a $ref chain that does not end");
      const std::vector<std::string> keys = own_keys(n);
      if (keys.size() > 1) fail_keyword("propertyNames", n.ptr, "$ref beside other keywords is not supported here");
      const auto [target, tptr] = resolve((*n.s)["$ref"], n.ptr);
      n = {target, tptr};
    }
    const Json& ns = *n.s;
    if (ns.is_boolean()) {
      if (ns.get<bool>()) return;
      forbid_every_key(spec, sub);
      return;
    }
    if (!ns.is_object()) fail_keyword("propertyNames", sub.ptr, "must be a schema");
    for (const std::string& k : own_keys(n)) {
      constexpr std::string_view ok[] = {"type", "enum", "const", "pattern", "minLength", "maxLength"};
      // A format outside the five written ones is an annotation here too.
      if (k == "format" && ns[k].is_string() && !is_known_format(ns[k])) continue;
      if (!in(ok, k)) fail_keyword("propertyNames", n.ptr, "\"" + k + "\" is not supported in it");
    }
    if (ns.contains("type") && !(type_mask(ns["type"], n.ptr) & kString)) {
      forbid_every_key(spec, sub);
      return;
    }
    const bool listed = ns.contains("enum") || ns.contains("const");
    std::vector<std::string> values;  // enum/const: the strings among them
    if (listed) {
      if (ns.contains("enum")) {
        if (!ns["enum"].is_array()) fail_keyword("propertyNames", n.ptr, "enum must be an array");
        for (const Json& x : ns["enum"])
          if (x.is_string()) values.push_back(x.get<std::string>());
      }
      if (ns.contains("const")) {
        const Json& c = ns["const"];
        if (ns.contains("enum")) {
          std::erase_if(values, [&](const std::string& x) { return !(c.is_string() && c.get<std::string>() == x); });
        } else if (c.is_string()) {
          values.push_back(c.get<std::string>());
        }
      }
    }
    std::optional<std::regex> re;
    if (ns.contains("pattern")) {
      if (!ns["pattern"].is_string() || !printable(ns["pattern"].get<std::string>()))
        fail_keyword("propertyNames", n.ptr, "pattern: only a string of printable ASCII is supported");
      try {
        re.emplace(ns["pattern"].get<std::string>(), std::regex::ECMAScript);
      } catch (const std::regex_error&) {
        fail_keyword("propertyNames", n.ptr, "pattern is not supported (std::regex)");
      }
    }
    const size_t min = ns.contains("minLength") ? count(n, "minLength") : 0;
    const size_t max = ns.contains("maxLength") ? count(n, "maxLength") : kNoMax;
    const auto satisfies = [&](const std::string& key) {
      if (listed && std::find(values.begin(), values.end(), key) == values.end()) return false;
      size_t len = 0;  // code points
      for (const char c : key) len += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
      if (len < min || len > max) return false;
      if (!re) return true;
      if (!printable(key))
        fail_keyword("propertyNames", n.ptr, "property \"" + key + "\": names outside printable ASCII are not "
                                             "supported beside a pattern");
      try {
        return std::regex_search(key, *re);
      } catch (const std::regex_error&) {
        fail_keyword("propertyNames", n.ptr, "pattern is too complex to match (std::regex)");
      }
    };
    bool a_name_satisfies = false;
    for (PropSpec& p : spec.props) {
      if (satisfies(p.key)) {
        a_name_satisfies = true;
        continue;
      }
      if (p.required)
        fail_empty("propertyNames", sub.ptr, "property \"" + p.key + "\" is required but its name does not satisfy it");
      p.forbidden = true;
      p.schemas.clear();
    }
    if (spec.extra == ObjectSpec::kNone) return;
    if (!spec.extra_key.empty()) {
      spec.extra = ObjectSpec::kNone;  // patternProperties' keys: not intersected
      return;
    }
    if (listed) {
      std::vector<std::string> keys;
      for (const std::string& v : values) {
        const bool named =
            std::any_of(spec.props.begin(), spec.props.end(), [&](const PropSpec& p) { return p.key == v; });
        const std::string lit = gbnf_literal(Json(v).dump());
        if (!named && satisfies(v) && std::find(keys.begin(), keys.end(), lit) == keys.end()) keys.push_back(lit);
      }
      if (keys.empty()) {
        spec.extra = ObjectSpec::kNone;
      } else {
        spec.extra_key = join(keys, " | ", identity);
      }
      return;
    }
    if (!re && min == 0 && max == kNoMax) return;  // any string: the keys as they were
    if (a_name_satisfies) {
      spec.extra = ObjectSpec::kNone;
      return;
    }
    Json& key_schema = synthetic_.emplace_back(Json::object());
    key_schema["type"] = "string";
    for (const char* k : {"pattern", "minLength", "maxLength"})
      if (ns.contains(k)) key_schema[k] = ns[k];
    const auto key = attempt([&] { return visit_string({&key_schema, n.ptr}, child_name(name, "key"), false); });
    if (key) {
      spec.extra_key = *key;
    } else {
      spec.extra = ObjectSpec::kNone;  // no string satisfies it: no additional key
    }
  }
  // propertyNames that no string satisfies: an object without properties.
  static void forbid_every_key(ObjectSpec& spec, const Sub& sub) {
    for (PropSpec& p : spec.props) {
      if (p.required)
        fail_empty("propertyNames", sub.ptr, "property \"" + p.key + "\" is required but no name is valid");
      p.forbidden = true;
      p.schemas.clear();
    }
    spec.extra = ObjectSpec::kNone;
  }

  std::string visit_object(const Sub& sub, const std::string& name, size_t depth, bool exact) {
    const Json& s = *sub.s;
    ObjectSpec spec;
    std::vector<std::string> required;
    if (s.contains("required")) {
      const Json& r = s["required"];
      if (!r.is_array()) fail_keyword("required", sub.ptr, "must be an array of strings");
      for (const Json& v : r) {
        if (!v.is_string()) fail_keyword("required", sub.ptr, "must be an array of strings");
        if (std::find(required.begin(), required.end(), v.get<std::string>()) == required.end()) {
          required.push_back(v.get<std::string>());
        }
      }
    }
    auto is_required = [&](const std::string& key) {
      return std::find(required.begin(), required.end(), key) != required.end();
    };
    const std::vector<PatternProperty> patterns = pattern_properties(sub);
    if (s.contains("properties")) {
      const Json& props = s["properties"];
      if (!props.is_object()) fail_keyword("properties", sub.ptr, "must be an object");
      const std::string props_ptr = pointer_child(sub.ptr, "properties");
      for (const auto& [key, schema] : props.items()) {
        PropSpec p{key, {}, is_required(key), schema.is_boolean() && !schema.get<bool>()};
        if (p.forbidden && p.required) {
          fail_empty("required", sub.ptr, "property \"" + key + "\" is required but its schema is false");
        }
        if (!p.forbidden) p.schemas.push_back({&schema, pointer_child(props_ptr, key)});
        add_pattern_schemas(p, matching(patterns, key, sub), sub);
        spec.props.push_back(std::move(p));
      }
    }
    if (!s.contains("additionalProperties")) {
      // llama.cpp's default: no other keys beside "properties"; but where
      // minProperties asks for more than the properties named, the other
      // keys the schema allows (additionalProperties absent: any).
      const bool short_of_min = s.contains("minProperties") && !s.contains("patternProperties") &&
                                count(sub, "minProperties") > spec.props.size();
      spec.extra = s.contains("properties") && !short_of_min ? ObjectSpec::kNone : ObjectSpec::kAny;
    } else if (const Json& a = s["additionalProperties"]; is_trivial(a)) {
      spec.extra = ObjectSpec::kAny;
    } else if (a.is_boolean()) {
      spec.extra = ObjectSpec::kNone;
    } else if (a.is_object()) {
      spec.extra = ObjectSpec::kSchemas;
      spec.extra_schemas.push_back({&a, pointer_child(sub.ptr, "additionalProperties")});
    } else {
      fail_keyword("additionalProperties", sub.ptr, "must be a boolean or a schema");
    }
    // Required names without a property schema take the schemas of the
    // patterns they match, else additionalProperties' (any value when it is
    // absent: llama.cpp's default shuts out only the names nobody asked for).
    for (const std::string& key : required) {
      const bool declared =
          std::any_of(spec.props.begin(), spec.props.end(), [&](const PropSpec& p) { return p.key == key; });
      if (declared) continue;
      if (const auto matches = matching(patterns, key, sub); !matches.empty()) {
        PropSpec p{key, {}, true, false};
        add_pattern_schemas(p, matches, sub);
        spec.props.push_back(std::move(p));
        continue;
      }
      if (spec.extra == ObjectSpec::kNone && s.contains("additionalProperties")) {
        fail_empty("required", sub.ptr,
                   "property \"" + key + "\" is required but not in \"properties\" and additionalProperties is false");
      }
      spec.props.push_back({key, spec.extra_schemas, true, false});
    }
    if (!patterns.empty()) pattern_extra(patterns, spec, sub);
    if (s.contains("propertyNames")) property_names(spec, sub, name);
    spec.ptr = sub.ptr;
    if (s.contains("minProperties")) spec.min_props = count(sub, "minProperties");
    if (s.contains("maxProperties")) spec.max_props = count(sub, "maxProperties");
    return emit_object(spec, name, depth, exact);
  }

  // minProperties and maxProperties: the grammar writes every required
  // property (distinct keys), then optional and additional ones, each one
  // more key (additional keys leave out the declared names) except that a
  // repeated additional key counts once, as parsers keep one: the additional
  // ones count at most one toward a minimum, each one toward a maximum.
  // At least one or at most one of them: the form below; other counts:
  // counted_properties.
  std::string emit_object(const ObjectSpec& spec, const std::string& name, size_t depth, bool exact) {
    const bool any_prop =
        std::any_of(spec.props.begin(), spec.props.end(), [](const PropSpec& p) { return !p.forbidden; });
    const bool counted = spec.min_props > 0 || spec.max_props != SIZE_MAX;
    if (!any_prop && spec.extra == ObjectSpec::kAny && spec.extra_key.empty() && !counted) {
      return use_primitive("object", name, exact);
    }
    const size_t n_required =
        std::count_if(spec.props.begin(), spec.props.end(), [](const PropSpec& p) { return p.required; });
    if (spec.min_props > spec.max_props) fail_empty("minProperties", spec.ptr, "greater than maxProperties");
    if (spec.max_props < n_required) fail_empty("maxProperties", spec.ptr, "fewer than the required properties");
    const bool only_required = spec.max_props == n_required;

    std::vector<std::string> required_kvs;
    std::vector<std::pair<std::string, std::string>> optional;  // key part of the name, kv rule
    std::vector<std::string> excluded;                          // keys the extra properties may not take
    ++struct_depth_;
    for (const PropSpec& p : spec.props) {
      excluded.push_back(p.key);
      if (p.forbidden || (only_required && !p.required)) continue;
      const std::string value_name = child_name(name, p.key);
      // An optional property no value satisfies is left out: no valid
      // object has it (a required one makes the object unsatisfiable).
      std::string value;
      if (p.schemas.empty()) {
        value = use_primitive("value", "", false);
      } else if (p.required) {
        value = visit_all(p.schemas, value_name, depth + 1);
      } else if (const auto v = attempt([&] { return visit_all(p.schemas, value_name, depth + 1); })) {
        value = *v;
      } else {
        continue;
      }
      const std::string kv = add_rule(
          value_name + "-kv", gbnf_literal("\"" + json_string_text(p.key) + "\"") + " space \":\" space " + value);
      if (p.required) {
        required_kvs.push_back(kv);
      } else {
        optional.emplace_back(p.key, kv);
      }
    }
    std::string extra_kv;
    // Likewise additional properties (none when no value satisfies their schema).
    const std::optional<std::string> extra_value =
        spec.extra == ObjectSpec::kNone || only_required ? std::nullopt
        : spec.extra == ObjectSpec::kAny ? use_primitive("value", "", false)
                                         : attempt([&] {
                                             return visit_all(spec.extra_schemas,
                                                              child_name(name, "additional-value"), depth + 1);
                                           });
    if (extra_value) {
      const std::string& value = *extra_value;
      std::string key;
      if (!spec.extra_key.empty()) {
        key = add_rule(child_name(name, "additional-k"), spec.extra_key);
      } else if (excluded.empty()) {
        key = use_primitive("string", "", false);
      } else {
        add_primitive("char");  // json_key_excluding's continuations
        key = add_rule(child_name(name, "additional-k"), schema::json_key_excluding(excluded, "char"));
      }
      extra_kv = add_rule(child_name(name, "additional-kv"), key + " space \":\" space " + value);
    }
    --struct_depth_;

    // The optional and additional properties written: lo..hi of them (hi
    // kNoMax where maxProperties is absent or the grammar cannot exceed it).
    const size_t lo = spec.min_props > n_required ? spec.min_props - n_required : 0;
    const bool bounded = spec.max_props != SIZE_MAX && !only_required &&
                         (!extra_kv.empty() || spec.max_props < n_required + optional.size());
    const size_t hi = bounded ? spec.max_props - n_required : kNoMax;
    const std::string comma = "\",\" space ";
    std::string body = R"("{" space )";
    body += join(required_kvs, " " + comma, identity);
    if (lo > optional.size() + (extra_kv.empty() ? 0 : 1) && !extra_kv.empty() && spec.extra_key.empty() &&
        !bounded) {
      if (const auto distinct = distinct_additional(spec, name, *extra_value, lo)) {
        // A stated subset: lo additional properties whose keys start with
        // distinct characters (so a parser keeps lo of them), after the
        // required ones; then the optional ones and any more additional ones.
        body += (required_kvs.empty() ? "" : " " + comma) + join(*distinct, " " + comma, identity);
        for (const auto& [key, kv] : optional) body += " ( " + comma + kv + " )?";
        body += " ( " + comma + extra_kv + " )*";
        return define(name, exact, body + R"( space "}")");
      }
    }
    if (lo > optional.size() + (extra_kv.empty() ? 0 : 1)) {
      fail_keyword("minProperties", spec.ptr,
                   "more properties than the grammar writes with distinct keys (the required and optional ones "
                   "it writes, and one additional key: a repeated one counts once) are not supported");
    }
    if (lo > 1 || (bounded && hi > 1)) {
      const std::string rest = counted_properties(optional, extra_kv, !required_kvs.empty(), lo, hi, spec, name);
      if (rest.empty() && required_kvs.empty()) return define(name, exact, R"("{" space "}")");
      if (!rest.empty()) body += (required_kvs.empty() ? "" : " ") + rest;
      return define(name, exact, body + R"( space "}")");
    }
    // One more than the required properties, at least or at most.
    const bool at_least_one = lo == 1;
    const bool at_most_one = bounded;
    // The optional properties in order, any subset, then the extra ones:
    // each alternative starts at one of them; `<key>-rest` is what may
    // follow key (llama.cpp's get_recursive_refs). At most one: each alone.
    std::vector<std::string> alts;
    const size_t n = optional.size() + (extra_kv.empty() ? 0 : 1);
    const std::string extra_tail = at_most_one ? "" : " ( " + comma + extra_kv + " )*";
    std::string rest;  // what may follow item i, built from the end
    std::vector<std::string> rests(n);
    for (size_t i = n; i-- > 0 && !at_most_one;) {
      rests[i] = rest;
      if (i == 0) break;
      // rest for item i-1: item i optional, then what follows it.
      const bool extra = i == optional.size();
      std::string piece = extra ? extra_tail.substr(1) : "( " + comma + optional[i].second + " )?";
      if (!rest.empty()) piece += " " + rest;
      rest = add_rule(child_name(name, optional[i - 1].first) + "-rest", piece);
    }
    for (size_t i = 0; i < n; ++i) {
      const bool extra = i == optional.size();
      std::string alt = extra ? extra_kv + extra_tail : optional[i].second;
      if (!rests[i].empty()) alt += " " + rests[i];
      alts.push_back(alt);
    }
    if (!alts.empty()) {
      const std::string choice = join(alts, " | ", identity);
      const std::string optional_mark = at_least_one ? "" : "?";
      if (required_kvs.empty()) {
        body += "( " + choice + " )" + optional_mark;
      } else {
        body += " ( " + comma + "( " + choice + " ) )" + optional_mark;
      }
    } else if (required_kvs.empty()) {
      return define(name, exact, R"("{" space "}")");
    }
    body += R"( space "}")";
    return define(name, exact, body);
  }

  // `count` additional properties (any key but the named ones, values
  // `value`) as kv rules whose keys start with distinct ASCII letters or
  // digits that start no named property's key, so every key differs from
  // the others and from the named ones; nullopt when fewer than `count`
  // such characters are left (62 at most).
  std::optional<std::vector<std::string>> distinct_additional(const ObjectSpec& spec, const std::string& name,
                                                              const std::string& value, size_t count) {
    std::vector<std::string> kvs;
    const std::string firsts = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (const char c : firsts) {
      if (kvs.size() == count) break;
      const bool taken = std::any_of(spec.props.begin(), spec.props.end(),
                                     [&](const PropSpec& p) { return !p.key.empty() && p.key[0] == c; });
      if (taken) continue;
      add_primitive("char");
      kvs.push_back(add_rule(child_name(name, std::string("additional-") + c + "-kv"),
                             gbnf_literal(std::string("\"") + c) + R"( char* "\"" space ":" space )" + value));
    }
    if (kvs.size() < count) return std::nullopt;
    return kvs;
  }

  // The optional properties `optional` (key, kv rule) in order, any subset,
  // then additional ones (`extra_kv`, none when empty), such that lo..hi of
  // them are written (hi kNoMax: no bound), additional ones counting as
  // emit_object says; after_required: a comma before the first one. Returns
  // the GBNF text that follows the required properties ("" when it is
  // empty). A state (i, c) is "items 0..i-1 decided, c written" (c capped at
  // max(lo, 1) without a bound, as only c >= lo and c > 0 then matter):
  //   R(i, c) ::= ( "," o_i R(i + 1, c + 1) )  [c < hi]  |  R(i + 1, c)
  // and R(m, c), the additional ones: none where c >= lo, or one (where
  // lo <= c + 1 <= hi) and up to hi - c - 1 more. The comma is left out
  // before the first property written. States from which lo cannot be
  // reached are dropped; R(i, c) is a rule `<key of i-1>-rest-<c>` unless
  // it is empty, a rule's name or one property to write: at most
  // m x (min(m, cap) + 1) rules.
  // Where those would pass limits.max_rules (beside the rules already made)
  // or, estimated, limits.max_bytes, it throws naming the keyword that
  // bounds the count (maxProperties, else minProperties).
  std::string counted_properties(const std::vector<std::pair<std::string, std::string>>& optional,
                                 const std::string& extra_kv, bool after_required, size_t lo, size_t hi,
                                 const ObjectSpec& spec, const std::string& name) {
    const size_t m = optional.size();
    const size_t cap = hi == kNoMax ? std::max<size_t>(lo, 1) : hi;
    const size_t width = std::min(m, cap) + 1;  // counts c a state can have
    const size_t n_rules = m * width + (extra_kv.empty() ? 0 : width);
    // Each rule: its name, two references and a kv rule's name.
    size_t longest = 0;
    for (const auto& [key, kv] : optional) longest = std::max(longest, kv.size());
    const size_t n_bytes = n_rules * (4 * (name.size() + longest + 8) + 40);
    if (n_rules > limits_.max_rules - std::min(limits_.max_rules, rules_.size()) || n_bytes > limits_.max_bytes) {
      fail_keyword(hi == kNoMax ? "minProperties" : "maxProperties", spec.ptr,
                   "counting " + std::to_string(m) + " optional properties up to " + std::to_string(cap) +
                       " needs up to " + std::to_string(n_rules) + " rules (about " + std::to_string(n_bytes) +
                       " bytes), over limits.max_rules (" + std::to_string(limits_.max_rules) +
                       ", those already made included) or limits.max_bytes (" + std::to_string(limits_.max_bytes) +
                       ")");
    }
    const std::string comma = "\",\" space ";
    const auto lead = [&](size_t c) { return after_required || c > 0 ? comma : std::string(); };
    // The states of column i + 1 (nullopt: lo cannot be reached), built from the end.
    std::vector<std::optional<std::string>> next(width), cur(width);
    for (size_t c = 0; c < width; ++c) {
      const bool done = c >= lo;
      std::string more;  // one additional property and what may follow it
      if (!extra_kv.empty() && c + 1 >= lo && c + 1 <= hi) {
        const size_t after = hi == kNoMax ? kNoMax : hi - c - 1;
        more = seq(lead(c) + extra_kv,
                   repetition("( " + comma + extra_kv + " )", 0, after, child_name(name, "additional-more")));
      }
      if (more.empty()) {
        next[c] = done ? std::optional<std::string>("") : std::nullopt;
      } else {
        next[c] = done ? "( " + more + " )?" : more;
      }
    }
    for (size_t i = m; i-- > 0;) {
      for (size_t c = 0; c < width && c <= i; ++c) {
        std::vector<std::string> alts;
        bool empty = false;  // nothing more may be written
        const size_t up = hi == kNoMax ? std::min(c + 1, cap) : c + 1;
        if (up <= hi && up < width && next[up]) alts.push_back(seq(lead(c) + optional[i].second, *next[up]));
        if (next[c]) {
          if (next[c]->empty()) {
            empty = true;
          } else {
            alts.push_back(*next[c]);
          }
        }
        if (alts.empty()) {
          cur[c] = empty ? std::optional<std::string>("") : std::nullopt;
          continue;
        }
        std::string body = join(alts, " | ", identity);
        if (empty) body = "( " + body + " )?";
        if (i == 0) {
          cur[c] = alts.size() > 1 && !empty ? "( " + body + " )" : body;
        } else if (alts.size() == 1 && !empty && std::count(alts[0].begin(), alts[0].end(), ' ') <= 2) {
          cur[c] = alts[0];  // a rule's name, or a comma and one property
        } else {
          cur[c] = add_rule(child_name(name, optional[i - 1].first) + "-rest-" + std::to_string(c), body);
        }
      }
      std::swap(next, cur);
      std::fill(cur.begin(), cur.end(), std::nullopt);
    }
    return *next[0];  // emit_object checked that lo is reachable
  }

  // --- conjunctions ---
  // All of `subs` must hold (an allOf, or a $ref or anyOf with siblings).
  // One schema is visited as it is. Several: an anyOf among them is
  // distributed (allOf [X, anyOf [A, B]] is anyOf [allOf [X, A], allOf [X,
  // B]]); bare "type" constraints are intersected; the rest must all be
  // objects (merged: properties united, each property's schemas and the
  // additionalProperties of the others all holding) or all enums (their
  // common values), or be one schema of those types. `why` names the
  // keyword in errors.
  std::string visit_all(const std::vector<Sub>& subs, const std::string& name, size_t depth) {
    if (subs.size() == 1) return visit(subs[0], name, depth, false);
    return visit_all_of(subs, subs[0].ptr, "allOf", name, depth, false);
  }

  std::string visit_all_of(const std::vector<Sub>& subs, const std::string& ptr, std::string_view why,
                           const std::string& name, size_t depth, bool exact) {
    std::vector<Sub> parts;
    std::set<std::string> expanding;
    for (const Sub& sub : subs) flatten(sub, parts, depth + 1, false, expanding);
    if (parts.size() == 1 && !is_compound(parts[0], depth + 1)) return visit(parts[0], name, depth + 1, exact);
    // Several: references are read through, to merge what they name.
    std::vector<Sub> unique;
    {
      std::vector<Sub> all;
      for (const Sub& sub : parts) flatten(sub, all, depth + 1, true, expanding);
      for (const Sub& sub : all) {
        const bool seen =
            std::any_of(unique.begin(), unique.end(), [&](const Sub& u) { return u.s == sub.s && u.skip == sub.skip; });
        if (!seen) unique.push_back(sub);
      }
    }
    if (unique.empty()) return use_primitive("value", name, exact);
    if (unique.size() == 1 && !is_compound(unique[0], depth + 1)) return visit(unique[0], name, depth + 1, exact);
    return merge(std::move(unique), ptr, why, name, depth, exact);
  }

  // The conjunction of `unique` (visit_all_of's parts, references read
  // through) as a rule. A conjunction met again inside its own conversion,
  // with no $ref made a rule in between (a recursive definition merged
  // with its siblings: allOf [{"$ref": "#"}, {...}] in an object's
  // property), would be expanded the same way again, without end; it
  // becomes a rule of its own, made once and referred to (as ref_rule does
  // for a $ref), when an object or array lies in between, and is refused
  // when none does (it would refer to itself before reading any input).
  // Met again after a $ref was made a rule, it is written in place again:
  // that $ref is a rule reference now, so the expansion differs and ends
  // (within the references' count). Conjunctions never met again inside
  // themselves are written in place as well (the inner use throws
  // RecursiveMerge up to the outer one, which starts over as a rule).
  std::string merge(std::vector<Sub> unique, const std::string& ptr, std::string_view why, const std::string& name,
                    size_t depth, bool exact) {
    // Keyed by its parts but those of a bare "type", which are one mask (as
    // merge_parts reads them): the same conjunction beside different
    // "type"-only siblings ({"type": "object", "$ref": "#"} at many
    // properties) is one.
    MergeKey key;
    unsigned types = kAllTypes;
    for (const Sub& sub : unique) {
      if (keys_within(sub, {"type"})) {
        types &= type_mask((*sub.s)["type"], sub.ptr);
      } else {
        key.parts.emplace_back(sub.s, sub.skip);
      }
    }
    key.types = types;
    std::sort(key.parts.begin(), key.parts.end());
    const OpenMerge now{struct_depth_, added_refs_.size()};
    auto again = [&](const OpenMerge& outer) {
      if (outer.refs != now.refs) return false;
      if (outer.struct_depth == now.struct_depth) {
        fail_keyword(why, ptr,
                     "refers back to the same conjunction without an object or array in between (it would never end)");
      }
      return true;
    };
    if (auto it = merge_rules_.find(key); it != merge_rules_.end()) {
      if (auto open = merges_open_.find(key); open != merges_open_.end()) again(open->second);
      return exact ? define(name, true, it->second) : it->second;
    }
    if (auto open = merges_open_.find(key); open != merges_open_.end() && again(open->second)) {
      throw RecursiveMerge{key};
    }
    // Open while converted (the innermost use where nested), restored
    // however it ends.
    struct Open {
      std::map<MergeKey, OpenMerge>& open;
      const MergeKey& key;
      std::optional<OpenMerge> outer;
      Open(std::map<MergeKey, OpenMerge>& o, const MergeKey& k, OpenMerge now) : open(o), key(k) {
        if (auto it = open.find(key); it != open.end()) outer = it->second;
        open[key] = now;
      }
      ~Open() {
        if (outer) {
          open[key] = *outer;
        } else {
          open.erase(key);
        }
      }
    };
    if (merges_recursive_.count(key)) {
      const std::string rule = exact ? name : fresh_name(name);
      if (!exact) {
        rules_[rule] = "";  // reserved while its schema is converted
        added_.push_back(rule);
      }
      merge_rules_[key] = rule;
      added_merges_.push_back(key);
      const Open open(merges_open_, key, now);
      merge_parts(unique, ptr, why, rule, depth, true);
      return rule;
    }
    const Mark before = mark();
    try {
      const Open open(merges_open_, key, now);
      return merge_parts(unique, ptr, why, name, depth, exact);
    } catch (const RecursiveMerge& r) {
      if (r.key != key) throw;
    }
    undo(before);
    merges_recursive_.insert(key);
    return merge(std::move(unique), ptr, why, name, depth, exact);
  }

  // Why the conjunction `parts` provably accepts no value from its
  // discriminators alone, else nullopt: its "type"s have no type in common,
  // or they leave objects only and some property is required (a "required"
  // of a part) yet absent ("false" in a part's "properties") or with no
  // value left: the values its const/enum schemas in the parts'
  // "properties" all list, less those a `not` of enum/const there excludes.
  // merge_parts asks it before distributing an anyOf, so that of the 2^k
  // branches of k if/then (each an anyOf of if and not-if testing one
  // property's const) the contradictory ones end as soon as they are: at
  // most about k are live at each level of the distribution.
  // Exact: each fact read holds of every value of the conjunction (the
  // property schemas' other keywords only narrow more); value lists with an
  // object, array or fraction are not read (JSON Schema's equality is not
  // Json's there), excluded ones of those kinds are not excluded.
  static std::optional<std::string> property_contradiction(const std::vector<Sub>& parts) {
    unsigned types = kAllTypes;
    for (const Sub& p : parts) {
      if (!has(p, "type")) continue;
      const Json& t = (*p.s)["type"];
      // (a name that is not a type: no fact; parse_types reports it)
      auto bits = [](const Json& n) {
        const unsigned b = n.is_string() ? type_bits(n.get<std::string>()) : 0;
        return b ? b : kAllTypes;
      };
      unsigned m = 0;
      if (t.is_array()) {
        for (const Json& n : t) m |= bits(n);
      } else {
        m = bits(t);
      }
      types &= m;
    }
    if (!types) return "the \"type\"s of its parts have no type in common";
    if (types != kObject) return std::nullopt;
    auto comparable = [](const Json* v) {
      return v->is_string() || v->is_boolean() || v->is_null() || v->is_number_integer();
    };
    struct Facts {
      bool required = false, absent = false;
      std::optional<std::vector<const Json*>> allowed;  // nullopt: any value
      std::vector<const Json*> excluded;
    };
    std::map<std::string, Facts> facts;
    for (const Sub& p : parts) {
      if (has(p, "required") && (*p.s)["required"].is_array())
        for (const Json& r : (*p.s)["required"])
          if (r.is_string()) facts[r.get<std::string>()].required = true;
      if (!has(p, "properties") || !(*p.s)["properties"].is_object()) continue;
      for (const auto& [prop, ps] : (*p.s)["properties"].items()) {
        if (ps.is_boolean()) {
          if (!ps.get<bool>()) facts[prop].absent = true;
          continue;
        }
        if (!ps.is_object()) continue;
        Facts& f = facts[prop];
        for (const char* key : {"const", "enum"}) {
          if (!ps.contains(key)) continue;
          std::vector<const Json*> values;
          if (key[0] == 'c') {
            values.push_back(&ps[key]);
          } else if (ps[key].is_array()) {
            for (const Json& v : ps[key]) values.push_back(&v);
          } else {
            continue;
          }
          if (!std::all_of(values.begin(), values.end(), comparable)) continue;
          if (f.allowed) {
            std::erase_if(*f.allowed, [&](const Json* a) {
              return std::none_of(values.begin(), values.end(), [&](const Json* v) { return *v == *a; });
            });
          } else {
            f.allowed = std::move(values);
          }
        }
        if (ps.contains("not"))
          if (const auto ex = excluded_values(ps["not"]))
            for (const Json* v : *ex)
              if (comparable(v)) f.excluded.push_back(v);
      }
    }
    for (auto& [prop, f] : facts) {
      if (!f.required) continue;
      if (f.absent) return "property \"" + prop + "\" is required and not allowed";
      if (!f.allowed) continue;
      std::erase_if(*f.allowed, [&](const Json* a) {
        return std::any_of(f.excluded.begin(), f.excluded.end(), [&](const Json* e) { return *e == *a; });
      });
      if (f.allowed->empty()) return "property \"" + prop + "\" is required and no value of it is allowed";
    }
    return std::nullopt;
  }

  // property_contradiction of `branch` with the allOfs of its parts opened
  // (up to kOpenedLevels deep; $refs not read: fewer facts, still exact),
  // so that merge_parts drops a contradictory alternative before
  // visit_all_of flattens all of its parts again.
  static constexpr size_t kOpenedLevels = 8;
  static bool opened_contradiction(const std::vector<Sub>& branch) {
    std::vector<Sub> parts;
    std::function<void(const Sub&, size_t)> open = [&](const Sub& sub, size_t level) {
      if (!sub.s->is_object()) return;
      parts.push_back(sub);
      if (level == kOpenedLevels || !has(sub, "allOf") || !(*sub.s)["allOf"].is_array()) return;
      for (const Json& item : (*sub.s)["allOf"]) open({&item, sub.ptr}, level + 1);
    };
    for (const Sub& sub : branch) open(sub, 0);
    return property_contradiction(parts).has_value();
  }

  std::string merge_parts(std::vector<Sub> unique, const std::string& ptr, std::string_view why,
                          const std::string& name, size_t depth, bool exact) {
    if (const auto contradiction = property_contradiction(unique)) fail_empty(why, ptr, *contradiction);
    for (size_t i = 0; i < unique.size(); ++i) {
      for (const char* key : {"anyOf", "oneOf"}) {
        if (!has(unique[i], key)) continue;
        const Json& alts = (*unique[i].s)[key];
        if (!alts.is_array() || alts.empty()) fail_keyword(key, unique[i].ptr, "must be a non-empty array of schemas");
        Sub self = unique[i];
        self.skip |= key[0] == 'a' ? kSkipAnyOf : kSkipOneOf;
        std::vector<std::vector<Sub>> guards(alts.size());
        if (key[0] == 'o') {
          unsigned within = kAllTypes;
          for (size_t k = 0; k < unique.size(); ++k) {
            std::set<std::string> open;
            within &= value_types(k == i ? self : unique[k], depth + 1, open, false);
          }
          guards = one_of_guards(alts, unique[i].ptr, within, depth);
        }
        std::vector<std::string> rules;
        for (size_t a = 0; a < alts.size(); ++a) {
          if (alts[a].is_boolean() && !alts[a].get<bool>()) continue;
          std::vector<Sub> branch = unique;
          branch[i] = self;
          branch.push_back({&alts[a], pointer_child(pointer_child(unique[i].ptr, key), a)});
          branch.insert(branch.end(), guards[a].begin(), guards[a].end());
          if (opened_contradiction(branch)) continue;  // as attempt would find, without distributing it
          const auto rule = attempt([&] { return visit_all_of(branch, ptr, why, alternative_name(name, a), depth + 1, false); },
                                    by_string_guard(guards[a]));
          if (rule && std::find(rules.begin(), rules.end(), *rule) == rules.end()) rules.push_back(*rule);
        }
        if (rules.empty()) fail_empty(key, unique[i].ptr, "no alternative accepts a value");
        return define(name, exact, join(rules, " | ", identity));
      }
    }

    unique = without_excluded_values(std::move(unique), why, ptr);
    unsigned types = kAllTypes;
    std::vector<Sub> rest;
    for (const Sub& sub : unique) {
      if (keys_within(sub, {"type"})) {
        types &= type_mask((*sub.s)["type"], sub.ptr);
      } else {
        rest.push_back(sub);
      }
    }
    if (!types) fail_empty(why, ptr, "the \"type\"s of its parts have no type in common");
    rest = without_excluded_types(std::move(rest), types, why, ptr);
    if (!types) fail_empty(why, ptr, "the \"type\"s of its parts have no type in common");
    if (rest.empty()) {
      synthetic_.push_back(Json::object());
      for (const char* t : {"null", "boolean", "integer", "number", "string", "array", "object"})
        if ((types & type_bits(t)) == type_bits(t)) synthetic_.back()["type"].push_back(t);
      return visit({&synthetic_.back(), ptr}, name, depth + 1, exact);
    }
    if (rest.size() == 1) {
      std::set<std::string> open;
      const unsigned narrowed = value_types(rest[0], depth + 1, open);
      if (!(narrowed & types)) fail_empty(why, ptr, "its \"type\" excludes the schema at " + where(rest[0].ptr));
      if ((narrowed & ~types) && scalar_keys(rest[0])) return visit(merge_scalars(rest, ptr, why, types), name, depth + 1, exact);
      if (narrowed & ~types) {
        fail_keyword(why, ptr, "a \"type\" that narrows the schema at " + where(rest[0].ptr) + " is not supported");
      }
      return visit(rest[0], name, depth + 1, exact);
    }
    const bool enums = std::all_of(rest.begin(), rest.end(), [](const Sub& sub) {
      return (sub.s->contains("enum") || sub.s->contains("const")) && keys_within(sub, {"enum", "const", "type"});
    });
    if (enums) {
      std::vector<const Json*> common = enum_values(rest[0]);
      for (size_t i = 1; i < rest.size(); ++i) {
        const std::vector<const Json*> other = enum_values(rest[i]);
        std::erase_if(common, [&](const Json* v) {
          return std::none_of(other.begin(), other.end(), [&](const Json* o) { return *o == *v; });
        });
      }
      std::erase_if(common, [&](const Json* v) { return !(json_type(*v) & types); });
      if (common.empty()) fail_empty(why, ptr, "no value is in every enum");
      std::vector<std::string> literals;
      for (const Json* v : common) literals.push_back(gbnf_literal(v->dump()));
      return define(name, exact, literals.size() == 1 ? literals[0] : join_in("(", literals, " | ", ")", identity));
    }
    if (std::all_of(rest.begin(), rest.end(), scalar_keys)) return visit(merge_scalars(rest, ptr, why, types), name, depth + 1, exact);
    const bool arrays = std::all_of(rest.begin(), rest.end(), [](const Sub& sub) {
      // additionalItems constrains only items past an items array: beside a
      // schema or no items it is nothing (merge_arrays ignores it).
      const bool inert_additional = !sub.s->contains("items") || !(*sub.s)["items"].is_array();
      return (keys_within(sub, {"type", "items", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
                                "maxContains"}) ||
              (inert_additional && keys_within(sub, {"type", "items", "minItems", "maxItems", "uniqueItems", "contains",
                                                     "minContains", "maxContains", "additionalItems"}))) &&
             (!sub.s->contains("type") || (type_mask((*sub.s)["type"], sub.ptr) & kArray));
    });
    if (arrays) return visit(merge_arrays(rest, ptr, why, types), name, depth + 1, exact);
    for (const Sub& sub : rest) {
      const Json& s = *sub.s;
      const bool object = keys_within(sub, {"properties", "required", "additionalProperties", "patternProperties",
                                            "minProperties", "maxProperties", "propertyNames", "type"}) &&
                          (!s.contains("type") || (type_mask(s["type"], sub.ptr) & kObject));
      if (!object) {
        fail_keyword(why, ptr,
                     "merges only objects (properties, required, additionalProperties, patternProperties, "
                     "minProperties, maxProperties, propertyNames) or enums; "
                     "the schema at " +
                         where(sub.ptr) + " is neither");
      }
    }
    if (!(types & kObject)) fail_empty(why, ptr, "its \"type\" excludes the objects it merges");
    // Each part's propertyNames on the merged object, as visit_object applies one.
    ObjectSpec spec = merge_objects(rest, ptr, why);
    for (const Sub& sub : rest)
      if (sub.s->contains("propertyNames")) property_names(spec, sub, name);
    return emit_object(spec, name, depth, exact);
  }

  // The parts of a conjunction: allOf items opened, a $ref with siblings
  // split from them, schemas that constrain nothing dropped; a lone $ref is
  // read through only when `through_refs` (so allOf [{"$ref": x}] keeps x's
  // rule, recursion included).
  void flatten(const Sub& sub, std::vector<Sub>& out, size_t depth, bool through_refs,
               std::set<std::string>& expanding) {
    enter(sub.ptr, depth);
    const Json& s = *sub.s;
    if (s.is_boolean()) {
      if (s.get<bool>()) return;
      fail_empty("", sub.ptr, "the schema false (no value is valid)");
    }
    if (!s.is_object()) fail(sub.ptr, "a schema must be an object or a boolean");
    check_keywords(s, sub.ptr);
    const std::vector<std::string> keys = own_keys(sub);
    if (keys.empty()) return;
    if (std::any_of(std::begin(kDependencyKeys), std::end(kDependencyKeys), [&](std::string_view k) { return has(sub, k); })) {
      for (const Sub& part : dependency_parts(sub, depth)) flatten(part, out, depth + 1, through_refs, expanding);
      flatten({sub.s, sub.ptr, sub.skip | kSkipDependencies}, out, depth, through_refs, expanding);
      return;
    }
    if (has(sub, "not") && !excluded_values(s["not"]) && !excluded_patterns(s["not"])) {
      // not S, other than of enum/const: a sound subset, the values of
      // negations(S) (each fails S), beside the node's other keywords.
      // Those of types the node's other keywords exclude are left out: where
      // none is left, `not` is what cannot be written.
      // (Strings told apart by a pattern or value only where no other
      // negation is left: see negations.)
      std::vector<Json> ns;
      std::set<std::string> open;
      const unsigned types = value_types({sub.s, sub.ptr, sub.skip | kSkipNot}, depth + 1, open, false);
      for (const bool strings : {false, true}) {
        negations({&s["not"], pointer_child(sub.ptr, "not")}, ns, kNegationLevels, depth + 1, strings);
        std::erase_if(ns, [&](const Json& n) {
          std::set<std::string> seen;
          return !(value_types({&n, sub.ptr}, depth + 1, seen, false) & types);
        });
        if (!ns.empty()) break;
      }
      if (ns.empty()) throw Error(Errc::invalid_argument, "json_schema: unsupported keyword \"not\" at " + where(sub.ptr));
      flatten({&interned(ns.size() == 1 ? std::move(ns[0]) : Json{{"anyOf", std::move(ns)}}), sub.ptr}, out, depth + 1,
              through_refs, expanding);
      flatten({sub.s, sub.ptr, sub.skip | kSkipNot}, out, depth, through_refs, expanding);
      return;
    }
    const bool ref = has(sub, "$ref"), all = has(sub, "allOf");
    if ((!ref && !all) || (ref && keys.size() == 1 && !through_refs)) {
      out.push_back(sub);
      return;
    }
    if (ref) {
      const auto [target, tptr] = resolve(s["$ref"], sub.ptr);
      if (!expanding.insert(tptr).second) {
        fail_keyword("$ref", sub.ptr, "\"" + s["$ref"].get<std::string>() + "\" is part of its own conjunction");
      }
      flatten({target, tptr}, out, depth + 1, true, expanding);
      expanding.erase(tptr);
    }
    if (all) {
      const Json& items = s["allOf"];
      if (!items.is_array() || items.empty()) fail_keyword("allOf", sub.ptr, "must be a non-empty array of schemas");
      for (size_t i = 0; i < items.size(); ++i) {
        flatten({&items[i], pointer_child(pointer_child(sub.ptr, "allOf"), i)}, out, depth + 1, through_refs,
                expanding);
      }
    }
    const Sub self{sub.s, sub.ptr, sub.skip | kSkipRef | kSkipAllOf};
    if (!own_keys(self).empty()) out.push_back(self);
  }

  // dependencies (draft 4-7), dependentRequired and dependentSchemas
  // (2019-09) as parts of a conjunction, exactly: for a property t whose
  // presence requires the properties D (or the schema S), an object either
  // lacks t or has t and D (or has t and is valid against S):
  //   {"anyOf": [{"properties": {t: false}}, {"required": [t, D...]}]}
  //   {"anyOf": [{"properties": {t: false}}, {"allOf": [{"required": [t]}, S]}]}
  // and where the node requires t itself, only {"required": D} (or S). Each
  // anyOf doubles the branches, so at most kMaxDependencies of them; with
  // more, dependency_cases.
  static constexpr size_t kMaxDependencies = 4;
  std::vector<Sub> dependency_parts(const Sub& sub, size_t depth) {
    std::vector<Sub> out;
    const Json& s = *sub.s;
    std::set<std::string> required;
    if (s.contains("required") && s["required"].is_array())
      for (const Json& r : s["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
    size_t n_optional = 0;
    for (const std::string_view key : kDependencyKeys)
      if (s.contains(key) && s[key].is_object())
        for (const auto& [t, d] : s[key].items()) n_optional += !required.count(t);
    if (n_optional > kMaxDependencies) return {dependency_cases(sub, required, depth)};
    n_optional = 0;
    for (const std::string_view key : kDependencyKeys) {
      if (!s.contains(key)) continue;
      const Json& deps = s[key];
      const std::string kptr = pointer_child(sub.ptr, key);
      if (!deps.is_object()) fail_keyword(key, sub.ptr, "must be an object");
      for (const auto& [t, d] : deps.items()) {
        enter(kptr, depth + 1);
        const bool names = dependency_is_names(key, kptr, t, d);
        Json then = Json::object();
        if (names) {
          Json r = Json::array();
          if (!required.count(t)) r.push_back(t);
          for (const Json& n : d) {
            if (!n.is_string()) fail_keyword(key, kptr, "\"" + t + "\" must be an array of property names");
            r.push_back(n);
          }
          then["required"] = std::move(r);
        } else if (required.count(t)) {
          then = d;
        } else {
          then["allOf"] = Json::array({Json::object({{"required", Json::array({t})}}), d});
        }
        const Json* part = nullptr;
        if (required.count(t)) {
          part = &interned(std::move(then));
        } else {
          if (++n_optional > kMaxDependencies)
            fail_keyword(key, sub.ptr, "more than " + std::to_string(kMaxDependencies) +
                                           " optional properties whose presence requires more are not supported");
          part = &interned(Json::object(
              {{"anyOf", Json::array({Json::object({{"properties", Json::object({{t, false}})}}), std::move(then)})}}));
        }
        out.push_back({part, pointer_child(kptr, t)});
      }
    }
    return out;
  }

  // Dependencies of more than kMaxDependencies optional properties, exactly,
  // as one anyOf of cases instead of an anyOf per property (2^n branches):
  // each dependency "t needs X" is clauses over literals (a property
  // present, absent, or absent or of values E: what {"properties": {p:
  // {"enum": E}}} says where the node's own p lists its values), "t absent
  // or C" for each clause C of X: names are one clause each; a schema of
  // required, properties false or of values, allOf and anyOf of those (anyOf
  // distributed into clauses, at most kMaxDependencyClauses), "type"
  // "object" aside; any other schema is kept whole, a part of the cases
  // where t is present. Cases split on one property at a time (present or
  // absent; absent or each value it lists), each clause dropped once true,
  // its last open literal made true; a case with no open clause and every
  // kept schema's t decided is written: its present properties required,
  // absent ones false, values as an enum, the kept schemas of present ts.
  // Every object valid against the dependencies is in exactly the cases
  // its properties decide, and only such objects are: exact. At most
  // kMaxDependencyCases cases.
  static constexpr size_t kMaxDependencyCases = 64;
  static constexpr size_t kMaxDependencyClauses = 64;
  struct DepLiteral {
    std::string prop;
    int kind;                 // 0 present, 1 absent, 2 absent or one of `values`
    std::vector<size_t> values;  // indexes into the property's values
  };
  using DepClause = std::vector<DepLiteral>;
  // The clauses a schema S is (a conjunction of them), or nullopt where it
  // is none of the forms above. `values`: the listed values of the node's
  // properties that list them.
  std::optional<std::vector<DepClause>> dependency_clauses(
      const Json& x, const std::map<std::string, std::vector<const Json*>>& values) const {
    if (x.is_boolean()) return x.get<bool>() ? std::optional<std::vector<DepClause>>(std::vector<DepClause>{})
                                             : std::optional<std::vector<DepClause>>(std::vector<DepClause>{{}});
    if (!x.is_object()) return std::nullopt;
    std::vector<DepClause> out;
    for (const auto& [k, v] : x.items()) {
      if (is_annotation(k)) continue;
      if (k == "type") {
        if (v != "object") return std::nullopt;
      } else if (k == "required") {
        if (!v.is_array()) return std::nullopt;
        for (const Json& r : v) {
          if (!r.is_string()) return std::nullopt;
          out.push_back({DepLiteral{r.get<std::string>(), 0, {}}});
        }
      } else if (k == "properties") {
        if (!v.is_object()) return std::nullopt;
        for (const auto& [name, ps] : v.items()) {
          if (ps == false) {
            out.push_back({DepLiteral{name, 1, {}}});
            continue;
          }
          auto listed = values.find(name);
          if (listed == values.end() || !ps.is_object()) return std::nullopt;
          std::vector<const Json*> allowed;
          for (const auto& [pk, pv] : ps.items()) {
            if (is_annotation(pk)) continue;
            if (pk == "const") {
              allowed.push_back(&pv);
            } else if (pk == "enum" && pv.is_array()) {
              for (const Json& e : pv) allowed.push_back(&e);
            } else {
              return std::nullopt;
            }
          }
          if (ps.contains("const") && ps.contains("enum")) return std::nullopt;
          DepLiteral lit{name, 2, {}};
          for (size_t i = 0; i < listed->second.size(); ++i)
            if (std::any_of(allowed.begin(), allowed.end(), [&](const Json* a) { return *a == *listed->second[i]; }))
              lit.values.push_back(i);
          out.push_back({std::move(lit)});
        }
      } else if (k == "allOf" || k == "anyOf") {
        if (!v.is_array() || v.empty()) return std::nullopt;
        std::vector<DepClause> acc = k == "allOf" ? std::vector<DepClause>{} : std::vector<DepClause>{{}};
        bool first = true;
        for (const Json& part : v) {
          const auto cs = dependency_clauses(part, values);
          if (!cs) return std::nullopt;
          if (k == "allOf") {
            acc.insert(acc.end(), cs->begin(), cs->end());
          } else {
            // (A1 & A2) | (B1 & B2) = (A1 | B1) & (A1 | B2) & (A2 | B1) & (A2 | B2)
            std::vector<DepClause> product;
            for (const DepClause& a : first ? std::vector<DepClause>{{}} : acc)
              for (const DepClause& b : *cs) {
                DepClause c = a;
                c.insert(c.end(), b.begin(), b.end());
                product.push_back(std::move(c));
              }
            if (cs->empty()) product.clear();  // an alternative that always holds
            acc = std::move(product);
            if (cs->empty()) break;
          }
          first = false;
          if (acc.size() > kMaxDependencyClauses) return std::nullopt;
        }
        out.insert(out.end(), acc.begin(), acc.end());
      } else {
        return std::nullopt;
      }
      if (out.size() > kMaxDependencyClauses) return std::nullopt;
    }
    return out;
  }

  Sub dependency_cases(const Sub& sub, const std::set<std::string>& required, size_t depth) {
    const Json& s = *sub.s;
    // The values of the node's own properties that list them.
    std::map<std::string, std::vector<const Json*>> values;
    if (s.contains("properties") && s["properties"].is_object())
      for (const auto& [name, ps] : s["properties"].items())
        if (const auto v = finite_values({&ps, sub.ptr})) values[name] = *v;
    std::vector<DepClause> clauses;
    std::vector<std::pair<std::string, const Json*>> kept;  // t, a schema kept whole
    const char* first_key = nullptr;
    for (const std::string_view key : kDependencyKeys) {
      if (!s.contains(key)) continue;
      const Json& deps = s[key];
      const std::string kptr = pointer_child(sub.ptr, key);
      if (!deps.is_object()) fail_keyword(key, sub.ptr, "must be an object");
      if (!first_key) first_key = key.data();
      for (const auto& [t, d] : deps.items()) {
        enter(kptr, depth + 1);
        const bool names = dependency_is_names(key, kptr, t, d);
        std::optional<std::vector<DepClause>> cs;
        if (names) {
          cs.emplace();
          for (const Json& n : d) {
            if (!n.is_string()) fail_keyword(key, kptr, "\"" + t + "\" must be an array of property names");
            cs->push_back({DepLiteral{n.get<std::string>(), 0, {}}});
          }
        } else {
          cs = dependency_clauses(d, values);
        }
        if (!cs) {
          kept.emplace_back(t, &d);
          continue;
        }
        for (DepClause& c : *cs) {
          c.push_back(DepLiteral{t, 1, {}});
          clauses.push_back(std::move(c));
        }
      }
    }
    // A case: each property's state: -2 unknown, -1 absent, 0 present (value
    // unknown), 1 + i present with values[prop][i].
    using State = std::map<std::string, long>;
    auto state_of = [](const State& st, const std::string& p) {
      auto it = st.find(p);
      return it == st.end() ? -2L : it->second;
    };
    // A literal's truth in a case: 1 true, 0 false, -1 open.
    auto truth = [&](const DepLiteral& l, const State& st) -> int {
      const long v = state_of(st, l.prop);
      if (v == -2) return -1;
      if (l.kind == 0) return v >= 0 ? 1 : 0;
      if (l.kind == 1) return v == -1 ? 1 : 0;
      if (v == -1) return 1;
      if (v == 0) return -1;
      return std::find(l.values.begin(), l.values.end(), static_cast<size_t>(v - 1)) != l.values.end() ? 1 : 0;
    };
    Json cases = Json::array();
    State start;
    for (const std::string& r : required) start[r] = 0;
    std::function<void(State)> split = [&](State st) {
      enter(sub.ptr, depth + 1);  // bounds the cases tried, dead ends included
      // Unit literals made true until nothing changes; a false clause ends the case.
      for (bool changed = true; changed;) {
        changed = false;
        for (const DepClause& c : clauses) {
          const DepLiteral* open = nullptr;
          size_t n_open = 0;
          bool holds = false;
          for (const DepLiteral& l : c) {
            const int v = truth(l, st);
            if (v == 1) holds = true;
            if (v == -1) ++n_open, open = &l;
          }
          if (holds) continue;
          if (n_open == 0) return;  // no object of this case satisfies the dependencies
          if (n_open == 1 && open->kind != 2) {
            st[open->prop] = open->kind == 0 ? 0 : -1;
            changed = true;
          } else if (n_open == 1 && open->values.empty()) {
            st[open->prop] = -1;
            changed = true;
          }
        }
      }
      // The property to split on: of the first open clause, else a kept schema's t.
      std::string prop;
      bool by_value = false;
      for (const DepClause& c : clauses) {
        if (std::any_of(c.begin(), c.end(), [&](const DepLiteral& l) { return truth(l, st) == 1; })) continue;
        for (const DepLiteral& l : c) {
          if (truth(l, st) != -1) continue;
          prop = l.prop;
          by_value = l.kind == 2;
          break;
        }
        break;
      }
      if (prop.empty())
        for (const auto& [t, x] : kept)
          if (state_of(st, t) == -2) {
            prop = t;
            break;
          }
      if (prop.empty()) {
        if (cases.size() >= kMaxDependencyCases)
          fail_keyword(first_key, sub.ptr, "more than " + std::to_string(kMaxDependencyCases) +
                                               " cases of the properties whose presence requires more are not supported");
        Json part = Json::object();
        Json all = Json::array();
        for (const auto& [p, v] : st) {
          if (v >= 0 && !required.count(p)) part["required"].push_back(p);
          if (v == -1) part["properties"][p] = false;
          if (v >= 1) {
            const Json& value = *values.at(p)[static_cast<size_t>(v - 1)];
            part["properties"][p] = Json::object({{"enum", Json::array({value})}});
          }
        }
        for (const auto& [t, x] : kept)
          if (state_of(st, t) >= 0) all.push_back(*x);
        if (!all.empty()) {
          all.insert(all.begin(), std::move(part));
          part = Json::object({{"allOf", std::move(all)}});
        }
        cases.push_back(std::move(part));
        return;
      }
      const long now = state_of(st, prop);
      if (by_value) {
        if (now == -2) {
          State absent = st;
          absent[prop] = -1;
          split(std::move(absent));
        }
        for (size_t i = 0; i < values.at(prop).size(); ++i) {
          State one = st;
          one[prop] = static_cast<long>(i) + 1;
          split(std::move(one));
        }
        return;
      }
      for (const long v : {0L, -1L}) {
        State next = st;
        next[prop] = v;
        split(std::move(next));
      }
    };
    split(start);
    if (cases.empty()) fail_empty(first_key, sub.ptr, "no object satisfies the dependencies");
    synthetic_.push_back(cases.size() == 1 ? std::move(cases[0]) : Json::object({{"anyOf", std::move(cases)}}));
    return {&synthetic_.back(), pointer_child(sub.ptr, first_key)};
  }

  // Whether dependency `t` of keyword `key` (dependencies, dependentRequired,
  // dependentSchemas, at kptr) lists property names (else it is a schema);
  // throws naming the keyword where its form does not fit the keyword.
  static bool dependency_is_names(std::string_view key, const std::string& kptr, const std::string& t, const Json& d) {
    const bool names = d.is_array();
    if (names ? key == "dependentSchemas" : key == "dependentRequired")
      fail_keyword(key, kptr, "\"" + t + "\" must be " + (names ? "a schema" : "an array of property names"));
    if (!names && !d.is_object() && !d.is_boolean())
      fail_keyword(key, kptr, "\"" + t + "\" must be an array of property names or a schema");
    return names;
  }

  // `not` of enum/const in a conjunction, exactly: the values of the parts
  // that list them (enum/const) without the excluded ones, the `not`s
  // removed. Where no part lists values the grammar cannot write "any value
  // but these": unsatisfiable for the grammar (a sound subset: nothing
  // written; an anyOf branch is dropped, elsewhere a 400 naming not).
  std::vector<Sub> without_excluded_values(std::vector<Sub> parts, std::string_view why, const std::string& ptr) {
    std::vector<Json> excluded;
    for (Sub& p : parts) {
      if (!has(p, "not")) continue;
      const auto ex = excluded_values((*p.s)["not"]);
      if (!ex) continue;  // (check_keywords refused other forms)
      for (const Json* v : *ex) excluded.push_back(*v);
      Json copy = *p.s;
      copy.erase("not");
      p.s = &interned(std::move(copy));
    }
    if (excluded.empty()) return parts;
    std::erase_if(parts, [](const Sub& p) { return own_keys(p).empty(); });
    auto listed = std::find_if(parts.begin(), parts.end(), [](const Sub& p) { return finite_values(p).has_value(); });
    if (listed == parts.end()) {
      fail_empty("not", ptr, "of enum/const beside no enum/const that lists the values allowed (" + std::string(why) +
                                 "): the grammar writes no value but these only where it lists them");
    }
    Json copy = *listed->s;
    Json kept = Json::array();
    for (const Json* v : enum_values(*listed))
      if (std::find(excluded.begin(), excluded.end(), *v) == excluded.end()) kept.push_back(*v);
    if (kept.empty()) fail_empty("not", ptr, "excludes every value the enum/const beside it allows");
    copy.erase("const");
    copy["enum"] = std::move(kept);
    listed->s = &interned(std::move(copy));
    return parts;
  }

  // The parts of a conjunction without the keywords of types no value of it
  // has (exactly: {"minimum": 0} constrains only numbers, so beside
  // {"type": "object"} it constrains nothing): `types` and each part's own
  // "type" and const/enum values bound the types; a part left with nothing
  // but "type" joins `types`, one left with nothing is dropped.
  std::vector<Sub> without_excluded_types(std::vector<Sub> parts, unsigned& types, std::string_view why,
                                         const std::string& ptr) {
    unsigned within = types;
    for (const Sub& p : parts) {
      if (p.s->contains("type")) within &= type_mask((*p.s)["type"], p.ptr);
      if (const auto values = finite_values(p)) {
        unsigned t = 0;
        for (const Json* v : *values) t |= json_type(*v);
        within &= t;
      }
    }
    if (!within) fail_empty(why, ptr, "the \"type\"s and values of its parts have no type in common");
    auto key_types = [](const std::string& k) -> unsigned {
      if (in(kObjectKeys, k)) return kObject;
      if (in(kArrayKeys, k) || k == "uniqueItems") return kArray;
      if (in(kStringKeys, k)) return kString;
      if (in(kNumberKeys, k)) return kNumber;
      return kAllTypes;
    };
    std::vector<Sub> out;
    for (Sub& p : parts) {
      std::vector<std::string> drop;
      for (const std::string& k : own_keys(p))
        if (!(key_types(k) & within)) drop.push_back(k);
      if (drop.empty()) {
        out.push_back(std::move(p));
        continue;
      }
      Json copy = *p.s;
      for (const std::string& k : drop) copy.erase(k);
      const Sub q{&interned(std::move(copy)), p.ptr, p.skip};
      const std::vector<std::string> left = own_keys(q);
      if (left.size() == 1 && left[0] == "type") {
        types &= type_mask((*q.s)["type"], q.ptr);
      } else if (!left.empty()) {
        out.push_back(q);
      }
    }
    return out;
  }

  static bool scalar_keys(const Sub& sub) {
    return keys_within(sub, {"type", "enum", "const", "pattern", "minLength", "maxLength", "format", "minimum", "maximum",
                             "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "not"}) &&
           (!has(sub, "not") || has_string_not(sub));
  }

  // Strings, numbers and enums merged (a $ref to a string beside maxLength,
  // allOf [{"format": "uri"}, {"pattern": "^https?://"}], integer bounds
  // split over parts): one schema, exactly: the types in common, the values
  // in every enum/const, the largest minLength and lower bound, the smallest
  // maxLength and upper bound, every pattern (several: one pattern of
  // their lookaheads), the one known format and multipleOf (two different
  // ones throw naming the keyword: their conjunction is not written), every
  // `not` of patterns (one `not` of all their patterns);
  // formats the converter does not know are annotations.
  Sub merge_scalars(const std::vector<Sub>& parts, const std::string& ptr, std::string_view why, unsigned types) {
    Json merged = Json::object();
    std::optional<std::vector<Json>> values;
    const Json *lo = nullptr, *hi = nullptr, *min_len = nullptr, *max_len = nullptr;
    bool lo_ex = false, hi_ex = false;
    std::map<std::string, const Json*> single;  // pattern, format, multipleOf: one value each
    Json excluded = Json::array();              // the `not`s' patterns
    std::vector<std::string> patterns;          // every part's, each once
    std::optional<std::string> with_lookahead;  // the one pattern with lookaheads of its own
    auto number = [](const Json& v, const char* k, const std::string& at) -> long double {
      if (!v.is_number()) fail_keyword(k, at, "must be a number");
      return v.get<long double>();
    };
    auto bound = [&](const Json& v, bool exclusive, bool lower, const char* k, const std::string& at) {
      const Json*& b = lower ? lo : hi;
      bool& ex = lower ? lo_ex : hi_ex;
      const long double x = number(v, k, at);
      if (!b || (lower ? x > b->get<long double>() : x < b->get<long double>()) ||
          (x == b->get<long double>() && exclusive)) {
        b = &v;
        ex = exclusive;
      }
    };
    for (const Sub& p : parts) {
      const Json& s = *p.s;
      if (s.contains("type")) types &= type_mask(s["type"], p.ptr);
      if (const auto fv = finite_values(p)) {
        std::vector<Json> mine;
        for (const Json* v : *fv) mine.push_back(*v);
        if (s.contains("enum") && s.contains("const")) std::erase_if(mine, [&](const Json& v) { return !(v == s["const"]); });
        if (values) std::erase_if(*values, [&](const Json& v) { return std::find(mine.begin(), mine.end(), v) == mine.end(); });
        else values = std::move(mine);
      }
      auto draft4 = [&](const char* key) { return s.contains(key) && s[key].is_boolean() && s[key].get<bool>(); };
      if (s.contains("minimum")) bound(s["minimum"], draft4("exclusiveMinimum"), true, "minimum", p.ptr);
      if (s.contains("maximum")) bound(s["maximum"], draft4("exclusiveMaximum"), false, "maximum", p.ptr);
      if (s.contains("exclusiveMinimum") && !s["exclusiveMinimum"].is_boolean())
        bound(s["exclusiveMinimum"], true, true, "exclusiveMinimum", p.ptr);
      if (s.contains("exclusiveMaximum") && !s["exclusiveMaximum"].is_boolean())
        bound(s["exclusiveMaximum"], true, false, "exclusiveMaximum", p.ptr);
      if (s.contains("minLength") && (!min_len || number(s["minLength"], "minLength", p.ptr) > min_len->get<long double>()))
        min_len = &s["minLength"];
      if (s.contains("maxLength") && (!max_len || number(s["maxLength"], "maxLength", p.ptr) < max_len->get<long double>()))
        max_len = &s["maxLength"];
      if (const auto ex = has(p, "not") ? excluded_patterns(s["not"]) : std::nullopt)
        for (const std::string& x : *ex)
          if (Json e{{"pattern", x}}; std::find(excluded.begin(), excluded.end(), e) == excluded.end())
            excluded.push_back(std::move(e));
      if (s.contains("pattern") && s["pattern"].is_string() &&
          std::find(patterns.begin(), patterns.end(), s["pattern"].get<std::string>()) == patterns.end()) {
        bool look = false;
        try {
          look = schema::check_pattern(s["pattern"].get<std::string>(), limits_.max_nesting, limits_.max_repetition);
        } catch (const schema::PatternError& e) {
          fail_keyword("pattern", p.ptr, e.what());
        }
        if (look && with_lookahead) {
          // Their conjunction asserts all but one pattern as lookaheads,
          // which do not nest: one pattern with lookaheads of its own, the
          // one left as it is, at most.
          fail_keyword("pattern", p.ptr,
                       "with a lookahead, beside another with one in one conjunction (\"" + std::string(why) +
                           "\"), is not supported");
        }
        if (look) {
          with_lookahead = s["pattern"].get<std::string>();
        } else {
          patterns.push_back(s["pattern"].get<std::string>());
        }
      }
      for (const char* k : {"pattern", "format", "multipleOf"}) {
        if (!s.contains(k) || (k[0] == 'f' && !is_known_format(s[k]))) continue;
        if (k[0] == 'p' && s[k].is_string()) continue;  // patterns: all of them, below
        const Json*& one = single[k];
        if (one && !(*one == s[k]))
          fail_keyword(k, p.ptr, "two different values in one conjunction (\"" + std::string(why) + "\") are not supported");
        one = &s[k];
      }
    }
    if (!types) fail_empty(why, ptr, "the \"type\"s of its parts have no type in common");
    if ((types & kFraction) && !(types & kInteger))
      fail_keyword(why, ptr, "its parts' \"type\"s leave numbers that are not integers, which no type names");
    if (types != kAllTypes) {
      for (const char* t : {"null", "boolean", "integer", "number", "string", "array", "object"})
        if ((types & type_bits(t)) == type_bits(t) && !(t[0] == 'i' && (types & kNumber) == kNumber))
          merged["type"].push_back(t);
    }
    if (values) {
      if (values->empty()) fail_empty(why, ptr, "no value is in every enum");
      merged["enum"] = std::move(*values);
    }
    if (lo) merged[lo_ex ? "exclusiveMinimum" : "minimum"] = *lo;
    if (hi) merged[hi_ex ? "exclusiveMaximum" : "maximum"] = *hi;
    if (min_len) merged["minLength"] = *min_len;
    if (max_len) merged["maxLength"] = *max_len;
    for (const auto& [k, v] : single) merged[k] = *v;
    if (with_lookahead) patterns.push_back(*with_lookahead);  // last: searched, not asserted
    if (patterns.size() == 1) merged["pattern"] = patterns[0];
    if (patterns.size() > 1) {
      // Several: one pattern that asserts each but the last from the start
      // (a lookahead searching the whole string for it: `[^]` is every code
      // point) and then searches for the last, so every reader of
      // "pattern" (the string's automaton, enum values, oneOf's proofs)
      // takes their conjunction. Each parsed alone first, so no pattern's
      // text can pair with another's.
      std::string all = "^";
      for (size_t i = 0; i + 1 < patterns.size(); ++i) all += "(?=[^]*?(?:" + patterns[i] + "))";
      merged["pattern"] = all + "[^]*?(?:" + patterns.back() + ")";
    }
    if (!excluded.empty()) merged["not"] = excluded.size() == 1 ? excluded[0] : Json{{"anyOf", std::move(excluded)}};
    synthetic_.push_back(std::move(merged));
    return {&synthetic_.back(), ptr};
  }

  // Arrays merged (a $ref to an array beside maxItems, allOf of array
  // parts): one array schema whose items are every part's items (an allOf
  // where several give them), the largest minItems and the smallest maxItems,
  // uniqueItems where a part has it.
  // `types`: what the parts' own "type"s and the type-only parts allow.
  Sub merge_arrays(const std::vector<Sub>& parts, const std::string& ptr, std::string_view why, unsigned types) {
    for (const Sub& p : parts)
      if (p.s->contains("type")) types &= type_mask((*p.s)["type"], p.ptr);
    if (!(types & kArray)) fail_empty(why, ptr, "its \"type\" excludes the arrays it merges");
    Json merged = Json::object({{"type", "array"}});
    Json items = Json::array();
    std::optional<uint64_t> lo, hi;
    for (const Sub& p : parts) {
      const Json& s = *p.s;
      if (s.contains("items")) {
        if (!s["items"].is_object() && !s["items"].is_boolean())
          fail_keyword("items", p.ptr, "must be a schema (an array of schemas is prefixItems' older spelling, "
                                        "not supported in a merge)");
        items.push_back(s["items"]);
      }
      for (const char* k : {"minItems", "maxItems"}) {
        if (!s.contains(k)) continue;
        const Json& v = s[k];
        if (!v.is_number() || v.get<double>() < 0 || std::floor(v.get<double>()) != v.get<double>() ||
            v.get<double>() > 1e18)
          fail_keyword(k, p.ptr, "must be a non-negative integer");
        const auto n = v.is_number_float() ? static_cast<uint64_t>(v.get<double>()) : v.get<uint64_t>();
        auto& bound = k[1] == 'i' ? lo : hi;
        bound = !bound ? n : k[1] == 'i' ? std::max(*bound, n) : std::min(*bound, n);
      }
    }
    if (items.size() == 1) merged["items"] = items[0];
    if (items.size() > 1) merged["items"] = Json::object({{"allOf", std::move(items)}});
    // One part's contains (with its minContains/maxContains, which constrain
    // nothing without it); two would need two matching items' placements.
    const Sub* with_contains = nullptr;
    for (const Sub& p : parts) {
      if (!p.s->contains("contains")) continue;
      if (with_contains)
        fail_keyword("contains", p.ptr, "in more than one part of " + std::string(why) + " is not supported");
      with_contains = &p;
      for (const char* k : {"contains", "minContains", "maxContains"})
        if (p.s->contains(k)) merged[k] = (*p.s)[k];
    }
    if (std::any_of(parts.begin(), parts.end(), [](const Sub& p) { return p.s->contains("uniqueItems") && (*p.s)["uniqueItems"] == true; }))
      merged["uniqueItems"] = true;
    if (lo) merged["minItems"] = *lo;
    if (hi) merged["maxItems"] = *hi;
    if (lo && hi && *lo > *hi) fail_empty(why, ptr, "minItems over maxItems among the arrays it merges");
    return {&interned(std::move(merged)), ptr};
  }

  // `s` kept among the synthetic schemas, at the address an equal schema
  // got before: a merge met again inside its own items (a recursive array
  // merged with its siblings) then has the same parts as the outer one, as
  // merge's recursion check needs.
  const Json& interned(Json s) {
    auto [it, added] = interned_.try_emplace(s.dump(), nullptr);
    if (added) {
      synthetic_.push_back(std::move(s));
      it->second = &synthetic_.back();
    }
    return *it->second;
  }

  // Objects merged: a property's schemas are those of the parts that
  // declare it or have patternProperties it matches, and the
  // additionalProperties of the parts that do neither (a false one forbids
  // it); extra properties need every part's consent. With no
  // additionalProperties anywhere, llama.cpp's default: none beside the
  // declared properties; with patternProperties in any part, none either (a
  // sound subset: an extra key might match a pattern whose schema it would
  // then need).
  ObjectSpec merge_objects(const std::vector<Sub>& parts, const std::string& ptr, std::string_view why) {
    std::vector<std::string> names;
    auto add_name = [&](const std::string& n) {
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    };
    bool declared = false;
    for (const Sub& p : parts) {
      if (!p.s->contains("properties")) continue;
      declared = true;
      const Json& props = (*p.s)["properties"];
      if (!props.is_object()) fail_keyword("properties", p.ptr, "must be an object");
      for (const auto& [k, v] : props.items()) add_name(k);
    }
    std::vector<std::string> required;
    for (const Sub& p : parts) {
      if (!p.s->contains("required")) continue;
      const Json& r = (*p.s)["required"];
      if (!r.is_array()) fail_keyword("required", p.ptr, "must be an array of strings");
      for (const Json& v : r) {
        if (!v.is_string()) fail_keyword("required", p.ptr, "must be an array of strings");
        add_name(v.get<std::string>());
        required.push_back(v.get<std::string>());
      }
    }
    // Each part's additionalProperties: absent or trivial (nullopt), false
    // (null Sub), or a schema.
    std::vector<std::optional<Sub>> extra(parts.size());
    bool extra_forbidden = false;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i].s->contains("additionalProperties")) continue;
      const Json& a = (*parts[i].s)["additionalProperties"];
      if (is_trivial(a)) continue;
      if (a.is_boolean()) {
        extra[i] = Sub{nullptr, ""};
        extra_forbidden = true;
      } else if (a.is_object()) {
        extra[i] = Sub{&a, pointer_child(parts[i].ptr, "additionalProperties")};
      } else {
        fail_keyword("additionalProperties", parts[i].ptr, "must be a boolean or a schema");
      }
    }
    std::vector<std::vector<PatternProperty>> patterns;
    bool any_patterns = false;
    for (const Sub& p : parts) {
      patterns.push_back(pattern_properties(p));
      any_patterns = any_patterns || !patterns.back().empty();
    }
    ObjectSpec spec;
    for (const std::string& n : names) {
      PropSpec prop{n, {}, std::find(required.begin(), required.end(), n) != required.end(), false};
      for (size_t i = 0; i < parts.size(); ++i) {
        const Json& s = *parts[i].s;
        const std::vector<const PatternProperty*> matches = matching(patterns[i], n, parts[i]);
        add_pattern_schemas(prop, matches, parts[i]);
        if (!matches.empty() && !(s.contains("properties") && s["properties"].contains(n))) continue;
        if (s.contains("properties") && s["properties"].contains(n)) {
          const Json& v = s["properties"][n];
          if (v.is_boolean() && !v.get<bool>()) {
            prop.forbidden = true;
          } else if (!is_trivial(v)) {
            prop.schemas.push_back({&v, pointer_child(pointer_child(parts[i].ptr, "properties"), n)});
          }
        } else if (extra[i]) {
          if (extra[i]->s) {
            prop.schemas.push_back(*extra[i]);
          } else {
            prop.forbidden = true;
          }
        }
      }
      if (prop.forbidden && prop.required) {
        fail_empty(why, ptr, "property \"" + n + "\" is required by one part and forbidden by another");
      }
      spec.props.push_back(std::move(prop));
    }
    // The largest minProperties and smallest maxProperties, enforced as
    // emit_object enforces one object's.
    spec.ptr = ptr;
    for (const Sub& p : parts) {
      if (p.s->contains("minProperties")) spec.min_props = std::max(spec.min_props, count(p, "minProperties"));
      if (p.s->contains("maxProperties")) spec.max_props = std::min(spec.max_props, count(p, "maxProperties"));
    }
    if (extra_forbidden || any_patterns) {
      spec.extra = ObjectSpec::kNone;
    } else {
      for (const auto& e : extra)
        if (e) spec.extra_schemas.push_back(*e);
      spec.extra = !spec.extra_schemas.empty() ? ObjectSpec::kSchemas : declared ? ObjectSpec::kNone : ObjectSpec::kAny;
    }
    return spec;
  }

  const Json& root_;
  const GrammarLimits& limits_;
  const schema::RefIndex& refs_;              // what resolve_refs found (for errors and unresolved fragments)
  const std::map<std::string, Json>& moved_;  // resolved targets not in root_ as written, rewritten alone
  std::map<std::string, std::string> rules_;      // name -> body, written in name order
  std::map<std::string, std::string> ref_rules_;  // a $ref's target pointer -> its rule
  std::map<std::string, size_t> refs_open_;       // targets being converted -> struct_depth_ then
  std::vector<std::string> added_;                // rules_ keys in the order made (for attempt)
  // Every pattern automaton of the conversion: at most kMaxPatternStates
  // states each (max_rules if lower), and max_states^2 / 4 steps in all.
  mutable schema::AutomatonBudget automata_;  // (spent by const proofs too)
  // bounded_pattern's rules: "min,max,pattern" -> its first rule's name and body
  std::map<std::string, std::pair<std::string, std::string>> bounded_patterns_;
  // pattern_dfa's results for enum values, by pattern and reading (kWide 1):
  // each built once, so the same patterns across a distributed anyOf spend
  // the budget once.
  mutable std::map<std::pair<std::string, int>, schema::PatternDfa> dfas_;
  std::set<const Json*> string_guards_;  // negation_guard's guards of string negations
  std::vector<std::string> added_refs_;           // ref_rules_ keys in the order made
  // merge's conjunctions, by their parts (node and skipped keywords), sorted.
  struct MergeKey {
    std::vector<std::pair<const Json*, unsigned>> parts;  // but those of a bare "type"
    unsigned types;                                       // theirs
    auto operator<=>(const MergeKey&) const = default;
  };
  struct RecursiveMerge {  // not an Error: attempt lets it through
    MergeKey key;
  };
  std::map<MergeKey, std::string> merge_rules_;  // conjunctions made rules -> the rule
  struct OpenMerge {
    size_t struct_depth, refs;  // struct_depth_ and added_refs_.size() when opened
  };
  std::map<MergeKey, OpenMerge> merges_open_;    // conjunctions being converted
  std::set<MergeKey> merges_recursive_;          // conjunctions met inside themselves (kept by undo)
  std::vector<MergeKey> added_merges_;           // merge_rules_ keys in the order made
  std::deque<Json> synthetic_;                    // schemas made for allOf (stable addresses)
  std::map<std::string, const Json*> interned_;   // interned's schemas, by their text
  size_t struct_depth_ = 0;                       // objects and arrays entered
  size_t work_ = 0;
};

}  // namespace

namespace {

// Appends `part` to the node's allOf (made when missing).
void add_all_of(Json& s, Json part) {
  if (!s.contains("allOf")) s["allOf"] = Json::array();
  s["allOf"].push_back(std::move(part));
}

// The forms of `not` that are other keywords in disguise, rewritten in place
// before conversion, at every schema position of the document (the
// subschemas of its keywords and of $defs/definitions; not inside enum,
// const or annotations), exactly:
//   not {} or not true: no value; the node becomes false;
//   not {"type": T}: the node's types ("type", else those its keywords imply,
//     as the converter reads them) without T (an integer-less number stays);
//   not {"required": [names]}: an object lacking one of the names: "type"
//     object and, for one name, the property false; for several, an anyOf of
//     those (in the node's allOf);
//   not {"anyOf": [A, B]}: allOf [not A, not B]; not {"allOf": [A, B]}: an
//     anyOf [not A, not B] in the node's allOf (De Morgan), where each not
//     is one of these forms.
// Other forms are left for the converter, which refuses `not` by name.
// `depth` stops the walk past max_nesting (the converter refuses that).
// Calls f on every subschema of the node s (its keywords' schemas and those
// of $defs/definitions; not inside enum, const or annotations).
template <typename F>
void for_each_subschema(Json& s, F&& f) {
  for (const char* k : schema::kSubschemaMaps) {
    if (s.contains(k) && s[k].is_object())
      for (auto& [name, sub] : s[k].items()) f(sub);
  }
  for (const char* k : schema::kSubschemaValues) {
    if (s.contains(k)) f(s[k]);
  }
  for (const char* k : schema::kSubschemaArrays) {
    if (s.contains(k) && s[k].is_array())
      for (Json& sub : s[k]) f(sub);
  }
}

void rewrite_not(Json& s, size_t depth, size_t max_depth) {
  if (!s.is_object() || depth > max_depth) return;
  for_each_subschema(s, [&](Json& sub) { rewrite_not(sub, depth + 1, max_depth); });
  if (!s.contains("not")) return;
  const Json& n = s["not"];
  if (n.is_boolean() ? n.get<bool>() : is_trivial(n)) {
    s = false;
    return;
  }
  if (!n.is_object()) return;
  if (s.contains("allOf") && !s["allOf"].is_array()) return;  // malformed: the converter says so
  std::vector<std::string> keys;
  for (const auto& [k, v] : n.items())
    if (!is_annotation(k)) keys.push_back(k);
  if (keys.size() != 1) return;
  unsigned types = kAllTypes;
  if (s.contains("type")) {
    const Json& t = s["type"];
    types = 0;
    if (t.is_string()) types = type_bits(t.get<std::string>());
    if (t.is_array())
      for (const Json& x : t)
        if (x.is_string()) types |= type_bits(x.get<std::string>());
    if (types == 0) return;  // a malformed "type": the converter says so
  } else {
    Json without = s;
    without.erase("not");
    types = implied_types(without);
  }
  const auto set_types = [&s](unsigned bits) {
    Json names = Json::array();
    for (const auto& [name, bit] : {std::pair<const char*, unsigned>{"null", kNull}, {"boolean", kBoolean},
                                    {"number", kNumber}, {"integer", kInteger}, {"string", kString},
                                    {"array", kArray}, {"object", kObject}}) {
      if ((bits & bit) == bit && !(bit == kInteger && (bits & kNumber) == kNumber)) names.push_back(name);
    }
    s["type"] = names.size() == 1 ? names[0] : names;
  };
  if (keys[0] == "type") {
    const Json& t = n["type"];
    unsigned out = 0;
    if (t.is_string()) out = type_bits(t.get<std::string>());
    if (t.is_array())
      for (const Json& x : t)
        if (x.is_string()) out |= type_bits(x.get<std::string>());
    if (out == 0) return;
    const unsigned left = types & ~out;
    if ((left & kFraction) && !(left & kInteger)) return;  // a number that is not an integer: no type names it
    if (left == 0) {
      s = false;
      return;
    }
    set_types(left);
    s.erase("not");
    return;
  }
  if (keys[0] == "required" && n["required"].is_array() && !n["required"].empty()) {
    for (const Json& x : n["required"])
      if (!x.is_string()) return;
    if (!(types & kObject)) {
      s = false;  // {"required": ...} holds for every value that is not an object
      return;
    }
    const Json names = n["required"];
    set_types(kObject);
    if (names.size() == 1) {
      s["properties"][names[0].get<std::string>()] = false;
    } else {
      Json alts = Json::array();
      for (const Json& x : names) alts.push_back(Json{{"properties", Json{{x.get<std::string>(), false}}}});
      add_all_of(s, Json{{"anyOf", std::move(alts)}});
    }
    s.erase("not");
    return;
  }
  // not {"contains": C}: an array none of whose items is valid against C
  // (every value that is not an array satisfies contains), written as items
  // {not C} where that `not` is one of these forms or one the converter
  // writes (of enum/const, of patterns); else left as written.
  if (keys[0] == "contains") {
    if (!(types & kArray)) {
      s = false;
      return;
    }
    Json items = Json{{"not", n["contains"]}};
    rewrite_not(items, depth + 1, max_depth);
    const bool written = !items.is_object() || !items.contains("not") || excluded_values(items["not"]) ||
                         excluded_patterns(items["not"]);
    if (!written) return;
    set_types(kArray);
    add_all_of(s, Json{{"items", std::move(items)}});
    s.erase("not");
    return;
  }
  // De Morgan: not anyOf is allOf of the nots, not allOf an anyOf of them
  // (in the node's allOf); each new not rewritten in turn, and the node left
  // as written (its not refused there) where one is none of these forms.
  const bool any = keys[0] == "anyOf", all = keys[0] == "allOf";
  if ((any || all) && n[keys[0]].is_array() && !n[keys[0]].empty()) {
    Json parts = Json::array();
    for (const Json& x : n[keys[0]]) {
      Json part = Json{{"not", x}};
      rewrite_not(part, depth + 1, max_depth);
      if (part.is_object() && part.contains("not")) return;  // refused where the user wrote it
      parts.push_back(std::move(part));
    }
    s.erase("not");
    if (any) {
      for (Json& part : parts) add_all_of(s, std::move(part));
    } else {
      add_all_of(s, Json{{"anyOf", std::move(parts)}});
    }
  }
}

// if/then/else, rewritten before `not` at every schema position (as
// rewrite_not walks them), as what they mean: a value is valid iff it is
// valid against if and then, or against not-if and else. Written as
//   allOf += anyOf [allOf [if, then], allOf [anyOf [N...], else]]
// where each N is a schema every value of which fails `if` (a sound subset
// of not-if: values of none of them are not written), one per keyword of
// `if` that can be negated: "type" T (the other types), "required" [r...]
// (an object lacking r), "properties" {p: S} (an object with p whose value
// fails S: S's negation in rewrite_not's forms, or `not` of its enum/const
// values, which the converter writes beside an enum that lists p's values).
// With no N, only allOf [if, then]. A missing then or else is true; an if of
// true or false picks one.
void rewrite_if(Json& s, size_t depth, size_t max_depth) {
  if (!s.is_object() || depth > max_depth) return;
  for_each_subschema(s, [&](Json& sub) { rewrite_if(sub, depth + 1, max_depth); });
  if (!s.contains("if")) {  // then and else without if constrain nothing
    s.erase("then");
    s.erase("else");
    return;
  }
  if (s.contains("allOf") && !s["allOf"].is_array()) return;  // malformed: the converter says so
  const Json cond = s["if"];
  if (!cond.is_boolean() && !cond.is_object()) return;
  const Json then = s.contains("then") ? s["then"] : Json(true);
  const Json other = s.contains("else") ? s["else"] : Json(true);
  s.erase("if");
  s.erase("then");
  s.erase("else");
  if (cond.is_boolean()) {
    add_all_of(s, cond.get<bool>() ? then : other);
    return;
  }
  Json negations = Json::array();
  if (cond.contains("type")) {
    Json n = Json{{"not", Json{{"type", cond["type"]}}}};
    rewrite_not(n, depth + 1, max_depth);
    if (!n.is_object() || !n.contains("not")) negations.push_back(std::move(n));
  }
  if (cond.contains("required") && cond["required"].is_array())
    for (const Json& r : cond["required"])
      if (r.is_string()) negations.push_back(Json{{"type", "object"}, {"properties", Json{{r.get<std::string>(), false}}}});
  if (cond.contains("properties") && cond["properties"].is_object()) {
    for (const auto& [name, sp] : cond["properties"].items()) {
      Json n = Json{{"not", sp}};
      // Enum/const (with a "type" their values have): `not` of those values.
      if (sp.is_object() && (sp.contains("enum") || sp.contains("const"))) {
        Json values = Json::array();
        bool plain = true;
        for (const auto& [k, v] : sp.items())
          if (!is_annotation(k) && k != "enum" && k != "const" && k != "type") plain = false;
        unsigned types = kAllTypes;
        if (sp.contains("type") && sp["type"].is_string()) types = type_bits(sp["type"].get<std::string>());
        if (sp.contains("type") && !sp["type"].is_string()) plain = false;
        if (sp.contains("enum") && !sp["enum"].is_array()) plain = false;
        if (plain) {
          const Json& list = sp.contains("enum") ? sp["enum"] : Json::array({sp["const"]});
          for (const Json& v : list)
            if ((json_type(v) & types) && (!sp.contains("const") || v == sp["const"])) values.push_back(v);
          n = Json{{"not", Json{{"enum", std::move(values)}}}};
        }
      } else {
        rewrite_not(n, depth + 1, max_depth);
        if (n.is_object() && n.contains("not")) continue;  // not negatable here: no such values written
      }
      negations.push_back(Json{{"type", "object"}, {"required", Json::array({name})}, {"properties", Json{{name, std::move(n)}}}});
    }
  }
  Json yes = Json{{"allOf", Json::array({cond, then})}};
  if (negations.empty()) {
    add_all_of(s, std::move(yes));
    return;
  }
  Json no_if = negations.size() == 1 ? std::move(negations[0]) : Json{{"anyOf", std::move(negations)}};
  add_all_of(s, Json{{"anyOf", Json::array({std::move(yes), Json{{"allOf", Json::array({std::move(no_if), other})}}})}});
}

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema_json, const GrammarLimits& limits) {
  Json root;
  try {
    root = Json::parse(schema_json.begin(), schema_json.end());
  } catch (const Json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." without its tag
    // (out_of_range.406 for a number beyond a double, such as 9999e999, too).
    std::string what = e.what();
    if (const size_t tag = what.find("] "); tag != std::string::npos) what = what.substr(tag + 2);
    throw Error(Errc::invalid_argument, "json_schema: the schema is not valid JSON: " + what);
  }
  // References resolve in the document as written; the rewrites below move
  // or replace some subschemas (a `then` into an allOf, a property beside
  // `not required` to false), so a target not found as it would be
  // rewritten alone is kept apart, rewritten alone.
  const schema::RefIndex refs = schema::resolve_refs(root, limits.max_nesting);
  const Json written = refs.resolved.empty() ? Json() : root;
  rewrite_if(root, 0, limits.max_nesting);
  rewrite_not(root, 0, limits.max_nesting);
  std::map<std::string, Json> moved;
  for (const std::string& frag : refs.resolved) {
    std::string canonical;
    Json alone = *schema::walk_pointer(written, frag, canonical);
    rewrite_if(alone, 0, limits.max_nesting);
    rewrite_not(alone, 0, limits.max_nesting);
    const Json* now = schema::walk_pointer(root, frag, canonical);
    if (!now || *now != alone) moved.emplace(frag, std::move(alone));
  }
  return Converter(root, limits, refs, moved).run();
}

}  // namespace synapse
