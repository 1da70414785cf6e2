// synapse chat -m MODEL [-sys SYSTEM | -sysf FILE] [-p FIRST | -f FILE] [-st] [-mli] [--jinja | --no-jinja]
//               [--chat-template NAME] [--chat-template-file FILE] [--chat-template-kwargs JSON] [-n N]
//               [-c N_CTX] [-t T] [-r TEXT] [--no-show-timings] [--context-shift] [-o FILE] [sampler flags]
//
// An interactive multi-turn conversation, like llama-cli's (llama.cpp v0.5.0,
// tools/cli): a loading line while the model loads, then "> " asks for a
// user line on stdout; the reply streams after it, and "[ Prompt: x t/s |
// Generation: y t/s ]" follows it on stderr (--no-show-timings: not).
// llama-cli's commands: /exit ends the session, /regen answers the last
// message again, /clear starts the conversation over, /read FILE puts a text
// file's contents ("--- File: FILE ---" and the text) before the next
// message. A line ending in '\' continues on the next one (-mli: every line
// continues until one ends in '\'); one ending in '/' is sent at once. -p
// or -f is the first message (escape-processed, as llama.cpp does); -st ends
// the session after one reply.
//
// The conversation is rendered with the model's own Jinja template (or a
// built-in format: chat_template_flags.hpp). The model's KV cache keeps the
// whole conversation, so each turn only feeds what the new message adds
// (llama.cpp's common_chat_format_single: render(past + new) minus
// render(past)). Ctrl-C during a reply stops it and keeps the session (the
// partial reply stays in the history); Ctrl-C or end of input at the prompt
// ends the session.
//
// A full context ends a reply, not the session, as in llama-cli (whose
// server stops a reply at the context's end and refuses a request that does
// not fit with "exceeds the available context size"): a message that does
// not fit beside the conversation is refused with that message, and the
// session goes on (/clear frees the context). With --context-shift the
// oldest exchanges are dropped instead, until the message fits (llama.cpp's
// context shift drops the oldest tokens after --keep; synapse drops whole
// exchanges, keeping the system message, so the template still renders a
// well-formed conversation).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
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
  std::string model;
  PromptFlags pf;
  ChatTemplateFlags tmpl;
  int n_predict = -1, threads = 0, n_ctx = 0;
  KvTypeFlags kv_types;  // -ctk, -ctv
  bool ignore_eos = false;
  bool single_turn = false;     // -st: one reply, then exit
  bool multiline = false;       // -mli
  bool show_timings = true;     // --show-timings / --no-show-timings (llama-cli's default: on)
  bool context_shift = false;   // --context-shift: drop the oldest exchanges when the context is full
  bool special = false;         // -sp: print special tokens' text
  std::vector<std::string> reverse_prompts;  // -r: end a reply at this text
  std::string output_file;      // -o: write the conversation here, as llama-cli does
  SamplerParams sp;
};

// The conversation so far, and what the sequence's KV cache holds of it.
class Conversation {
 public:
  Conversation(const Tokenizer& tok, ChatFormatter f, const std::string& system_prompt)
      : tok_(tok), f_(std::move(f)), n_system_(system_prompt.empty() ? 0 : 1) {
    if (!system_prompt.empty()) history_.push_back({"system", system_prompt});
  }

  // Exchanges (user message + reply) in the history.
  size_t n_exchanges() const { return (history_.size() - n_system_) / 2; }

  // /regen: removes the last exchange and returns its user message and the
  // sequence length before it (what the cache must be cut back to).
  std::pair<ChatMessage, int64_t> pop_last() {
    const Snapshot s = snapshots_.back();
    snapshots_.pop_back();
    ChatMessage msg = history_[history_.size() - 2];
    history_.resize(history_.size() - 2);
    cached_.resize(s.n_cached);
    cached_known_ = s.cached_known;
    return {msg, s.n_past};
  }

  // /clear, and the start over after a context shift: nothing in the cache.
  void clear_history() {
    history_.resize(n_system_);
    forget_cache();
  }

  // --context-shift: drops the oldest exchange (the system message stays).
  void drop_oldest() {
    history_.erase(history_.begin() + static_cast<std::ptrdiff_t>(n_system_),
                   history_.begin() + static_cast<std::ptrdiff_t>(n_system_ + 2));
    forget_cache();
  }

