// synapse::Tokenizer: llama.cpp's llama_tokenize / llama_token_to_piece /
// llama_detokenize (src/llama-vocab.cpp, c392e509) over a Vocab.
#include "synapse/tokenizer.hpp"

#include <string>
#include <utility>

#include "synapse/error.hpp"
#include "tokenizer/pretokenize.hpp"
#include "tokenizer/sessions.hpp"
#include "tokenizer/vocab.hpp"

namespace synapse {

using tokenizer::kNull;
using tokenizer::Vocab;
using tokenizer::VocabType;

struct Tokenizer::Impl {
  Vocab vocab;
  std::unique_ptr<tokenizer::PreTokenizer> pre;  // BPE only
};

namespace {

// One piece of the input after special tokens are split out: a token id, or
// bytes [off, off + len) of the raw text still to tokenize.
struct Fragment {
  token_id id;  // kNull for raw text
  size_t off;
  size_t len;
};

// isspace() in the "C" locale, as llama.cpp applies it to (signed) chars.
bool c_isspace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// llama_vocab::impl::tokenizer_st_partition: for each special token in cache
// order (longest first), every occurrence inside a raw fragment is cut out.
// Control and unknown tokens only with parse_special; user-defined always.
// LSTRIP/RSTRIP tokens eat the white space beside them.
std::vector<Fragment> partition(const Vocab& v, std::string_view raw, bool parse_special) {
  std::vector<Fragment> frags;
  if (raw.empty()) return frags;
  frags.push_back({kNull, 0, raw.size()});
  std::vector<Fragment> next;
  for (const token_id sid : v.special_cache) {
    const uint32_t attr = v.attr[sid];
    if (!parse_special && (attr & (tokenizer::kAttrControl | tokenizer::kAttrUnknown))) continue;
    const std::string& st = v.text[sid];
    next.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.id != kNull) {
        next.push_back(f);
        continue;
      }
      size_t off = f.off, len = f.len;
      while (true) {
        const size_t match = raw.substr(0, off + len).find(st, off);
        if (match == std::string_view::npos) {
          if (len > 0) next.push_back({kNull, off, len});
          break;
        }
        changed = true;
        if (match > off) {
          size_t left = match - off;
          if (attr & tokenizer::kAttrLstrip) {
            while (left > 0 && c_isspace(raw[off + left - 1])) --left;
          }
          if (left > 0) next.push_back({kNull, off, left});
        }
        next.push_back({sid, 0, 0});
        const size_t end = off + len;
        size_t r_off = match + st.size();
        if (r_off >= end) break;
        size_t r_len = end - r_off;
        if (attr & tokenizer::kAttrRstrip) {
          while (r_len > 0 && c_isspace(raw[r_off])) {
            ++r_off;
            --r_len;
          }
        }
        off = r_off;
        len = r_len;
        if (len == 0) break;
      }
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

std::string escape_whitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  for (char c : s) {
    if (c == ' ') {
      out += "\xE2\x96\x81";
    } else {
      out += c;
    }
  }
  return out;
}

// The three clean-up passes of llama_vocab::impl::detokenize (clean_spaces),
// done in place exactly as llama.cpp does them (later reads see earlier
// writes, including the '\0' the apostrophe pass leaves).
void clean_up_spaces(std::string& text) {
  int32_t total = static_cast<int32_t>(text.size());
  // " ?", " !", " .", " ," lose the space.
  const int32_t total1 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total1; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  }
  // " ' " loses both spaces.
  const int32_t total2 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total2; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  }
  // " 's", " 'm", " 're", " 've" lose the space.
  const int32_t total3 = total;
  total = total ? 1 : 0;
  for (int32_t i = 1; i < total3; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < total3) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  }
  text.resize(total);
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_gguf(const gguf::File& file) {
  auto impl = std::make_unique<Impl>();
  impl->vocab = Vocab::load(file);
  if (impl->vocab.type == VocabType::bpe) {
    impl->pre = std::make_unique<tokenizer::PreTokenizer>(impl->vocab.pre);
  }
  return Tokenizer(std::move(impl));
}

