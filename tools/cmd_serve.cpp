// synapse serve -m MODEL [-c N] [-np N] [-t N] [--host H] [--port P] [--api-key K] ...
// An OpenAI- and llama-server-compatible HTTP server (src/server/). The flags
// are llama-server's, so a llama-server command line works with
// `llama-server` replaced by `synapse serve`. One difference: -c is the
// context of EACH of the -np slots (llama-server divides -c among them).
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/strings.hpp"
#include "commands.hpp"
#include "progress.hpp"
#include "common_flags.hpp"
#include "sampler_flags.hpp"
#include "server/http_server.hpp"
#include "synapse/chat.hpp"
#include "synapse/error.hpp"
#include "synapse/scheduler.hpp"

#ifndef SYNAPSE_GIT_COMMIT
#define SYNAPSE_GIT_COMMIT "unknown"
#endif
#ifndef SYNAPSE_BUILD_NUMBER
#define SYNAPSE_BUILD_NUMBER 0
#endif

namespace synapse::tools {
namespace {

// llama.cpp's comma-separated --alias / --tags: split_stripped's parts,
// sorted without repeats (its std::set).
std::vector<std::string> comma_set(const std::string& value) {
  const std::vector<std::string> parts = split_stripped(value, ',');
  const std::set<std::string> out(parts.begin(), parts.end());
  return {out.begin(), out.end()};
}

// The format names llama.cpp's --chat-template takes without --jinja
// (v0.5.0 src/llama-chat.cpp, LLM_CHAT_TEMPLATES), synapse's among them.
bool is_llama_cpp_template_name(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1", "mistral-v3",
      "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "phi3", "phi4", "falcon3", "zephyr", "monarch",
      "gemma", "orion", "openchat", "vicuna", "vicuna-orca", "deepseek", "deepseek2", "deepseek3", "deepseek-ocr",
      "command-r", "llama3", "chatglm3", "chatglm4", "glmedge", "minicpm", "exaone3", "exaone4", "exaone-moe",
      "rwkv-world", "granite", "granite-4.0", "granite-4.1", "gigachat", "megrez", "yandex", "bailing",
      "bailing-think", "bailing2", "llama4", "smolvlm", "hunyuan-moe", "gpt-oss", "hunyuan-dense", "hunyuan-vl",
      "kimi-k2", "seed_oss", "grok-2", "pangu-embedded", "solar-open"};
  for (const std::string_view n : kNames)
    if (n == name) return true;
  for (const std::string_view n : synapse::chat_template_names())
    if (n == name) return true;
  return false;
}


struct ServeArgs {
  server::ServerParams server;
  SchedulerParams sched;
  std::vector<std::string> api_keys;  // --api-key, each maybe "k1,k2"
  std::string api_key_file;
  std::string alias;
  std::string tags;
  int shutdown_timeout_s = server::defaults::kShutdownTimeoutS;  // --shutdown-timeout
  KvTypeFlags kv_types;  // -ctk, -ctv
};

std::string read_text_file(const std::string& path, const char* flag) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(Errc::io, std::string("cannot read ") + flag + " " + path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// --api-key-file: one key per line; blank lines are skipped.
std::vector<std::string> read_key_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(Errc::io, "cannot read --api-key-file " + path);
  std::vector<std::string> keys;
  for (std::string line; std::getline(f, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) keys.push_back(line);
  }
  if (keys.empty()) throw Error(Errc::invalid_argument, "--api-key-file " + path + " holds no key");
  return keys;
}

// glibc gives every thread a cache (tcache) of up to 7 freed chunks of each
// size up to 1032 bytes, kept outside the arenas (malloc_trim does not return
// it). The server's HTTP threads (4 x slots + 16, at least 32) each fill theirs
// as they meet new request and reply sizes, so the RSS creeps up for thousands
// of requests before it levels off, while the live heap stays flat (measured
// with heaptrack and malloc_info: see the commit that added this). The cache
// can only be turned off through GLIBC_TUNABLES, read at process start, so the
// server executes itself again, once, with glibc.malloc.tcache_count=0 added
// (unless the variable already sets it). When that fails it goes on as it is.
void exec_without_malloc_thread_cache() {
  const char* set = std::getenv("GLIBC_TUNABLES");
  const std::string tunables = set != nullptr ? set : "";
  if (tunables.find("glibc.malloc.tcache_count") != std::string::npos) return;
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0, end; start < cmdline.size(); start = end + 1) {
    end = cmdline.find('\0', start);
    if (end == std::string::npos) end = cmdline.size();
    args.push_back(cmdline.substr(start, end - start));
  }
  if (args.empty()) return;
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string value = (tunables.empty() ? "" : tunables + ":") + "glibc.malloc.tcache_count=0";
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv.data());
  if (set != nullptr) setenv("GLIBC_TUNABLES", tunables.c_str(), 1);  // exec failed: as before
  else unsetenv("GLIBC_TUNABLES");
}

