// The vocabulary trie and the matcher of a constrained reply.
//
// The parser state is llama.cpp's: a set of stacks of grammar positions
// (llama_grammar_stacks), each stack's top a byte terminal or the stack empty
// (the root rule is complete). Here stacks are persistent lists hash-consed
// into ids (node = position + id of the rest), and each distinct set of stacks
// is interned as a state id, so the state after a byte is a table entry
// computed once per (state, byte): a lazily built DFA over the grammar's
// pushdown states. The mask walks the vocabulary trie (tokens' bytes in
// depth-first order, llguidance's and llama.cpp PR #4306's idea) through that
// table and skips a subtree at the first byte no stack accepts; masks of a
// state already seen in this reply come from a cache.
//
// Token terminals (<[id]>, !<[id]>) are stack tops too, but only at a token's
// start: a byte drops the stacks they top (a token's bytes never cross one,
// as in llama.cpp's llama_grammar_accept_chr), a token ending exactly at one
// leaves it for the next token, and the next state after token t is the
// union of its bytes' walk and the token terminals t matches. The mask ORs in
// those terminals' tokens; a grammar without them pays one flag test.
//
// Everything a matcher computes is a function of the grammar and the tokens it
// accepted, never of timing or other requests (contract G1).
#include <algorithm>
#include <array>
#include <iterator>
#include <cstring>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/grammar_impl.hpp"
#include "synapse/error.hpp"

namespace synapse {

using grammar::ByteSet;
using grammar::ElemType;

// A byte at a character boundary in UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF): the continuation bytes it calls for
// (0 for ASCII, -1 for a byte no character starts with) and the range of the
// first of them (the rest are 0x80-0xBF).
struct Utf8Lead {
  int due;
  uint8_t lo, hi;
};
constexpr Utf8Lead utf8_lead(uint8_t b) {
  if (b < 0x80) return {0, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b >= 0xE0 && b <= 0xEF)
    return {2, static_cast<uint8_t>(b == 0xE0 ? 0xA0 : 0x80), static_cast<uint8_t>(b == 0xED ? 0x9F : 0xBF)};
  if (b >= 0xF0 && b <= 0xF4)
    return {3, static_cast<uint8_t>(b == 0xF0 ? 0x90 : 0x80), static_cast<uint8_t>(b == 0xF4 ? 0x8F : 0xBF)};
  return {-1, 0, 0};
}

struct TokenVocabulary::Impl {
  struct Node {
    uint8_t byte;
    uint16_t depth;     // 1 for a first byte
    uint32_t skip;      // index of the first node after this node's subtree
    uint32_t tok_begin;  // tokens ending here: tokens[tok_begin, tok_end)
    uint32_t tok_end;
  };
  int32_t n_vocab = 0;
  std::vector<std::string> pieces;
  std::vector<char> eog;
  std::vector<int32_t> eog_ids;
  std::vector<Node> nodes;
  // Per node, its subtree's bytes read as UTF-8 from a character boundary at
  // the node (a boundary on its token's path, or after an invalid byte):
  // kinds, the kinds of the characters started in it (byte_class of an ASCII
  // byte; a 2-, 3- or 4-byte lead's class for a character of that length;
  // the invalid class for a byte invalid there); chars, the most characters
  // one of its paths starts; at, the characters its path starts before it,
  // and whether it is at a boundary at all (a continuation byte is not).
  std::vector<uint64_t> trie_tokens;  // a mask of every token in the trie (not EOG, not empty)
  std::vector<uint64_t> kinds;
  std::vector<uint16_t> chars;
  std::vector<uint16_t> at;
  std::vector<char> boundary;
  std::vector<int32_t> tokens;
  size_t max_depth = 0;

