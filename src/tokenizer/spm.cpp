// SentencePiece (BPE variant with scores) as llama.cpp's llm_tokenizer_spm
// (src/llama-vocab.cpp, c392e509).
//
// Symbols start as UTF-8 characters (length from the lead byte, clamped to the
// text). Repeatedly, the adjacent pair whose concatenation is a vocabulary
// token with the highest score is merged (ties: leftmost pair). Each final
// symbol is a token, or is spelled with <0xXX> byte tokens.
#include <algorithm>

#include "tokenizer/sessions.hpp"
#include "tokenizer/unicode.hpp"

namespace synapse::tokenizer {

namespace {

struct Symbol {
  int prev;
  int next;
  size_t off;  // into the text
  size_t n;    // bytes; 0 once merged into the left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  uint32_t size;  // bytes of the pair when it was queued (stale check; a token text's length)
};

// Highest score first; among equal scores the smaller `left`.
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

// Merges the symbols [begin, end) of `sym` (linked among themselves) and
// appends their tokens. `queue` is scratch space, left empty.
void merge_range(const Vocab& vocab, const std::string& text, std::vector<Symbol>& sym, int begin, int end,
                 std::vector<Bigram>& queue, std::string& pair, std::vector<token_id>& out) {
  sym[begin].prev = -1;
  sym[end - 1].next = -1;
  const BigramLess less;
  const auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    // No token holds the two bytes at the junction: the pair is no token (cheap test first).
    const size_t junction = sym[right].off;
    if (!vocab.pair_inside_token(static_cast<uint8_t>(text[junction - 1]), static_cast<uint8_t>(text[junction])))
      return;
    pair.assign(text, sym[left].off, sym[left].n + sym[right].n);
    const token_id id = vocab.find(pair);
    if (id == kNull) return;
    queue.push_back({left, right, vocab.score[id], static_cast<uint32_t>(pair.size())});
    std::push_heap(queue.begin(), queue.end(), less);
  };
  for (int i = begin + 1; i < end; ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), less);
    const Bigram b = queue.back();
    queue.pop_back();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  // Every merged symbol is a token; a leftover character that is not one is
  // spelled in bytes (llama.cpp's resegment: its rev_merge lookup only ever
  // holds token texts, so it never applies to a non-token symbol).
  for (int i = begin; i != -1; i = sym[i].next) {
    const Symbol& s = sym[i];
    const token_id id = vocab.find(std::string_view(text).substr(s.off, s.n));
    if (id != kNull) {
      out.push_back(id);
      continue;
    }
    for (size_t j = 0; j < s.n; ++j) {
      const token_id b = vocab.byte_to_token(static_cast<uint8_t>(text[s.off + j]));
      if (b != kNull) out.push_back(b);
    }
  }
}

}  // namespace

// llama.cpp runs one priority queue over the whole fragment; that queue grows
// to hundreds of thousands of entries on a 100 KB text and every pop misses
// the cache. A merge never crosses a boundary whose two bytes are not
// neighbours inside any token text (Vocab::pair_inside_token), so the symbols
// between such boundaries are merged as separate runs: within a run the pops
// come in the same order as in the single queue (score, then leftmost), and
// runs do not interact, so the ids are the same.
void spm_tokenize(const Vocab& vocab, const std::string& text, std::vector<token_id>& out) {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }
  std::vector<Bigram> queue;
  std::string pair;
  const int n = static_cast<int>(sym.size());
  int begin = 0;
  for (int i = 1; i <= n; ++i) {
    if (i < n && vocab.pair_inside_token(static_cast<uint8_t>(text[sym[i].off - 1]),
                                         static_cast<uint8_t>(text[sym[i].off])))
      continue;
    merge_range(vocab, text, sym, begin, i, queue, pair, out);
    begin = i;
  }
}

}  // namespace synapse::tokenizer