// While the model loads (or the scheduler starts), SIGTERM and SIGINT end
// the process at once by the signal's own default action, as llama-server's
// do (it installs its handlers only once the model is loaded): the exit
// status says "killed by SIGTERM" (a shell's 143; SIGINT: 130), and nothing
// waits for the load to finish. The signals are blocked in every thread
// (serve() blocks them before any thread starts), so this thread takes them
// with sigtimedwait and re-raises one with its default action unblocked.
// Once destroyed (the model is loaded), a signal stays pending for serve()'s
// sigwait: the graceful stop.
class StopDuringLoad {
 public:
  explicit StopDuringLoad(const sigset_t& signals)
      : signals_(signals), thread_([this] { watch(); }) {}
  ~StopDuringLoad() {
    loaded_.store(true);
    thread_.join();
  }
  StopDuringLoad(const StopDuringLoad&) = delete;
  StopDuringLoad& operator=(const StopDuringLoad&) = delete;

 private:
  void watch() {
    while (!loaded_.load()) {
      const timespec tick{0, 20 * 1000 * 1000};
      const int sig = sigtimedwait(&signals_, nullptr, &tick);
      if (sig <= 0) continue;
      std::fprintf(stderr, "synapse serve: %s while loading the model, exiting\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      std::fflush(stderr);
      signal(sig, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      raise(sig);        // to this thread, where it is now unblocked: the process ends
      _exit(128 + sig);  // not reached
    }
  }

  sigset_t signals_;
  std::atomic<bool> loaded_{false};
  std::thread thread_;
};

int serve(ServeArgs& a) {
  exec_without_malloc_thread_cache();  // before any thread starts
  // Two malloc arenas rather than glibc's 8 per core, one per thread up to
  // that: each arena keeps the free memory of its own threads' peaks, so
  // with 80 HTTP threads the RSS again climbed with every thread's first
  // large reply. Threads share arenas from the start instead.
  mallopt(M_ARENA_MAX, 2);
  server::ServerParams& sp = a.server;
  for (const std::string& k : a.api_keys) {
    size_t start = 0;
    for (size_t comma; (comma = k.find(',', start)) != std::string::npos; start = comma + 1)
      if (comma > start) sp.api_keys.push_back(k.substr(start, comma - start));
    if (start < k.size()) sp.api_keys.push_back(k.substr(start));
  }
  if (!a.api_key_file.empty())
    for (std::string& k : read_key_file(a.api_key_file)) sp.api_keys.push_back(std::move(k));
  // The chat template's flags are checked before the model loads. As
  // llama-server's --chat-template with --jinja: a value that names no format
  // of llama.cpp's is a Jinja template's text (a name synapse lacks stays an
  // error, from the name's check at load).
  if (!sp.chat_template.empty() && sp.jinja && !is_llama_cpp_template_name(sp.chat_template)) {
    try {
      server::check_chat_template(sp.chat_template);
    } catch (const Error& e) {
      throw Error(e.code(), "--chat-template (not a format's name, so a Jinja template): " + std::string(e.what()));
    }
    sp.chat_template_source = std::move(sp.chat_template);
    sp.chat_template.clear();
  }
  if (!sp.chat_template_file.empty() && !sp.chat_template_source) {
    if (!sp.jinja) throw Error(Errc::invalid_argument, "--chat-template-file is a Jinja template: it cannot go with --no-jinja");
    sp.chat_template_source = read_text_file(sp.chat_template_file, "--chat-template-file");
    try {
      server::check_chat_template(*sp.chat_template_source);
    } catch (const Error& e) {
      throw Error(e.code(), "--chat-template-file " + sp.chat_template_file + ": " + e.what());
    }
  }
  server::check_template_kwargs(sp.chat_template_kwargs);
  // llama-server's --alias and --tags: comma-separated names, kept as sorted
  // sets; the first alias is the model's name.
  sp.aliases = comma_set(a.alias);
  sp.tags = comma_set(a.tags);
  sp.model_name = sp.aliases.empty() ? sp.model_path : sp.aliases.front();
  // llama-server's build_info, "b<build number>-<commit>" (clients and its test
  // suite read the "b"), with synapse's build number and commit.
  sp.system_fingerprint = "b" + std::to_string(SYNAPSE_BUILD_NUMBER) + "-" + SYNAPSE_GIT_COMMIT;
  if (sp.n_http_threads <= 0) sp.n_http_threads = server::defaults::http_threads(a.sched.n_parallel);

  // SIGINT / SIGTERM are taken by this thread (sigwait below), not by the
  // server's threads, which inherit the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not a dead server

  server::HttpServer http(sp);
  http.start();
  std::string urls;
  for (const std::string& url : http.urls()) urls += (urls.empty() ? "" : ", ") + url;
  std::fprintf(stderr, "synapse serve: listening on %s (loading %s)\n", urls.c_str(), sp.model_path.c_str());
  std::optional<StopDuringLoad> stop_during_load(stop_signals);
  const Model model = load_model(sp.model_path);
  SchedulerParams sched_params = a.sched;
  sched_params.type_k = kv_cache_type_from_name(a.kv_types.k);
  sched_params.type_v = kv_cache_type_from_name(a.kv_types.v);
  auto sched = std::make_unique<Scheduler>(model, sched_params);
  const SchedulerParams& rp = sched->params();
  // The KV types and their bytes a token, as llama-server's llama_kv_cache
  // line names them ("K (q8_0)").
  std::fprintf(stderr,
               "synapse serve: model loaded; %d slots sharing a KV pool of %lld tokens (K %s, V %s: %llu bytes a "
               "token), %d threads%s\n",
               rp.n_parallel, static_cast<long long>(sched->n_ctx()), kv_type_label(rp.type_k).c_str(),
               kv_type_label(rp.type_v).c_str(),
               static_cast<unsigned long long>(model.kv_bytes_per_position(rp.type_k, rp.type_v)), rp.n_threads,
               sp.api_keys.empty() ? "" : ", API key required");
  // From here a signal is the graceful stop (serve()'s sigwait below), also
  // one that comes while the routes are being readied: the watcher ends
  // before /health can say 200.
  stop_during_load.reset();
  http.set_scheduler(std::move(sched));

  // The first signal: a graceful stop within --shutdown-timeout (every
  // request ends, its reply is written, the process exits 0). A second
  // signal: exit at once, with 128 + its number (a shell's code for a death
  // by that signal), leaving the rest to the kernel.
  int sig = 0;
  sigwait(&stop_signals, &sig);
  const auto grace = std::chrono::seconds(a.shutdown_timeout_s);
  std::fprintf(stderr, "synapse serve: %s, stopping (requests in flight end within %d s; again to exit now)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", a.shutdown_timeout_s);
  http.begin_shutdown(grace);
  // Every request has ended by the deadline; a reply not written a second
  // later (a client that does not read) has its connection shut.
  const auto hard = std::chrono::steady_clock::now() + grace + std::chrono::seconds(1);
  bool closed = false;
  while (!http.wait_stopped(std::chrono::milliseconds(0))) {
    const timespec tick{0, 50 * 1000 * 1000};
    const int again = sigtimedwait(&stop_signals, nullptr, &tick);
    if (again > 0) {
      std::fprintf(stderr, "synapse serve: %s again, exiting now\n", again == SIGINT ? "SIGINT" : "SIGTERM");
      std::fflush(stderr);
      _exit(128 + again);
    }
    if (!closed && std::chrono::steady_clock::now() >= hard) {
      http.close_connections();
      closed = true;
    }
  }
  http.stop();
  std::fprintf(stderr, "synapse serve: stopped\n");
  return 0;
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  a->sched.max_queue = server::defaults::kMaxQueue;
  const SchedulerParams engine;  // the engine's defaults, for the help text
  app.add_option("-m,--model", a->server.model_path, "GGUF model file")->required();
  add_kv_type_flags(app, a->kv_types);
  app.add_option("-c,--ctx-size", a->sched.n_ctx,
                 "KV cache tokens of all slots together, one pool that any one request may fill "
                 "(llama-server's unified KV; default: the model's context, at most 4096)")
      ->check(int_range(0, INT32_MAX));
  app.add_option("--parallel", a->sched.n_parallel, "slots: requests served at once (-np, default 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("-t,--threads", a->sched.n_threads, "threads (default: physical cores)")
      ->check(int_range(0, max_threads, " (ggml's GGML_MAX_N_THREADS)"));
  app.add_option("-b,--batch-size", a->sched.n_batch, "rows per step, all slots together (default " + std::to_string(engine.n_batch) + ")")
      ->check(CLI::PositiveNumber);
  app.add_option("--ubatch-size", a->sched.n_ubatch, "prompt rows per slot per step (-ub, default " + std::to_string(engine.n_ubatch) + ")")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-queue", a->sched.max_queue, "requests waiting for a slot before 503 (default " + std::to_string(server::defaults::kMaxQueue) + ")")
      ->check(int_range(0, INT32_MAX));
  app.add_option("--host", a->server.host,
                 std::string("addresses to listen on, comma-separated (default ") + server::defaults::kHost + ")");
  app.add_option("--port", a->server.port, "port to listen on (default " + std::to_string(server::defaults::kPort) + "; 0: any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--api-key", a->api_keys, "API key clients must send (Bearer or x-api-key); repeatable or comma-separated");
  app.add_option("--api-key-file", a->api_key_file, "file of API keys, one per line");
  app.add_flag("-v,--verbose", a->server.verbose,
               "replies to /v1/chat/completions and /v1/completions carry llama-server's \"__verbose\" (the "
               "/completion result); a request's \"verbose\" overrides");
  app.add_option("-a,--alias", a->alias,
                 "model names, comma-separated: the first in sorted order is the name in replies and /v1/models' id, "
                 "all are /v1/models' aliases (default: the model path)");
  app.add_option("--tags", a->tags, "informational model tags, comma-separated (/v1/models' tags)");
  app.add_option("-n,--n-predict,--predict", a->server.n_predict,
                 "tokens per reply when a request gives no max_tokens / n_predict (-1: until the end or a full context)")
      ->check(int_range(-1, INT32_MAX));
  add_sampler_flags(app, a->server.sampling);
  app.add_flag("--jinja,!--no-jinja", a->server.jinja,
               "render chat with the model's Jinja template (default on; --no-jinja: the built-in formats)");
  auto* tmpl_name = app.add_option("--chat-template", a->server.chat_template,
                                   "a built-in chat format by name (chatml, llama3, ...; then no Jinja)");
  app.add_option("--chat-template-file", a->server.chat_template_file,
                 "a Jinja chat template to use instead of the model's (implies --jinja)")
      ->excludes(tmpl_name);
  app.add_option("--chat-template-kwargs", a->server.chat_template_kwargs,
                 "a JSON object of extra template variables, e.g. '{\"enable_thinking\": false}' "
                 "(requests' chat_template_kwargs go over it)");
  app.add_option("--reasoning-format", a->server.reasoning_format,
                 "where a reply's reasoning goes: auto or deepseek (reasoning_content), none (left in content); "
                 "default auto")
      ->check(CLI::IsMember({"none", "deepseek", "deepseek-legacy", "auto"}));
  app.add_option("--timeout", a->server.timeout_s,
                 "socket read/write timeout, and wall-clock limit of one request from its arrival, in seconds: a "
                 "reply is cut there (finish_reason length), a request still queued is answered 503 (-to, default " +
                     std::to_string(server::defaults::kTimeoutS) + ")")
      ->check(CLI::PositiveNumber);
  app.add_option("--shutdown-timeout", a->shutdown_timeout_s,
                 "on SIGTERM/SIGINT, seconds the requests in flight may still run before they are cut "
                 "(finish_reason length); then the server exits 0. A second signal exits at once (default " +
                     std::to_string(server::defaults::kShutdownTimeoutS) + ")")
      ->check(CLI::Range(0, 3600));
  app.add_option("--cors-origin,--cors-origins", a->server.cors_origins,
                 "origin a browser page may call from (repeatable; '*': any; default: no CORS)")
      ->delimiter(',');
  app.add_option("--max-header-size", a->server.max_header_bytes,
                 "largest request line and headers together, in bytes (431 above it; default " +
                     std::to_string(server::defaults::kMaxHeaderBytes) + "; each line at most 8192)")
      ->check(CLI::Range(size_t{256}, size_t{1} << 20));
  app.add_option("--idle-timeout", a->server.idle_timeout_s,
                 "seconds a keep-alive connection may wait for its next request, and a request's header may "
                 "take to arrive, before the connection is closed (408 for a late header; default " +
                     std::to_string(server::defaults::kIdleTimeoutS) + ")")
      ->check(CLI::Range(1, 3600));
  app.add_flag("--spm-infill", a->server.spm_infill,
               "/infill puts the suffix before the prefix (SPM order, for models trained so; default: PSM)");
  app.add_flag("--metrics", a->server.metrics, "enable the Prometheus endpoint GET /metrics");
  app.add_flag("--slots,!--no-slots", a->server.slots, "GET /slots: the slots' state (default: enabled)");
  app.add_flag("--props", a->server.props,
               "POST /props answers {\"success\": true} (no property can be changed; default: 501)");
  app.add_flag("--embedding,--embeddings", a->server.embeddings,
               "serve embeddings: /v1/embeddings, /embedding, /api/embed (default: disabled)");
  app.add_option_function<std::string>(
         "--pooling", [a](const std::string& v) { a->server.pooling = pooling_from_name(v); },
         "pooling type for embeddings: none, mean, cls, last, rank (default: the model's, else none)")
      ->check(CLI::IsMember({"none", "mean", "cls", "last", "rank"}));
  app.add_flag_callback(
      "--rerank,--reranking",
      [a] {
        a->server.embeddings = true;
        a->server.pooling = Pooling::rank;
      },
      "serve /v1/rerank (embeddings with pooling rank; needs a reranker model)");
  app.add_option("--embd-normalize", a->server.embd_normalize,
                 "normalisation of pooled embeddings: -1 none, 0 max absolute int16, 1 taxicab, 2 euclidean, "
                 ">2 p-norm (default " + std::to_string(server::defaults::kEmbdNormalize) + ")")
      ->check(int_range(-1, 1000));
  app.add_option("--threads-http", a->server.n_http_threads,
                 "HTTP threads (default: 4 x slots + 16, at least " + std::to_string(server::defaults::http_threads(0)) + ")")
      ->check(int_range(0, 4096));
  return [a] { return serve(*a); };
}

}  // namespace synapse::tools
