// Byte-level BPE as llama.cpp's llm_tokenizer_bpe_session (src/llama-vocab.cpp,
// c392e509): pre-tokenize, then in each word merge the adjacent pair with the
// lowest merge rank (ties: leftmost) until no pair has a rank.
#include <algorithm>
#include <unordered_map>

#include "tokenizer/sessions.hpp"
#include "tokenizer/unicode.hpp"

namespace synapse::tokenizer {

namespace {

struct Symbol {
  int prev;
  int next;
  size_t off;  // into the word
  size_t n;    // bytes; 0 once merged into the left neighbour
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  uint32_t size;  // bytes of the pair when queued (stale check; a token text's length)
};

// Lowest rank first; among equal ranks the smaller `left`.
struct BigramGreater {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

// Scratch space reused across the words of one text.
struct Scratch {
  std::vector<Symbol> sym;
  std::vector<Bigram> queue;
};

void merge_word(const Vocab& vocab, const std::string& word, Scratch& scratch, std::vector<token_id>& out) {
  std::vector<Symbol>& sym = scratch.sym;
  sym.clear();
  if (vocab.ignore_merges) {
    // Llama 3 / Tekken: a word that is a whole token is taken as it is.
    const token_id id = vocab.find(word);
    if (id != kNull) {
      out.push_back(id);
      return;
    }
  }
  sym.reserve(word.size());
  for (size_t off = 0; off < word.size();) {
    const size_t len = std::min(utf8_len(static_cast<uint8_t>(word[off])), word.size() - off);
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, off + len == word.size() ? -1 : idx + 1, off, len});
    off += len;
  }
  if (sym.empty()) return;

  std::vector<Bigram>& queue = scratch.queue;
  queue.clear();
  const BigramGreater greater;
  const std::string_view w(word);
  const auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view a = w.substr(sym[left].off, sym[left].n);
    const std::string_view b = w.substr(sym[right].off, sym[right].n);
    const int32_t rank = vocab.rank(a, b);
    if (rank < 0) return;
    queue.push_back({left, right, rank, static_cast<uint32_t>(a.size() + b.size())});
    std::push_heap(queue.begin(), queue.end(), greater);
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), greater);
    const Bigram b = queue.back();
    queue.pop_back();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0) continue;
    // Stale unless the two symbols still spell the queued pair. A symbol's
    // start never moves, so the same start, adjacency and length mean the same
    // text as llama.cpp's string comparison.
    if (l.n + r.n != b.size || l.off + l.n != r.off) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = 0; i != -1; i = sym[i].next) {
    const Symbol& s = sym[i];
    if (s.n == 0) continue;
    const std::string_view piece = w.substr(s.off, s.n);
    const token_id id = vocab.find(piece);
    if (id != kNull) {
      out.push_back(id);
      continue;
    }
    // No token: each byte of the (byte-encoded) text that is a token itself.
    for (char c : piece) {
      const token_id bid = vocab.find(std::string(1, c));
      if (bid != kNull) out.push_back(bid);
    }
  }
}

}  // namespace

// Natural text repeats its words, so each distinct word of `text` is merged
// once and its ids reused (merge_word depends on the word alone).
void bpe_tokenize(const Vocab& vocab, const PreTokenizer& pre, const std::string& text,
                  std::vector<token_id>& out) {
  Scratch scratch;
  std::unordered_map<std::string, std::pair<size_t, size_t>> seen;  // word -> [first, count) in `out`
  for (std::string& word : pre.split(text, /*byte_encode=*/true)) {
    const auto it = seen.find(word);
    if (it != seen.end()) {
      const auto [first, count] = it->second;
      for (size_t i = 0; i < count; ++i) out.push_back(out[first + i]);
      continue;
    }
    const size_t first = out.size();
    merge_word(vocab, word, scratch, out);
    seen.emplace(std::move(word), std::make_pair(first, out.size() - first));
  }
}

}  // namespace synapse::tokenizer
