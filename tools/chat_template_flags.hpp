// The chat-template flags of `synapse chat` and `synapse run -cnv`, spelled
// as llama-cli and llama-server spell them, and the template they select:
//   --jinja (default) / --no-jinja   the model's Jinja template, rendered by
//                                    synapse's engine (JinjaChatTemplate), or
//                                    the built-in formats (synapse/chat.hpp)
//   --chat-template-file FILE        a Jinja template instead of the file's
//                                    (with --no-jinja: its family, detected)
//   --chat-template-kwargs JSON      extra template variables, a JSON object
//                                    (e.g. '{"enable_thinking": false}')
//   --chat-template NAME             a built-in format by name
// A file without tokenizer.chat_template falls back to the built-in formats
// (chatml), as llama.cpp does.
#pragma once

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "synapse/chat.hpp"
#include "synapse/error.hpp"
#include "synapse/synapse.hpp"

namespace synapse::tools {

struct ChatTemplateFlags {
  std::string name;    // --chat-template
  bool jinja = true;   // --jinja / --no-jinja
  std::string file;    // --chat-template-file
  std::string kwargs;  // --chat-template-kwargs
};

inline void add_chat_template_flags(CLI::App& app, ChatTemplateFlags& f) {
  app.add_option("--chat-template", f.name,
                 "a built-in chat format by name (chatml, llama2, llama3, mistral-v1, mistral-v3, mistral-v7, phi3, "
                 "zephyr, gemma, ...) instead of the model's template");
  app.add_flag("--jinja", f.jinja, "render the model's own Jinja chat template (the default)");
  app.add_flag_callback("--no-jinja", [&f] { f.jinja = false; },
                        "use the built-in chat formats, not the model's Jinja template");
  app.add_option("--chat-template-file", f.file, "a Jinja chat template file to use instead of the model's");
  app.add_option("--chat-template-kwargs", f.kwargs,
                 "extra variables for the Jinja template, a JSON object, e.g. '{\"enable_thinking\": false}'");
}

// The template a conversation is rendered with: the Jinja one when `jinja`
// is set, else the built-in format `builtin`.
struct ChatFormatter {
  std::optional<JinjaChatTemplate> jinja;
  ChatTemplate builtin = ChatTemplate::chatml;
  std::string kwargs;       // --chat-template-kwargs, "" for none
  std::string description;  // for the start-up line
};

inline std::string read_text_file(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, std::string(flag) + ": cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Throws Error(invalid_argument) for flags that contradict each other or a
// --chat-template-kwargs that is not a JSON object, and for a Jinja template
// that does not parse (naming where it came from and its line).
inline ChatFormatter chat_formatter(const Model& model, const ChatTemplateFlags& f) {
  if (!f.name.empty() && !f.file.empty())
    throw Error(Errc::invalid_argument, "--chat-template and --chat-template-file both pick a template; pass one");
  ChatFormatter out;
  if (!f.kwargs.empty()) {
    const nlohmann::json j = nlohmann::json::parse(f.kwargs, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw Error(Errc::invalid_argument, "--chat-template-kwargs: must be a JSON object, got '" + f.kwargs + "'");
    out.kwargs = f.kwargs;
  }
  if (!f.name.empty()) {
    out.builtin = chat_template_from_name(f.name);
    out.description = "built-in " + std::string(chat_template_name(out.builtin));
  } else if (f.jinja) {
    std::optional<std::string> source;
    if (!f.file.empty()) source = read_text_file(f.file, "--chat-template-file");
    const std::string where = f.file.empty() ? "the model's tokenizer.chat_template" : f.file;
    try {
      out.jinja = JinjaChatTemplate::for_model(model.gguf(), model.tokenizer(), source);
    } catch (const Error& e) {
      throw Error(e.code(), "chat template (" + where + "): " + e.what() + " (--no-jinja uses the built-in formats)");
    }
    if (out.jinja) {
      out.description = "Jinja, " + where;
    } else {
      out.builtin = chat_template_for_model(model.gguf());
      out.description = "built-in " + std::string(chat_template_name(out.builtin)) + ", the model has no Jinja template";
    }
  } else if (!f.file.empty()) {
    out.builtin = detect_chat_template(read_text_file(f.file, "--chat-template-file"));
    out.description = "built-in " + std::string(chat_template_name(out.builtin)) + ", detected in " + f.file;
  } else {
    out.builtin = chat_template_for_model(model.gguf());
    out.description = "built-in " + std::string(chat_template_name(out.builtin));
  }
  if (!out.kwargs.empty() && !out.jinja)
    std::fprintf(stderr, "synapse: --chat-template-kwargs has no effect on a built-in chat format\n");
  return out;
}

// A message as OpenAI JSON ({"role", "content"}).
inline nlohmann::ordered_json chat_message_json(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

}  // namespace synapse::tools
