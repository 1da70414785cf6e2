// Constrained generation: llama.cpp's GBNF grammars, JSON Schema converted to
// GBNF, and the per-step token mask that keeps a reply inside the grammar.
//
// A Grammar is GBNF text parsed and compiled once (rules of alternatives of
// sequences; character classes over Unicode code points become byte-level
// alternatives of UTF-8 ranges, so tokens that split a character work). It
// is immutable and shared by any number of requests and threads.
//
// A GrammarMatcher is one reply's parser state over a TokenVocabulary (each
// token's bytes): which tokens keep the output inside the grammar, and the
// state advanced by the token taken. Its answers depend only on the grammar
// and the tokens it accepted (contract G1: a constrained reply is the same
// alone or among other requests). One thread per matcher.
//
// Sources: GBNF syntax, llama.cpp grammars/README.md and src/llama-grammar.cpp
// (v0.5.0); the converter follows common/json-schema-to-grammar.cpp's rules
// (whitespace, formats, the regex subset of `pattern`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace synapse {

// Bounds on what a grammar may ask of the parser and the matcher; a grammar
// over them is an Error(invalid_argument) naming the bound, never a crash
// (llama.cpp #26600: 60k nested groups overflowed its stack).
struct GrammarLimits {
  size_t max_bytes = 1u << 20;     // GBNF text
  size_t max_rules = 20000;        // rules, those made for groups, repetitions and classes included (a
                                   // class's UTF-8 continuation rules are not: max_elements bounds them)
  size_t max_elements = 1u << 21;  // elements over all rules after repetitions are expanded
  size_t max_nesting = 256;        // nested parentheses (and schema nesting in the converter)
  size_t max_repetition = 10000;   // m and n of {m,n}
  // A matcher's cached parser states (each with a 1 KiB row of transitions)
  // before it drops its caches and keeps only the current state: bounds a
  // long reply's memory; answers do not change.
  size_t max_matcher_states = 1u << 16;
  // A matcher's work on parser states new to it in one call (the
  // constructor, allows, accept, fill_mask): stacks expanded or stepped over
  // a byte. An ambiguous grammar (repetitions nested through rules, such as
  // x ::= "x"+ and y ::= x+ and z ::= y+ ...) can multiply its stacks with
  // every byte; past this bound the call throws Error(invalid_argument)
  // "grammar: ..." and the reply ends with that error instead of hanging.
  // Work already cached costs nothing.
  size_t max_matcher_work = size_t{1} << 20;
};

// A token reference of a grammar (llama.cpp's token terminals): `<[id]>`
// (id set, text empty) or `<text>` (text with its angle brackets, as llama.cpp
// tokenizes it; id -1: the tokenizer resolves it, see GrammarMatcher).
struct GrammarTokenRef {
  int32_t id = -1;
  std::string text;
};

class Grammar {
 public:
  // Parses GBNF `text` and compiles the rule `root` and what it reaches.
  // Throws Error(invalid_argument) with "line L, column C: what" for a syntax
  // error, an undefined rule, a missing root, left recursion, or a limit
  // passed. Thread-safe (no shared state).
  static std::shared_ptr<const Grammar> parse(std::string_view text, std::string_view root = "root",
                                              const GrammarLimits& limits = {});