std::vector<token_id> Tokenizer::tokenize(std::string_view text, bool add_special,
                                          bool parse_special) const {
  const Vocab& v = impl_->vocab;
  std::vector<token_id> out;
  const std::vector<Fragment> frags = partition(v, text, parse_special);

  if (v.type == VocabType::spm) {
    // A space is prefixed to the first fragment and to every fragment that
    // follows a special token (add_space_prefix).
    bool prev_special = true;
    if (add_special && v.add_bos) out.push_back(v.bos);
    for (const Fragment& f : frags) {
      if (f.id != kNull) {
        out.push_back(f.id);
        prev_special = true;
        continue;
      }
      std::string piece;
      if (v.add_space_prefix && prev_special) piece = " ";
      piece.append(text.substr(f.off, f.len));
      tokenizer::spm_tokenize(v, escape_whitespace(piece), out);
      prev_special = false;
    }
    if (add_special && v.add_eos) out.push_back(v.eos);
    return out;
  }

  if (add_special && v.add_bos) out.push_back(v.bos);
  for (const Fragment& f : frags) {
    if (f.id != kNull) {
      out.push_back(f.id);
      continue;
    }
    std::string piece(text.substr(f.off, f.len));
    if (v.escape_whitespaces) piece = escape_whitespace(piece);
    tokenizer::bpe_tokenize(v, *impl_->pre, piece, out);
  }
  if (add_special && v.add_eos) out.push_back(v.eos);
  return out;
}

std::string Tokenizer::token_to_piece(token_id id, bool special) const {
  const Vocab& v = impl_->vocab;
  if (id < 0 || id >= v.n_vocab()) {
    throw Error(Errc::out_of_range, "token id " + std::to_string(id) + " outside [0, " +
                                        std::to_string(v.n_vocab()) + ")");
  }
  if (!special && (v.attr[id] & (tokenizer::kAttrUnknown | tokenizer::kAttrControl))) return {};
  return v.piece_cache[id];
}

std::string Tokenizer::detokenize(const std::vector<token_id>& ids, bool remove_special,
                                  bool unparse_special) const {
  const Vocab& v = impl_->vocab;
  size_t first = 0, last = ids.size();
  // The first piece loses one leading space when the vocabulary adds one.
  bool remove_space = v.add_space_prefix;
  if (remove_special && v.add_bos && last > first && ids[first] == v.bos) {
    remove_space = false;
    ++first;
  }
  if (remove_special && v.add_eos && last > first && ids[last - 1] == v.eos) --last;

  std::string text;
  for (size_t i = first; i < last; ++i) {
    const std::string piece = token_to_piece(ids[i], unparse_special);
    if (remove_space && !piece.empty() && piece[0] == ' ') {  // lstrip = 1
      text.append(piece, 1, std::string::npos);
    } else {
      text += piece;
    }
    remove_space = false;
  }
  if (v.clean_spaces) clean_up_spaces(text);
  return text;
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab.n_vocab(); }
token_id Tokenizer::bos() const { return impl_->vocab.bos; }
token_id Tokenizer::eos() const { return impl_->vocab.eos; }
token_id Tokenizer::eot() const { return impl_->vocab.eot; }
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::add_eos() const { return impl_->vocab.add_eos; }
FimTokens Tokenizer::fim() const {
  const Vocab& v = impl_->vocab;
  return {v.fim_pre, v.fim_suf, v.fim_mid, v.fim_pad, v.fim_rep, v.fim_sep};
}
bool Tokenizer::is_eog(token_id id) const {
  return id != kNull && impl_->vocab.eog.count(id) > 0;
}

std::vector<token_id> Tokenizer::eog_ids() const {
  const Vocab& v = impl_->vocab;
  std::vector<token_id> out;
  for (const token_id id : v.eog)  // a std::set: ascending
    if (id >= 0 && id < v.n_vocab()) out.push_back(id);
  return out;
}

TokenType Tokenizer::type(token_id id) const {
  const Vocab& v = impl_->vocab;
  if (id < 0 || id >= v.n_vocab())
    throw Error(Errc::out_of_range, "token id " + std::to_string(id) + " outside [0, " +
                                        std::to_string(v.n_vocab()) + ")");
  return v.ttype[id];
}

const std::string& Tokenizer::text(token_id id) const {
  const Vocab& v = impl_->vocab;
  if (id < 0 || id >= v.n_vocab())
    throw Error(Errc::out_of_range, "token id " + std::to_string(id) + " outside [0, " +
                                        std::to_string(v.n_vocab()) + ")");
  return v.text[id];
}

}  // namespace synapse