  // Bytes grouped for the walk's shortcut: each ASCII punctuation mark, \t,
  // \n, \r and DEL alone; digits, lower- and upper-case letters, the other
  // control bytes, and each kind of non-ASCII byte (continuation, 2-, 3-,
  // 4-byte lead, invalid) as one class each. 47 classes.
  static int byte_class(uint8_t b) {
    if (b >= '0' && b <= '9') return 0;
    if (b >= 'a' && b <= 'z') return 1;
    if (b >= 'A' && b <= 'Z') return 2;
    if (b == '\t') return 3;
    if (b == '\n') return 4;
    if (b == '\r') return 5;
    if (b < 0x20) return 6;
    if (b == 0x7F) return 7;
    if (b >= 0x80 && b <= 0xBF) return 8;
    if (b >= 0xC2 && b <= 0xDF) return 9;
    if (b >= 0xE0 && b <= 0xEF) return 10;
    if (b >= 0xF0 && b <= 0xF4) return 11;
    if (b >= 0x80) return 12;
    // 0x20-0x2F, 0x3A-0x40, 0x5B-0x60, 0x7B-0x7E: 33 marks, classes 13-45.
    if (b <= 0x2F) return 13 + (b - 0x20);
    if (b <= 0x40) return 29 + (b - 0x3A);
    if (b <= 0x60) return 36 + (b - 0x5B);
    return 42 + (b - 0x7B);
  }
};

TokenVocabulary::TokenVocabulary(std::vector<std::string> pieces, std::vector<bool> eog)
    : impl_(std::make_unique<Impl>()) {
  Impl& v = *impl_;
  if (pieces.size() != eog.size())
    throw Error(Errc::invalid_argument, "TokenVocabulary: " + std::to_string(pieces.size()) + " pieces but " +
                                            std::to_string(eog.size()) + " end-of-generation flags");
  if (pieces.size() > static_cast<size_t>(INT32_MAX) || pieces.empty())
    throw Error(Errc::invalid_argument, "TokenVocabulary: a vocabulary of " + std::to_string(pieces.size()) + " tokens");
  v.n_vocab = static_cast<int32_t>(pieces.size());
  v.eog.resize(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    v.eog[i] = eog[i] ? 1 : 0;
    if (eog[i]) v.eog_ids.push_back(static_cast<int32_t>(i));
  }
  v.pieces = std::move(pieces);
  // Tokens in byte order (ties by id): the trie's depth-first order.
  std::vector<int32_t> order;
  for (int32_t i = 0; i < v.n_vocab; ++i)
    if (!v.eog[static_cast<size_t>(i)] && !v.pieces[static_cast<size_t>(i)].empty()) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const int c = v.pieces[static_cast<size_t>(a)].compare(v.pieces[static_cast<size_t>(b)]);
    return c < 0 || (c == 0 && a < b);
  });
  std::vector<uint32_t> path;  // node index per depth - 1 of the previous piece
  const std::string* prev = nullptr;
  for (const int32_t t : order) {
    const std::string& p = v.pieces[static_cast<size_t>(t)];
    if (p.size() > UINT16_MAX) throw Error(Errc::invalid_argument, "TokenVocabulary: token " + std::to_string(t) + " is longer than 65535 bytes");
    size_t lcp = 0;
    if (prev) {
      while (lcp < prev->size() && lcp < p.size() && (*prev)[lcp] == p[lcp]) ++lcp;
    }
    while (path.size() > lcp) {
      v.nodes[path.back()].skip = static_cast<uint32_t>(v.nodes.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < p.size(); ++d) {
      path.push_back(static_cast<uint32_t>(v.nodes.size()));
      const auto n = static_cast<uint32_t>(v.tokens.size());
      v.nodes.push_back({static_cast<uint8_t>(p[d]), static_cast<uint16_t>(d + 1), 0, n, n});
    }
    v.tokens.push_back(t);
    v.nodes[path.back()].tok_end = static_cast<uint32_t>(v.tokens.size());
    v.max_depth = std::max(v.max_depth, p.size());
    prev = &p;
  }
  while (!path.empty()) {
    v.nodes[path.back()].skip = static_cast<uint32_t>(v.nodes.size());
    path.pop_back();
  }
  v.trie_tokens.assign((static_cast<size_t>(v.n_vocab) + 63) / 64, 0);
  for (const int32_t t : v.tokens) v.trie_tokens[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  // UTF-8 on each path, parents before children (depth-first order): the
  // bytes the next one may be (a boundary: lo > hi) and the continuation
  // bytes still due, per depth.
  const size_t n_nodes = v.nodes.size();
  v.kinds.assign(n_nodes, 0);
  v.chars.assign(n_nodes, 0);
  v.at.assign(n_nodes, 0);
  v.boundary.assign(n_nodes, 0);
  struct Utf8 {
    uint8_t lo = 1, hi = 0, due = 0;  // the next byte's range while due > 0
    uint16_t started = 0;             // characters started on the path
  };
  std::vector<Utf8> dec(v.max_depth + 2);
  std::vector<char> own_invalid(n_nodes, 0);
  for (size_t i = 0; i < n_nodes; ++i) {
    const size_t d = v.nodes[i].depth;
    const Utf8 in = dec[d - 1];
    const uint8_t b = v.nodes[i].byte;
    Utf8 out = in;
    v.at[i] = in.started;
    if (in.due > 0) {
      if (b >= in.lo && b <= in.hi) {
        out.due = static_cast<uint8_t>(in.due - 1);
        out.lo = 0x80;
        out.hi = 0xBF;
      } else {
        own_invalid[i] = 1;
        out = {1, 0, 0, in.started};  // read on from a boundary
      }
    } else {
      v.boundary[i] = 1;
      const Utf8Lead lead = utf8_lead(b);
      if (lead.due < 0) {
        own_invalid[i] = 1;
        out = {1, 0, 0, in.started};
      } else {
        out = {lead.lo, lead.hi, static_cast<uint8_t>(lead.due),
               static_cast<uint16_t>(std::min<int>(in.started + 1, UINT16_MAX))};
      }
    }
    dec[d] = out;
  }
  // Subtree summaries, children before parents (reverse depth-first order).
  constexpr int kInvalid = 12;
  for (size_t i = n_nodes; i-- > 0;) {
    const uint8_t b = v.nodes[i].byte;
    uint64_t k = 0;
    if (own_invalid[i]) {
      k = uint64_t{1} << kInvalid;
    } else if (v.boundary[i]) {
      k = uint64_t{1} << Impl::byte_class(b);
    }
    uint16_t c = 0;
    for (size_t j = i + 1; j < v.nodes[i].skip; j = v.nodes[j].skip) {
      k |= v.kinds[j];
      c = std::max(c, v.chars[j]);
    }
    v.kinds[i] = k;
    v.chars[i] = static_cast<uint16_t>(std::min<int>(c + (v.boundary[i] ? 1 : 0), UINT16_MAX));
  }
}

TokenVocabulary::~TokenVocabulary() = default;
int32_t TokenVocabulary::n_vocab() const { return impl_->n_vocab; }

struct GrammarMatcher::State {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenVocabulary> vocab;
  const Grammar::Impl* g;
  const TokenVocabulary::Impl* v;

  // Stack nodes: id 0 is the empty stack.
  std::vector<std::pair<uint32_t, uint32_t>> nodes{{0, 0}};  // (position, rest)
  // (position << 32 | rest) -> node id, open addressing (a closure looks up
  // tens of nodes; std::unordered_map's allocation per new key cost more than
  // the rest of it). kEmpty is no key: positions are below 2^32 - 1.
  struct NodeIds {
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    std::vector<uint64_t> keys;
    std::vector<uint32_t> ids;
    size_t used = 0;
    void clear() {
      keys.assign(1024, kEmpty);
      ids.assign(1024, 0);
      used = 0;
    }
    static size_t slot_of(uint64_t key, size_t mask) {
      return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
    }
    // The id of key, inserting next_id when new; fresh tells which.
    uint32_t find_or_add(uint64_t key, uint32_t next_id, bool& fresh) {
      if (keys.empty()) clear();
      if ((used + 1) * 2 > keys.size()) grow();
      const size_t mask = keys.size() - 1;
      for (size_t i = slot_of(key, mask);; i = (i + 1) & mask) {
        if (keys[i] == key) {
          fresh = false;
          return ids[i];
        }
        if (keys[i] == kEmpty) {
          keys[i] = key;
          ids[i] = next_id;
          ++used;
          fresh = true;
          return next_id;
        }
      }
    }
    void grow() {
      std::vector<uint64_t> old_keys(keys.size() * 2, kEmpty);
      std::vector<uint32_t> old_ids(keys.size() * 2, 0);
      old_keys.swap(keys);
      old_ids.swap(ids);
      const size_t mask = keys.size() - 1;
      for (size_t k = 0; k < old_keys.size(); ++k) {
        if (old_keys[k] == kEmpty) continue;
        size_t i = slot_of(old_keys[k], mask);
        while (keys[i] != kEmpty) i = (i + 1) & mask;
        keys[i] = old_keys[k];
        ids[i] = old_ids[k];
      }
    }
  };
  NodeIds node_ids;
  // States: id 0 is the dead state (no stack).
  std::vector<std::vector<uint32_t>> stacks{{}};
  std::vector<ByteSet> allowed{ByteSet{}};  // bytes some stack's top accepts
  std::vector<char> accepting{0};           // holds the empty stack
  std::vector<char> has_tokens{0};          // some stack's top is a token terminal
  std::vector<int32_t> trans;               // [state * 256 + byte]: next state, -1 unknown
  // Per state: the byte classes (TokenVocabulary::Impl::byte_class) all of
  // whose bytes step to one live state, uni_next, the same for all of them
  // (of the candidates, the one most classes lead to); -1 unknown.
  static constexpr uint64_t kMultiByte = 0xE00;  // byte_class 9, 10, 11: 2-, 3-, 4-byte characters
  std::vector<int64_t> uni{0};
  std::vector<uint32_t> uni_next{0};
  std::vector<uint64_t> mb_known{kMultiByte};  // the multi-byte kinds uni[state] has been tested for
  // Per state: its byte representatives (state_rep), an index into reps; -1 not yet needed.
  std::vector<int32_t> reps_of{-1};
  std::vector<std::array<uint8_t, 256>> reps;
  struct VecHash {
    size_t operator()(const std::vector<uint32_t>& s) const {
      uint64_t h = 1469598103934665603ull;
      for (const uint32_t x : s) h = (h ^ x) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };
  std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> state_ids;
  std::unordered_map<uint32_t, std::vector<uint64_t>> mask_cache;
  size_t mask_cache_words = 0;

  uint32_t cur = 0;
  bool ended = false;  // an end-of-generation token was accepted

  std::vector<int32_t> ref_id;  // token id of each of g->token_refs
  int32_t n_plain = 0;          // tokens that are not end of generation

  // Work left to this call (GrammarLimits::max_matcher_work): one per
  // alternative a closure expands and per stack a new transition steps.
  size_t budget = 0;
  size_t stack_entries = 0;  // over every state's stacks: with nodes, compact() past 4x max_matcher_work

  void begin_call() { budget = g->max_matcher_work; }

  void spend(size_t n) {
    if (n <= budget) {
      budget -= n;
      return;
    }
    throw Error(Errc::invalid_argument,
                "grammar: more than " + std::to_string(g->max_matcher_work) +
                    " parser steps for one token (max_matcher_work): the grammar is too ambiguous; repetitions "
                    "nested in repetitions (x ::= \"x\"+ then y ::= x+ ...) multiply its parses with every byte");
  }

  // Scratch for closures: visit stamps per stack node.
  std::vector<uint32_t> stamp;
  uint32_t epoch = 0;
  std::vector<uint32_t> work, out;
  std::vector<uint32_t> walk;  // state per trie depth
  // fill_mask's chain from cur: chain[j] = uni_next of chain[j - 1]; when
  // chain_fixed, the last one is its own uni_next (and so every later one).
  std::vector<uint32_t> chain;
  bool chain_fixed = false;
  std::vector<std::pair<uint32_t, uint32_t>> runs_on, runs_off;  // fill_mask's intervals of `tokens`

  uint32_t node(uint32_t pos, uint32_t rest) {
    const uint64_t key = (uint64_t{pos} << 32) | rest;
    bool fresh = false;
    const uint32_t id = node_ids.find_or_add(key, static_cast<uint32_t>(nodes.size()), fresh);
    if (fresh) nodes.emplace_back(pos, rest);
    return id;
  }

  // The stacks reached from `work` by expanding rule references until every
  // top is a byte terminal (llama_grammar_advance_stack), deduplicated and
  // interned as a state. A reference that ends its alternative is replaced,
  // not pushed (tail calls), so right recursion does not grow the stack.
  uint32_t closure() {
    ++epoch;
    out.clear();
    while (!work.empty()) {
      const uint32_t s = work.back();
      work.pop_back();
      if (s >= stamp.size()) stamp.resize(nodes.size() * 2 + 16, 0);
      if (stamp[s] == epoch) continue;
      stamp[s] = epoch;
      if (s == 0) {
        out.push_back(0);
        continue;
      }
      const auto [pos, rest] = nodes[s];
      const grammar::Elem e = g->elems[pos];
      if (e.type == ElemType::kBytes) {
        // A class that matches nothing ([^\x00-\U0010FFFF]) is a dead end:
        // dropped, so that no token leads into a state with no way on.
        const ByteSet& b = g->byte_sets[e.value];
        if (b.w[0] | b.w[1] | b.w[2] | b.w[3]) out.push_back(s);
        continue;
      }
      if (e.type == ElemType::kToken || e.type == ElemType::kTokenNot) {
        // Dead ends too: <eog> (end of generation is the grammar's accepting,
        // never a terminal) and a !<t> with no other token to take.
        const int32_t id = ref_id[e.value];
        const bool id_plain = !v->eog[static_cast<size_t>(id)];
        if (e.type == ElemType::kToken ? id_plain : n_plain > (id_plain ? 1 : 0)) out.push_back(s);
        continue;
      }
      // kRuleRef (a node never points at the end of an alternative).
      const uint32_t cont = g->ends(pos + 1) ? rest : node(pos + 1, rest);
      for (uint32_t a = g->rule_start[e.value];;) {
        spend(1);
        work.push_back(g->ends(a) ? cont : node(a, cont));
        while (!g->ends(a)) ++a;
        if (g->elems[a].type == ElemType::kEnd) break;
        ++a;
      }
    }
    std::sort(out.begin(), out.end());
    return intern(out);
  }

  uint32_t intern(const std::vector<uint32_t>& set) {
    if (set.empty()) return 0;
    const auto [it, fresh] = state_ids.emplace(set, static_cast<uint32_t>(stacks.size()));
    if (!fresh) return it->second;
    ByteSet bytes;
    bool acc = false, tok = false;
    for (const uint32_t s : set) {
      if (s == 0) {
        acc = true;
        continue;
      }
      const grammar::Elem e = g->elems[nodes[s].first];
      if (e.type != ElemType::kBytes) {
        tok = true;
        continue;
      }
      const ByteSet& b = g->byte_sets[e.value];
      for (int i = 0; i < 4; ++i) bytes.w[i] |= b.w[i];
    }
    stacks.push_back(set);
    stack_entries += set.size();
    allowed.push_back(bytes);
    accepting.push_back(acc ? 1 : 0);
    has_tokens.push_back(tok ? 1 : 0);
    trans.resize(trans.size() + 256, -1);
    uni.push_back(-1);
    uni_next.push_back(0);
    mb_known.push_back(0);
    reps_of.push_back(-1);
    return it->second;
  }

  uint32_t step_uncached(uint32_t state, uint8_t byte) {
    spend(stacks[state].size());
    work.clear();
    for (const uint32_t s : stacks[state]) {
      if (s == 0) continue;
      const auto [pos, rest] = nodes[s];
      const grammar::Elem e = g->elems[pos];
      if (e.type != ElemType::kBytes || !g->byte_sets[e.value].has(byte)) continue;
      work.push_back(g->ends(pos + 1) ? rest : node(pos + 1, rest));
    }
    return closure();
  }

  // The representative of byte's class at `state`: the first byte of the
  // grammar's byte classes (Grammar::Impl::byte_rep) in exactly the same of
  // state's stack tops as byte. Those step alike from this state, so one
  // transition is computed per class of this state's tops (inside a string:
  // its characters, '"', '\\', the rest), not per class of the grammar.
  uint8_t state_rep(uint32_t state, uint8_t byte) {
    if (reps_of[state] < 0) {
      std::vector<uint32_t> sets;  // the byte sets atop state's stacks
      for (const uint32_t n : stacks[state]) {
        if (n == 0) continue;
        const grammar::Elem e = g->elems[nodes[n].first];
        if (e.type == ElemType::kBytes) sets.push_back(e.value);
      }
      std::sort(sets.begin(), sets.end());
      sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
      std::array<uint8_t, 256> rep;
      if (sets.size() > 64) {
        rep = g->byte_rep;
      } else {
        // Signatures of the grammar's representatives; bytes take theirs.
        std::array<uint64_t, 256> sig{};
        std::vector<uint8_t> firsts;  // representatives with a new signature, in byte order
        std::array<uint8_t, 256> own{};
        for (int b = 0; b < 256; ++b) {
          const uint8_t r = g->byte_rep[b];
          if (r == b) {
            uint64_t x = 0;
            for (size_t k = 0; k < sets.size(); ++k)
              if (g->byte_sets[sets[k]].has(r)) x |= uint64_t{1} << k;
            sig[r] = x;
            own[r] = r;
            for (const uint8_t f : firsts)
              if (sig[f] == x) {
                own[r] = f;
                break;
              }
            if (own[r] == r) firsts.push_back(r);
          }
          rep[b] = own[r];
        }
      }
      reps_of[state] = static_cast<int32_t>(reps.size());
      reps.push_back(rep);
    }
    return reps[static_cast<size_t>(reps_of[state])][byte];
  }

  uint32_t step(uint32_t state, uint8_t byte) {
    if (!allowed[state].has(byte)) return 0;
    const size_t k = size_t{state} * 256 + byte;
    if (trans[k] < 0) {
      // Bytes in the same of this state's byte sets step alike.
      const uint8_t rb = state_rep(state, byte);
      const size_t r = size_t{state} * 256 + rb;
      if (trans[r] < 0) {
        const uint32_t next = step_uncached(state, rb);
        trans[r] = static_cast<int32_t>(next);  // `trans` may have grown: index again
      }
      trans[k] = trans[r];
    }
    return static_cast<uint32_t>(trans[k]);
  }

  // The one state every valid UTF-8 character of `len` bytes leads to from
  // `state` (each of its prefixes then leads to a live state); 0 if none.
  // The states after each prefix are few: searched as sets, not per byte.
  uint32_t char_target(uint32_t state, int len) {
    struct Item {
      uint32_t s;
      uint8_t lo, hi;
    };
    std::vector<Item> level, next;
    const auto add = [](std::vector<Item>& to, Item it) {
      for (const Item& x : to)
        if (x.s == it.s && x.lo == it.lo && x.hi == it.hi) return;
      to.push_back(it);
    };
    for (int b = 0x80; b < 0x100; ++b) {
      const Utf8Lead lead = utf8_lead(static_cast<uint8_t>(b));
      if (lead.due != len - 1) continue;
      const uint32_t m = step(state, static_cast<uint8_t>(b));
      if (m == 0) return 0;
      add(level, {m, lead.lo, lead.hi});
    }
    uint32_t target = 0;
    for (int k = 1; k < len; ++k) {
      next.clear();
      for (const Item& it : level) {
        for (int b = it.lo; b <= it.hi; ++b) {
          const uint32_t m = step(it.s, static_cast<uint8_t>(b));
          if (m == 0) return 0;
          if (k + 1 < len) {
            add(next, {m, 0x80, 0xBF});
          } else if (target == 0 || target == m) {
            target = m;
          } else {
            return 0;
          }
        }
      }
      level.swap(next);
    }
    return target;
  }

  // uni[state] (and uni_next[state]): inside a JSON string, every character
  // kind but '"', '\\' and the control bytes, to the state after one more
  // character (the same state unless the string's length is bounded).
  // Kinds are TokenVocabulary::Impl::byte_class's ASCII classes and its 2-,
  // 3- and 4-byte lead classes standing for every character of that length.
  // The target is the one most ASCII classes share (ties to the smaller
  // state id); the multi-byte kinds in `need` are tested against it on first
  // use (most tokens that run long are ASCII: a chain far ahead is tested
  // for those alone).
  uint64_t uniform(uint32_t state, uint64_t need = 0) {
    if (uni[state] < 0) {
      constexpr uint32_t kUnset = UINT32_MAX;
      std::array<uint32_t, 64> to;
      to.fill(kUnset);
      uint64_t bad = 0;
      for (int b = 0; b < 0x80; ++b) {
        const int c = TokenVocabulary::Impl::byte_class(static_cast<uint8_t>(b));
        const uint64_t bit = uint64_t{1} << c;
        if (bad & bit) continue;
        const uint32_t next = step(state, static_cast<uint8_t>(b));
        if (next == 0 || (to[c] != kUnset && to[c] != next)) {
          bad |= bit;
        } else {
          to[c] = next;
        }
      }
      // Distinct targets are few (a string: its next state alone).
      std::array<std::pair<uint32_t, int>, 64> counts;
      size_t n_targets = 0;
      for (int c = 0; c < 64; ++c) {
        if (to[c] == kUnset || (bad >> c) & 1) continue;
        size_t k = 0;
        while (k < n_targets && counts[k].first != to[c]) ++k;
        if (k == n_targets) counts[n_targets++] = {to[c], 0};
        ++counts[k].second;
      }
      uint32_t best = 0;
      int best_n = 0;
      for (size_t k = 0; k < n_targets; ++k) {
        const auto [t, n] = counts[k];
        if (n > best_n || (n == best_n && t < best)) {
          best = t;
          best_n = n;
        }
      }
      uint64_t set = 0;
      for (int c = 0; c < 64; ++c)
        if (best_n > 0 && to[c] == best && !((bad >> c) & 1)) set |= uint64_t{1} << c;
      uni[state] = static_cast<int64_t>(set);
      uni_next[state] = best;
      // Without an ASCII target no multi-byte kind is tested.
      mb_known[state] = set == 0 ? kMultiByte : 0;
    }
    if (const uint64_t todo = need & kMultiByte & ~mb_known[state]) {
      for (const int len : {2, 3, 4}) {
        const uint64_t bit = uint64_t{1} << TokenVocabulary::Impl::byte_class(len == 2 ? 0xC2 : len == 3 ? 0xE0 : 0xF0);
        if (!(todo & bit)) continue;
        if (char_target(state, len) == uni_next[state]) uni[state] |= static_cast<int64_t>(bit);
        mb_known[state] |= bit;
      }
    }
    return static_cast<uint64_t>(uni[state]);
  }

  // chain[j], extending the chain as needed; 0 where it ends before j (a
  // state with no uniform step).
  uint32_t chain_at(size_t j) {
    while (j >= chain.size() && !chain_fixed) {
      const uint32_t last = chain.back();
      if (uniform(last) == 0) return 0;
      const uint32_t next = uni_next[last];
      if (next == last) {
        chain_fixed = true;
      } else {
        chain.push_back(next);
      }
    }
    return chain[std::min(j, chain.size() - 1)];
  }

  // Whether every character of kinds `cls` steps along the chain at
  // characters from + 1 .. from + h (chain[j] being the state after j
  // uniform steps from cur): then every path of up to h such characters from
  // chain[from], a last one cut short included, stays live.
  bool chain_takes(size_t from, uint64_t cls, size_t h) {
    for (size_t j = from; j < from + h; ++j) {
      const uint32_t s = chain_at(j);
      if (s == 0 || (cls & ~uniform(s, cls))) return false;
      if (chain_fixed && j + 1 >= chain.size()) return true;  // the rest is the same state
    }
    return true;
  }

  // Drops every table (stack nodes, states, transitions, cached masks) but
  // what the current state needs, re-interned. The tables are caches of pure
  // functions of the grammar, so answers do not change; this bounds a long
  // reply's memory (each state costs a 1 KiB row of transitions).
  void compact() {
    std::vector<std::vector<uint32_t>> chains;  // per stack: positions from the bottom up
    for (const uint32_t top : stacks[cur]) {
      std::vector<uint32_t> c;
      for (uint32_t n = top; n != 0; n = nodes[n].second) c.push_back(nodes[n].first);
      std::reverse(c.begin(), c.end());
      chains.push_back(std::move(c));
    }
    nodes.assign(1, {0, 0});
    node_ids.clear();
    stacks.assign(1, {});
    allowed.assign(1, ByteSet{});
    accepting.assign(1, 0);
    has_tokens.assign(1, 0);
    trans.assign(256, -1);
    uni.assign(1, 0);
    uni_next.assign(1, 0);
    mb_known.assign(1, kMultiByte);
    reps_of.assign(1, -1);
    reps.clear();
    state_ids.clear();
    stack_entries = 0;
    mask_cache.clear();
    mask_cache_words = 0;
    stamp.clear();
    std::vector<uint32_t> set;
    for (const auto& c : chains) {
      uint32_t n = 0;
      for (const uint32_t pos : c) n = node(pos, n);
      set.push_back(n);
    }
    std::sort(set.begin(), set.end());
    cur = intern(set);
  }

  // Whether the token terminal at the top of stack node s takes token id.
  bool takes(uint32_t s, int32_t id) const {
    const grammar::Elem e = g->elems[nodes[s].first];
    if (e.type == ElemType::kToken) return ref_id[e.value] == id;
    return e.type == ElemType::kTokenNot && ref_id[e.value] != id;
  }

  // The state after token id (not end of generation) from cur: its bytes'
  // walk (an empty piece has none) joined with the token terminals it
  // matches; 0 when neither goes on.
  uint32_t after(int32_t id) {
    const std::string& piece = v->pieces[static_cast<size_t>(id)];
    uint32_t s = piece.empty() ? 0 : cur;
    for (const char c : piece) {
      s = step(s, static_cast<uint8_t>(c));
      if (s == 0) break;
    }
    if (!has_tokens[cur]) return s;
    work.clear();
    for (const uint32_t n : stacks[cur]) {
      if (n == 0 || !takes(n, id)) continue;
      const uint32_t pos = nodes[n].first, rest = nodes[n].second;
      work.push_back(g->ends(pos + 1) ? rest : node(pos + 1, rest));
    }
    if (work.empty()) return s;
    const uint32_t t = closure();
    if (s == 0 || t == 0 || s == t) return s | t;
    std::vector<uint32_t> both;
    std::set_union(stacks[s].begin(), stacks[s].end(), stacks[t].begin(), stacks[t].end(), std::back_inserter(both));
    return intern(both);
  }

  // The tokens the token terminals atop cur's stacks take, into words.
  void token_terminal_mask(std::vector<uint64_t>& words) const {
    const auto set_bit = [&](int32_t t) { words[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63); };
    int64_t except = -1;  // the token every !<t> on top refuses, when they agree; -2 when none refuses it
    for (const uint32_t n : stacks[cur]) {
      if (n == 0) continue;
      const grammar::Elem e = g->elems[nodes[n].first];
      if (e.type == ElemType::kToken) {
        set_bit(ref_id[e.value]);
      } else if (e.type == ElemType::kTokenNot) {
        const int32_t t = ref_id[e.value];
        except = except == -1 || except == t ? t : -2;
      }
    }
    if (except == -1) return;
    const bool was = except >= 0 && ((words[static_cast<size_t>(except) >> 6] >> (except & 63)) & 1);
    for (int32_t t = 0; t < v->n_vocab; ++t)
      if (!v->eog[static_cast<size_t>(t)]) set_bit(t);
    if (except >= 0 && !was) words[static_cast<size_t>(except) >> 6] &= ~(uint64_t{1} << (except & 63));
  }

  void check_id(int32_t id) const {
    if (id < 0 || id >= v->n_vocab)
      throw Error(Errc::out_of_range, "grammar: token id " + std::to_string(id) + " outside the vocabulary of " +
                                          std::to_string(v->n_vocab));
  }
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab,
                               std::span<const int32_t> token_ids)
    : s_(std::make_unique<State>()) {
  if (!grammar || !vocab) throw Error(Errc::invalid_argument, "GrammarMatcher: a null grammar or vocabulary");
  State& s = *s_;
  s.grammar = std::move(grammar);
  s.vocab = std::move(vocab);
  s.g = &s.grammar->impl();
  s.v = &s.vocab->impl();
  s.trans.assign(256, -1);
  s.walk.resize(s.v->max_depth + 1);
  const auto& refs = s.g->token_refs;
  if (!token_ids.empty() && token_ids.size() != refs.size())
    throw Error(Errc::invalid_argument, "GrammarMatcher: " + std::to_string(token_ids.size()) +
                                            " token ids for a grammar of " + std::to_string(refs.size()) +
                                            " token references");
  for (size_t i = 0; i < refs.size(); ++i) {
    const std::string name = refs[i].text.empty() ? "<[" + std::to_string(refs[i].id) + "]>" : refs[i].text;
    const int32_t id = token_ids.empty() ? refs[i].id : token_ids[i];
    if (id < 0)
      throw Error(Errc::invalid_argument, "grammar: the token reference " + name + " needs the model's tokenizer");
    if (id >= s.v->n_vocab)
      throw Error(Errc::invalid_argument, "grammar: the token reference " + name + " is token " + std::to_string(id) +
                                              ", outside the vocabulary of " + std::to_string(s.v->n_vocab) + " tokens");
    s.ref_id.push_back(id);
  }
  s.n_plain = s.v->n_vocab - static_cast<int32_t>(s.v->eog_ids.size());
  s.begin_call();
  // The start: every alternative of the root rule.
  for (uint32_t a = s.g->rule_start[s.g->root];;) {
    s.work.push_back(s.g->ends(a) ? 0 : s.node(a, 0));
    while (!s.g->ends(a)) ++a;
    if (s.g->elems[a].type == ElemType::kEnd) break;
    ++a;
  }
  s.cur = s.closure();
}

GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;
GrammarMatcher::~GrammarMatcher() = default;

bool GrammarMatcher::allows(int32_t id) {
  State& s = *s_;
  s.check_id(id);
  if (s.ended) return false;
  if (s.v->eog[static_cast<size_t>(id)]) return s.accepting[s.cur] != 0;
  s.begin_call();
  return s.after(id) != 0;
}

void GrammarMatcher::accept(int32_t id) {
  State& s = *s_;
  s.check_id(id);
  if (s.ended) throw Error(Errc::invalid_argument, "grammar: a token after the end of generation");
  if (s.v->eog[static_cast<size_t>(id)]) {
    if (!s.accepting[s.cur])
      throw Error(Errc::invalid_argument, "grammar: end of generation before the grammar is complete");
    s.ended = true;
    return;
  }
  s.begin_call();
  const uint32_t next = s.after(id);
  if (next == 0)
    throw Error(Errc::invalid_argument, "grammar: token " + std::to_string(id) + " does not fit the grammar here");
  s.cur = next;
  const size_t held = std::max(s.stack_entries, s.nodes.size());
  if (s.stacks.size() > s.g->max_matcher_states || held / 4 > s.g->max_matcher_work) s.compact();
}

void GrammarMatcher::fill_mask(std::vector<uint64_t>& words) {
  State& s = *s_;
  const size_t n_words = (static_cast<size_t>(s.v->n_vocab) + 63) / 64;
  if (s.ended) {
    words.assign(n_words, 0);
    return;
  }
  if (const auto it = s.mask_cache.find(s.cur); it != s.mask_cache.end()) {
    words = it->second;
    return;
  }
  words.assign(n_words, 0);
  s.begin_call();
  const auto& nodes = s.v->nodes;
  const uint64_t* kinds = s.v->kinds.data();
  const uint16_t* chars = s.v->chars.data();
  const uint16_t* at = s.v->at.data();
  const char* boundary = s.v->boundary.data();
  const int32_t* tokens = s.v->tokens.data();
  const auto n_tokens = static_cast<uint32_t>(s.v->tokens.size());
  uint32_t* st = s.walk.data();
  st[0] = s.cur;
  // The walk splits the trie's tokens (an interval of `tokens` per subtree,
  // depth-first order) into allowed and refused runs; the cheaper side is
  // written: the allowed bits, or every trie token's bit less the refused
  // (inside a string nearly every token is allowed).
  auto& on = s.runs_on;
  auto& off = s.runs_off;
  on.clear();
  off.clear();
  size_t n_on = 0;
  const auto run = [](std::vector<std::pair<uint32_t, uint32_t>>& to, uint32_t b, uint32_t e) {
    if (b == e) return;
    if (!to.empty() && to.back().second == b) {
      to.back().second = e;
    } else {
      to.emplace_back(b, e);
    }
  };
  // A subtree whose characters all step along the chain of uniform steps
  // from cur (a string's characters: back to the same state, or to the next
  // count of a bounded length) is allowed whole, without walking it. Its
  // path's characters index the chain; any index whose state is the parent's
  // is sound (the chain from a state is a function of the state).
  s.chain.assign(1, s.cur);
  s.chain_fixed = false;
  const size_t n = nodes.size();
  for (size_t i = 0; i < n;) {
    const auto& nd = nodes[i];
    const uint32_t ps = st[nd.depth - 1];
    const uint32_t end = nd.skip < n ? nodes[nd.skip].tok_begin : n_tokens;
    if (boundary[i] && s.chain_at(at[i]) == ps && s.chain_takes(at[i], kinds[i], chars[i])) {
      run(on, nd.tok_begin, end);
      n_on += end - nd.tok_begin;
      i = nd.skip;
      continue;
    }
    const uint32_t ns = s.step(ps, nd.byte);
    if (ns == 0) {
      run(off, nd.tok_begin, end);
      i = nd.skip;
      continue;
    }
    st[nd.depth] = ns;
    run(on, nd.tok_begin, nd.tok_end);
    n_on += nd.tok_end - nd.tok_begin;
    ++i;
  }
  if (n_on * 2 <= n_tokens) {
    for (const auto& [b, e] : on)
      for (uint32_t k = b; k < e; ++k) words[static_cast<size_t>(tokens[k]) >> 6] |= uint64_t{1} << (tokens[k] & 63);
  } else {
    const uint64_t* all = s.v->trie_tokens.data();
    for (size_t w = 0; w < n_words; ++w) words[w] = all[w];
    for (const auto& [b, e] : off)
      for (uint32_t k = b; k < e; ++k) words[static_cast<size_t>(tokens[k]) >> 6] &= ~(uint64_t{1} << (tokens[k] & 63));
  }
  // Token terminals and the end of generation after the trie's bits (the
  // refused runs clear only trie tokens' bits, before these are set).
  if (s.has_tokens[s.cur]) s.token_terminal_mask(words);
  if (s.accepting[s.cur])
    for (const int32_t t : s.v->eog_ids) words[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  // A reply revisits few states (inside a string, the same one each token);
  // keep up to 64 MiB of their masks.
  if ((s.mask_cache_words + n_words) * 8 <= (size_t{64} << 20)) {
    s.mask_cache.emplace(s.cur, words);
    s.mask_cache_words += n_words;
  }
}

bool GrammarMatcher::is_complete() const { return !s_->ended && s_->accepting[s_->cur] != 0; }

bool GrammarMatcher::is_finished() const {
  const State& s = *s_;
  if (s.ended) return true;
  const ByteSet& b = s.allowed[s.cur];
  return b.w[0] == 0 && b.w[1] == 0 && b.w[2] == 0 && b.w[3] == 0 && !s.has_tokens[s.cur];
}

}  // namespace synapse
