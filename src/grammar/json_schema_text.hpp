// Text helpers of the JSON Schema converter (json_schema.cpp): sets of code
// points, GBNF literals and character classes, the JSON text of a string's
// characters, a key rule that shuts out given names, integer ranges, and
// `pattern` (a regular expression) translated to GBNF over the JSON text of a
// string. In their own namespace, beside the GBNF parser's and the matcher's
// internals in synapse::grammar.
//
// Everything here is a pure function of its arguments (thread-safe). Errors
// are PatternError (a description without the schema location, which the
// converter adds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace synapse::grammar::schema {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// A set of Unicode code points: sorted, disjoint, non-adjacent inclusive
// ranges within [0, 0x10FFFF].
class CodepointSet {
 public:
  CodepointSet() = default;
  CodepointSet(uint32_t lo, uint32_t hi) { add(lo, hi); }

  void add(uint32_t lo, uint32_t hi);
  void add(const CodepointSet& other);
  CodepointSet complement() const;
  CodepointSet minus(const CodepointSet& other) const;
  CodepointSet intersect(const CodepointSet& other) const;
  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  // The one code point of a single-element set, or -1.
  int64_t single() const;
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }
  bool operator==(const CodepointSet&) const = default;

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// Decodes the UTF-8 code point at s[pos] and advances pos. The input is
// valid UTF-8 (nlohmann's parser checks every string), so a bad byte is
// taken as itself rather than reported.
uint32_t next_codepoint(std::string_view s, size_t& pos);
// The code points of `utf8` (a string's length as JSON Schema's
// minLength/maxLength count it), decoded as next_codepoint decodes them.
size_t codepoint_count(std::string_view utf8);
void append_utf8(std::string& out, uint32_t cp);

// A GBNF string literal ("...") matching exactly the bytes of `utf8`.
std::string gbnf_literal(std::string_view utf8);
// A GBNF character class matching one code point of `set` (not empty): the
// shorter of [...] and [^...].
std::string gbnf_class(const CodepointSet& set);

// The code points a JSON string holds as themselves: all but '"', '\',
// the controls U+0000-U+001F, U+007F (kept escaped, as llama.cpp's `char`
// rule does) and the surrogates U+D800-U+DFFF (not scalar values).
const CodepointSet& json_plain_chars();
// The JSON text of one code point inside a string: itself when plain, else
// its short escape (\" \\ \b \f \n \r \t) or \u00xx.
std::string json_char_text(uint32_t cp);
// The JSON text of a whole string's contents (no quotes), each code point as
// json_char_text writes it.
std::string json_string_text(std::string_view utf8);
// A GBNF expression matching the JSON text of one code point of `set` (not
// empty): plain ones raw, the others as json_char_text writes them.
std::string json_char_expr(const CodepointSet& set);

// The body of a rule matching a JSON string (quotes included) that is none
// of `names` (UTF-8). A character that leaves the names is raw or a short
// escape: \u escapes are not taken there (one could spell a name's
// character), which only narrows the keys. `char_rule` takes one JSON
// character, escapes included.
std::string json_key_excluding(const std::vector<std::string>& names, std::string_view char_rule);

// Alternatives (a GBNF alternation, not parenthesized) matching the decimal
// numerals of the integers in [lo, hi], a missing side unbounded: the
// numerals of each length, split where their digits stop running through
// 0-9 (llama.cpp's build_min_max_int writes the same language). No leading
// zeros and no -0; an unbounded side stops at 16 digits (or the other
// bound's), as llama.cpp's integral-part does.
std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

// A bound of a number: an integer, exclusive or not.
struct NumberBound {
  int64_t value = 0;
  bool exclusive = false;
};