  // The cache was emptied (Sequence::clear): the next turn renders everything.
  void forget_cache() {
    cached_.clear();
    cached_known_ = true;
    snapshots_.clear();
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
  // `n_before`: the sequence's length before this turn's tokens were fed
  // (n_keep), for /regen.
  void commit(const ChatMessage& msg, int64_t n_keep, const std::vector<token_id>& fed, const GenerationResult& g,
              token_id eog, int64_t n_past) {
    snapshots_.push_back({std::min(static_cast<size_t>(n_keep), cached_.size()), cached_known_, n_keep});
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

  struct Snapshot {  // before an exchange: for /regen
    size_t n_cached;
    bool cached_known;
    int64_t n_past;
  };

  const Tokenizer& tok_;
  ChatFormatter f_;
  size_t n_system_;
  std::vector<ChatMessage> history_;
  std::vector<Snapshot> snapshots_;
  std::vector<token_id> cached_;  // the ids the sequence holds, when cached_known_
  bool cached_known_ = true;
};

// Cuts the sequence back to n positions; a sliding-window cache that cannot
// rewind that far is emptied instead. Returns the positions kept.
int64_t rewind(Sequence& seq, int64_t n) {
  try {
    seq.truncate(n);
    return n;
  } catch (const Error&) {
    seq.clear();
    return 0;
  }
}

// One message from stdin, as llama.cpp's console::readline_simple reads it:
// a line ending in '\' continues (with -mli: ends) the message, one ending
// in '/' ends it at once. False at end of input with nothing read.
bool read_message(bool multiline, std::string* out) {
  out->clear();
  bool any = false;
  std::string line;
  for (;;) {
    if (!std::getline(std::cin, line)) return any;
    any = true;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.back() == '/') {
      line.pop_back();
      *out += line;
      break;
    }
    bool more = multiline;
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      more = !more;
    }
    *out += line;
    *out += '\n';
    if (!more) break;
  }
  if (!out->empty() && out->back() == '\n') out->pop_back();
  return true;
}

