// synapse run -m MODEL (-p PROMPT | -f FILE | -bf FILE) [-n N] [-t T] [-c N_CTX] [--temp T] [--seed S]
//             [-r TEXT] [--display-prompt] [--verbose-prompt] [--no-escape] [--no-parse-special] [-sp]
//             [-cnv [-sys TEXT | -sysf FILE] [--jinja | --no-jinja] [--chat-template NAME]
//              [--chat-template-file FILE] [--chat-template-kwargs JSON]]
// llama-completion's one-shot generation. Prints only the generated text to
// stdout (with --display-prompt the prompt first, as llama-completion does
// by default), token by token; logs and timings go to stderr. Stops at an
// end-of-generation token, a -r or --stop string, after -n tokens, or at a
// full context (llama.cpp's default: no context shift). The prompt is read
// as prompt_flags.hpp says: escapes processed and special tokens parsed, as
// llama.cpp does.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "chat_template_flags.hpp"
#include "commands.hpp"
#include "common_flags.hpp"
#include "progress.hpp"
#include "prompt_flags.hpp"
#include "sampler_flags.hpp"
#include "synapse/chat.hpp"
#include "synapse/error.hpp"
#include "synapse/generation.hpp"
#include "synapse/synapse.hpp"

namespace synapse::tools {
namespace {

struct RunArgs {
  std::string model;
  PromptFlags pf;
  std::vector<std::string> reverse_prompts;  // -r: stop after this text (printed, as llama-completion)
  bool display_prompt = false;               // --display-prompt: print the prompt before the generation
  bool special = false;                      // -sp: print special tokens' text
  int n_predict = -1;
  int threads = 0;
  int n_ctx = 0;
  int n_batch = 2048;   // -b: logical batch (llama.cpp's default)
  int n_ubatch = 512;   // -ub: physical batch, the rows of one forward
  KvTypeFlags kv_types;  // -ctk, -ctv
  SamplerParams sp;
  std::vector<std::string> stops;
  bool ignore_eos = false;
  bool chat = false;
  ChatTemplateFlags tmpl;
};

int run(RunArgs& a, const CLI::App& app) {
  std::string text;
  a.pf.reverse_prompts = &a.reverse_prompts;
  resolve_prompt(app, a.pf, &text);  // none: the BOS token alone, as llama-completion
  const std::string system_prompt = resolve_system_prompt(app, a.pf);
  const auto t_load = std::chrono::steady_clock::now();
  const Model model = load_model(a.model);
  const int64_t n_ctx = a.n_ctx > 0 ? a.n_ctx
                                    : (model.n_ctx_train() > 0 ? std::min<int64_t>(model.n_ctx_train(), 4096) : 4096);

  const Tokenizer& tok = model.tokenizer();
  std::vector<token_id> prompt;
  if (a.chat) {
    // One chat turn: the model's Jinja template (or a built-in format;
    // chat_template_flags.hpp) around the prompt.
    const ChatFormatter f = chat_formatter(model, a.tmpl);
    std::vector<ChatMessage> msgs;
    if (!system_prompt.empty()) msgs.push_back({"system", system_prompt});
    msgs.push_back({"user", text});
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
    // As llama-completion: special-token texts in the prompt are parsed.
    prompt = tok.tokenize(text, /*add_special=*/true, /*parse_special=*/a.pf.parse_special);
  }
  if (a.pf.verbose_prompt) print_verbose_prompt(tok, text, prompt);
  if (prompt.empty()) throw Error(Errc::invalid_argument, "the prompt tokenizes to no tokens and the model adds no BOS");
  if (static_cast<int64_t>(prompt.size()) > n_ctx)
    throw Error(Errc::invalid_argument, "the prompt is " + std::to_string(prompt.size()) +
                                            " tokens, longer than the context size " + std::to_string(n_ctx) +
                                            " (raise -c)");
  const double load_s = seconds_since(t_load);
  Context ctx(model, a.threads);
  apply_kv_types(ctx, a.kv_types);
  std::fprintf(stderr, "synapse: loaded %s (%s, %lld layers, n_embd %lld, n_vocab %lld) in %.3f s; n_ctx %lld, %d threads\n",
               a.model.c_str(), model.architecture().c_str(), static_cast<long long>(model.n_layer()),
               static_cast<long long>(model.n_embd()), static_cast<long long>(model.n_vocab()), load_s,
               static_cast<long long>(n_ctx), ctx.n_threads());
  Sequence seq = ctx.new_sequence(n_ctx);

  GenerationParams gp;
  gp.sampling = a.sp;  // the penalty window starts with the prompt, as in llama-cli (generate accepts it)
  gp.max_tokens = a.n_predict;
  gp.stop = a.stops;
  gp.stop.insert(gp.stop.end(), a.reverse_prompts.begin(), a.reverse_prompts.end());
  if (a.special) gp.preserved_tokens = control_tokens(tok);
  gp.ignore_eos = a.ignore_eos;
  // The prompt runs in physical batches of at most min(-b, -ub) rows; the
  // logits are the same whatever the split (every op is per row).
  gp.n_ubatch = std::max(1, std::min(a.n_batch, a.n_ubatch));
  if (a.display_prompt) {
    for (token_id id : prompt) std::fputs(tok.token_to_piece(id, a.special).c_str(), stdout);
    std::fflush(stdout);
  }
  const GenerationResult g = generate(ctx, seq, prompt, gp, [](const GeneratedToken& t) {
    if (!t.text.empty()) {
      std::fwrite(t.text.data(), 1, t.text.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  // llama-completion prints the reverse prompt it stopped at (--stop's string is not printed).
  if (g.stop_reason == StopReason::stop_string &&
      std::find(a.reverse_prompts.begin(), a.reverse_prompts.end(), g.stopping_word) != a.reverse_prompts.end())
    std::fputs(g.stopping_word.c_str(), stdout);
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
  add_prompt_flags(app, a->pf, "prompt text");
  app.add_option("-n,--n-predict,--predict", a->n_predict,
                 "tokens to generate (-1, -2: until end of generation or a full context)")
      ->check(int_range(-2, INT32_MAX));
  add_threads_flag(app, a->threads);
  add_ctx_flag(app, a->n_ctx);
  add_kv_type_flags(app, a->kv_types);
  add_batch_flags(app, a->n_batch, a->n_ubatch);
  add_sampler_flags(app, a->sp);
  app.add_option("--stop", a->stops, "stop when the output contains this string (repeatable; not printed)");
  app.add_option("-r,--reverse-prompt", a->reverse_prompts,
                 "stop after this text (repeatable; printed, as llama-completion does)");
  app.add_flag("--display-prompt,!--no-display-prompt", a->display_prompt,
               "print the prompt before the generated text (default off: only the generation)");
  app.add_flag("--special", a->special, "print special tokens' text (-sp)");
  app.add_flag("--ignore-eos", a->ignore_eos, "do not stop at end-of-generation tokens");
  app.add_flag("--chat,!--no-chat", a->chat,
               "wrap the prompt in the model's chat template, one user turn (-cnv; -no-cnv: not, the default)");
  add_chat_template_flags(app, a->tmpl);
  return [a, &app] { return run(*a, app); };
}

}  // namespace synapse::tools
