// synapse chat -m MODEL [-sys SYSTEM] [--chat-template NAME] [-n N] [-c N_CTX] [-t T] [sampler flags]
//
// An interactive multi-turn conversation, like llama-cli's conversation mode:
// "> " asks for a user line on stdout; the reply streams after it. The model's
// KV cache keeps the whole conversation, so each turn only feeds what the new
// message adds (runtime::format_chat_delta). Ctrl-C during a reply stops it
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
#include "generate.hpp"
#include "synapse/chat.hpp"
#include "sampler_flags.hpp"
#include "synapse/error.hpp"

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
  runtime::SamplerParams sp;
};

int run(const ChatArgs& a) {
  auto m = model::load_model(a.model);
  const Tokenizer& tok = *m->tokenizer;
  const runtime::ChatTemplate tmpl = runtime::chat_template_for_model(
      m->file, a.chat_template.empty() ? std::nullopt : std::optional<std::string_view>(a.chat_template));
  const int64_t n_ctx =
      a.n_ctx > 0 ? a.n_ctx : (m->hp.n_ctx_train > 0 ? std::min<int64_t>(m->hp.n_ctx_train, 4096) : 4096);
  runtime::ThreadPool pool(a.threads > 0 ? a.threads : runtime::default_thread_count());
  runtime::KvCache kv = model::make_kv_cache(*m, n_ctx);
  runtime::Sampler sampler(a.sp, static_cast<int32_t>(n_ctx));
  std::fprintf(stderr, "synapse: chat with %s (template %s, n_ctx %lld); Ctrl-C stops a reply, Ctrl-D or Ctrl-C at the prompt quits\n",
               a.model.c_str(), std::string(runtime::chat_template_name(tmpl)).c_str(), static_cast<long long>(n_ctx));
  std::signal(SIGINT, on_sigint);

  std::vector<runtime::ChatMessage> history;
  if (!a.system_prompt.empty()) history.push_back({"system", a.system_prompt});
  std::vector<float> logits;
  bool first = true;
  std::string line;
  for (;;) {
    std::fputs("\n> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    const runtime::ChatMessage msg{"user", line};
    // What this message adds to the prompt the cache already holds.
    const std::vector<runtime::ChatSegment> delta = runtime::format_chat_delta(tmpl, history, msg, true);
    const std::vector<token_id> ids = runtime::tokenize_segments(tok, delta, /*add_special=*/first);
    if (kv.n_past() + static_cast<int64_t>(ids.size()) >= kv.n_ctx()) {
      std::fprintf(stderr, "synapse: the context of %lld tokens is full; start a new session (or raise -c)\n",
                   static_cast<long long>(n_ctx));
      break;
    }
    first = false;
    history.push_back(msg);
    for (token_id t : ids) sampler.accept(t);
    model::forward(*m, kv, ids, false, logits, pool);
    runtime::Stopper stopper(tok, {a.n_predict, {}, a.ignore_eos});
    g_interrupt.store(false);
    g_generating.store(true);
    const Generated g = generate(*m, kv, pool, sampler, stopper, logits, stdout, &g_interrupt);
    g_generating.store(false);
    history.push_back({"assistant", g.text});
    // The end-of-turn token the model stopped at goes into the cache too (as
    // llama-cli does); the next turn's delta starts after it.
    if (stopper.reason() == runtime::StopReason::eog && kv.n_past() < kv.n_ctx()) {
      const token_id eot[1] = {g.last_token};
      model::forward(*m, kv, eot, false, logits, pool);
    }
    if (g.interrupted) std::fputs(" [stopped]", stdout);
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
