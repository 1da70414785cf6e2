#include "synapse/chat.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>

#include "synapse/error.hpp"

namespace synapse {

namespace {

constexpr std::array<std::string_view, 17> kNames = {
    "chatml",     "llama2",     "llama2-sys",        "llama2-sys-bos", "llama2-sys-strip", "mistral-v1",
    "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "phi3",          "phi4",
    "falcon3",    "zephyr",     "llama3",            "gemma",          "command-r",
};

std::string known_names() {
  std::string s;
  for (std::string_view n : kNames) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

// llama.cpp's trim(): isspace() in the "C" locale at both ends.
bool c_isspace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && c_isspace(s[b])) ++b;
  while (e > b && c_isspace(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// Builds a segment list, merging neighbours of the same kind.
class Out {
 public:
  // Template text, roles included: Phi-3 and Zephyr build special tokens out
  // of the role ("<|" + role + "|>").
  void t(std::string_view s) { add(s, true); }
  void c(std::string_view s) { add(s, false); }  // message contents
  std::vector<ChatSegment> take() { return std::move(segs_); }

 private:
  void add(std::string_view s, bool special) {
    if (s.empty()) return;
    if (!segs_.empty() && segs_.back().special == special) {
      segs_.back().text.append(s);
    } else {
      segs_.push_back({std::string(s), special});
    }
  }
  std::vector<ChatSegment> segs_;
};

void format_mistral_v7(Out& o, std::span<const ChatMessage> msgs, bool tekken) {
  const std::string_view sp = tekken ? "" : " ";
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      o.t("[SYSTEM_PROMPT]"), o.t(sp), o.c(m.content), o.t("[/SYSTEM_PROMPT]");
    } else if (m.role == "user") {
      o.t("[INST]"), o.t(sp), o.c(m.content), o.t("[/INST]");
    } else {
      o.t(sp), o.c(m.content), o.t("</s>");
    }
  }
}

void format_mistral(Out& o, std::span<const ChatMessage> msgs, ChatTemplate tmpl) {
  const std::string_view lead = tmpl == ChatTemplate::mistral_v1 ? " " : "";
  const std::string_view trail = tmpl == ChatTemplate::mistral_v3_tekken ? "" : " ";
  const bool trim_assistant = tmpl == ChatTemplate::mistral_v3;
  bool inside_turn = false;
  for (const ChatMessage& m : msgs) {
    if (!inside_turn) {
      o.t(lead), o.t("[INST]"), o.t(trail);
      inside_turn = true;
    }
    if (m.role == "system") {
      o.c(m.content), o.t("\n\n");
    } else if (m.role == "user") {
      o.c(m.content), o.t(lead), o.t("[/INST]");
    } else {
      o.t(trail), o.c(trim_assistant ? trim(m.content) : m.content), o.t("</s>");
      inside_turn = false;
    }
  }
}

void format_llama2(Out& o, std::span<const ChatMessage> msgs, ChatTemplate tmpl) {
  const bool support_system = tmpl != ChatTemplate::llama2;
  const bool bos_inside = tmpl == ChatTemplate::llama2_sys_bos;
  const bool strip = tmpl == ChatTemplate::llama2_sys_strip;
  bool inside_turn = true;  // the first [INST] has no BOS text
  o.t("[INST] ");
  for (const ChatMessage& m : msgs) {
    const std::string content = strip ? trim(m.content) : m.content;
    if (!inside_turn) {
      inside_turn = true;
      o.t(bos_inside ? "<s>[INST] " : "[INST] ");
    }
    if (m.role == "system") {
      if (support_system) {
        o.t("<<SYS>>\n"), o.c(content), o.t("\n<</SYS>>\n\n");
      } else {
        o.c(content), o.t("\n");  // folded into the first user turn
      }
    } else if (m.role == "user") {
      o.c(content), o.t(" [/INST]");
    } else {
      o.c(content), o.t("</s>");
      inside_turn = false;
    }
  }
}

void format_gemma(Out& o, std::span<const ChatMessage> msgs, bool add_ass) {
  std::string system_prompt;  // gemma has no system role: prepended to the next user turn
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      system_prompt += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    o.t("<start_of_turn>"), o.t(role), o.t("\n");
    if (!system_prompt.empty() && role != "model") {
      o.c(system_prompt), o.t("\n\n");
      system_prompt.clear();
    }
    o.c(trim(m.content)), o.t("<end_of_turn>\n");
  }
  if (add_ass) o.t("<start_of_turn>model\n");
}

// Families llm_chat_detect_template can return that are not formatted here.
Error unsupported_family(std::string_view family) {
  return Error(Errc::unsupported, "chat template family '" + std::string(family) +
                                      "' (detected from tokenizer.chat_template) is not supported; "
                                      "choose one with --chat-template NAME: " +
                                      known_names());
}

// The special tokens of a vocabulary as llama.cpp's tokenizer_st_partition
// sees them, from the public Tokenizer interface: control, user-defined and
// unknown tokens, plus the end-of-generation tokens (llama.cpp turns those
// into control tokens), longest text first.
struct SpecialToken {
  token_id id;
  bool always;  // user-defined: matched even with parse_special = false
};

std::vector<SpecialToken> special_tokens(const Tokenizer& tok) {
  std::vector<SpecialToken> out;
  const int32_t n = tok.n_vocab();
  for (token_id id = 0; id < n; ++id) {
    const TokenType t = tok.type(id);
    const bool eog = tok.is_eog(id);
    if (t == TokenType::control || t == TokenType::unknown || eog) {
      out.push_back({id, false});
    } else if (t == TokenType::user_defined) {
      out.push_back({id, true});
    }
  }
  std::stable_sort(out.begin(), out.end(), [&](const SpecialToken& a, const SpecialToken& b) {
    return tok.text(a.id).size() > tok.text(b.id).size();
  });
  return out;
}

// Whether a special token eats the white space on its left / right (llama.cpp's
// LSTRIP / RSTRIP attributes, which the public interface does not expose):
// probed by tokenizing with and without a space beside it.
struct Strip {
  bool left;
  bool right;
};
Strip probe_strip(const Tokenizer& tok, token_id id) {
  const std::string& s = tok.text(id);
  const bool right = tok.tokenize(s + " a", false, true) == tok.tokenize(s + "a", false, true);
  const bool left = tok.tokenize("a " + s, false, true) == tok.tokenize("a" + s, false, true);
  return {left, right};
}

}  // namespace

