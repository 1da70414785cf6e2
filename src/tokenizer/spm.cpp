// SentencePiece (BPE variant with scores) as llama.cpp's llm_tokenizer_spm
// (src/llama-vocab.cpp, c392e509).
//
// Symbols start as UTF-8 characters (length from the lead byte, clamped to the
// text). Repeatedly, the adjacent pair whose concatenation is a vocabulary
// token with the highest score is merged (ties: leftmost pair). Each final
// symbol is a token, or is spelled with <0xXX> byte tokens.
#include <queue>

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
  size_t size;  // bytes of the pair when it was queued (stale check)
};

// Highest score first; among equal scores the smaller `left`.
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

}  // namespace

void spm_tokenize(const Vocab& vocab, const std::string& text, std::vector<token_id>& out) {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }
  if (sym.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  std::string pair;
  const auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    pair.assign(text, sym[left].off, sym[left].n + sym[right].n);
    const token_id id = vocab.find(pair);
    if (id == kNull) return;
    queue.push({left, right, vocab.score[id], pair.size()});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
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
  for (int i = 0; i != -1; i = sym[i].next) {
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

}  // namespace synapse::tokenizer