// Alternatives (a GBNF alternation, not parenthesized; empty when none)
// matching a sound subset of the JSON numbers within `lo` and `hi` (a
// missing side unbounded, not both): the integers in range (integer_range's
// numerals) and decimals I.F, -I.F without exponent, where I has at most 15
// digits and F 1 to 16, whose every value is in range even after rounding to
// a double (validators read decimals as doubles): for I.F, [I, I+1] within
// the bounds (for -I.F, [-(I+1), -I]), exact as I and I+1 are doubles. Next
// to an exclusive bound also I.F in (I, I+1) with I or I+1 the bound: then F
// has a non-zero last digit (at the lower bound) and I.F at most 15
// significant digits, so its double differs from the bound (DBL_DIG: decimals
// of 15 digits are distinct doubles). So x > 0 allows 0.5 and x < 0 -0.5.
std::string number_range(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

class PatternError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// pattern_to_gbnf's error for what its rewriting cannot write but the
// pattern's automaton (string_automaton) can: a lookahead.
class PatternNeedsAutomaton : public PatternError {
 public:
  using PatternError::PatternError;
};
// pattern_to_gbnf's error where its rewriting cannot bound the lengths
// (pattern_automaton may).
class PatternUnbounded : public PatternNeedsAutomaton {
 public:
  using PatternNeedsAutomaton::PatternNeedsAutomaton;
};

// Translates `pattern`, a regular expression, into a GBNF expression
// matching the JSON text of the contents of every string the pattern matches
// (quotes excluded). The pattern is read as ECMA-262 (with the u flag, so
// over code points) where that and Python's re (python-jsonschema's) agree,
// and throws where they part. Unanchored ends match anything: `char_rule` (a
// rule taking one JSON character, escapes included) repeated, so "b" is
// char* "b" char*.
// Supported: literals, escapes (\t \n \r \f \v \0 \xHH \uHHHH but not of a
// surrogate, escaped punctuation), classes [...] [^...] with ranges, \d \w
// \s \S, `.`, groups (...) (?:...), alternation, ? * + {n}
// {n,} {n,m} (lazy forms too: the language is the same), ^ at the start and
// $ at the end of a top-level alternative. Throws PatternNeedsAutomaton for
// a lookahead (?=...) (?!...), which only the automaton (pattern_dfa)
// writes; PatternError for the rest (backreferences, lookbehind, named
// groups, \b, \p{..}, \D, \W, \c, \u{..}, anchors elsewhere, an empty class),
// for a pattern that is not a valid regular expression, for a repetition
// count over `max_repetition` and for groups nested deeper than
// `max_nesting`.
// uses_char_rule: set when the expression refers to `char_rule`.
std::string pattern_to_gbnf(std::string_view pattern, std::string_view char_rule, size_t max_nesting,
                            size_t max_repetition, bool& uses_char_rule);
// The same for the strings the pattern matches of min_len to max_len code
// points (max_len UINT64_MAX: no bound), nullopt when there are none. Exact,
// and only where cheap, per top-level alternative: its lengths already
// within the bounds; or one variable part (an unanchored end, or a
// repetition of a one code point class such as [a-z]+) taking the lengths
// the fixed-length parts leave; or, when max_len is the alternative's least
// length, every variable part at its least. Throws PatternUnbounded
// otherwise, PatternError as for the pattern itself and for a count over
// max_repetition.
std::optional<std::string> pattern_to_gbnf(std::string_view pattern, std::string_view char_rule, size_t max_nesting,
                                           size_t max_repetition, bool& uses_char_rule, uint64_t min_len,
                                           uint64_t max_len);

// Throws PatternError where pattern_dfa would for the pattern's text (its
// syntax, counts over max_repetition, groups deeper than max_nesting), no
// automaton built; else whether it has a lookahead. Thread-safe.
bool check_pattern(std::string_view pattern, size_t max_nesting, size_t max_repetition);

// A pattern (as pattern_to_gbnf reads it) whose matches are exactly the
// strings of `values` (UTF-8), anchored at both ends: ^(?:v1|v2|...)$ with
// ASCII punctuation and space escaped by a backslash, controls and U+007F
// as \uHHHH, the rest itself. (Its wide reading also matches each value
// followed by '\n'.) For `not` of a string enum as an excluded pattern.
std::string literal_pattern(const std::vector<std::string>& values);

// What building pattern automata may take: states per automaton, and steps
// (an atom or a state visited) over every automaton built with the one
// budget (a schema's conversion has one: a bound on hostile schemas as a
// whole, not only on each pattern).
struct AutomatonBudget {
  size_t max_states = 4096;
  size_t max_work = size_t{1} << 22;
  size_t work = 0;
};

// A deterministic automaton over code points: states[0] is the start, every
// state is reachable from it and can reach an accepting one, and from each
// state the edges' sets are disjoint (one target per code point). A state
// may instead be a counted tail: its strings are exactly `loop` repeated
// loop_min to loop_max times (loop_max UINT64_MAX: no bound), with no edges
// (what a grammar writes as one counted repetition, not a state per count).
struct PatternAutomaton {
  struct Edge {
    CodepointSet chars;
    size_t to = 0;
  };
  struct State {
    std::vector<Edge> edges;
    bool accepting = false;
    bool counted = false;
    CodepointSet loop;
    uint64_t loop_min = 0, loop_max = 0;
  };
  std::vector<State> states;
};

// How a pattern is read where ECMA-262 and Python's re part. kNarrow: the
// strings both dialects match (what pattern_to_gbnf writes: each class
// escape its narrow set, `.` ECMA-262's). kWide: every string either
// dialect matches, and maybe more (each class escape its wide set, `.`
// anything but '\n', and a '$' at the end also before a final '\n', as
// Python's is), so a string outside it matches in neither: what a pattern's
// complement is built from. The wide reading throws PatternError for a '$'
// followed by what cannot match "".
enum class PatternReading { kNarrow, kWide };

// A set of strings, as JSON Schema's string keywords make it: those of
// min_len to max_len code points (max_len UINT64_MAX: no bound) that every
// pattern of `patterns` matches (kNarrow) and no pattern of `excluded`
// matches (kWide: neither dialect finds a match, so `not {"pattern": P}` is
// exact for what is written). Patterns are searched (unanchored ends take any
// scalar value).
struct StringLanguage {
  std::vector<std::string> patterns;
  std::vector<std::string> excluded;
  uint64_t min_len = 0;
  uint64_t max_len = UINT64_MAX;
};

// The strings of `lang` (scalar values only: never a surrogate), as the
// product of the patterns' minimal DFAs (Thompson NFA, subset construction
// over the classes' common atoms, Moore's minimization), the excluded
// patterns' DFAs with their accepting states flipped (and a missing
// transition, the dead state, made an accepting sink) and a count of the
// code points read (saturating at min_len when max_len is unbounded), over
// the common refinement of their atoms and of the scalar values; states that
// cannot reach an accepting one dropped. The count is kept only where it
// decides something: it is dropped once min_len is reached and the
// patterns' automata cannot read more than max_len in all (their longest
// path to acceptance), and a state whose every continuation loops on itself
// over one set (a trailing [a-z]*, an unanchored end reached) becomes a
// counted tail of that set and the lengths left. Exact for any patterns
// pattern_to_gbnf takes; nullopt when no string is left. Throws PatternError
// as pattern_dfa does, and when the product would need more than the
// budget's states or steps.
std::optional<PatternAutomaton> string_automaton(const StringLanguage& lang, size_t max_nesting,
                                                 size_t max_repetition, AutomatonBudget& budget);
// A sound subset of string_automaton's strings for one pattern of the shape
// ^(?:X+Y+){0,K}X+$ (X and Y disjoint sets, such as \S and \s: at most K + 1
// words), maybe beside ^$, where the exact product (words read x code points
// read) is too large, as long as min_len <= 1: the strings in which each
// word with the run after it, rounded up to a multiple of
// m = floor(max_len / (K + 1)) code points, takes at most K + 1 such slots
// in all, so at most K + 1 words and max_len code points (a word of up to m
// code points with its run takes one slot; a longer one takes more). Exact
// where max_len <= 2K + 1 (no string that short has more words). About
// 2 max_len states (two edges each), max_len under the budget's states.
// nullopt for another shape or lengths, or when no string is left. Throws PatternError as pattern_to_gbnf
// does for the pattern, and when the budget's steps run out.
std::optional<PatternAutomaton> word_count_automaton(const StringLanguage& lang, size_t max_nesting,
                                                     size_t max_repetition, AutomatonBudget& budget);
// string_automaton of the one pattern and lengths.// string_automaton of the one pattern and lengths.
std::optional<PatternAutomaton> pattern_automaton(std::string_view pattern, size_t max_nesting,
                                                  size_t max_repetition, uint64_t min_len, uint64_t max_len,
                                                  AutomatonBudget& budget);

// Whether no string of min_len to max_len code points that one pattern
// matches (kNarrow: what the grammar writes) is matched by the other in
// either dialect (kWide), both ways ("" for no pattern: an unanchored empty
// pattern matches every string): a search of the products of their automata
// for a pair of accepting states. False (not proven) where the pairs visited
// would be more than the budget's states, or the wide reading throws; throws
// as pattern_automaton.
bool patterns_disjoint(std::string_view a, std::string_view b, uint64_t min_len, uint64_t max_len,
                       size_t max_nesting, size_t max_repetition, AutomatonBudget& budget);

// A pattern's minimal DFA over code points (read as pattern_to_gbnf reads
// it, unanchored ends taking any scalar value; lookaheads too, but not one
// inside another, nor one inside a group that matches "" before a '^' or
// after a '$', nor a quantifier after one): transitions over `atoms`,
// disjoint sets covering every class of the pattern, -1 for the dead state
// (left out); empty when the pattern matches nothing. Built once, matched
// against many strings (enum values beside a pattern).
struct PatternDfa {
  std::vector<CodepointSet> atoms;
  std::vector<std::vector<int32_t>> next;  // [state][atom]
  std::vector<bool> accepting;

  // Whether the pattern matches `utf8` (a string's value, not its JSON
  // text), in the language pattern_to_gbnf writes: true only where ECMA-262
  // and Python's re both match it.
  bool matches(std::string_view utf8) const;
};

// Throws PatternError as pattern_to_gbnf does for the pattern itself (and
// the wide reading's '$'), and when the NFA or the DFA would need more than
// the budget's states, or the budget's steps run out. matches() of a kWide
// DFA is false only where neither dialect matches.
PatternDfa pattern_dfa(std::string_view pattern, size_t max_nesting, size_t max_repetition,
                       AutomatonBudget& budget, PatternReading reading = PatternReading::kNarrow);

}  // namespace synapse::grammar::schema