std::span<const std::string_view> chat_template_names() { return kNames; }

std::string_view chat_template_name(ChatTemplate t) { return kNames.at(static_cast<size_t>(t)); }

ChatTemplate chat_template_from_name(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<ChatTemplate>(i);
  throw Error(Errc::invalid_argument,
              "unknown chat template '" + std::string(name) + "'; known: " + known_names());
}

ChatTemplate detect_chat_template(std::string_view tmpl) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == tmpl) return static_cast<ChatTemplate>(i);
  auto has = [&](std::string_view s) { return tmpl.find(s) != std::string_view::npos; };
  // llm_chat_detect_template's rules, in its order.
  if (has("<|im_start|>")) {
    if (has("<|im_sep|>")) return ChatTemplate::phi4;
    if (has("<end_of_utterance>")) throw unsupported_family("smolvlm");
    return ChatTemplate::chatml;
  }
  if (tmpl.starts_with("mistral") || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return ChatTemplate::mistral_v7;
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return ChatTemplate::mistral_v1;
      if (has("\"[INST]\"")) return ChatTemplate::mistral_v3_tekken;
      return ChatTemplate::mistral_v3;
    }
    if (has("content.strip()")) return ChatTemplate::llama2_sys_strip;
    if (has("bos_token + '[INST]")) return ChatTemplate::llama2_sys_bos;
    if (has("<<SYS>>")) return ChatTemplate::llama2_sys;
    return ChatTemplate::llama2;
  }
  if (has("<|assistant|>") && has("<|end|>")) return ChatTemplate::phi3;
  if (has("[gMASK]<sop>")) throw unsupported_family("chatglm4");
  if (has("<|assistant|>") && has("<|user|>")) {
    if (has("</s>")) return ChatTemplate::falcon3;
    throw unsupported_family("glmedge");
  }
  if (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>")) throw unsupported_family("glmedge");
  if (has("<|user|>") && has("<|endoftext|>")) return ChatTemplate::zephyr;
  if (has("bos_token + message['role']")) throw unsupported_family("monarch");
  if (has("<start_of_turn>")) return ChatTemplate::gemma;
  if (has("'\\n\\nAssistant: ' + eos_token")) throw unsupported_family("orion");
  if (has("GPT4 Correct ")) throw unsupported_family("openchat");
  if (has("USER: ") && has("ASSISTANT: ")) throw unsupported_family(has("SYSTEM: ") ? "vicuna-orca" : "vicuna");
  if (has("### Instruction:") && has("<|EOT|>")) throw unsupported_family("deepseek");
  if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return ChatTemplate::command_r;
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return ChatTemplate::llama3;
  if (has("[gMASK]sop")) throw unsupported_family("chatglm3");
  if (has("<\xE7\x94\xA8\xE6\x88\xB7>")) throw unsupported_family("minicpm");  // "<用户>"
  if (has("'Assistant: ' + message['content'] + eos_token")) throw unsupported_family("deepseek2");
  if (has("<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>") && has("<\xEF\xBD\x9C" "User\xEF\xBD\x9C>"))
    throw unsupported_family("deepseek3");  // "<｜Assistant｜>", "<｜User｜>"
  if (has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]"))
    throw unsupported_family(has("[|tool|]") ? "exaone4" : "exaone3");
  if (has("rwkv-world")) throw unsupported_family("rwkv-world");
  if (has("<|start_of_role|>")) throw unsupported_family("granite");
  if (has("<|role_start|>")) throw unsupported_family("megrez");
  if (has("<role>ASSISTANT</role>") && has("'HUMAN'")) throw unsupported_family("bailing");
  if (has("<|header_start|>") && has("<|header_end|>")) throw unsupported_family("llama4");
  std::string head(tmpl.substr(0, 60));
  for (char& ch : head)
    if (ch == '\n') ch = ' ';
  throw Error(Errc::unsupported, "unrecognised chat template \"" + head + (tmpl.size() > 60 ? "...\"" : "\"") +
                                     "; choose one with --chat-template NAME: " + known_names());
}

