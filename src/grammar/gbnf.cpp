// GBNF text -> Grammar::Impl (grammar_impl.hpp).
//
// The syntax is llama.cpp's (grammars/README.md, src/llama-grammar.cpp's
// llama_grammar_parser, v0.5.0): `name ::= alternatives` rules; alternatives
// separated by `|`; elements are "literals", [character classes] with ranges
// and ^ negation, `.` (any character), rule names, ( groups ), each followed
// by any of `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`, `{,n}`; `#` comments. At
// the top level a rule ends at a newline; inside parentheses and after `|`
// newlines are spaces. Repetitions are expanded as llama.cpp does (S{m,n} is
// S m times then n-m nested optional rules; S* is a right-recursive rule), so
// the accepted language is the same. Two rewrites keep that language and keep
// ambiguity out of the matcher (see compose): a repetition of a repetition
// whose counts leave no gap is one repetition (S+*, S?+ and (S*)+ are S*; S++
// is S+), and a group of one alternative is its sequence, written in place.
// Without them `"x"++++...` (a fuzzer's input) gives 2^k parses of k nested
// loops, and the matcher a set of stacks that grows as fast.
//
// What differs from llama.cpp, and why: terminals are compiled to bytes here
// (a class over code points becomes UTF-8 byte-range alternatives, see
// add_code_point_set) while token references (<[id]>, <text>, !<...>) stay
// token terminals, a <text> kept as text for the caller's tokenizer (llama.cpp
// tokenizes it while parsing, so its grammars are bound to one vocabulary;
// here a compiled grammar is shared by any); every size
// and the nesting of groups is bounded (GrammarLimits) and reported with its
// line and column instead of crashing or silently widening a repetition.
#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/grammar_impl.hpp"
#include "synapse/error.hpp"

