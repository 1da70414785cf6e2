// synapse chat -m MODEL [-sys SYSTEM] [--jinja | --no-jinja] [--chat-template NAME]
//               [--chat-template-file FILE] [--chat-template-kwargs JSON] [-n N] [-c N_CTX] [-t T] [sampler flags]
//
// An interactive multi-turn conversation, like llama-cli's conversation mode:
// "> " asks for a user line on stdout; the reply streams after it. The
// conversation is rendered with the model's own Jinja template (or a built-in
// format: chat_template_flags.hpp). The model's KV cache keeps the whole
// conversation, so each turn only feeds what the new message adds
// (llama.cpp's common_chat_format_single: render(past + new) minus
// render(past)). Ctrl-C during a reply stops it and keeps the session (the
// partial reply stays in the history); Ctrl-C or end of input at the prompt
// ends the session.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_template_flags.hpp"
#include "commands.hpp"
#include "common_flags.hpp"
#include "sampler_flags.hpp"
#include "synapse/chat.hpp"
#include "synapse/error.hpp"
#include "synapse/generation.hpp"
#include "synapse/synapse.hpp"

namespace synapse::tools {
namespace {

std::atomic<bool> g_interrupt{false};
std::atomic<bool> g_generating{false};

extern "C" void on_sigint(int) {
  if (g_generating.load()) {
    g_interrupt.store(true);  // stop the reply, keep the session
  } else {
    std::_Exit(130);  // at the prompt: leave, as llama-cli does
  }
}

struct ChatArgs {
  std::string model, system_prompt;
  ChatTemplateFlags tmpl;
  int n_predict = -1, threads = 0, n_ctx = 0;
  bool ignore_eos = false;
  SamplerParams sp;
};

// The conversation so far, and what the sequence's KV cache holds of it.
class Conversation {
 public:
  Conversation(const Tokenizer& tok, ChatFormatter f, const std::string& system_prompt) : tok_(tok), f_(std::move(f)) {
    if (!system_prompt.empty()) history_.push_back({"system", system_prompt});
  }

  // The tokens a user message adds to the prompt the cache holds (n_past
  // positions); *n_keep is set to the positions to keep first (n_past, or
  // fewer when the template rewrote part of the past). Throws the template's
  // Error when it fails on the conversation.
  std::vector<token_id> turn(const ChatMessage& msg, int64_t n_past, int64_t* n_keep) const {
    std::vector<ChatMessage> all = history_;
    all.push_back(msg);
    *n_keep = n_past;
    if (!f_.jinja) {
      // The first turn renders everything (the system message too); later
      // ones the delta.
      if (n_past == 0) return tokenize_segments(tok_, format_chat_segments(f_.builtin, all, true), true);
      return tokenize_segments(tok_, format_chat_delta(f_.builtin, history_, msg, true), false);
    }
    const std::string full = render(all, true);
    if (n_past == 0) return tok_.tokenize(full, /*add_special=*/true, /*parse_special=*/true);
    // common_chat_format_single: render(past + msg, true) minus render(past,
    // false), after a "\n" when the past ends in one (the newline after the
    // end-of-turn token the model stopped at, which it never generated).
    const std::string past = render(history_, false);
    if (full.compare(0, past.size(), past) == 0) {
      std::string delta = !past.empty() && past.back() == '\n' ? "\n" : "";
      delta.append(full, past.size());
      return tok_.tokenize(delta, /*add_special=*/false, /*parse_special=*/true);
    }
    // The template renders the past differently once a message follows it
    // (Qwen3 drops the reasoning of earlier replies, and its empty <think>
    // block of the last one): llama.cpp's delta would cut the new prompt at
    // the wrong byte. Keep the positions whose tokens the new prompt
    // starts with, and feed the rest.
    std::vector<token_id> ids = tok_.tokenize(full, true, true);
    size_t k = 0;
    if (cached_known_)
      while (k < cached_.size() && k < ids.size() && cached_[k] == ids[k]) ++k;
    k = std::min(k, ids.size() - 1);  // at least one token is fed, for its logits
    *n_keep = static_cast<int64_t>(k);
    ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k));
    return ids;
  }

  // Records a finished turn: the message, the tokens fed for it (after
  // keeping n_keep positions), the reply, and the sequence's length after
  // it. `eog`: the end-of-generation token the reply stopped at, or -1.
  void commit(const ChatMessage& msg, int64_t n_keep, const std::vector<token_id>& fed, const GenerationResult& g,
              token_id eog, int64_t n_past) {
    history_.push_back(msg);
    history_.push_back({"assistant", g.text});
    cached_.resize(static_cast<size_t>(std::min<int64_t>(n_keep, static_cast<int64_t>(cached_.size()))));
    cached_.insert(cached_.end(), fed.begin(), fed.end());
    cached_.insert(cached_.end(), g.tokens.begin(), g.tokens.end());
    // The turn is closed in the cache (GenerationParams::close_turn) by the
    // token the model stopped at, or by the vocabulary's end of turn.
    if (static_cast<int64_t>(cached_.size()) + 1 == n_past) cached_.push_back(eog >= 0 ? eog : end_of_turn_token(tok_));
    cached_known_ = cached_known_ && static_cast<int64_t>(cached_.size()) == n_past;
  }