ChatTemplate chat_template_for_model(const gguf::File& file, std::optional<std::string_view> override_name) {
  if (override_name) return chat_template_from_name(*override_name);
  const gguf::Value* v = file.find("tokenizer.chat_template");
  if (v == nullptr) return ChatTemplate::chatml;
  const std::optional<std::string> s = file.get_string("tokenizer.chat_template");
  if (!s) throw Error(Errc::format, file.path() + ": tokenizer.chat_template is not a string");
  return detect_chat_template(*s);
}

std::vector<ChatSegment> format_chat_segments(ChatTemplate tmpl, std::span<const ChatMessage> msgs,
                                              bool add_ass) {
  Out o;
  switch (tmpl) {
    case ChatTemplate::chatml:
      for (const ChatMessage& m : msgs) o.t("<|im_start|>"), o.t(m.role), o.t("\n"), o.c(m.content), o.t("<|im_end|>\n");
      if (add_ass) o.t("<|im_start|>assistant\n");
      break;
    case ChatTemplate::mistral_v7:
    case ChatTemplate::mistral_v7_tekken:
      format_mistral_v7(o, msgs, tmpl == ChatTemplate::mistral_v7_tekken);
      break;
    case ChatTemplate::mistral_v1:
    case ChatTemplate::mistral_v3:
    case ChatTemplate::mistral_v3_tekken:
      format_mistral(o, msgs, tmpl);
      break;
    case ChatTemplate::llama2:
    case ChatTemplate::llama2_sys:
    case ChatTemplate::llama2_sys_bos:
    case ChatTemplate::llama2_sys_strip:
      format_llama2(o, msgs, tmpl);
      break;
    case ChatTemplate::phi3:
      for (const ChatMessage& m : msgs) o.t("<|"), o.t(m.role), o.t("|>\n"), o.c(m.content), o.t("<|end|>\n");
      if (add_ass) o.t("<|assistant|>\n");
      break;
    case ChatTemplate::phi4:
      for (const ChatMessage& m : msgs)
        o.t("<|im_start|>"), o.t(m.role), o.t("<|im_sep|>"), o.c(m.content), o.t("<|im_end|>");
      if (add_ass) o.t("<|im_start|>assistant<|im_sep|>");
      break;
    case ChatTemplate::falcon3:
      for (const ChatMessage& m : msgs) o.t("<|"), o.t(m.role), o.t("|>\n"), o.c(m.content), o.t("\n");
      if (add_ass) o.t("<|assistant|>\n");
      break;
    case ChatTemplate::zephyr:
      for (const ChatMessage& m : msgs) o.t("<|"), o.t(m.role), o.t("|>\n"), o.c(m.content), o.t("<|endoftext|>\n");
      if (add_ass) o.t("<|assistant|>\n");
      break;
    case ChatTemplate::llama3:
      for (const ChatMessage& m : msgs)
        o.t("<|start_header_id|>"), o.t(m.role), o.t("<|end_header_id|>\n\n"), o.c(trim(m.content)), o.t("<|eot_id|>");
      if (add_ass) o.t("<|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    case ChatTemplate::gemma:
      format_gemma(o, msgs, add_ass);
      break;
    case ChatTemplate::command_r:
      // llama.cpp's LLM_CHAT_TEMPLATE_COMMAND_R: contents trimmed, roles other
      // than these three left out.
      for (const ChatMessage& m : msgs) {
        const char* token = m.role == "system"      ? "<|SYSTEM_TOKEN|>"
                            : m.role == "user"      ? "<|USER_TOKEN|>"
                            : m.role == "assistant" ? "<|CHATBOT_TOKEN|>"
                                                    : nullptr;
        if (token == nullptr) continue;
        o.t("<|START_OF_TURN_TOKEN|>"), o.t(token), o.c(trim(m.content)), o.t("<|END_OF_TURN_TOKEN|>");
      }
      if (add_ass) o.t("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
      break;
  }
  return o.take();
}

std::string format_chat(ChatTemplate tmpl, std::span<const ChatMessage> msgs, bool add_ass) {
  std::string s;
  for (const ChatSegment& seg : format_chat_segments(tmpl, msgs, add_ass)) s += seg.text;
  return s;
}

std::vector<ChatSegment> format_chat_delta(ChatTemplate tmpl, std::span<const ChatMessage> past,
                                           const ChatMessage& msg, bool add_ass) {
  const std::string fmt_past = past.empty() ? std::string() : format_chat(tmpl, past, false);
  std::vector<ChatMessage> all(past.begin(), past.end());
  all.push_back(msg);
  std::vector<ChatSegment> out;
  if (add_ass && !fmt_past.empty() && fmt_past.back() == '\n') out.push_back({"\n", true});
  size_t skip = fmt_past.size();
  for (ChatSegment& seg : format_chat_segments(tmpl, all, add_ass)) {
    if (skip >= seg.text.size()) {
      skip -= seg.text.size();
      continue;
    }
    seg.text.erase(0, skip);
    skip = 0;
    if (!out.empty() && out.back().special == seg.special) {
      out.back().text += seg.text;
    } else {
      out.push_back(std::move(seg));
    }
  }
  return out;
}

std::vector<token_id> tokenize_segments(const Tokenizer& tok, std::span<const ChatSegment> segments,
                                        bool add_special) {
  // The whole text, and which bytes belong to template segments.
  std::string text;
  std::vector<std::pair<size_t, size_t>> tmpl_ranges;  // [begin, end)
  for (const ChatSegment& s : segments) {
    if (s.special && !s.text.empty()) tmpl_ranges.emplace_back(text.size(), text.size() + s.text.size());
    text += s.text;
  }
  auto inside_template = [&](size_t b, size_t e) {
    for (const auto& [rb, re] : tmpl_ranges)
      if (b >= rb && e <= re) return true;
    return false;
  };

  // tokenizer_st_partition over the whole text, except that a control or
  // unknown token only counts where it lies inside one template segment.
  struct Frag {
    token_id id;  // -1: raw text [off, off + len)
    size_t off, len;
  };
  std::vector<Frag> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  std::map<token_id, Strip> strip_cache;
  std::vector<Frag> next;
  for (const SpecialToken& st : special_tokens(tok)) {
    const std::string& s = tok.text(st.id);
    if (s.empty() || text.find(s) == std::string::npos) continue;
    next.clear();
    bool changed = false;
    for (const Frag& f : frags) {
      if (f.id != -1) {
        next.push_back(f);
        continue;
      }
      size_t off = f.off, len = f.len, from = f.off;
      while (true) {
        const size_t end = off + len;
        size_t match = std::string_view(text).substr(0, end).find(s, from);
        while (match != std::string::npos && !st.always && !inside_template(match, match + s.size()))
          match = std::string_view(text).substr(0, end).find(s, match + 1);
        if (match == std::string::npos) {
          if (len > 0) next.push_back({-1, off, len});
          break;
        }
        changed = true;
        auto it = strip_cache.find(st.id);
        if (it == strip_cache.end()) it = strip_cache.emplace(st.id, probe_strip(tok, st.id)).first;
        const Strip strip = it->second;
        if (match > off) {
          size_t left = match - off;
          if (strip.left)
            while (left > 0 && c_isspace(text[off + left - 1])) --left;
          if (left > 0) next.push_back({-1, off, left});
        }
        next.push_back({st.id, 0, 0});
        size_t r_off = match + s.size();
        if (r_off >= end) break;
        size_t r_len = end - r_off;
        if (strip.right)
          while (r_len > 0 && c_isspace(text[r_off])) ++r_off, --r_len;
        off = r_off;
        len = r_len;
        from = off;
        if (len == 0) break;
      }
    }
    if (changed) frags.swap(next);
  }

  // Raw fragments are tokenized one by one, as llama_tokenize does (each gets
  // the SPM space prefix: it starts the text or follows a special token).
  std::vector<token_id> out;
  if (add_special && tok.add_bos()) out.push_back(tok.bos());
  for (const Frag& f : frags) {
    if (f.id != -1) {
      out.push_back(f.id);
    } else {
      const std::vector<token_id> ids = tok.tokenize(std::string_view(text).substr(f.off, f.len), false, false);
      out.insert(out.end(), ids.begin(), ids.end());
    }
  }
  if (add_special && tok.add_eos()) out.push_back(tok.eos());
  return out;
}

std::vector<token_id> tokenize_chat(const Tokenizer& tok, ChatTemplate tmpl, std::span<const ChatMessage> msgs,
                                    bool add_ass, bool add_special) {
  const std::vector<ChatSegment> segs = format_chat_segments(tmpl, msgs, add_ass);
  return tokenize_segments(tok, segs, add_special);
}

}  // namespace synapse
