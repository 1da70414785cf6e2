// synapse run -m MODEL -p PROMPT [-n N] [-t T] [-c N_CTX] [--temp T] [--seed S]
//             [-cnv [-sys TEXT] [--jinja | --no-jinja] [--chat-template NAME] [--chat-template-file FILE]
//              [--chat-template-kwargs JSON]]
// Prints only the generated text to stdout, token by token; logs and timings
// go to stderr. Stops at an end-of-generation token or after -n tokens.
#include <chrono>
#include <cstdio>
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

struct RunArgs {
  std::string model;
  std::string prompt;
  int n_predict = -1;
  int threads = 0;
  int n_ctx = 0;
  int n_batch = 2048;   // -b: logical batch (llama.cpp's default)
  int n_ubatch = 512;   // -ub: physical batch, the rows of one forward
  SamplerParams sp;
  std::vector<std::string> stops;
  bool ignore_eos = false;
  bool chat = false;
  std::string system_prompt;
  ChatTemplateFlags tmpl;
  bool no_display_prompt = true;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const RunArgs& a) {
  const auto t_load = std::chrono::steady_clock::now();
  const Model model = Model::load(a.model);
  const int64_t n_ctx = a.n_ctx > 0 ? a.n_ctx
                                    : (model.n_ctx_train() > 0 ? std::min<int64_t>(model.n_ctx_train(), 4096) : 4096);

  const Tokenizer& tok = model.tokenizer();
  std::vector<token_id> prompt;
  if (a.chat) {
    // One chat turn: the model's Jinja template (or a built-in format;
    // chat_template_flags.hpp) around the prompt.
    const ChatFormatter f = chat_formatter(model, a.tmpl);
    std::vector<ChatMessage> msgs;
    if (!a.system_prompt.empty()) msgs.push_back({"system", a.system_prompt});
    msgs.push_back({"user", a.prompt});
    if (f.jinja) {
      // As llama.cpp: the rendered text is tokenized whole, special tokens parsed.
      nlohmann::ordered_json j = nlohmann::ordered_json::array();
      for (const ChatMessage& m : msgs) j.push_back(chat_message_json(m.role, m.content));
      std::string text;
      try {
        const std::string json = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // U+FFFD for bad UTF-8
        text = f.jinja->apply(json, /*add_generation_prompt=*/true, {}, f.kwargs);
      } catch (const Error& e) {
        throw Error(e.code(), std::string("chat template: ") + e.what());
      }
      prompt = tok.tokenize(text, /*add_special=*/true, /*parse_special=*/true);
    } else {
      // Template text parses special tokens, the user's text does not.
      prompt = tokenize_chat(tok, f.builtin, msgs, /*add_generation_prompt=*/true, /*add_special=*/true);
    }
  } else {
    prompt = tok.tokenize(a.prompt, /*add_special=*/true, /*parse_special=*/false);
  }
  if (prompt.empty()) throw Error(Errc::invalid_argument, "the prompt tokenizes to no tokens and the model adds no BOS");
  if (static_cast<int64_t>(prompt.size()) > n_ctx)
    throw Error(Errc::invalid_argument, "the prompt is " + std::to_string(prompt.size()) +
                                            " tokens, longer than the context size " + std::to_string(n_ctx) +
                                            " (raise -c)");
  const double load_s = seconds_since(t_load);
  Context ctx(model, a.threads);
  std::fprintf(stderr, "synapse: loaded %s (%s, %lld layers, n_embd %lld, n_vocab %lld) in %.3f s; n_ctx %lld, %d threads\n",
               a.model.c_str(), model.architecture().c_str(), static_cast<long long>(model.n_layer()),
               static_cast<long long>(model.n_embd()), static_cast<long long>(model.n_vocab()), load_s,
               static_cast<long long>(n_ctx), ctx.n_threads());
  Sequence seq = ctx.new_sequence(n_ctx);

  GenerationParams gp;
  gp.sampling = a.sp;  // the penalty window starts with the prompt, as in llama-cli (generate accepts it)
  gp.max_tokens = a.n_predict;
  gp.stop = a.stops;
  gp.ignore_eos = a.ignore_eos;
  // The prompt runs in physical batches of at most min(-b, -ub) rows; the
  // logits are the same whatever the split (every op is per row).
  gp.n_ubatch = std::max(1, std::min(a.n_batch, a.n_ubatch));
  const GenerationResult g = generate(ctx, seq, prompt, gp, [](const GeneratedToken& t) {
    if (!t.text.empty()) {
      std::fwrite(t.text.data(), 1, t.text.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  std::fputc('\n', stdout);
  if (g.context_full)
    std::fprintf(stderr, "synapse: context of %lld tokens is full; stopping\n", static_cast<long long>(n_ctx));
  const double pp_s = g.timings.prompt_ms / 1e3, tg_s = g.timings.predicted_ms / 1e3;
  const int n_gen = static_cast<int>(g.tokens.size());
  std::fprintf(stderr, "synapse: prompt %zu tokens in %.3f s (%.1f t/s); generated %d tokens in %.3f s (%.1f t/s); seed %u; stop: %s\n",
               prompt.size(), pp_s, prompt.size() / std::max(pp_s, 1e-9), n_gen, tg_s, n_gen / std::max(tg_s, 1e-9),
               g.seed, g.context_full ? "context full" : stop_reason_name(g.stop_reason));
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
  add_chat_template_flags(app, a->tmpl);
  return [a] { return run(*a); };
}

}  // namespace synapse::tools