 private:
  std::string render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt) const {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const ChatMessage& m : msgs) j.push_back(chat_message_json(m.role, m.content));
    // Invalid UTF-8 in a reply (a byte token, a character cut by -n) is
    // written as U+FFFD: JSON text holds UTF-8 only. The cache keeps the
    // bytes; turn() finds where the renderings part.
    const std::string json = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return f_.jinja->apply(json, add_generation_prompt, {}, f_.kwargs);
  }

  const Tokenizer& tok_;
  ChatFormatter f_;
  std::vector<ChatMessage> history_;
  std::vector<token_id> cached_;  // the ids the sequence holds, when cached_known_
  bool cached_known_ = true;
};

int run(const ChatArgs& a) {
  const Model model = Model::load(a.model);
  const Tokenizer& tok = model.tokenizer();
  ChatFormatter formatter = chat_formatter(model, a.tmpl);
  const std::string template_name = formatter.description;
  const int64_t n_ctx = a.n_ctx > 0 ? a.n_ctx
                                    : (model.n_ctx_train() > 0 ? std::min<int64_t>(model.n_ctx_train(), 4096) : 4096);
  Context ctx(model, a.threads);
  Sequence seq = ctx.new_sequence(n_ctx);
  // One sampler for the session: its RNG and penalty window run on across
  // turns, as llama-cli's one common_sampler does.
  Sampler sampler(a.sp, static_cast<int32_t>(n_ctx));
  std::fprintf(stderr, "synapse: chat with %s (template: %s; n_ctx %lld); Ctrl-C stops a reply, Ctrl-D or Ctrl-C at the prompt quits\n",
               a.model.c_str(), template_name.c_str(), static_cast<long long>(n_ctx));
  std::signal(SIGINT, on_sigint);

  GenerationParams gp;
  gp.max_tokens = a.n_predict;
  gp.sampling.grammar = a.sp.grammar;  // each reply is constrained afresh (the shared sampler carries RNG and penalties)
  gp.ignore_eos = a.ignore_eos;
  // Every reply ends with an end-of-turn token in the cache (the one the
  // model stopped at, or the vocabulary's when -n or Ctrl-C cut it short), so
  // the next turn's delta continues the conversation the template shows.
  gp.close_turn = true;
  token_id eog = -1;
  const auto print = [&eog](const GeneratedToken& t) {
    if (t.eog) eog = t.id;
    if (!t.text.empty()) {
      std::fwrite(t.text.data(), 1, t.text.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  Conversation conv(tok, std::move(formatter), a.system_prompt);
  std::string line;
  for (;;) {
    std::fputs("\n> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    const ChatMessage msg{"user", line};
    // What this message adds to the prompt the cache already holds.
    int64_t n_keep = 0;
    std::vector<token_id> ids;
    try {
      ids = conv.turn(msg, seq.n_past(), &n_keep);
    } catch (const Error& e) {
      // The template refused the conversation (its raise_exception, or an
      // error in it): the message is dropped and the session goes on.
      std::fprintf(stderr, "synapse: error: chat template: %s\n", e.what());
      continue;
    }
    // A message that cannot fit even in an empty context is refused alone
    // (the session goes on); one that fits but not beside the history ends it.
    if (static_cast<int64_t>(ids.size()) + (n_keep == 0 ? 0 : 1) >= seq.n_ctx()) {
      std::fprintf(stderr,
                   "synapse: this message is %zu tokens with its template, more than the context of %lld tokens "
                   "holds; shorten it or raise -c\n",
                   ids.size(), static_cast<long long>(n_ctx));
      continue;
    }
    if (n_keep + static_cast<int64_t>(ids.size()) >= seq.n_ctx()) {
      std::fprintf(stderr, "synapse: the context of %lld tokens is full; start a new session (or raise -c)\n",
                   static_cast<long long>(n_ctx));
      break;
    }
    if (n_keep < seq.n_past()) seq.truncate(n_keep);
    Generation gen(tok, gp, sampler);
    eog = -1;
    g_interrupt.store(false);
    g_generating.store(true);
    const GenerationResult g = generate(ctx, seq, ids, gen, print, &g_interrupt);
    g_generating.store(false);
    conv.commit(msg, n_keep, ids, g, eog, seq.n_past());
    if (g.finish_reason == FinishReason::cancelled) std::fputs(" [stopped]", stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (g.context_full) {
      std::fprintf(stderr, "synapse: the context of %lld tokens is full\n", static_cast<long long>(n_ctx));
      break;
    }
  }
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

Runner add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  app.add_option("-m,--model", a->model, "GGUF model file")->required();
  app.add_option("--system-prompt", a->system_prompt, "system message (-sys)");
  add_chat_template_flags(app, a->tmpl);
  app.add_option("-n,--n-predict", a->n_predict, "most tokens per reply (-1: until end of turn)");
  add_threads_flag(app, a->threads);
  app.add_option("-c,--ctx-size", a->n_ctx, "context size in tokens (default: the model's, at most 4096)");
  app.add_flag("--ignore-eos", a->ignore_eos, "do not end a reply at end-of-generation tokens");
  add_sampler_flags(app, a->sp);
  return [a] { return run(*a); };
}

}  // namespace synapse::tools