namespace synapse {

namespace {

using grammar::ByteSet;
using grammar::Elem;
using grammar::ElemType;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct Range {
  uint32_t lo, hi;
  bool operator<(const Range& o) const { return lo < o.lo || (lo == o.lo && hi < o.hi); }
};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// Sorted, merged ranges; with `negate` the complement within [0, 0x10FFFF].
std::vector<Range> normalize(std::vector<Range> r, bool negate) {
  std::sort(r.begin(), r.end());
  std::vector<Range> m;
  for (const Range& x : r) {
    if (!m.empty() && x.lo <= m.back().hi + 1)
      m.back().hi = std::max(m.back().hi, x.hi);
    else
      m.push_back(x);
  }
  if (!negate) return m;
  std::vector<Range> out;
  uint32_t next = 0;
  for (const Range& x : m) {
    if (x.lo > next) out.push_back({next, x.lo - 1});
    next = x.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

// UTF-8 encoding of one code point (up to 4 bytes).
int encode_utf8(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

// Splits a code point range into ranges whose UTF-8 encodings are one
// sequence of byte ranges each (the construction of Russ Cox's RE2 and of
// Rust's regex-syntax Utf8Sequences): same length, and for each continuation
// byte either the full 0x80-0xBF span or a prefix shared by lo and hi.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  static constexpr uint32_t kLenEnd[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (uint32_t end : kLenEnd) {
    if (lo <= end && hi > end) {
      utf8_sequences(lo, end, out);
      utf8_sequences(end + 1, hi, out);
      return;
    }
  }
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  const int n = encode_utf8(lo, a);
  encode_utf8(hi, b);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

constexpr uint64_t kUnbounded = UINT64_MAX;

// A repetition {lo,hi} (hi kUnbounded: no bound) of the symbol just parsed,
// not yet expanded: the operators written after one symbol compose first.
struct Repeat {
  bool active = false;
  uint64_t lo = 1, hi = 1;
  size_t pos = 0;  // where its first operator is written, for errors
};

// (S{a,b}){c,d} as one repetition S{ac,bd} where that is the same language:
// the union over k in [c,d] of the counts [ka,kb] has no gap, which holds
// when (k+1)a <= kb + 1 for the smallest k < d (k = 0: a <= 1; also k = 1 when
// c is 0, as the condition only grows with k from 1 on). Only where the
// expansion is no larger (one side unbounded, or b*d <= b+d) and lo stays
// within `max_lo`; otherwise nullopt and the two are expanded in turn.
std::optional<std::pair<uint64_t, uint64_t>> compose(uint64_t a, uint64_t b, uint64_t c, uint64_t d,
                                                     uint64_t max_lo) {
  if (b == 0 || d == 0) return std::make_pair(uint64_t{0}, uint64_t{0});  // S{0} or (..){0}: the empty string
  const auto no_gap_at = [&](uint64_t k) {
    if (k >= d) return true;
    if (k == 0) return a <= 1;
    return b == kUnbounded || (k + 1) * a <= k * b + 1;
  };
  if (!no_gap_at(c) || (c == 0 && !no_gap_at(1))) return std::nullopt;
  const bool unbounded = b == kUnbounded || d == kUnbounded;
  if (!unbounded && b * d > b + d) return std::nullopt;  // b, d <= max_repetition: no overflow
  if (a != 0 && c > max_lo / a) return std::nullopt;
  return std::make_pair(a * c, unbounded ? kUnbounded : b * d);
}

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : src_(text), lim_(limits) {}

  std::unique_ptr<Grammar::Impl> run(std::string_view root_name) {
    if (src_.size() > lim_.max_bytes)
      fail(0, "the grammar is " + std::to_string(src_.size()) + " bytes, more than the limit of " +
                  std::to_string(lim_.max_bytes));
    size_t pos = skip_space(0, true);
    while (pos < src_.size()) pos = parse_rule(pos);
    for (size_t id = 0; id < rules_.size(); ++id)
      if (!defined_[id]) fail(first_use_[id], "undefined rule '" + names_[id] + "'");
    const auto it = ids_.find(std::string(root_name));
    if (it == ids_.end() || !defined_[it->second])
      fail(src_.size(), "the grammar has no rule '" + std::string(root_name) + "' to start from");
    return finish(it->second);
  }

 private:
  [[noreturn]] void fail(size_t pos, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error(Errc::invalid_argument,
                "grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }

  char at(size_t pos) const { return pos < src_.size() ? src_[pos] : '\0'; }

  // llama_grammar_parser's parse_space: blanks and # comments, newlines too
  // when newline_ok.
  size_t skip_space(size_t pos, bool newline_ok) const {
    while (pos < src_.size()) {
      const char c = src_[pos];
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        ++pos;
      } else if (c == '#') {
        while (pos < src_.size() && src_[pos] != '\r' && src_[pos] != '\n') ++pos;
      } else {
        break;
      }
    }
    return pos;
  }

  uint32_t symbol(const std::string& name, size_t pos) {
    const auto [it, fresh] = ids_.emplace(name, static_cast<uint32_t>(rules_.size()));
    if (fresh) new_rule(name, pos);
    return it->second;
  }

  // limits.max_rules counts the rules a grammar names, its groups and
  // repetitions, and one per character class; a class's continuation rules
  // (code_point_set) are not counted (limits.max_elements bounds them).
  uint32_t new_rule(const std::string& name, size_t pos, bool counted = true) {
    if (counted && rules_.size() - n_uncounted_ >= lim_.max_rules)
      fail(pos, "more than " + std::to_string(lim_.max_rules) + " rules (groups and repetitions count)");
    if (!counted) ++n_uncounted_;
    rules_.emplace_back();
    names_.push_back(name);
    defined_.push_back(false);
    first_use_.push_back(pos);
    return static_cast<uint32_t>(rules_.size() - 1);
  }

  uint32_t generated(const std::string& base, size_t pos, bool counted = true) {
    const uint32_t id = new_rule(base + "-" + std::to_string(rules_.size()), pos, counted);
    defined_[id] = true;
    return id;
  }

  void set_rule(uint32_t id, std::vector<Elem> body, size_t pos) {
    n_elems_ += body.size();
    if (n_elems_ > lim_.max_elements)
      fail(pos, "more than " + std::to_string(lim_.max_elements) + " grammar elements after expanding repetitions");
    rules_[id] = std::move(body);
    defined_[id] = true;
  }

  uint32_t byte_set(const ByteSet& s) {
    const auto [it, fresh] = set_ids_.emplace(s.w, static_cast<uint32_t>(sets_.size()));
    if (fresh) sets_.push_back(s);
    return it->second;
  }

  // The elements matching one code point of `ranges` (sorted, merged): one
  // kBytes element when all are ASCII, else a reference to a rule of UTF-8
  // alternatives (one per set, cached).
  Elem code_point_set(const std::vector<Range>& ranges, size_t pos) {
    if (ranges.empty()) {
      // An empty class ([^\x00-\U0010FFFF]) matches nothing: an empty byte set.
      return {ElemType::kBytes, byte_set(ByteSet{})};
    }
    if (ranges.back().hi < 0x80) {
      ByteSet s;
      for (const Range& r : ranges) s.set_range(r.lo, r.hi);
      return {ElemType::kBytes, byte_set(s)};
    }
    std::vector<uint32_t> key;
    for (const Range& r : ranges) {
      key.push_back(r.lo);
      key.push_back(r.hi);
    }
    if (const auto it = class_rules_.find(key); it != class_rules_.end()) return {ElemType::kRuleRef, it->second};
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
    for (const Range& r : ranges) utf8_sequences(r.lo, r.hi, seqs);
    // One alternative for all single bytes, then the multi-byte sequences
    // as a tree of their byte ranges: sequences with the same first ranges
    // share them, each continuation a rule of its own. A large class (a
    // script's letters) is then tens of alternatives at its first byte, not
    // one per sequence, so a parser state at it holds tens of stacks.
    struct Node {
      std::vector<std::pair<std::pair<uint8_t, uint8_t>, size_t>> kids;  // (range, node index)
    };
    std::vector<Node> tree(1);
    for (const auto& seq : seqs) {
      if (seq.size() == 1) continue;
      size_t at = 0;
      for (const auto& range : seq) {
        size_t next = 0;
        for (const auto& [r, k] : tree[at].kids)
          if (r == range) next = k;
        if (next == 0) {
          next = tree.size();
          tree[at].kids.emplace_back(range, next);
          tree.emplace_back();
        }
        at = next;
      }
    }
    // A node's alternatives: each range, then the rule of what follows it.
    const auto alternatives = [&](const auto& self, size_t at, std::vector<Elem>& body) -> void {
      for (const auto& [r, k] : tree[at].kids) {
        if (!body.empty()) body.push_back({ElemType::kAlt, 0});
        ByteSet b;
        b.set_range(r.first, r.second);
        body.push_back({ElemType::kBytes, byte_set(b)});
        if (tree[k].kids.empty()) continue;
        std::vector<Elem> sub;
        self(self, k, sub);
        sub.push_back({ElemType::kEnd, 0});
        const uint32_t sub_id = generated("char", pos, /*counted=*/false);
        set_rule(sub_id, std::move(sub), pos);
        body.push_back({ElemType::kRuleRef, sub_id});
      }
    };
    std::vector<Elem> body;
    ByteSet ascii;
    bool any_ascii = false;
    for (const auto& seq : seqs)
      if (seq.size() == 1) {
        ascii.set_range(seq[0].first, seq[0].second);
        any_ascii = true;
      }
    if (any_ascii) body.push_back({ElemType::kBytes, byte_set(ascii)});
    const uint32_t id = generated("char", pos);
    alternatives(alternatives, 0, body);
    body.push_back({ElemType::kEnd, 0});
    set_rule(id, std::move(body), pos);
    class_rules_.emplace(std::move(key), id);
    return {ElemType::kRuleRef, id};
  }

  // One character of a literal or class: an escape or a UTF-8 sequence.
  std::pair<uint32_t, size_t> parse_char(size_t pos) {
    if (pos >= src_.size()) fail(pos, "unexpected end of input");
    const auto c = static_cast<uint8_t>(src_[pos]);
    if (c == '\\') {
      const char e = at(pos + 1);
      switch (e) {
        case 'x': return parse_hex(pos + 2, 2);
        case 'u': return parse_hex(pos + 2, 4);
        case 'U': return parse_hex(pos + 2, 8);
        case 't': return {'\t', pos + 2};
        case 'r': return {'\r', pos + 2};
        case 'n': return {'\n', pos + 2};
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-': return {static_cast<uint32_t>(e), pos + 2};
        default: fail(pos, std::string("unknown escape \"\\") + (e ? std::string(1, e) : std::string()) + "\"");
      }
    }
    // llama.cpp's decode_utf8: the lead byte's length, continuation bytes
    // taken as they come (a malformed sequence still yields a code point).
    static constexpr int kLen[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    const int n = kLen[c >> 4];
    static constexpr uint8_t kMask[] = {0, 0xFF, 0x1F, 0x0F, 0x07};
    uint32_t cp = c & kMask[n];
    size_t p = pos + 1;
    for (int i = 1; i < n && p < src_.size() && src_[p] != '\0'; ++i, ++p)
      cp = (cp << 6) | (static_cast<uint8_t>(src_[p]) & 0x3F);
    if (cp > kMaxCodePoint) fail(pos, "a character beyond U+10FFFF");
    return {cp, p};
  }

  std::pair<uint32_t, size_t> parse_hex(size_t pos, int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = at(pos + static_cast<size_t>(i));
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else fail(pos + static_cast<size_t>(i), "expecting " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > kMaxCodePoint) fail(pos, "a character beyond U+10FFFF");
    return {v, pos + static_cast<size_t>(digits)};
  }

  size_t parse_name_end(size_t pos) const {
    size_t e = pos;
    while (e < src_.size() && is_word_char(src_[e])) ++e;
    return e;
  }

  size_t parse_rule(size_t pos) {
    const size_t name_end = parse_name_end(pos);
    if (name_end == pos) fail(pos, "expecting a rule name");
    const std::string name(src_.substr(pos, name_end - pos));
    const uint32_t id = symbol(name, pos);
    size_t p = skip_space(name_end, false);
    if (src_.compare(p, 3, "::=") != 0) fail(p, "expecting ::=");
    p = skip_space(p + 3, true);
    std::vector<Elem> body;
    p = parse_alternates(p, name, body, false, 0, nullptr);
    set_rule(id, std::move(body), pos);
    if (at(p) == '\r') {
      p += at(p + 1) == '\n' ? 2 : 1;
    } else if (at(p) == '\n') {
      ++p;
    } else if (p < src_.size()) {
      fail(p, std::string("expecting a newline or the end, found '") + src_[p] + "'");
    }
    return skip_space(p, true);
  }

  // Alternatives into body, ended by kEnd. With `single` (a group's body):
  // when the alternatives are one symbol S{m,n} and empty ones (S{m,n} or
  // nothing: S{0,n} where m <= 1), that symbol's repetition is left
  // unexpanded in *single (body then holds S's elements alone, no kEnd), for
  // the group's own operators to compose with; else *single stays inactive.
  size_t parse_alternates(size_t pos, const std::string& name, std::vector<Elem>& body, bool nested, size_t depth,
                          Repeat* single) {
    struct Alt {
      std::vector<Elem> elems;
      Repeat rep;
      size_t last_start = 0, n_symbols = 0;
    };
    std::vector<Alt> alts(1);
    pos = parse_sequence(pos, name, alts[0].elems, nested, depth, alts[0].rep, alts[0].last_start, alts[0].n_symbols);
    while (at(pos) == '|') {
      pos = skip_space(pos + 1, true);
      Alt& a = alts.emplace_back();
      pos = parse_sequence(pos, name, a.elems, nested, depth, a.rep, a.last_start, a.n_symbols);
    }
    if (single) {
      const Alt* one = nullptr;
      bool empty = false, other = false;
      for (const Alt& a : alts) {
        if (a.n_symbols == 0) empty = true;
        else if (a.n_symbols == 1 && !one) one = &a;
        else other = true;
      }
      if (one && !other) {
        std::optional<std::pair<uint64_t, uint64_t>> counts{{one->rep.lo, one->rep.hi}};
        if (empty) counts = compose(one->rep.lo, one->rep.hi, 0, 1, lim_.max_repetition);
        if (counts) {
          *single = one->rep;
          single->active = true;
          std::tie(single->lo, single->hi) = *counts;
          if (!one->rep.active) single->pos = pos;
          body = one->elems;
          return pos;
        }
      }
    }
    for (size_t i = 0; i < alts.size(); ++i) {
      if (i > 0) body.push_back({ElemType::kAlt, 0});
      expand(alts[i].elems, alts[i].last_start, alts[i].rep, name);
      body.insert(body.end(), alts[i].elems.begin(), alts[i].elems.end());
    }
    body.push_back({ElemType::kEnd, 0});
    return pos;
  }

  // The pending repetition of out[last_start..], expanded.
  void expand(std::vector<Elem>& out, size_t last_start, Repeat& rep, const std::string& name) {
    if (!rep.active) return;
    rep.active = false;
    repeat(out, last_start, rep.lo, rep.hi, name, rep.pos);
  }

  // One sequence of symbols into out. The last symbol's repetition is left
  // pending in `rep` (its elements start at out[last_start]) for the caller to
  // expand or to compose further; n_symbols counts the symbols.
  size_t parse_sequence(size_t pos, const std::string& name, std::vector<Elem>& out, bool nested, size_t depth,
                        Repeat& rep, size_t& last_start, size_t& n_symbols) {
    rep = Repeat{};
    last_start = out.size();  // where the last symbol (what a repetition repeats) begins
    n_symbols = 0;
    bool have_last = false;
    // A new symbol: the previous one's repetition is final.
    const auto next_symbol = [&] {
      expand(out, last_start, rep, name);
      last_start = out.size();
      ++n_symbols;
    };
    while (pos < src_.size()) {
      const char c = src_[pos];
      const size_t here = pos;
      if (c == '"') {
        next_symbol();
        ++pos;
        while (at(pos) != '"') {
          if (pos >= src_.size()) fail(here, "unterminated string literal");
          const auto [cp, next] = parse_char(pos);
          uint8_t bytes[4];
          const int n = encode_utf8(cp, bytes);
          for (int i = 0; i < n; ++i) {
            ByteSet s;
            s.set(bytes[i]);
            out.push_back({ElemType::kBytes, byte_set(s)});
          }
          pos = next;
        }
        have_last = true;
        pos = skip_space(pos + 1, nested);
      } else if (c == '[') {
        ++pos;
        bool negate = false;
        if (at(pos) == '^') {
          negate = true;
          ++pos;
        }
        std::vector<Range> ranges;
        while (at(pos) != ']') {
          if (pos >= src_.size()) fail(here, "unterminated character class");
          const auto [lo, next] = parse_char(pos);
          pos = next;
          uint32_t hi = lo;
          if (at(pos) == '-' && at(pos + 1) != ']') {
            if (pos + 1 >= src_.size()) fail(here, "unterminated character class");
            const auto [h, next2] = parse_char(pos + 1);
            hi = h;
            pos = next2;
          }
          // llama.cpp's matcher tests lo <= c <= hi, so a reversed range matches nothing.
          if (lo <= hi) ranges.push_back({lo, hi});
        }
        next_symbol();
        out.push_back(code_point_set(normalize(std::move(ranges), negate), here));
        have_last = true;
        pos = skip_space(pos + 1, nested);
      } else if (c == '<' || c == '!') {
        next_symbol();
        pos = parse_token(pos, out);
        have_last = true;
        pos = skip_space(pos, nested);
      } else if (is_word_char(c)) {
        const size_t e = parse_name_end(pos);
        next_symbol();
        out.push_back({ElemType::kRuleRef, symbol(std::string(src_.substr(pos, e - pos)), pos)});
        have_last = true;
        pos = skip_space(e, nested);
      } else if (c == '(') {
        if (depth + 1 > lim_.max_nesting)
          fail(pos, "groups nested more than " + std::to_string(lim_.max_nesting) + " deep");
        pos = skip_space(pos + 1, true);
        std::vector<Elem> body;
        Repeat single;
        pos = parse_alternates(pos, name, body, true, depth + 1, &single);
        if (at(pos) != ')') fail(pos, "expecting ')'");
        next_symbol();
        if (single.active) {
          // (S) and (S{m,n}) are S and S{m,n}: the symbol in place, its
          // repetition still open to the operators after the group.
          out.insert(out.end(), body.begin(), body.end());
          rep = single;
          rep.active = single.lo != 1 || single.hi != 1;
        } else {
          const uint32_t sub = generated(name, here);
          set_rule(sub, std::move(body), here);
          out.push_back({ElemType::kRuleRef, sub});
        }
        have_last = true;
        pos = skip_space(pos + 1, nested);
      } else if (c == '.') {
        next_symbol();
        out.push_back(code_point_set({{0, kMaxCodePoint}}, here));
        have_last = true;
        pos = skip_space(pos + 1, nested);
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) fail(pos, std::string("'") + c + "' with nothing before it to repeat");
        uint64_t lo = 0, hi = kUnbounded;
        if (c == '*') {
          pos = skip_space(pos + 1, nested);
        } else if (c == '+') {
          lo = 1;
          pos = skip_space(pos + 1, nested);
        } else if (c == '?') {
          hi = 1;
          pos = skip_space(pos + 1, nested);
        } else {
          pos = skip_space(pos + 1, nested);
          auto number = [&](size_t& p) {
            if (!(at(p) >= '0' && at(p) <= '9')) fail(p, "expecting a number");
            uint64_t v = 0;
            while (at(p) >= '0' && at(p) <= '9') {
              v = v * 10 + static_cast<uint64_t>(at(p) - '0');
              if (v > lim_.max_repetition)
                fail(p, "a repetition count over the limit of " + std::to_string(lim_.max_repetition));
              ++p;
            }
            p = skip_space(p, nested);
            return v;
          };
          if (at(pos) != ',') lo = number(pos);
          if (at(pos) == '}') {
            hi = lo;
          } else if (at(pos) == ',') {
            pos = skip_space(pos + 1, nested);
            if (at(pos) >= '0' && at(pos) <= '9') hi = number(pos);
          } else {
            fail(pos, "expecting ',' or '}'");
          }
          if (at(pos) != '}') fail(pos, "expecting '}'");
          if (hi < lo) fail(here, "a repetition {m,n} with n < m");
          pos = skip_space(pos + 1, nested);
        }
        if (!rep.active) {
          rep = {true, lo, hi, here};
        } else if (const auto both = compose(rep.lo, rep.hi, lo, hi, lim_.max_repetition)) {
          rep.lo = both->first;
          rep.hi = both->second;
        } else {
          expand(out, last_start, rep, name);
          rep = {true, lo, hi, here};
        }
        have_last = true;
      } else {
        break;
      }
    }
    return pos;
  }

  // A token terminal (llama_grammar_parser's parse_token): `<[id]>`, or
  // `<text>` whose text, brackets included, the model's tokenizer must make
  // one token of (resolved by the matcher's caller), each after an optional
  // `!` (any other token). Appends one kToken or kTokenNot element; returns
  // the position after the '>'.
  size_t parse_token(size_t pos, std::vector<Elem>& out) {
    const size_t here = pos;
    ElemType type = ElemType::kToken;
    if (at(pos) == '!') {
      type = ElemType::kTokenNot;
      ++pos;
    }
    if (at(pos) != '<') fail(pos, "expecting '<' after '!' (a token reference !<...>)");
    GrammarTokenRef ref;
    if (at(pos + 1) == '[') {
      size_t p = pos + 2;
      if (!(at(p) >= '0' && at(p) <= '9')) fail(p, "expecting a token id in <[id]>");
      int64_t id = 0;
      while (at(p) >= '0' && at(p) <= '9') {
        id = id * 10 + (at(p) - '0');
        if (id > INT32_MAX) fail(pos, "a token id over " + std::to_string(INT32_MAX));
        ++p;
      }
      if (at(p) != ']') fail(p, "expecting ']' in <[id]>");
      if (at(p + 1) != '>') fail(p + 1, "expecting '>' in <[id]>");
      ref.id = static_cast<int32_t>(id);
      pos = p + 2;
    } else {
      const size_t close = src_.find('>', pos + 1);
      if (close == std::string_view::npos) fail(here, "unterminated token reference (no '>')");
      ref.text = std::string(src_.substr(pos, close + 1 - pos));
      pos = close + 1;
    }
    const auto key = std::make_pair(ref.id, ref.text);
    auto [it, fresh] = token_ids_.emplace(key, static_cast<uint32_t>(token_refs_.size()));
    if (fresh) token_refs_.push_back(std::move(ref));
    out.push_back({type, it->second});
    return pos;
  }

  // S{lo,hi} in place of out[last_start..]: S lo times, then for an unbounded
  // hi a rule S' ::= S S' | , else hi-lo nested rules S'(k) ::= S S'(k-1) | .
  void repeat(std::vector<Elem>& out, size_t last_start, uint64_t lo, uint64_t hi, const std::string& name,
              size_t pos) {
    const std::vector<Elem> sym(out.begin() + static_cast<std::ptrdiff_t>(last_start), out.end());
    out.resize(last_start);
    if (sym.size() * std::max<uint64_t>(lo, 1) + n_elems_ > lim_.max_elements)
      fail(pos, "more than " + std::to_string(lim_.max_elements) + " grammar elements after expanding repetitions");
    for (uint64_t i = 0; i < lo; ++i) out.insert(out.end(), sym.begin(), sym.end());
    if (hi == lo) return;
    if (hi == kUnbounded) {
      const uint32_t r = generated(name, pos);
      std::vector<Elem> body(sym);
      body.push_back({ElemType::kRuleRef, r});
      body.push_back({ElemType::kAlt, 0});
      body.push_back({ElemType::kEnd, 0});
      set_rule(r, std::move(body), pos);
      out.push_back({ElemType::kRuleRef, r});
      return;
    }
    uint32_t inner = 0;
    for (uint64_t k = 0; k < hi - lo; ++k) {
      const uint32_t r = generated(name, pos);
      std::vector<Elem> body(sym);
      if (k > 0) body.push_back({ElemType::kRuleRef, inner});
      body.push_back({ElemType::kAlt, 0});
      body.push_back({ElemType::kEnd, 0});
      set_rule(r, std::move(body), pos);
      inner = r;
    }
    out.push_back({ElemType::kRuleRef, inner});
  }

  // Flattens the rules and rejects left recursion (a rule reaching itself
  // before any byte is consumed would make the matcher's expansion endless;
  // llama.cpp refuses it too: llama_grammar_detect_left_recursion).
  std::unique_ptr<Grammar::Impl> finish(uint32_t root) {
    const size_t n = rules_.size();
    // nullable[r]: rule r can match the empty string (fixed point).
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        bool alt_ok = true;
        for (const Elem& e : rules_[r]) {
          if (e.type == ElemType::kAlt || e.type == ElemType::kEnd) {
            if (alt_ok) {
              nullable[r] = 1;
              changed = true;
              break;
            }
            alt_ok = true;
          } else if (e.type != ElemType::kRuleRef || !nullable[e.value]) {
            alt_ok = false;
          }
        }
      }
    }
    // Edges r -> s where s is referenced after only nullable elements; a cycle is left recursion.
    std::vector<std::vector<uint32_t>> first(n);
    for (size_t r = 0; r < n; ++r) {
      bool open = true;
      for (const Elem& e : rules_[r]) {
        if (e.type == ElemType::kAlt || e.type == ElemType::kEnd) {
          open = true;
        } else if (open) {
          if (e.type == ElemType::kRuleRef) {
            first[r].push_back(e.value);
            if (!nullable[e.value]) open = false;
          } else {
            open = false;
          }
        }
      }
    }
    // Iterative depth-first search with colours (a deep chain must not overflow the stack).
    std::vector<uint8_t> colour(n, 0);
    for (size_t s = 0; s < n; ++s) {
      if (colour[s]) continue;
      std::vector<std::pair<uint32_t, size_t>> stack{{static_cast<uint32_t>(s), 0}};
      colour[s] = 1;
      while (!stack.empty()) {
        auto& [r, i] = stack.back();
        if (i < first[r].size()) {
          const uint32_t t = first[r][i++];
          if (colour[t] == 1) fail(first_use_[t], "left recursion in rule '" + names_[t] + "'");
          if (colour[t] == 0) {
            colour[t] = 1;
            stack.emplace_back(t, 0);
          }
        } else {
          colour[r] = 2;
          stack.pop_back();
        }
      }
    }
    auto g = std::make_unique<Grammar::Impl>();
    g->rule_start.resize(n);
    for (size_t r = 0; r < n; ++r) {
      g->rule_start[r] = static_cast<uint32_t>(g->elems.size());
      g->elems.insert(g->elems.end(), rules_[r].begin(), rules_[r].end());
    }
    g->rule_names = std::move(names_);
    g->byte_sets = std::move(sets_);
    // Bytes by membership: refine one class by each set in turn (class ids
    // stay below 256: at most one class per byte).
    std::array<uint16_t, 256> cls{};
    for (const ByteSet& set : g->byte_sets) {
      std::array<int16_t, 512> split;
      split.fill(-1);
      int16_t n_cls = 0;
      for (int b = 0; b < 256; ++b) {
        int16_t& id = split[cls[b] * 2u + (set.has(static_cast<uint8_t>(b)) ? 1 : 0)];
        if (id < 0) id = n_cls++;
        cls[b] = static_cast<uint16_t>(id);
      }
    }
    std::array<int16_t, 256> first_of;
    first_of.fill(-1);
    for (int b = 0; b < 256; ++b) {
      if (first_of[cls[b]] < 0) first_of[cls[b]] = static_cast<int16_t>(b);
      g->byte_rep[b] = static_cast<uint8_t>(first_of[cls[b]]);
    }
    g->token_refs = std::move(token_refs_);
    g->root = root;
    g->max_matcher_states = std::max<size_t>(lim_.max_matcher_states, 2);
    g->max_matcher_work = std::max<size_t>(lim_.max_matcher_work, 1);
    return g;
  }

  std::string_view src_;
  const GrammarLimits& lim_;
  std::vector<std::vector<Elem>> rules_;
  std::vector<std::string> names_;
  std::vector<char> defined_;
  std::vector<size_t> first_use_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<ByteSet> sets_;
  std::map<std::array<uint64_t, 4>, uint32_t> set_ids_;
  std::map<std::vector<uint32_t>, uint32_t> class_rules_;
  std::vector<GrammarTokenRef> token_refs_;
  std::map<std::pair<int32_t, std::string>, uint32_t> token_ids_;
  size_t n_elems_ = 0;
  size_t n_uncounted_ = 0;  // class continuation rules, outside limits.max_rules
};

}  // namespace

Grammar::Grammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Grammar::~Grammar() = default;

size_t Grammar::n_rules() const { return impl_->rule_start.size(); }
const std::vector<GrammarTokenRef>& Grammar::token_refs() const { return impl_->token_refs; }

std::shared_ptr<const Grammar> Grammar::parse(std::string_view text, std::string_view root,
                                              const GrammarLimits& limits) {
  Parser p(text, limits);
  return std::shared_ptr<const Grammar>(new Grammar(p.run(root)));
}

}  // namespace synapse
