// synapse chat -m MODEL [-sys SYSTEM] [--chat-template NAME] [-n N] [-c N_CTX] [-t T] [sampler flags]
//
// An interactive multi-turn conversation, like llama-cli's conversation mode:
// "> " asks for a user line on stdout; the reply streams after it. The model's
// KV cache keeps the whole conversation, so each turn only feeds what the new
// message adds (synapse::format_chat_delta). Ctrl-C during a reply stops it
// and keeps the session (the partial reply stays in the history); Ctrl-C or
// end of input at the prompt ends the session.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

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
  std::string model, system_prompt, chat_template;
  int n_predict = -1, threads = 0, n_ctx = 0;
  bool ignore_eos = false;
  SamplerParams sp;
};

int run(const ChatArgs& a) {
  const Model model = Model::load(a.model);
  const Tokenizer& tok = model.tokenizer();
  const ChatTemplate tmpl = chat_template_for_model(
      model.gguf(), a.chat_template.empty() ? std::nullopt : std::optional<std::string_view>(a.chat_template));
  const int64_t n_ctx = a.n_ctx > 0 ? a.n_ctx
                                    : (model.n_ctx_train() > 0 ? std::min<int64_t>(model.n_ctx_train(), 4096) : 4096);
  Context ctx(model, a.threads);
  Sequence seq = ctx.new_sequence(n_ctx);
  // One sampler for the session: its RNG and penalty window run on across
  // turns, as llama-cli's one common_sampler does.
  Sampler sampler(a.sp, static_cast<int32_t>(n_ctx));
  std::fprintf(stderr, "synapse: chat with %s (template %s, n_ctx %lld); Ctrl-C stops a reply, Ctrl-D or Ctrl-C at the prompt quits\n",
               a.model.c_str(), std::string(chat_template_name(tmpl)).c_str(), static_cast<long long>(n_ctx));
  std::signal(SIGINT, on_sigint);

  GenerationParams gp;
  gp.max_tokens = a.n_predict;
  gp.sampling.grammar = a.sp.grammar;  // each reply is constrained afresh (the shared sampler carries RNG and penalties)
  gp.ignore_eos = a.ignore_eos;
  // Every reply ends with an end-of-turn token in the cache (the one the
  // model stopped at, or the vocabulary's when -n or Ctrl-C cut it short), so
  // the next turn's delta continues the conversation the template shows.
  gp.close_turn = true;
  const auto print = [](const GeneratedToken& t) {
    if (!t.text.empty()) {
      std::fwrite(t.text.data(), 1, t.text.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  std::vector<ChatMessage> history;
  if (!a.system_prompt.empty()) history.push_back({"system", a.system_prompt});
  bool first = true;
  std::string line;
  for (;;) {
    std::fputs("\n> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    const ChatMessage msg{"user", line};
    // What this message adds to the prompt the cache already holds.
    const std::vector<ChatSegment> delta = format_chat_delta(tmpl, history, msg, true);
    const std::vector<token_id> ids = tokenize_segments(tok, delta, /*add_special=*/first);
    // A message that cannot fit even in an empty context is refused alone
    // (the session goes on); one that fits but not beside the history ends it.
    if (static_cast<int64_t>(ids.size()) + (first ? 0 : 1) >= seq.n_ctx()) {
      std::fprintf(stderr,
                   "synapse: this message is %zu tokens with its template, more than the context of %lld tokens "
                   "holds; shorten it or raise -c\n",
                   ids.size(), static_cast<long long>(n_ctx));
      continue;
    }
    if (seq.n_past() + static_cast<int64_t>(ids.size()) >= seq.n_ctx()) {
      std::fprintf(stderr, "synapse: the context of %lld tokens is full; start a new session (or raise -c)\n",
                   static_cast<long long>(n_ctx));
      break;
    }
    first = false;
    history.push_back(msg);
    Generation gen(tok, gp, sampler);
    g_interrupt.store(false);
    g_generating.store(true);
    const GenerationResult g = generate(ctx, seq, ids, gen, print, &g_interrupt);
    g_generating.store(false);
    history.push_back({"assistant", g.text});
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
  app.add_option("--chat-template", a->chat_template, "chat template name (default: the model's, else chatml)");
  app.add_option("-n,--n-predict", a->n_predict, "most tokens per reply (-1: until end of turn)");
  add_threads_flag(app, a->threads);
  app.add_option("-c,--ctx-size", a->n_ctx, "context size in tokens (default: the model's, at most 4096)");
  app.add_flag("--ignore-eos", a->ignore_eos, "do not end a reply at end-of-generation tokens");
  add_sampler_flags(app, a->sp);
  return [a] { return run(*a); };
}

}  // namespace synapse::tools