  ~Grammar();
  size_t n_rules() const;  // rules after compilation (groups, repetitions and UTF-8 ranges included)
  // The token references <[id]>, <text>, !<[id]>, !<text> (a negation shares
  // its token's entry), each once, in order of first use; empty for a grammar
  // without them (then the mask costs nothing more).
  const std::vector<GrammarTokenRef>& token_refs() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Grammar(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Converts a JSON Schema (a JSON text) into GBNF whose root rule accepts the
// JSON values the schema accepts, with llama.cpp's whitespace rule between
// tokens and its conventions, which narrow it (a reply is always valid):
// properties in declared order (required ones first), none beyond the
// declared ones unless additionalProperties is given, prefixItems as a tuple
// of all its items unless minItems or items say otherwise, numbers of at most
// 16 integral digits, bounded numbers other than integers as integers and
// decimals without exponent whose every value is in range (bounds rounded
// inward to integers), enum values in compact form. oneOf is an alternation
// (as llama.cpp reads it) where its alternatives are provably exclusive:
// no two share a type, or they are const/enum values none equal, or objects
// where one requires a property the other forbids or gives an exclusive
// schema (through $ref, allOf, nested anyOf/oneOf and additionalProperties,
// a few levels deep); else it is refused.
// Keywords: type (and unions), properties, required, additionalProperties,
// patternProperties (a named property takes the schemas of the patterns it
// matches too; no other properties but, with one pattern no name matches,
// the keys it matches),
// minProperties and maxProperties (exact counts of the optional properties
// written, in order, and the additional ones; a repeated additional key
// counts once, so additional ones make up at most one property of a
// minimum, except, as a stated subset, where free keys (no pattern or name
// constraint) and no maximum: then the minimum's additional keys start with
// distinct letters or digits; without additionalProperties, other keys
// only where the minimum needs them; refused over limits.max_rules), items, prefixItems, minItems,
// maxItems, additionalItems (it constrains
// only items past an items array, and none are written), enum, const,
// anyOf, oneOf, allOf (objects merged, arrays merged, strings, numbers and
// enums merged, keywords of types the parts exclude dropped, over anyOf
// distributed), $ref to
// any subschema of the document (a JSON pointer, a plain name: draft 4's
// "id": "#name", drafts 6/7's "$id": "#name", $anchor, 2020-12's
// $dynamicAnchor; an embedded resource's URI; each resolved against the
// base URI its resource's id sets, "id" in draft 4 and "$id" later, in the
// dialect $schema names, 2020-12 without one; as written, before if/then/else
// and not are rewritten; recursion included; siblings are a
// conjunction), pattern (ECMA-262 where Python's re reads it the same:
// literals, escapes, classes, \d \w \s \S, ., groups, |, ? * + {m,n}, ^ and $
// anywhere but in a group repeated a bounded number of times, lookaheads
// (?=...) and (?!...) but not nested, through the pattern's automaton),
// dependencies, dependentRequired and dependentSchemas (exactly: an object
// lacks the property or has what it needs; for more than 4 such properties
// of an object that does not require them, cases of which properties are
// present (and which value of a property that lists its values), each
// dependency's names, required, properties false or of values, allOf and
// anyOf of those read as clauses, other schemas a part of the cases where
// their property is present; at most 64 cases),
// minLength, maxLength (like minItems and maxItems, exact at any count below
// 10^18: counts over 256 are written in base 16; beside pattern exactly,
// through the product of its automaton with a count of code points (kept
// only where it can bind, a trailing loop as a counted repetition), within
// 8192 states, and for ^(?:X+Y+){0,K}X+$ (at most K+1 words) beyond 4096 a
// sound subset: each word with its run rounded up to slots of
// maxLength/(K+1) code points, at most K+1 slots; beside format where its
// lengths imply them, email within 67 code points), minimum/maximum/
// exclusiveMinimum/exclusiveMaximum, multipleOf (a whole number m: 1 the
// integers; between bounds holding at most 256 multiples, those written
// out; else a divisor of 1000 (2, 4, 5, 8, 10, 20, 25, ...) by the last
// digits, unbounded or with one bound within m of 0; else the numerals
// digit by digit with the remainder still needed, within the bounds or 16
// digits (at most 1024 rules: any m up to 64); a number with it is
// written as an integer; a fraction 1/k (0.5, 0.1, 0.01, ...) as the
// integers, which IEEE division finds whole; other fractions refused), format (date, time, date-time, uuid,
// email; beside a pattern the strings of both, email within 67 code points), uniqueItems (true: arrays of at most one item; beside minItems
// over 1 refused), contains and minContains (exactly: items before, between
// and after the matching ones are any items, a matching one is valid under
// items and contains; not beside prefixItems; minContains over 1 only
// where minItems/maxItems do not bind; within minItems/maxItems, fewer than
// 32 other items around the match; maxContains where maxItems is no more,
// else where contains is an enum/const, items lists its values (the other
// items are those values but contains') and minItems/maxItems do not
// bind; in a merge, one part's), propertyNames (type, enum, const, pattern,
// minLength, maxLength, through $ref; in a merge, each part's on the merged
// object: named properties whose name fails it are forbidden; additional
// keys are its strings, or none where a named property's name or
// patternProperties would overlap them), not in the forms
// that are other keywords (not {} : no value; not {"type": T}: the other
// types; not {"required": [names]}: an object lacking one of them; not
// {"contains": C}: an array of items {not C}, where that not is one of these
// forms; not of enum/const beside an enum/const that lists the values), if/then/else (as
// (if and then) or (not-if and else), not-if from the keywords of if that
// negate: a sound subset).
// Annotations (title, description, examples, default, $schema, $id,
// $comment, readOnly, writeOnly, deprecated, contentMediaType,
// contentEncoding), every keyword outside JSON Schema's vocabulary (draft 4's
// id, OpenAPI's nullable, x-... extensions) and formats other than those five
// are ignored, as the specification has it: they constrain nothing.
// Throws Error(invalid_argument) naming the keyword and its JSON pointer for
// a validation keyword it cannot enforce (not in other forms,
// contains, minContains and maxContains beyond the cases above, more than
// 64 cases of dependencies, multipleOf beyond the cases above,
// propertyNames with other keywords, oneOf whose alternatives cannot be kept apart, ...;
// patternProperties, minProperties, maxProperties and number bounds beyond
// the sound subsets above), a regular expression feature outside the subset, a bad value, a
// schema no value satisfies (an optional property, additional properties or
// items past a prefix no value satisfies are left out, as no valid value has
// them), a $ref that names nothing in the document (another document, a
// missing pointer or name, an id two subschemas declare), a schema that is not JSON (with its
// line and column), nesting deeper than limits.max_nesting, a pattern's count
// over limits.max_repetition, a schema that expands to more than
// limits.max_elements subschemas, or a grammar over limits.max_rules or
// limits.max_bytes (a grammar over a quarter of either has its rules of the
// same body merged first: schemas that repeat a subschema inline shrink
// about tenfold). Thread-safe.
std::string json_schema_to_gbnf(std::string_view schema_json, const GrammarLimits& limits = {});

// The bytes of every token of a vocabulary, as the matcher sees them, in a
// trie. pieces[i] is token i's text (llama_token_to_piece); an empty piece is
// a token no grammar's text produces (control tokens; a token terminal takes
// it by id). eog[i] marks end-of-generation
// tokens, allowed exactly when the grammar accepts the output so far.
// Immutable after construction; share it between matchers.
class TokenVocabulary {
 public:
  TokenVocabulary(std::vector<std::string> pieces, std::vector<bool> eog);
  ~TokenVocabulary();
  int32_t n_vocab() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

class GrammarMatcher {
 public:
  // Both are shared: the matcher keeps them alive. token_ids: the token id of
  // each of grammar->token_refs() (a <text> reference is what the model's
  // tokenizer makes of the text, which must be exactly one token: llama.cpp's
  // rule, see runtime's resolve_grammar_tokens); empty means each ref's own id.
  // A token terminal matches one whole token by id, whatever its bytes (a
  // control token rendered as "" included), never an end-of-generation token
  // (those are allowed exactly when the grammar accepts, as in llama.cpp):
  // <x> that token, !<x> every other token. Throws Error(invalid_argument) for
  // token_ids of the wrong size, a <text> left unresolved, or an id outside
  // the vocabulary, or for a start whose parser states pass
  // GrammarLimits::max_matcher_work.
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab,
                 std::span<const int32_t> token_ids = {});
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;
  ~GrammarMatcher();

  // Whether token `id` keeps the output inside the grammar: its bytes extend
  // the output to a prefix of a sentence of the grammar, or a token terminal
  // takes it, or it is an end-of-generation token and the output so far is a
  // sentence. Throws
  // Error(out_of_range) for an id outside the vocabulary.
  // allows, accept and fill_mask throw Error(invalid_argument) when the call
  // would pass GrammarLimits::max_matcher_work (the state is then unchanged).
  bool allows(int32_t id);
  // Takes token `id` (the sampler's choice). Throws Error(invalid_argument)
  // when allows(id) is false; the state is then unchanged.
  void accept(int32_t id);
  // Every allowed token: bit i of words[i / 64] (n_vocab bits, rounded up).
  void fill_mask(std::vector<uint64_t>& words);
  // The output so far is a sentence of the grammar (end of generation allowed).
  bool is_complete() const;
  // No token but end of generation can follow (the grammar has ended).
  bool is_finished() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace synapse
