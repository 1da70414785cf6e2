// synapse tokenize -m MODEL (-p TEXT | -f FILE | --stdin | --jsonl FILE) [flags]
//
// Text -> token ids with the model's vocabulary, as llama.cpp's
// llama-tokenize prints them (tools/tokenize/tokenize.cpp, v0.5.0):
//   default   one line per token: "%6d -> '%s'" (id, token_to_piece(id, special = true))
//   --ids     a Python-style list: [1, 2, 3]
//   --pieces  a Python-style list of the pieces: ['He', 'llo'] (\\, \', \n, \r,
//             \t, other control bytes and bytes that are not UTF-8 as \xNN)
//   --show-count  then "Total number of tokens: N"
// --add-special (default) adds BOS/EOS per the vocabulary's add_bos_token /
// add_eos_token (--no-add-special, or llama-tokenize's --no-bos: none);
// control and user-defined token texts in the input become their ids
// (llama-tokenize's default; --no-parse-special keeps them text). The text
// of -p, -f (read as is) and --stdin has its escapes processed (\n, \t,
// \xNN, ...: llama.cpp's -e, on by default; --no-escape turns it off).
//
// --jsonl FILE ('-' for stdin) reads one JSON object a line,
//   {"text": "..." | "text_b64": "...", "add_special": bool, "parse_special": bool}
// (the two flags default to the command-line values) and writes one a line,
//   {"ids": [...], "detok": "..."}
// where detok = detokenize(ids, remove_special = false, unparse_special = true);
// "detok_b64" (standard base64) replaces "detok" when the bytes are not UTF-8.
// A line that is not such an object stops the run: one error line naming the
// line number, exit 1 (the lines before it are already written).
//
// --bench tokenizes the -p/-f text --repeat times (after one warm-up run) and
// prints the byte and token counts and the best and median wall and thread
// CPU time in ms.
//
// -m may be any GGUF file with tokenizer.ggml.* keys (a vocab-only file is
// enough): only the metadata is read, never the weights.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "base/strings.hpp"
#include "prompt_flags.hpp"
#include "synapse/error.hpp"
#include "synapse/gguf.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse::tools {
namespace {

struct TokenizeArgs {
  std::string model, prompt, file, jsonl;
  bool has_prompt = false;
  bool add_special = true;
  bool parse_special = true;
  bool escape = true;
  bool use_stdin = false, show_count = false;
  bool ids = false, pieces = false;
  bool bench = false;
  int repeat = 5;
};

// Opens `path` for reading. Throws Error(io) naming it when it cannot be
// opened or is a directory (an ifstream opens a directory, then throws
// "basic_filebuf::underflow" from the first read).
void open_text_file(std::ifstream& f, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(Errc::io, path + ": is a directory, not a text file");
  f.open(path, std::ios::binary);
  if (!f) throw Error(Errc::io, path + ": cannot open the file");
}

// Reads a whole file, or stdin for "-". Throws Error(io) naming the path.
std::string read_all(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::ifstream f;
  open_text_file(f, path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw Error(Errc::io, path + ": read error");
  return s;
}

void write_out(const std::string& s) {
  if (!s.empty() && std::fwrite(s.data(), 1, s.size(), stdout) != s.size())
    throw Error(Errc::io, "cannot write to stdout");
}

std::string base64_encode(const std::string& in) {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kChars[(v >> s) & 63];
  }
  if (i < in.size()) {
    const bool two = i + 1 < in.size();
    const uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (two ? uint32_t(uint8_t(in[i + 1])) << 8 : 0);
    out += kChars[(v >> 18) & 63];
    out += kChars[(v >> 12) & 63];
    out += two ? kChars[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Strict base64 (standard alphabet, '=' padding only at the end); nullopt-like
// failure reported through `ok`.
std::string base64_decode(const std::string& in, bool& ok) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  ok = true;
  for (char c : in) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') { ++pad; continue; }
    if (v < 0 || pad > 0) { ok = false; return {}; }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  if (pad > 2 || (in.size() % 4 != 0 && pad > 0)) ok = false;
  return out;
}

// Length of the valid UTF-8 sequence (strict: no overlongs, surrogates or
// values above U+10FFFF) starting at s[i], or 0 when there is none.
size_t utf8_seq_len(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

// Python repr-like single-quoted string of arbitrary bytes.
std::string py_quote(const std::string& s) {
  std::string out = "'";
  char buf[8];
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c == '\\') out += "\\\\";
    else if (c == '\'') out += "\\'";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      const size_t n = utf8_seq_len(s, i);
      if (n == 0) {
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
        ++i;
      } else {
        out.append(s, i, n);
        i += n;
      }
      continue;
    }
    ++i;
  }
  return out + "'";
}

Tokenizer load_tokenizer(const std::string& path) {
  const gguf::File file = gguf::File::open(path);
  return Tokenizer::from_gguf(file);
}

std::string ids_list(const std::vector<token_id>& ids) {
  return join_in("[", ids, ", ", "]");
}

// One --jsonl line -> one output line. Throws Error(format) naming `line_no`.
std::string jsonl_line(const Tokenizer& tok, const std::string& line, size_t line_no, const TokenizeArgs& a) {
  const std::string where = a.jsonl + ":" + std::to_string(line_no) + ": ";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(Errc::format, where + "not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(Errc::format, where + "not a JSON object");
  std::string text;
  const bool has_text = j.contains("text"), has_b64 = j.contains("text_b64");
  if (has_text == has_b64) throw Error(Errc::format, where + "needs exactly one of \"text\" and \"text_b64\"");
  if (has_text) {
    if (!j["text"].is_string()) throw Error(Errc::format, where + "\"text\" is not a string");
    text = j["text"].get<std::string>();
  } else {
    if (!j["text_b64"].is_string()) throw Error(Errc::format, where + "\"text_b64\" is not a string");
    bool ok = false;
    text = base64_decode(j["text_b64"].get<std::string>(), ok);
    if (!ok) throw Error(Errc::format, where + "\"text_b64\" is not valid base64");
  }
  const auto flag = [&](const char* key, bool dflt) {
    if (!j.contains(key)) return dflt;
    if (!j[key].is_boolean()) throw Error(Errc::format, where + "\"" + key + "\" is not true or false");
    return j[key].get<bool>();
  };
  const bool add_special = flag("add_special", a.add_special);
  const bool parse_special = flag("parse_special", a.parse_special);
  const std::vector<token_id> ids = tok.tokenize(text, add_special, parse_special);
  const std::string detok = tok.detokenize(ids, false, true);
  std::string out = "{\"ids\": " + ids_list(ids) + ", ";
  try {
    out += "\"detok\": " + nlohmann::json(detok).dump() + "}\n";
  } catch (const nlohmann::json::type_error&) {  // not UTF-8: JSON cannot carry it
    out += "\"detok_b64\": \"" + base64_encode(detok) + "\"}\n";
  }
  return out;
}

int run_jsonl(const Tokenizer& tok, const TokenizeArgs& a) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (a.jsonl != "-") {
    open_text_file(file, a.jsonl);
    in = &file;
  }
  std::string line, out;
  size_t line_no = 0;
  try {
    while (std::getline(*in, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines carry no case
      out += jsonl_line(tok, line, line_no, a);
      if (out.size() > (1u << 16)) {
        write_out(out);
        out.clear();
      }
    }
  } catch (...) {
    write_out(out);
    std::fflush(stdout);
    throw;
  }
  if (in->bad()) throw Error(Errc::io, a.jsonl + ": read error");
  write_out(out);
  return 0;
}

// CPU time of the calling thread in ms (CLOCK_THREAD_CPUTIME_ID): on a
// shared machine it leaves out the time other processes hold the core.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int run_bench(const Tokenizer& tok, const std::string& text, const TokenizeArgs& a) {
  using clock = std::chrono::steady_clock;
  size_t n_tokens = tok.tokenize(text, a.add_special, a.parse_special).size();  // warm-up
  std::vector<double> wall, cpu;
  for (int r = 0; r < a.repeat; ++r) {
    const auto t0 = clock::now();
    const double c0 = thread_cpu_ms();
    n_tokens = tok.tokenize(text, a.add_special, a.parse_special).size();
    cpu.push_back(thread_cpu_ms() - c0);
    wall.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  std::printf("%zu bytes -> %zu tokens: wall best %.2f ms, median %.2f ms; cpu best %.2f ms, median %.2f ms (%d runs)\n",
              text.size(), n_tokens, wall.front(), wall[wall.size() / 2], cpu.front(), cpu[cpu.size() / 2], a.repeat);
  return 0;
}

int run(const TokenizeArgs& a) {
  const int n_inputs = int(a.has_prompt) + int(!a.file.empty()) + int(!a.jsonl.empty()) + int(a.use_stdin);
  if (n_inputs != 1) throw Error(Errc::invalid_argument, "tokenize: give exactly one of -p, -f, --stdin and --jsonl");
  if (a.ids && a.pieces) throw Error(Errc::invalid_argument, "tokenize: --ids and --pieces exclude each other");
  if (a.bench && !a.jsonl.empty()) throw Error(Errc::invalid_argument, "tokenize: --bench takes -p or -f, not --jsonl");
  std::string text = a.has_prompt ? a.prompt : a.file.empty() ? std::string() : read_all(a.file);
  const Tokenizer tok = load_tokenizer(a.model);
  if (a.use_stdin) text = read_all("-");  // after the vocabulary loads, as llama-tokenize
  if (a.escape && a.jsonl.empty()) text = process_escapes(text);
  if (!a.jsonl.empty()) return run_jsonl(tok, a);
  if (a.bench) return run_bench(tok, text, a);
  const std::vector<token_id> ids = tok.tokenize(text, a.add_special, a.parse_special);
  std::string out;
  if (a.ids) {
    out = ids_list(ids) + "\n";
  } else if (a.pieces) {
    out = join_in("[", ids, ", ", "]\n", [&](token_id id) { return py_quote(tok.token_to_piece(id, true)); });
  } else {
    char buf[32];
    for (token_id id : ids) {
      std::snprintf(buf, sizeof buf, "%6d -> '", id);
      out += buf;
      out += tok.token_to_piece(id, true);
      out += "'\n";
    }
  }
  if (a.show_count) out += "Total number of tokens: " + std::to_string(ids.size()) + "\n";
  write_out(out);
  return 0;
}

}  // namespace

Runner add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  app.add_option("-m,--model", a->model, "GGUF file with a vocabulary (a vocab-only file is enough)")->required();
  CLI::Option* prompt = app.add_option("-p,--prompt", a->prompt, "text to tokenize");
  app.add_option("-f,--file", a->file, "read the text from FILE ('-' for stdin)");
  app.add_option("--jsonl", a->jsonl,
                 "tokenize each {\"text\"|\"text_b64\", \"add_special\", \"parse_special\"} line of FILE ('-' for "
                 "stdin); write {\"ids\", \"detok\"|\"detok_b64\"} lines");
  app.add_flag("--add-special,!--no-add-special,!--no-bos", a->add_special,
               "add BOS/EOS as the vocabulary asks (default on; --no-bos: llama-tokenize's name for off)");
  app.add_flag("--stdin", a->use_stdin, "read the text from stdin");
  app.add_flag("--parse-special,!--no-parse-special", a->parse_special,
               "turn control and user-defined token texts into their ids (default on, as llama-tokenize)");
  app.add_flag("-e,--escape,!--no-escape", a->escape,
               "process escapes (\\n, \\t, \\xNN, ...) in the -p, -f or --stdin text (default on)");
  app.add_flag("--show-count", a->show_count, "then print the number of tokens");
  app.add_flag("--ids", a->ids, "print only the ids, as a list [1, 2, 3]");
  app.add_flag("--pieces", a->pieces, "print only the pieces, as a list ['a', 'b']");
  app.add_flag("--bench", a->bench, "time the tokenization of the -p/-f text instead of printing it");
  app.add_option("--repeat", a->repeat, "timed runs for --bench")->check(CLI::Range(1, 1000000));
  return [a, prompt] {
    a->has_prompt = prompt->count() > 0;
    return run(*a);
  };
}

}  // namespace synapse::tools