int run(ChatArgs& a, const CLI::App& app) {
  std::string first_message;
  a.pf.reverse_prompts = &a.reverse_prompts;
  const bool has_first = resolve_prompt(app, a.pf, &first_message);
  const std::string system_prompt = resolve_system_prompt(app, a.pf);
  std::unique_ptr<std::ofstream> out_file;
  if (!a.output_file.empty()) {
    out_file = std::make_unique<std::ofstream>(a.output_file, std::ios::binary);
    if (!*out_file) throw Error(Errc::io, "-o: cannot write " + a.output_file);
  }
  // llama-cli's "Loading model..." line.
  std::fprintf(stderr, "synapse: loading %s\n", a.model.c_str());
  const Model model = load_model(a.model);
  const Tokenizer& tok = model.tokenizer();
  ChatFormatter formatter = chat_formatter(model, a.tmpl);
  const std::string template_name = formatter.description;
  const int64_t n_ctx = a.n_ctx > 0 ? a.n_ctx
                                    : (model.n_ctx_train() > 0 ? std::min<int64_t>(model.n_ctx_train(), 4096) : 4096);
  Context ctx(model, a.threads);
  apply_kv_types(ctx, a.kv_types);
  Sequence seq = ctx.new_sequence(n_ctx);
  // One sampler for the session: its RNG and penalty window run on across
  // turns, as llama-cli's one common_sampler does.
  Sampler sampler(a.sp, static_cast<int32_t>(n_ctx));
  std::fprintf(stderr,
               "synapse: chat with %s (template: %s; n_ctx %lld); commands: /exit, /regen (answer the last message "
               "again), /clear (start over), /read FILE (add a text file); Ctrl-C stops a reply, Ctrl-D or Ctrl-C at the prompt quits\n",
               a.model.c_str(), template_name.c_str(), static_cast<long long>(n_ctx));
  std::signal(SIGINT, on_sigint);

  GenerationParams gp;
  gp.max_tokens = a.n_predict;
  gp.sampling.grammar = a.sp.grammar;  // each reply is constrained afresh (the shared sampler carries RNG and penalties)
  gp.ignore_eos = a.ignore_eos;
  gp.stop = a.reverse_prompts;
  if (a.special) gp.preserved_tokens = control_tokens(tok);
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
  Conversation conv(tok, std::move(formatter), system_prompt);
  std::string line;
  std::string pending_files;  // /read: text files for the next message
  bool pending_first = has_first;
  for (;;) {
    std::fputs("\n> ", stdout);
    std::fflush(stdout);
    if (pending_first) {
      line = first_message;
      pending_first = false;
      std::fputs(line.c_str(), stdout);  // echoed, as llama-cli does
      std::fputc('\n', stdout);
      std::fflush(stdout);
    } else if (!read_message(a.multiline, &line)) {
      break;
    }
    if (line.empty()) continue;
    if (line.rfind("/exit", 0) == 0) break;
    if (line.rfind("/read ", 0) == 0) {
      // llama-cli's /read: the file's text goes before the next message.
      std::string name = line.substr(6);
      name.erase(0, name.find_first_not_of(" \t"));
      name.erase(name.find_last_not_of(" \t") + 1);
      std::ifstream f(name, std::ios::binary);
      if (!f) {
        std::fprintf(stderr, "synapse: error: file does not exist or cannot be opened: '%s'\n", name.c_str());
        continue;
      }
      pending_files += "--- File: " + name + " ---\n" + std::string(std::istreambuf_iterator<char>(f), {});
      std::fprintf(stderr, "synapse: loaded text from '%s'\n", name.c_str());
      continue;
    }
    ChatMessage msg{"user", pending_files + line};
    if (line.rfind("/clear", 0) == 0) {
      seq.clear();
      conv.clear_history();
      pending_files.clear();
      std::fprintf(stderr, "synapse: chat history cleared\n");
      continue;
    }
    if (line.rfind("/regen", 0) == 0) {
      if (conv.n_exchanges() == 0) {
        std::fprintf(stderr, "synapse: no message to regenerate\n");
        continue;
      }
      auto [last, n_before] = conv.pop_last();
      msg = std::move(last);
      if (rewind(seq, n_before) != n_before) conv.forget_cache();
    }
    // What this message adds to the prompt the cache already holds.
    int64_t n_keep = 0;
    std::vector<token_id> ids;
    bool fits = false;
    try {
      for (;;) {
        ids = conv.turn(msg, seq.n_past(), &n_keep);
        // At least one position left for the reply.
        fits = n_keep + static_cast<int64_t>(ids.size()) < seq.n_ctx();
        if (fits || !a.context_shift || conv.n_exchanges() == 0) break;
        conv.drop_oldest();
        seq.clear();
        std::fprintf(stderr, "synapse: context full: dropped the oldest exchange\n");
      }
    } catch (const Error& e) {
      // The template refused the conversation (its raise_exception, or an
      // error in it): the message is dropped and the session goes on.
      std::fprintf(stderr, "synapse: error: chat template: %s\n", e.what());
      continue;
    }
    if (!fits && conv.n_exchanges() == 0) {
      std::fprintf(stderr,
                   "synapse: error: this message is %zu tokens with its template, more than the context of %lld "
                   "tokens holds; shorten it or raise -c\n",
                   ids.size(), static_cast<long long>(n_ctx));
      continue;
    }
    if (!fits) {
      // llama-server's answer to a request that does not fit (llama-cli shows
      // it and goes on); the message is not kept.
      std::fprintf(stderr,
                   "synapse: error: this message needs %lld tokens with the conversation, which exceeds the context "
                   "of %lld tokens; /clear starts over (or raise -c, or use --context-shift)\n",
                   static_cast<long long>(n_keep + static_cast<int64_t>(ids.size())), static_cast<long long>(n_ctx));
      continue;
    }
    if (n_keep < seq.n_past()) seq.truncate(n_keep);
    Generation gen(tok, gp, sampler);
    eog = -1;
    g_interrupt.store(false);
    g_generating.store(true);
    const GenerationResult g = generate(ctx, seq, ids, gen, print, &g_interrupt);
    g_generating.store(false);
    conv.commit(msg, n_keep, ids, g, eog, seq.n_past());
    pending_files.clear();
    if (g.finish_reason == FinishReason::cancelled) std::fputs(" [stopped]", stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (out_file) *out_file << "User:\n" << msg.content << "\n\nAssistant:\n" << g.text << "\n\n" << std::flush;
    if (g.context_full)
      std::fprintf(stderr,
                   "synapse: the context of %lld tokens is full: the reply was cut; /clear starts over, /regen "
                   "retries (or raise -c)\n",
                   static_cast<long long>(n_ctx));
    if (a.show_timings)
      std::fprintf(stderr, "[ Prompt: %.1f t/s | Generation: %.1f t/s ]\n", g.timings.prompt_per_second(),
                   g.timings.predicted_per_second());
    if (a.single_turn) break;
  }
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

Runner add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  app.add_option("-m,--model", a->model, "GGUF model file")->required();
  add_prompt_flags(app, a->pf, "the first user message (then the session goes on, unless -st)");
  add_chat_template_flags(app, a->tmpl);
  app.add_option("-n,--n-predict,--predict", a->n_predict, "most tokens per reply (-1, -2: until end of turn)")
      ->check(int_range(-2, INT32_MAX));
  add_threads_flag(app, a->threads);
  add_ctx_flag(app, a->n_ctx);
  add_kv_type_flags(app, a->kv_types);
  app.add_flag("--ignore-eos", a->ignore_eos, "do not end a reply at end-of-generation tokens");
  app.add_flag("--single-turn", a->single_turn, "end the session after one reply (-st)");
  app.add_flag("--multiline-input", a->multiline,
               "a message continues over lines until one ends in '\\' (-mli; default: a line ending in '\\' "
               "continues)");
  app.add_flag("--show-timings,!--no-show-timings", a->show_timings,
               "print prompt and generation t/s after each reply, on stderr (default on)");
  app.add_flag("--context-shift,!--no-context-shift", a->context_shift,
               "when a message does not fit, drop the oldest exchanges (default: refuse the message)");
  app.add_option("-r,--reverse-prompt", a->reverse_prompts, "end a reply at this text (repeatable)");
  app.add_flag("--special", a->special, "print special tokens' text (-sp)");
  app.add_option("-o,--output,--output-file", a->output_file, "write the conversation to FILE, as llama-cli does");
  add_sampler_flags(app, a->sp);
  return [a, &app] { return run(*a, app); };
}

}  // namespace synapse::tools
