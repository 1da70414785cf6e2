// tokenize_cases: runs texts through llama.cpp's tokenizer (as a library) and
// prints, per text, what tests/data/tokenizer/cases/<vocab>.jsonl records:
// the ids of llama_tokenize, each id's llama_token_to_piece (lstrip 0,
// special true) and llama_detokenize with unparse_special true and false.
// Our own program over the public llama.h API of the reference build; not
// part of synapse's build. Build (one line), against llama.cpp v0.5.0:
//   g++ -O2 -std=c++17 tokenize_cases.cpp -I$LC/include -I$LC/ggml/include $B/src/libllama.a
//       $B/ggml/src/libggml.a $B/ggml/src/libggml-cpu.a $B/ggml/src/libggml-base.a -fopenmp -lpthread
//       -o tokenize_cases
// Usage: tokenize_cases MODEL.gguf < cases.tsv > out.tsv
//   in:  one line per text: name TAB add_special(0/1) TAB parse_special(0/1) TAB base64(text)
//   out: name TAB ids (space-separated) TAB base64 pieces (comma-separated)
//        TAB base64(detok) TAB base64(detok_plain)
// Run it with a large stack (ulimit -s unlimited): llama.cpp's std::regex
// fallback recurses per character.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "llama.h"

static const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static std::string b64(const std::string& s) {
  std::string out;
  size_t i = 0;
  for (; i + 3 <= s.size(); i += 3) {
    const unsigned v = (unsigned char)s[i] << 16 | (unsigned char)s[i + 1] << 8 | (unsigned char)s[i + 2];
    for (int k = 3; k >= 0; --k) out += kB64[(v >> (6 * k)) & 63];
  }
  if (i + 1 == s.size()) {
    const unsigned v = (unsigned char)s[i] << 16;
    out += kB64[v >> 18], out += kB64[(v >> 12) & 63], out += "==";
  } else if (i + 2 == s.size()) {
    const unsigned v = (unsigned char)s[i] << 16 | (unsigned char)s[i + 1] << 8;
    out += kB64[v >> 18], out += kB64[(v >> 12) & 63], out += kB64[(v >> 6) & 63], out += '=';
  }
  return out;
}

static std::string unb64(const std::string& s) {
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  for (char c : s) {
    const char* p = std::char_traits<char>::find(kB64, 64, c);
    if (!p) continue;
    acc = acc << 6 | unsigned(p - kB64);
    bits += 6;
    if (bits >= 8) bits -= 8, out += char((acc >> bits) & 0xFF);
  }
  return out;
}

static std::string detok(const llama_vocab* v, const std::vector<llama_token>& ids, bool unparse) {
  std::string s(ids.size() * 64 + 64, '\0');
  int n = llama_detokenize(v, ids.data(), (int)ids.size(), s.data(), (int)s.size(), false, unparse);
  if (n < 0) {
    s.resize(-n);
    n = llama_detokenize(v, ids.data(), (int)ids.size(), s.data(), (int)s.size(), false, unparse);
  }
  s.resize(n < 0 ? 0 : n);
  return s;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tokenize_cases MODEL.gguf < in.tsv > out.tsv\n");
    return 2;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "tokenize_cases: llama.cpp refused %s\n", argv[1]);
    return 3;
  }
  const llama_vocab* v = llama_model_get_vocab(model);
  for (std::string line; std::getline(std::cin, line);) {
    std::vector<std::string> f;
    for (size_t a = 0;;) {
      const size_t b = line.find('\t', a);
      f.push_back(line.substr(a, b == std::string::npos ? std::string::npos : b - a));
      if (b == std::string::npos) break;
      a = b + 1;
    }
    if (f.size() != 4) {
      std::fprintf(stderr, "tokenize_cases: bad line: %s\n", line.c_str());
      return 4;
    }
    const std::string text = unb64(f[3]);
    const bool add = f[1] == "1", parse = f[2] == "1";
    std::vector<llama_token> ids(text.size() + 16);
    int n = llama_tokenize(v, text.data(), (int)text.size(), ids.data(), (int)ids.size(), add, parse);
    if (n < 0) {
      ids.resize(-n);
      n = llama_tokenize(v, text.data(), (int)text.size(), ids.data(), (int)ids.size(), add, parse);
    }
    ids.resize(n);
    std::string out = f[0] + "\t";
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
    out += "\t";
    for (size_t i = 0; i < ids.size(); ++i) {
      char buf[512];
      const int m = llama_token_to_piece(v, ids[i], buf, sizeof buf, 0, true);
      out += (i ? "," : "") + b64(std::string(buf, m < 0 ? 0 : m));
    }
    out += "\t" + b64(detok(v, ids, true)) + "\t" + b64(detok(v, ids, false));
    std::cout << out << "\n";
  }
  llama_model_free(model);
  return 0;
}
