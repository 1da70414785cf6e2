// synapse run -m MODEL -p PROMPT [-n N] [-t T] [-c N_CTX] [--temp T] [--seed S]
// Prints only the generated text to stdout, token by token; logs and timings
// go to stderr. Stops at an end-of-generation token or after -n tokens.
#include <chrono>
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "common_flags.hpp"
#include "model/forward.hpp"
#include "generate.hpp"
#include "synapse/chat.hpp"
#include "synapse/sampling.hpp"
#include "sampler_flags.hpp"
#include "synapse/error.hpp"

namespace synapse::tools {
namespace {

struct RunArgs {
  std::string model;
  std::string prompt;
  int n_predict = -1;
  int threads = 0;
  int n_ctx = 0;
  int n_batch = 2048;   // -b: logical batch (llama.cpp's default)
  int n_ubatch = 512;   // -ub: physical batch, the rows of one forward
  runtime::SamplerParams sp;
  std::vector<std::string> stops;
  bool ignore_eos = false;
  bool chat = false;
  std::string system_prompt;
  std::string chat_template;
  bool no_display_prompt = true;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const RunArgs& a) {
  const auto t_load = std::chrono::steady_clock::now();
  auto m = model::load_model(a.model);
  const int threads = a.threads > 0 ? a.threads : runtime::default_thread_count();
  int64_t n_ctx = a.n_ctx > 0 ? a.n_ctx : (m->hp.n_ctx_train > 0 ? std::min<int64_t>(m->hp.n_ctx_train, 4096) : 4096);

  const Tokenizer& tok = *m->tokenizer;
  std::vector<token_id> prompt;
  if (a.chat) {
    // One chat turn: the model's template (or --chat-template) around the
    // prompt; template text parses special tokens, the user's text does not.
    const runtime::ChatTemplate tmpl = runtime::chat_template_for_model(
        m->file, a.chat_template.empty() ? std::nullopt : std::optional<std::string_view>(a.chat_template));
    std::vector<runtime::ChatMessage> msgs;
    if (!a.system_prompt.empty()) msgs.push_back({"system", a.system_prompt});
    msgs.push_back({"user", a.prompt});
    prompt = runtime::tokenize_chat(tok, tmpl, msgs, /*add_generation_prompt=*/true, /*add_special=*/true);
  } else {
    prompt = tok.tokenize(a.prompt, /*add_special=*/true, /*parse_special=*/false);
  }
  if (prompt.empty()) throw Error(Errc::invalid_argument, "the prompt tokenizes to no tokens and the model adds no BOS");
  if (static_cast<int64_t>(prompt.size()) > n_ctx)
    throw Error(Errc::invalid_argument, "the prompt is " + std::to_string(prompt.size()) +
                                            " tokens, longer than the context size " + std::to_string(n_ctx) +
                                            " (raise -c)");
  std::fprintf(stderr, "synapse: loaded %s (%s, %lld layers, n_embd %lld, n_vocab %lld) in %.3f s; n_ctx %lld, %d threads\n",
               a.model.c_str(), m->hp.arch_name.c_str(), static_cast<long long>(m->hp.n_layer),
               static_cast<long long>(m->hp.n_embd), static_cast<long long>(m->hp.n_vocab), seconds_since(t_load),
               static_cast<long long>(n_ctx), threads);
  runtime::ThreadPool pool(threads);
  runtime::KvCache kv = model::make_kv_cache(*m, n_ctx);
  runtime::Sampler sampler(a.sp, static_cast<int32_t>(n_ctx));
  for (const token_id t : prompt) sampler.accept(t);  // the penalty window starts with the prompt, as in llama-cli
  std::vector<float> logits;

  const auto t_pp = std::chrono::steady_clock::now();
  // The prompt runs in physical batches of at most min(-b, -ub) rows; the
  // logits are the same whatever the split (every op is per row).
  const size_t step = static_cast<size_t>(std::max(1, std::min(a.n_batch, a.n_ubatch)));
  for (size_t i = 0; i < prompt.size(); i += step) {
    const size_t n = std::min(step, prompt.size() - i);
    model::forward(*m, kv, std::span<const token_id>(prompt.data() + i, n), false, logits, pool);
  }
  const double pp_s = seconds_since(t_pp);

  runtime::Stopper stopper(tok, {a.n_predict, a.stops, a.ignore_eos});
  const Generated g = generate(*m, kv, pool, sampler, stopper, logits, stdout);
  std::fputc('\n', stdout);
  if (g.context_full)
    std::fprintf(stderr, "synapse: context of %lld tokens is full; stopping\n", static_cast<long long>(n_ctx));
  std::fprintf(stderr, "synapse: prompt %zu tokens in %.3f s (%.1f t/s); generated %d tokens in %.3f s (%.1f t/s); seed %u; stop: %s\n",
               prompt.size(), pp_s, prompt.size() / std::max(pp_s, 1e-9), g.n_tokens, g.seconds,
               g.n_tokens / std::max(g.seconds, 1e-9), sampler.seed(),
               g.context_full ? "context full" : runtime::stop_reason_name(stopper.reason()));
  return 0;
}

}  // namespace

Runner add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  app.add_option("-m,--model", a->model, "GGUF model file")->required();
  app.add_option("-p,--prompt", a->prompt, "prompt text")->required();
  app.add_option("-n,--n-predict", a->n_predict, "tokens to generate (-1: until end of generation or full context)");
  add_threads_flag(app, a->threads);
  app.add_option("-c,--ctx-size", a->n_ctx, "context size in tokens (default: the model's, at most 4096)");
  add_batch_flags(app, a->n_batch, a->n_ubatch);
  add_sampler_flags(app, a->sp);
  app.add_option("--stop", a->stops, "stop when the output contains this string (repeatable; not printed)");
  app.add_flag("--ignore-eos", a->ignore_eos, "do not stop at end-of-generation tokens");
  app.add_flag("--chat", a->chat, "wrap the prompt in the model's chat template (one user turn)");
  app.add_option("--system-prompt", a->system_prompt, "system message for --chat");
  app.add_option("--chat-template", a->chat_template,
                 "chat template name (chatml, llama2, llama3, mistral-v1, mistral-v3, mistral-v7, phi3, zephyr, ...)");
  return [a] { return run(*a); };
}

}  // namespace synapse::tools
