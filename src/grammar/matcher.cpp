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
  std::vector<uint64_t> classes;  // per node: byte_class bits of every byte of its subtree, its own included
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
  // Subtree classes, children before parents (reverse depth-first order).
  v.classes.assign(v.nodes.size(), 0);
  for (size_t i = v.nodes.size(); i-- > 0;) {
    uint64_t c = uint64_t{1} << Impl::byte_class(v.nodes[i].byte);
    for (size_t j = i + 1; j < v.nodes[i].skip; j = v.nodes[j].skip) c |= v.classes[j];
    v.classes[i] = c;
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
  std::unordered_map<uint64_t, uint32_t> node_ids;
  // States: id 0 is the dead state (no stack).
  std::vector<std::vector<uint32_t>> stacks{{}};
  std::vector<ByteSet> allowed{ByteSet{}};  // bytes some stack's top accepts
  std::vector<char> accepting{0};           // holds the empty stack
  std::vector<char> has_tokens{0};          // some stack's top is a token terminal
  std::vector<int32_t> trans;               // [state * 256 + byte]: next state, -1 unknown
  std::vector<int64_t> loops;               // per state: classes whose every byte leads back to it; -1 unknown
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

  uint32_t node(uint32_t pos, uint32_t rest) {
    const uint64_t key = (uint64_t{pos} << 32) | rest;
    const auto [it, fresh] = node_ids.emplace(key, static_cast<uint32_t>(nodes.size()));
    if (fresh) nodes.emplace_back(pos, rest);
    return it->second;
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
    loops.push_back(-1);
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

  uint32_t step(uint32_t state, uint8_t byte) {
    if (!allowed[state].has(byte)) return 0;
    const size_t k = size_t{state} * 256 + byte;
    if (trans[k] < 0) {
      const uint32_t next = step_uncached(state, byte);
      trans[k] = static_cast<int32_t>(next);  // `trans` may have grown: index again
    }
    return static_cast<uint32_t>(trans[k]);
  }

  // The classes (TokenVocabulary::Impl::byte_class) all of whose bytes step
  // from `state` back to `state`: inside a JSON string, every ASCII class but
  // '"', '\\' and the control bytes.
  uint64_t loop_classes(uint32_t state) {
    if (loops[state] >= 0) return static_cast<uint64_t>(loops[state]);
    uint64_t seen = 0, bad = 0;
    for (int b = 0; b < 256; ++b) {
      const uint64_t bit = uint64_t{1} << TokenVocabulary::Impl::byte_class(static_cast<uint8_t>(b));
      seen |= bit;
      if ((bad & bit) == 0 && step(state, static_cast<uint8_t>(b)) != state) bad |= bit;
    }
    loops[state] = static_cast<int64_t>(seen & ~bad);
    return seen & ~bad;
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
    loops.assign(1, 0);
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
  s.loops.assign(1, 0);
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
  if (s.has_tokens[s.cur]) s.token_terminal_mask(words);
  if (s.accepting[s.cur])
    for (const int32_t t : s.v->eog_ids) words[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  const auto& nodes = s.v->nodes;
  const uint64_t* classes = s.v->classes.data();
  const int32_t* tokens = s.v->tokens.data();
  const auto n_tokens = static_cast<uint32_t>(s.v->tokens.size());
  uint32_t* st = s.walk.data();
  st[0] = s.cur;
  // A subtree reached from the start state whose every byte loops back to it
  // is allowed whole, without walking it (a string's characters).
  const uint64_t loop = s.allowed[s.cur].w[0] | s.allowed[s.cur].w[1] ? s.loop_classes(s.cur) : 0;
  const size_t n = nodes.size();
  for (size_t i = 0; i < n;) {
    const auto& nd = nodes[i];
    const uint32_t ps = st[nd.depth - 1];
    if (ps == s.cur && (classes[i] & ~loop) == 0) {
      const uint32_t end = nd.skip < n ? nodes[nd.skip].tok_begin : n_tokens;
      for (uint32_t k = nd.tok_begin; k < end; ++k)
        words[static_cast<size_t>(tokens[k]) >> 6] |= uint64_t{1} << (tokens[k] & 63);
      i = nd.skip;
      continue;
    }
    const uint32_t ns = s.step(ps, nd.byte);
    if (ns == 0) {
      i = nd.skip;
      continue;
    }
    st[nd.depth] = ns;
    for (uint32_t k = nd.tok_begin; k < nd.tok_end; ++k)
      words[static_cast<size_t>(tokens[k]) >> 6] |= uint64_t{1} << (tokens[k] & 63);
    ++i;
  }
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
