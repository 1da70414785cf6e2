// Prompt input as llama.cpp's common/arg.cpp takes it, for run and chat:
//   -p, --prompt TEXT         the prompt
//   -f, --file FILE           the prompt from a file, less one trailing newline
//   -bf, --binary-file FILE   the prompt from a file, as is
//   -e, --escape / --no-escape  process \n \r \t \' \" \\ \xNN in the prompt
//                             and -r strings (default on)
//   --no-parse-special        special-token texts in the prompt stay text
//                             (llama.cpp always parses them)
//   --verbose-prompt          print the prompt's tokens to stderr first
//   -sys / -sysf              the system message, or read from a file (less
//                             one trailing newline); not escape-processed
// The last of -p, -f and -bf on the command line wins, as in llama.cpp.
#pragma once

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "synapse/error.hpp"
#include "synapse/tokenizer.hpp"

namespace synapse::tools {

// llama.cpp's string_process_escapes (common/common.cpp): backslash n, r, t,
// quote, double quote, backslash, and xNN (two hex digits); any other
// backslash pair is kept as is.
inline std::string process_escapes(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\' || i + 1 >= in.size()) {
      out += in[i];
      continue;
    }
    const char c = in[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'x':
        if (i + 2 < in.size() && hex(in[i + 1]) && hex(in[i + 2])) {
          out += static_cast<char>(std::strtol(in.substr(i + 1, 2).c_str(), nullptr, 16));
          i += 2;
          break;
        }
        [[fallthrough]];
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

// A whole file's bytes. Throws Error(io) naming `flag` and the path.
inline std::string read_prompt_file(const std::string& flag, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(Errc::io, flag + ": cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct PromptFlags {
  std::string prompt, file, binary_file;
  CLI::Option *p_opt = nullptr, *f_opt = nullptr, *bf_opt = nullptr;
  bool escape = true;
  bool parse_special = true;
  bool verbose_prompt = false;
  std::string system_prompt, system_prompt_file;
  CLI::Option *sys_opt = nullptr, *sysf_opt = nullptr;
  std::vector<std::string>* reverse_prompts = nullptr;  // escape-processed too, when set
};

inline void add_prompt_flags(CLI::App& app, PromptFlags& f, const char* prompt_help) {
  f.p_opt = app.add_option("-p,--prompt", f.prompt, prompt_help);
  f.f_opt = app.add_option("-f,--file", f.file, "read the prompt from FILE (one trailing newline dropped)");
  f.bf_opt = app.add_option("--binary-file", f.binary_file, "read the prompt from FILE as is (-bf)");
  app.add_flag("-e,--escape,!--no-escape", f.escape,
               "process escapes (\\n, \\r, \\t, \\', \\\", \\\\, \\xNN) in the prompt (default on)");
  app.add_flag("!--no-parse-special", f.parse_special,
               "keep special-token texts in the prompt as text (default: parsed, as llama.cpp)");
  app.add_flag("--verbose-prompt", f.verbose_prompt, "print the prompt's tokens to stderr before generating");
  f.sys_opt = app.add_option("--system-prompt", f.system_prompt, "system message (-sys)");
  f.sysf_opt = app.add_option("--system-prompt-file", f.system_prompt_file,
                              "read the system message from FILE (-sysf; one trailing newline dropped)");
}

inline void drop_one_newline(std::string& s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
}

// The prompt the flags give ("" when none), and whether one was given: the
// last of -p, -f, -bf in `app`'s parse order; escapes processed unless
// --no-escape. Also escape-processes *reverse_prompts. Throws Error(io) for
// a file that cannot be read.
inline bool resolve_prompt(const CLI::App& app, PromptFlags& f, std::string* out) {
  const CLI::Option* last = nullptr;
  for (const CLI::Option* o : app.parse_order())
    if (o == f.p_opt || o == f.f_opt || o == f.bf_opt) last = o;
  if (f.escape && f.reverse_prompts != nullptr)
    for (std::string& r : *f.reverse_prompts) r = process_escapes(r);
  if (last == nullptr) return false;
  std::string text;
  if (last == f.p_opt) {
    text = f.prompt;
  } else if (last == f.f_opt) {
    text = read_prompt_file("-f", f.file);
    drop_one_newline(text);
  } else {
    text = read_prompt_file("-bf", f.binary_file);
  }
  *out = f.escape ? process_escapes(text) : text;
  return true;
}

// The system message of -sys or -sysf (the later given wins), "" for none.
inline std::string resolve_system_prompt(const CLI::App& app, const PromptFlags& f) {
  const CLI::Option* last = nullptr;
  for (const CLI::Option* o : app.parse_order())
    if (o == f.sys_opt || o == f.sysf_opt) last = o;
  if (last == nullptr) return "";
  if (last == f.sys_opt) return f.system_prompt;
  std::string s = read_prompt_file("-sysf", f.system_prompt_file);
  drop_one_newline(s);
  return s;
}

// --verbose-prompt, as llama-completion prints it (to stderr): the text,
// the token count, then "%6d -> '%s'" per token.
inline void print_verbose_prompt(const Tokenizer& tok, const std::string& text, const std::vector<token_id>& ids) {
  std::fprintf(stderr, "synapse: prompt: '%s'\n", text.c_str());
  std::fprintf(stderr, "synapse: number of tokens in prompt = %zu\n", ids.size());
  for (token_id id : ids) std::fprintf(stderr, "%6d -> '%s'\n", id, tok.token_to_piece(id, true).c_str());
  std::fprintf(stderr, "\n");
}

// The control tokens of the vocabulary (-sp/--special: rendered in the output).
inline std::vector<token_id> control_tokens(const Tokenizer& tok) {
  std::vector<token_id> ids;
  for (token_id id = 0; id < tok.n_vocab(); ++id)
    if (tok.type(id) == TokenType::control) ids.push_back(id);
  return ids;
}

}  // namespace synapse::tools
