#include "server/http_server.hpp"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <httplib.h>

#include "server/chat.hpp"
#include "server/anthropic.hpp"
#include "server/connection.hpp"
#include "server/embedding.hpp"
#include "server/infill.hpp"
#include "server/limits.hpp"
#include "server/ollama.hpp"
#include "server/request.hpp"
#include "server/response.hpp"
#include "server/responses.hpp"
#include "synapse/chat.hpp"
#include "synapse/error.hpp"
#include "template/jinja.hpp"

namespace synapse::server {

using nlohmann::json;

void check_chat_template(const std::string& source) { (void)jinja::Template::parse(source); }

bool api_key_matches(const std::vector<std::string>& keys, std::string_view given) {
  unsigned match = 0;
  for (const std::string& key : keys) {
    // Walk the longer of the two in full so that the time depends on the
    // lengths only, never on the first differing byte.
    const size_t n = std::max(key.size(), given.size());
    unsigned char diff = key.size() == given.size() ? 0 : 1;
    for (size_t i = 0; i < n; ++i) {
      const unsigned char a = i < key.size() ? static_cast<unsigned char>(key[i]) : 0;
      const unsigned char b = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
      diff |= a ^ b;
    }
    match |= diff == 0;
  }
  return match != 0;
}

std::string presented_key(std::string_view authorization, std::string_view x_api_key) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() > kBearer.size() && authorization.substr(0, kBearer.size()) == kBearer)
    return std::string(authorization.substr(kBearer.size()));
  return std::string(x_api_key);
}

std::string metrics_text(const SchedulerMetrics& m, const ServerMetrics& sm) {
  std::string s;
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + buf + "\n";
  };
  const double decodes = static_cast<double>(m.n_decode_total);
  metric("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.",
         static_cast<double>(m.prompt_tokens_total));
  metric("llamacpp:prompt_seconds_total", "counter", "Prompt process time", m.prompt_seconds_total);
  metric("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.",
         static_cast<double>(m.tokens_predicted_total));
  metric("llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time",
         m.tokens_predicted_seconds_total);
  metric("llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls", decodes);
  metric("llamacpp:n_tokens_max", "counter", "Largest observed sequence length (prompt + generation)",
         static_cast<double>(m.n_tokens_max));
  metric("llamacpp:prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache",
         static_cast<double>(m.cached_tokens_total));
  // No speculative decoding here: llama-server's draft counters stay 0, there
  // for the dashboards and checks that read them.
  metric("llamacpp:spec_decode_num_draft_tokens_total", "counter", "Speculative: Total draft tokens generated", 0);
  metric("llamacpp:spec_decode_num_accepted_tokens_total", "counter",
         "Speculative: Total draft tokens accepted by the target model", 0);
  metric("llamacpp:spec_decode_num_drafts_total", "counter",
         "Speculative: Total speculative decoding verification steps", 0);
  // A ratio, so a gauge (llama-server's type for it).
  metric("llamacpp:n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call",
         decodes > 0 ? static_cast<double>(m.n_busy_slots_total) / decodes : 0.0);
  metric("llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
         m.prompt_seconds_total > 0 ? static_cast<double>(m.prompt_tokens_total) / m.prompt_seconds_total : 0.0);
  metric("llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
         m.tokens_predicted_seconds_total > 0
             ? static_cast<double>(m.tokens_predicted_total) / m.tokens_predicted_seconds_total
             : 0.0);
  metric("llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.",
         m.kv_cells_total > 0 ? static_cast<double>(m.kv_cells_used) / static_cast<double>(m.kv_cells_total) : 0.0);
  metric("llamacpp:kv_cache_tokens", "gauge", "KV-cache tokens.", static_cast<double>(m.kv_cells_used));
  metric("llamacpp:requests_processing", "gauge", "Number of requests processing.", m.requests_processing);
  metric("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", m.requests_deferred);
  metric("synapse:kv_cells_cached", "gauge", "KV cells kept by free slots as prompt cache.",
         static_cast<double>(m.kv_cells_cached));
  metric("synapse:kv_cells_total", "gauge", "KV cells of the pool all slots share (-c).",
         static_cast<double>(m.kv_cells_total));
  metric("synapse:kv_page_size", "gauge", "KV cells a page of the pool.", static_cast<double>(m.kv_page_size));
  metric("synapse:kv_pages_total", "gauge", "KV pages of the pool.", static_cast<double>(m.kv_pages_total));
  metric("synapse:kv_pages_used", "gauge", "KV pages held by requests and prompt caches.",
         static_cast<double>(m.kv_pages_used));
  metric("synapse:kv_pages_free", "gauge", "KV pages free.",
         static_cast<double>(m.kv_pages_total - m.kv_pages_used));
  metric("synapse:prefix_cache_pages", "gauge",
         "KV pages the prefix tree owns (whole pages of past requests, each once), counted in kv_pages_used.",
         static_cast<double>(m.prefix_cache_pages));
  metric("synapse:preemptions_total", "counter",
         "Requests preempted for lack of KV pages (requeued, resumed with the same reply).",
         static_cast<double>(m.preemptions_total));
  metric("synapse:snapshot_bytes", "gauge",
         "Bytes of recurrent state the slots' prompt-cache snapshots hold (hybrid models; Sequence::snapshot_bytes).",
         static_cast<double>(m.snapshot_bytes));
  metric("synapse:cached_tokens_total", "counter", "Prompt tokens served from the prompt cache.",
         static_cast<double>(m.cached_tokens_total));
  metric("synapse:requests_total", "counter", "Requests accepted.", static_cast<double>(m.requests_total));
  metric("synapse:hangups_total", "counter", "Requests whose client closed the connection before the reply's end.",
         static_cast<double>(sm.hangups_total));
  metric("synapse:hangup_steps_max", "gauge",
         "Most scheduler steps between a hang-up seen and its request's end (its slot free).",
         static_cast<double>(sm.hangup_steps_max));
  return s;
}

namespace {

// What one HTTP request's generations report, from the scheduler's worker
// thread to the HTTP thread that waits on it. The worker signals `event_fd`
// (an eventfd) after each change, so that the HTTP thread can wait for it and
// for its client hanging up at once (wait_event_or_hangup).
struct Channel {
  struct Event {
    int index;
    bool done;
    GeneratedToken step;                    // when !done and no progress
    std::optional<PromptProgress> progress = {};  // a prompt-progress report (return_progress)
  };
  std::mutex mu;
  std::deque<Event> events;  // streaming only
  std::vector<std::optional<GenerationResult>> results;
  size_t n_done = 0;
  bool stream = false;
  std::atomic<bool> cancelled{false};
  // The client hung up: the scheduler's step count then (see HttpServer's
  // hang-up metrics), -1 while connected.
  std::atomic<int64_t> hangup_step{-1};
  const int event_fd = eventfd(0, EFD_CLOEXEC);

  Channel() {
    if (event_fd < 0) throw Error(Errc::io, std::string("eventfd: ") + std::strerror(errno));
  }
  ~Channel() { ::close(event_fd); }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  void notify() { (void)eventfd_write(event_fd, 1); }

  // Waits until ready() (called with `lock` held) or the client of `sock`
  // hangs up (false). `lock` holds mu on return.
  template <class Pred>
  bool wait(std::unique_lock<std::mutex>& lock, int sock, Pred ready) {
    while (!ready()) {
      lock.unlock();
      const bool connected = wait_event_or_hangup(sock, event_fd);
      lock.lock();
      if (!connected) return ready();
    }
    return true;
  }
};

// The hang-up counters: shared by the HTTP server and the on_done callbacks of
// its requests, which thus never reach into the server (nor the Scheduler).
struct HangupStats {
  std::atomic<uint64_t> total{0};      // ServerMetrics::hangups_total
  std::atomic<uint64_t> steps_max{0};  // ServerMetrics::hangup_steps_max

  // A hung-up request's on_done ran `steps` scheduler steps after the hang-up was seen.
  void note_freed(uint64_t steps) {
    uint64_t seen = steps_max.load();
    while (steps > seen && !steps_max.compare_exchange_weak(seen, steps)) {
    }
  }
};

// A request that ended before it had a slot because its deadline passed
// (GenerationResult::deadline_passed): the server was too busy to start it
// in time, or is shutting down. Either way nothing was computed and another
// try (later, or at another replica) may succeed: 503 with Retry-After, as a
// full queue. (408 would say the client was slow to send its request.)
bool expired_unstarted(const GenerationResult& r) {
  return r.deadline_passed && r.finish_reason == FinishReason::cancelled;
}

// The status of a synapse::Error of category `code` (nullopt: not one): the
// caller's fault (invalid_argument, out_of_range) is a 400, anything else a
// 500. The route handler answers a thrown Error with it; a reply that ended
// with FinishReason::error (a grammar too ambiguous for the matcher's budget,
// found while generating) gets the same, from GenerationResult::error_code.
int error_status(std::optional<Errc> code) {
  return code == Errc::invalid_argument || code == Errc::out_of_range ? 400 : 500;
}

std::string random_id(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::lock_guard<std::mutex> lock(mu);
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += kAlnum[rng() % (sizeof kAlnum - 1)];
  return s;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(dump_json(j), "application/json; charset=utf-8");
}

// An ordered object (llama-server's key order); its strings are valid UTF-8 or replaced.
void send_ordered(httplib::Response& res, int status, const nlohmann::ordered_json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace),
                  "application/json; charset=utf-8");
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {},
                const std::string& code = {}) {
  send_json(res, status, error_body(status, message, param, code));
}

}  // namespace

struct HttpServer::Impl {
  ServerParams p;
  // One listener per --host address, their connections served by one pool.
  std::vector<std::unique_ptr<Listener>> listeners;
  std::vector<std::string> urls;  // "http://HOST:PORT" of each listener, as bound
  std::unique_ptr<httplib::ThreadPool> pool;
  std::vector<std::thread> threads;  // one listening thread per listener
  std::atomic<size_t> listening{0};  // threads not yet ended
  int bound_port = 0;

  // Set once by set_scheduler, read by every handler after `ready`.
  std::atomic<bool> ready{false};
  std::unique_ptr<Scheduler> sched;
  RequestContext rc;
  InfillParams infill;        // /infill's prompt layout: -b, -n, the slot's context, --spm-infill
  std::string template_name;  // /props' chat_template: the Jinja source, or the built-in format's name
  std::string model_ftype;    // /props' model_ftype (llama_ftype_name), set with the scheduler
  int64_t created = unix_now();
  OllamaModel ollama;  // the served model as Ollama's /api/tags, /api/show and /api/ps describe it
  Pooling pooling = Pooling::none;  // --pooling resolved against the model (set_scheduler)
  std::optional<std::string> rerank_template;  // tokenizer.chat_template.rerank, if the file has one

  explicit Impl(ServerParams params) : p(std::move(params)) {}

  const Tokenizer& tok() const { return *rc.tok; }

  // Wraps a handler: 503 while loading (unless `always`), and every exception
  // as an OpenAI error body.
  template <class F>
  httplib::Server::Handler route(F f, bool needs_model = true) {
    return [this, f, needs_model](const httplib::Request& req, httplib::Response& res) {
      try {
        if (needs_model && !ready.load(std::memory_order_acquire))
          return send_error(res, 503, "Loading model");
        if (needs_model && draining.load()) {
          res.set_header("Retry-After", "1");
          return send_error(res, 503, "the server is shutting down");
        }
        f(req, res);
      } catch (const HttpError& e) {
        if (e.status() == 503) res.set_header("Retry-After", "1");
        send_error(res, e.status(), e.what(), e.param(), e.code());
      } catch (const Error& e) {
        send_error(res, error_status(e.code()), e.what());
      } catch (const std::bad_alloc&) {
        send_error(res, 500, "out of memory");
      } catch (const std::exception& e) {
        send_error(res, 500, std::string("internal error: ") + e.what());
      }
    };
  }

  bool authorized(const httplib::Request& req) const {
    if (p.api_keys.empty()) return true;
    const std::string& path = req.path;
    if (path == "/health" || path == "/v1/health" || path == "/v1/models" || path == "/models") return true;
    if (path == "/" || path == "/api/version" || path == "/api/tags") return true;  // Ollama clients' probes
    return api_key_matches(p.api_keys,
                           presented_key(req.get_header_value("Authorization"), req.get_header_value("x-api-key")));
  }

  // How a route of another API (Anthropic's Messages, OpenAI's Responses,
  // Ollama's chat and generate; install_api_routes, install_ollama_routes)
  // rewrites the route's reply. No sink: the route's own reply. `result`: the
  // generation (of the last choice that ended, when streamed), for what the
  // reply does not carry (the stop string, the timings).
  struct ReplySink {
    std::function<json(const json& reply, const GenerationResult& result)> reply;  // not streamed
    std::function<std::string(const json& chunk)> chunk;  // streamed: the text for one chunk ("": none)
    std::function<std::string(const GenerationResult& result)> end;  // streamed: in place of "data: [DONE]"
    const char* content_type = "text/event-stream";                  // of the stream
  };

  void install_routes(Listener& http);
  void install_api_routes(Listener& http);
  void install_ollama_routes(Listener& http);
  void install_embedding_routes(Listener& http);
  std::vector<Embedding> run_embeddings(std::vector<std::vector<token_id>> inputs, const EmbeddingParams& params);
  void handle_ollama(OllamaEndpoint ep, const std::string& body, httplib::Response& res);
  void handle_completion(Route route, std::string_view body, httplib::Response& res,
                         std::shared_ptr<ReplySink> sink = nullptr);
  void stream_reply(std::shared_ptr<const CompletionRequest> creq, std::shared_ptr<Channel> ch,
                    std::vector<RequestId> ids, ReplyMeta meta, int sock, httplib::Response& res,
                    std::shared_ptr<ReplySink> sink);
  size_t count_prompt_tokens(const std::string& chat_body) const;
  json model_meta() const;

  // Hang-ups (the client closed its connection before the reply's end):
  // counted, their generations cancelled (once: later calls do nothing).
  // Called on HTTP threads only, which all end before the scheduler does.
  std::shared_ptr<HangupStats> hangups = std::make_shared<HangupStats>();
  void hang_up(Channel& ch, const std::vector<RequestId>& ids) {
    int64_t connected = -1;
    if (!ch.hangup_step.compare_exchange_strong(connected, static_cast<int64_t>(sched->metrics().n_decode_total)))
      return;
    ++hangups->total;
    ch.cancelled.store(true);
    for (const RequestId id : ids) sched->cancel(id);
  }

  // Shutdown (begin_shutdown): set once; model routes then answer 503.
  std::atomic<bool> draining{false};
  std::promise<void> listen_done;  // set when the listening thread ends (every connection closed)
  std::shared_future<void> listening_over = listen_done.get_future().share();
  // 503 for a request that ended before it had a slot (expired_unstarted).
  HttpError unstarted_error() const {
    if (draining.load()) return HttpError(503, "the server is shutting down; retry at another replica or later");
    return HttpError(503, "the server is busy: the request waited for a slot longer than its time limit "
                          "(--timeout " + std::to_string(p.timeout_s) + " s); retry later");
  }
};

HttpServer::HttpServer(ServerParams params) : impl_(std::make_unique<Impl>(std::move(params))) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->bound_port; }

namespace {

// "HOST:PORT", an IPv6 address in brackets ("[::1]:8080").
std::string host_port(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

void HttpServer::start() {
  Impl& s = *impl_;
  const std::vector<std::string> hosts = host_addresses(s.p.host);
  // Each open connection (a streaming reply included) holds one thread of
  // the pool, whichever address it came to.
  const int n_threads = s.p.n_http_threads > 0 ? s.p.n_http_threads : defaults::http_threads(1);
  s.pool = std::make_unique<httplib::ThreadPool>(static_cast<size_t>(n_threads));
  const bool several = hosts.size() > 1;
  for (const std::string& host : hosts) {
    Listener& http = *s.listeners.emplace_back(std::make_unique<Listener>());
    s.install_routes(http);
    httplib::TaskQueue* pool = s.pool.get();
    http.new_task_queue = [pool] { return new PoolShare(*pool); };
    http.set_read_timeout(s.p.timeout_s);
    http.set_write_timeout(s.p.timeout_s);
    http.set_payload_max_length(s.p.max_body_bytes);
    http.limits = ConnectionLimits{s.p.max_header_bytes, s.p.idle_timeout_s};
    http.set_tcp_nodelay(true);  // one SSE chunk per token: no Nagle delay
    // SO_REUSEADDR alone, in place of cpp-httplib's default SO_REUSEPORT: a
    // restarted server binds its port while the connections the last one
    // closed sit in TIME_WAIT, and a second server on a port in use fails to
    // bind instead of silently sharing it (the kernel would split the
    // connections between the two). With several addresses, an IPv6 one
    // (`::`) takes IPv6 alone, leaving IPv4 to the others (llama-server's
    // rule).
    http.set_socket_options([several](int sock) {
      const int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      int domain = 0;
      socklen_t len = sizeof domain;
      if (several && ::getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_INET6)
        ::setsockopt(sock, IPPROTO_IPV6, IPV6_V6ONLY, &yes, sizeof yes);
    });
    // --port 0: the first address takes any free port, the others the same.
    const int want = s.listeners.size() > 1 ? s.bound_port : s.p.port;
    const int port = want == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, want) ? want : -1);
    if (port <= 0)
      throw Error(Errc::io, "cannot listen on " + host_port(host, want) +
                                " (address in use, or not an address of this host)");
    s.bound_port = port;
    http.raise_backlog(512);
    s.urls.push_back("http://" + host_port(host, port));
  }
  s.listening.store(s.listeners.size());
  for (const auto& http : s.listeners) {
    s.threads.emplace_back([&s, l = http.get()] {
      // Returns once the listening socket is closed and every connection
      // this listener accepted has ended (PoolShare::shutdown waits for them).
      l->listen_after_bind();
      if (s.listening.fetch_sub(1) == 1) s.listen_done.set_value();
    });
  }
  // Listening before start() returns: the library's stop() does nothing to a
  // server that has not yet begun listen_after_bind (is_running() false), so
  // a shutdown right after start() would otherwise be missed. A bound
  // listener always begins.
  for (const auto& http : s.listeners)
    while (!http->is_running()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

const std::vector<std::string>& HttpServer::urls() const { return impl_->urls; }

void HttpServer::begin_shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  s.draining.store(true);
  // Requests first, then the socket: a handler in flight replies (and its
  // connection closes) as soon as its request ends.
  if (s.ready.load(std::memory_order_acquire)) s.sched->drain(std::chrono::steady_clock::now() + grace);
  for (const auto& http : s.listeners) http->stop();
}

bool HttpServer::wait_stopped(std::chrono::milliseconds wait) {
  Impl& s = *impl_;
  return s.threads.empty() || s.listening_over.wait_for(wait) == std::future_status::ready;
}

void HttpServer::close_connections() {
  for (const auto& http : impl_->listeners) http->close_connections();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (!s.draining.load()) begin_shutdown(std::chrono::milliseconds(0));
  if (!s.threads.empty()) {
    // Every request has ended (or ends now); what is left is writing the
    // replies. A client that does not read its reply within a second has its
    // connection shut, which ends its handler.
    if (!wait_stopped(std::chrono::seconds(1))) close_connections();
    for (std::thread& t : s.threads) t.join();
    s.threads.clear();
  }
  // Every listener's connections have ended (PoolShare::shutdown): the pool
  // is idle. (A start() that failed to bind leaves it without threads' work.)
  if (s.pool) {
    s.pool->shutdown();
    s.pool.reset();
  }
  // No handler runs any more, so nothing calls the scheduler: destroying it
  // joins its worker (what is left ends with finish_reason cancelled).
  s.sched.reset();
}

void HttpServer::set_scheduler(std::unique_ptr<Scheduler> scheduler) {
  Impl& s = *impl_;
  const Model& model = scheduler->model();
  s.rc.tok = &model.tokenizer();
  // The model's Jinja template, unless a built-in format was asked for.
  std::optional<std::string> source;
  std::string where =
      s.p.chat_template_file.empty() ? "--chat-template" : "--chat-template-file " + s.p.chat_template_file;
  if (s.p.chat_template_source) {
    source = s.p.chat_template_source;
  } else if (s.p.jinja && s.p.chat_template.empty() && model.gguf().find("tokenizer.chat_template") != nullptr) {
    source = model.gguf().get_string("tokenizer.chat_template");
    if (!source) throw Error(Errc::format, model.gguf().path() + ": tokenizer.chat_template is not a string");
    where = model.gguf().path() + ": tokenizer.chat_template";
  }
  if (source) {
    const std::string arch = model.gguf().get_string("general.architecture").value_or("");
    try {
      s.rc.jinja = make_jinja_chat(*source, *s.rc.tok, arch, s.p.chat_template_kwargs, s.p.reasoning_format);
    } catch (const Error& e) {
      throw Error(e.code(), where + ": " + e.what() +
                                " (fix it with --chat-template-file FILE, or serve a built-in format with --no-jinja "
                                "or --chat-template NAME)");
    }
    s.template_name = *source;
  } else {
    s.rc.chat_template = synapse::chat_template_for_model(
        model.gguf(), s.p.chat_template.empty() ? std::nullopt : std::optional<std::string_view>(s.p.chat_template));
    s.template_name = std::string(synapse::chat_template_name(s.rc.chat_template));
  }
  s.rc.n_ctx = scheduler->n_ctx();
  s.rc.sampling = s.p.sampling;
  s.rc.n_predict = s.p.n_predict;
  s.rc.verbose = s.p.verbose;
  s.infill = {scheduler->params().n_batch, s.p.n_predict, s.rc.n_ctx, s.p.spm_infill};
  OllamaServing serving;
  serving.model_name = s.p.model_name;
  serving.model_path = s.p.model_path;
  serving.n_ctx = s.rc.n_ctx;
  serving.n_parallel = scheduler->params().n_parallel;
  serving.chat_template = s.template_name;
  serving.tools = s.rc.jinja && s.rc.jinja->renderer.caps().supports_tools;
  serving.thinking = s.rc.jinja && template_has_reasoning(s.rc.jinja->renderer.source());
  serving.sampling = s.p.sampling;
  serving.n_predict = s.p.n_predict;
  // llama_context's rule: --pooling, else the file's pooling_type, else none.
  s.pooling = s.p.pooling != Pooling::unspecified ? s.p.pooling
              : model.pooling_type() != Pooling::unspecified ? model.pooling_type()
                                                              : Pooling::none;
  serving.embedding = s.p.embeddings && s.pooling != Pooling::none && s.pooling != Pooling::rank;
  s.ollama = describe_ollama_model(model, serving);
  if (s.p.embeddings && s.pooling == Pooling::rank) model.check_rank_head();
  s.rerank_template = model.gguf().get_string("tokenizer.chat_template.rerank");
  s.model_ftype = llama_ftype_name(model.gguf());
  s.sched = std::move(scheduler);
  s.ready.store(true, std::memory_order_release);
}

json HttpServer::Impl::model_meta() const {
  const Model& m = sched->model();
  return {{"vocab_type", m.tokenizer().bos() >= 0 ? 1 : 2},
          {"n_vocab", m.n_vocab()},
          {"n_ctx_train", m.n_ctx_train()},
          {"n_embd", m.n_embd()},
          {"n_params", m.n_params()},
          {"size", m.weight_bytes()}};
}

void HttpServer::Impl::install_routes(Listener& http) {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (apply_cors(p.cors_origins, req, res)) return httplib::Server::HandlerResponse::Handled;
    if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, 401, "Invalid API Key");
    return httplib::Server::HandlerResponse::Handled;
  });
  // 404 for unknown routes, 413 for a body over the limit, ...: the library
  // sets the status and leaves the body to this handler.
  auto openai_error = [this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    // The library says 400 for a header it could not read; the connection
    // knows why (it is closed after this reply).
    const Connection* conn = current_connection();
    const HeaderRefusal why = conn != nullptr ? conn->header_refusal() : HeaderRefusal::none;
    if (res.status == 400 && why == HeaderRefusal::too_large)
      return send_error(res, 431,
                        "the request header is larger than " + std::to_string(p.max_header_bytes) +
                            " bytes (--max-header-size)");
    if (res.status == 400 && why == HeaderRefusal::too_slow)
      return send_error(res, 408, "the request header did not arrive within " + std::to_string(p.idle_timeout_s) +
                                      " s (--idle-timeout)");
    if (res.status == 404) send_error(res, 404, "File Not Found: " + req.path);
    else if (res.status == 413) send_error(res, 413, "the request body is larger than the limit");
    else send_error(res, res.status, "HTTP error " + std::to_string(res.status));
  };
  http.set_error_handler([openai_error](const httplib::Request& req, httplib::Response& res) {
    openai_error(req, res);
    // Anthropic's routes answer every error (401, 413, a bad field, ...) in
    // Anthropic's shape, Ollama's in Ollama's.
    const bool anthropic = req.path.rfind("/v1/messages", 0) == 0;
    if (anthropic || req.path.rfind("/api/", 0) == 0) {
      const json j = json::parse(res.body, nullptr, false);
      if (j.is_object() && j.contains("error") && j["error"].is_object()) {
        const std::string message = j["error"].value("message", "");
        res.set_content(dump_json(anthropic ? anthropic_error_body(res.status, message) : ollama_error_body(message)),
                        "application/json; charset=utf-8");
      }
    }
  });

  auto health = route([this](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); });
  http.Get("/health", health);
  http.Get("/v1/health", health);

  auto models = route([this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", p.model_name},
                                      {"aliases", p.aliases.empty() ? std::vector<std::string>{p.model_name}
                                                                    : p.aliases},
                                      {"tags", p.tags},
                                      {"object", "model"},
                                      {"created", created},
                                      {"owned_by", "synapse"},
                                      {"meta", model_meta()}}})}});
  });
  http.Get("/v1/models", models);
  http.Get("/models", models);

  http.Get("/props", route([this](const httplib::Request&, httplib::Response& res) {
    const SamplerParams& sp = rc.sampling;
    send_json(res, 200,
              {{"default_generation_settings",
                {{"n_ctx", rc.n_ctx},
                 {"params",
                  {{"n_predict", rc.n_predict},
                   {"seed", sp.seed},
                   {"temperature", sp.temp},
                   {"top_k", sp.top_k},
                   {"top_p", sp.top_p},
                   {"min_p", sp.min_p},
                   {"typical_p", sp.typical_p},
                   {"repeat_penalty", sp.penalty_repeat},
                   {"repeat_last_n", sp.penalty_last_n},
                   {"presence_penalty", sp.penalty_present},
                   {"frequency_penalty", sp.penalty_freq}}}}},
               {"total_slots", sched->params().n_parallel},
               {"model_path", p.model_path},
               {"model_alias", p.model_name},
               {"model_ftype", model_ftype},
               {"chat_template", template_name},
               {"chat_template_caps", rc.jinja ? caps_json(rc.jinja->renderer.caps()) : json::object()},
               {"bos_token", tok().bos() >= 0 ? tok().token_to_piece(tok().bos(), true) : ""},
               {"eos_token", tok().eos() >= 0 ? tok().token_to_piece(tok().eos(), true) : ""},
               {"build_info", p.system_fingerprint},
               // Text only: no image, video or audio input.
               {"modalities", {{"vision", false}, {"video", false}, {"audio", false}}},
               {"endpoint_slots", p.slots},
               {"endpoint_props", p.props},
               {"endpoint_metrics", p.metrics},
               {"is_sleeping", false}});
  }));

  // llama-server's POST /props: no property can be changed there either.
  http.Post("/props", route([this](const httplib::Request&, httplib::Response& res) {
    if (!p.props)
      return send_error(res, 501, "This server does not support changing global properties. Start it with `--props`");
    send_json(res, 200, {{"success", true}});
  }));

  // llama-server's GET /slots: server_slot::to_json as it answers without
  // LLAMA_SERVER_SLOTS_DEBUG, less the request's sampling "params"; ?fail_on_no_slot
  // answers 503 when every slot is busy.
  http.Get("/slots", route([this](const httplib::Request& req, httplib::Response& res) {
    if (!p.slots) return send_error(res, 501, "This server does not support slots endpoint. Start it with `--slots`");
    const std::vector<SlotState> states = sched->slots();
    json out = json::array();
    bool any_idle = false;
    for (const SlotState& st : states) {
      any_idle = any_idle || !st.is_processing;
      json slot = {{"id", st.id}, {"n_ctx", sched->n_ctx()}, {"speculative", false}, {"is_processing", st.is_processing}};
      if (st.has_task) {
        slot["id_task"] = st.id_task;
        slot["n_prompt_tokens"] = st.n_prompt_tokens;
        slot["n_prompt_tokens_processed"] = st.n_prompt_tokens_processed;
        slot["n_prompt_tokens_cache"] = st.n_prompt_tokens_cache;
        slot["next_token"] = json::array({{{"has_next_token", st.is_processing},
                                           {"has_new_line", st.has_new_line},
                                           {"n_remain", st.max_tokens < 0 ? -1 : st.max_tokens - st.n_decoded},
                                           {"n_decoded", st.n_decoded}}});
      }
      out.push_back(std::move(slot));
    }
    if (req.has_param("fail_on_no_slot") && !req.get_param_value("fail_on_no_slot").empty() && !any_idle)
      return send_error(res, 503, "no slot available");
    send_json(res, 200, out);
  }));

  // llama-server's adapter list: synapse loads none (--lora is refused), so
  // it is empty. A POST may only set the empty list ({"success": true}, as
  // llama-server); an entry names an adapter that is not there: 400, where
  // llama-server ignores an unknown id.
  http.Get("/lora-adapters", route([](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, json::array());
  }));
  http.Post("/lora-adapters", route([](const httplib::Request& req, httplib::Response& res) {
    const json j = json::parse(req.body, nullptr, false);
    if (!j.is_array()) return send_error(res, 400, "Request body must be an array");
    if (!j.empty()) return send_error(res, 400, "no LoRA adapter is loaded (synapse does not support --lora)");
    send_json(res, 200, {{"success", true}});
  }));

  http.Get("/metrics", route([this](const httplib::Request&, httplib::Response& res) {
    if (!p.metrics) return send_error(res, 501, "This server does not support metrics endpoint. Start it with `--metrics`");
    res.set_header("Process-Start-Time-Unix", std::to_string(created));  // llama-server's header
    res.set_content(metrics_text(sched->metrics(), {hangups->total.load(), hangups->steps_max.load()}),
                    "text/plain; version=0.0.4");
  }));

  http.Post("/tokenize", route([this](const httplib::Request& req, httplib::Response& res) {
    const json j = parse_json_object(req.body, rc.limits.max_json_depth);
    const std::string content = get_string(j, "content", "");
    const bool add_special = get_bool(j, "add_special", false);
    const bool parse_special = get_bool(j, "parse_special", true);
    const bool with_pieces = get_bool(j, "with_pieces", false);
    const std::vector<token_id> ids = tok().tokenize(content, add_special, parse_special);
    json tokens = json::array();
    for (const token_id id : ids) {
      if (!with_pieces) {
        tokens.push_back(id);
        continue;
      }
      // A piece that is not valid UTF-8 (a byte token) is given as its bytes.
      const std::string piece = tok().token_to_piece(id, true);
      json jp = piece;
      try {
        (void)jp.dump();
      } catch (const json::type_error&) {
        jp = json::array();
        for (const unsigned char c : piece) jp.push_back(static_cast<int>(c));
      }
      tokens.push_back({{"id", id}, {"piece", jp}});
    }
    send_json(res, 200, {{"tokens", tokens}});
  }));

  http.Post("/detokenize", route([this](const httplib::Request& req, httplib::Response& res) {
    const json j = parse_json_object(req.body, rc.limits.max_json_depth);
    std::vector<token_id> ids;
    if (const auto it = j.find("tokens"); it != j.end() && !it->is_null())
      ids = get_token_ids(*it, "tokens", tok().n_vocab());
    send_json(res, 200, {{"content", tok().detokenize(ids, false, false)}});
  }));

  http.Post("/apply-template", route([this](const httplib::Request& req, httplib::Response& res) {
    const json j = parse_json_object(req.body, rc.limits.max_json_depth);
    check_continuation(j);
    if (rc.jinja) {
      // The prompt exactly as a chat request renders it (tools, tool_choice,
      // chat_template_kwargs included).
      const JinjaPrompt jp = render_jinja_chat(nlohmann::ordered_json::parse(req.body), *rc.jinja, rc.limits,
                                               synapse::kDefaultSeed);
      return send_json(res, 200, {{"prompt", jp.prompt}});
    }
    check_builtin_chat_fields(j);
    const std::vector<synapse::ChatMessage> msgs = parse_messages(j, rc.limits);
    std::string prompt;
    for (const synapse::ChatSegment& s : builtin_chat_segments(rc.chat_template, j, msgs)) prompt += s.text;
    send_json(res, 200, {{"prompt", prompt}});
  }));

  auto completion = [this](Route r) {
    return route(
        [this, r](const httplib::Request& req, httplib::Response& res) { handle_completion(r, req.body, res); });
  };
  http.Post("/v1/chat/completions", completion(Route::chat_completions));
  http.Post("/chat/completions", completion(Route::chat_completions));
  http.Post("/v1/completions", completion(Route::completions));
  http.Post("/completion", completion(Route::completion));
  http.Post("/completions", completion(Route::completion));
  // llama-server's /infill: the FIM prompt in place of "prompt", then
  // /completion with every other field of the body.
  http.Post("/infill", route([this](const httplib::Request& req, httplib::Response& res) {
    json body = parse_json_object(req.body, rc.limits.max_json_depth);
    body["prompt"] = infill_prompt(body, tok(), infill);
    handle_completion(Route::completion, body.dump(-1, ' ', false, json::error_handler_t::replace), res);
  }));
  install_api_routes(http);
  install_ollama_routes(http);
  install_embedding_routes(http);
}

void HttpServer::Impl::handle_completion(Route route, std::string_view body, httplib::Response& res,
                                         std::shared_ptr<ReplySink> sink) {
  auto creq = std::make_shared<const CompletionRequest>(parse_completion_request(route, body, rc));
  const CompletionRequest& c = *creq;
  if (c.stream && route == Route::completion && c.prompts.size() > 1)
    throw HttpError(400, "'stream' with several prompts is not supported on /completion (use /v1/completions)",
                    "stream");
  const size_t n_choices = c.prompts.size() * static_cast<size_t>(c.n);
  // --timeout: the request's wall-clock limit from its arrival (the Scheduler
  // checks it while queued and at every step).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(p.timeout_s);
  auto ch = std::make_shared<Channel>();
  ch->stream = c.stream;
  ch->results.resize(n_choices);

  std::vector<RequestId> ids;
  auto cancel_all = [this](const std::vector<RequestId>& list) {
    for (const RequestId id : list) sched->cancel(id);
  };
  for (size_t i = 0; i < n_choices; ++i) {
    Request r;
    r.prompt = c.prompts[i / static_cast<size_t>(c.n)];
    r.params.sampling = c.sampling;
    // Choice j of a prompt draws with seed + j: n samples, each reproducible.
    const uint32_t j = static_cast<uint32_t>(i % static_cast<size_t>(c.n));
    if (c.sampling.seed != synapse::kDefaultSeed && j > 0) {
      r.params.sampling.seed = c.sampling.seed + j;
      if (r.params.sampling.seed == synapse::kDefaultSeed) r.params.sampling.seed = 0;
    }
    r.params.max_tokens = c.stop.n_predict;
    r.params.stop = c.stop.stops;
    r.params.ignore_eos = c.stop.ignore_eos;
    r.params.logprobs = c.logprobs;
    r.params.n_probs = c.top_logprobs;
    r.params.post_sampling_probs = c.post_sampling_probs;
    r.params.preserved_tokens = c.preserved_tokens;  // the chat format's markers, as text
    // A chat reply always ends its turn in the cache (also when cut by
    // max_tokens or a disconnect), so the next turn's prompt finds it there.
    r.params.close_turn = route == Route::chat_completions;
    r.cache_prompt = c.cache_prompt;
    r.deadline = deadline;
    r.t_max_predict_ms = c.t_max_predict_ms;
    const int index = static_cast<int>(i);
    r.on_token = [ch, index](const GeneratedToken& step) {
      if (ch->stream) {
        std::lock_guard<std::mutex> lock(ch->mu);
        ch->events.push_back({index, false, step});
        ch->notify();
      }
      return !ch->cancelled.load();
    };
    // A plain stream only: an Anthropic or Responses stream (a ReplySink) has no such event.
    if (c.stream && c.return_progress && !sink)
      r.on_progress = [ch, index](const PromptProgress& pp) {
        std::lock_guard<std::mutex> lock(ch->mu);
        ch->events.push_back({index, false, {}, pp});
        ch->notify();
      };
    r.on_done = [hangups = hangups, ch, index](const GenerationResult& result) {
      // A hang-up seen after the step that ended the request freed nothing: 0 steps.
      if (const int64_t at = ch->hangup_step.load(); at >= 0)
        hangups->note_freed(result.step > static_cast<uint64_t>(at) ? result.step - static_cast<uint64_t>(at) : 0);
      std::lock_guard<std::mutex> lock(ch->mu);
      ch->results[static_cast<size_t>(index)] = result;
      ++ch->n_done;
      if (ch->stream) ch->events.push_back({index, true, {}});
      ch->notify();
    };
    std::optional<RequestId> id;
    try {
      id = sched->try_submit(std::move(r));
    } catch (...) {
      cancel_all(ids);
      throw;
    }
    if (!id) {
      cancel_all(ids);
      if (draining.load()) throw HttpError(503, "the server is shutting down");
      throw HttpError(503, "the server is busy: the request queue is full; retry later");
    }
    ids.push_back(*id);
  }

  ReplyMeta meta{random_id(route == Route::chat_completions ? "chatcmpl-" : "cmpl-"), unix_now(), p.model_name,
                 p.system_fingerprint};
  // The socket of this request's client, watched while the reply is
  // computed (-1 off a connection thread).
  const Connection* conn = current_connection();
  const int sock = conn != nullptr ? conn->socket() : -1;
  // A request that fails or expires before its first token is answered as a
  // whole: 400 or 500 (error_status), or 503 with Retry-After; no reply has begun.
  auto refuse_if_failed = [this](const GenerationResult& r) {
    if (r.finish_reason == FinishReason::error)
      throw HttpError(error_status(r.error_code), "generation failed: " + r.error);
    if (expired_unstarted(r)) throw unstarted_error();
  };
  if (c.stream) {
    // llama-server's rule (handle_completions_impl): the status line waits
    // for a stream's first result, and a first result that is an error is
    // the reply, with its status, as OpenAI's API answers a request it
    // refuses. So a stream that expires while queued (or meets the shutdown
    // there) is a 503 before any header, not a 200 with an error event.
    std::optional<GenerationResult> failed;
    {
      std::unique_lock<std::mutex> lock(ch->mu);
      if (!ch->wait(lock, sock, [&] { return !ch->events.empty(); })) {
        lock.unlock();
        hang_up(*ch, ids);
        return send_error(res, 499, "the client closed the connection");  // read by no one
      }
      const Channel::Event& first = ch->events.front();
      if (first.done) failed = ch->results[static_cast<size_t>(first.index)];
    }
    if (failed && (failed->finish_reason == FinishReason::error || expired_unstarted(*failed))) {
      cancel_all(ids);
      refuse_if_failed(*failed);
    }
    return stream_reply(creq, ch, std::move(ids), std::move(meta), sock, res, std::move(sink));
  }

  std::vector<GenerationResult> results;
  {
    std::unique_lock<std::mutex> lock(ch->mu);
    if (!ch->wait(lock, sock, [&] { return ch->n_done == n_choices; })) {
      lock.unlock();
      hang_up(*ch, ids);
      return send_error(res, 499, "the client closed the connection");  // read by no one
    }
    for (auto& r : ch->results) results.push_back(std::move(*r));
  }
  for (const GenerationResult& r : results) refuse_if_failed(r);
  json reply = completion_reply(c, meta, results, tok());
  if (sink) reply = sink->reply(reply, results[0]);
  send_json(res, 200, reply);
}

void HttpServer::Impl::stream_reply(std::shared_ptr<const CompletionRequest> creq, std::shared_ptr<Channel> ch,
                                    std::vector<RequestId> ids, ReplyMeta meta, int sock, httplib::Response& res,
                                    std::shared_ptr<ReplySink> reply_sink) {
  const size_t n_choices = ch->results.size();
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      reply_sink ? reply_sink->content_type : "text/event-stream",
      [this, creq, ch, ids, meta, n_choices, sock, reply_sink](size_t, httplib::DataSink& sink) {
        const CompletionRequest& c = *creq;
        const bool openai = c.route != Route::completion;
        std::vector<size_t> offsets(n_choices, 0);
        GenerationResult last;  // the last choice that ended (a ReplySink's stream has one)
        auto write = [&](const json& j) {
          const std::string e = reply_sink ? reply_sink->chunk(j) : sse_event(j);
          return e.empty() || sink.write(e.data(), e.size());
        };
        auto give_up = [&] {
          hang_up(*ch, ids);
          return false;
        };
        if (c.route == Route::chat_completions)
          for (size_t i = 0; i < n_choices; ++i)
            if (!write(stream_chunk(c, meta, static_cast<int>(i), "", {}, 0, tok(), true, nullptr))) return give_up();
        // A parsed chat reply (the model's Jinja template): each choice's text
        // goes through its OutputStream, which sends content, reasoning and
        // calls as OpenAI deltas.
        std::vector<runtime::OutputStream> parsers;
        std::vector<bool> made_calls(n_choices, false);
        if (c.chat_output)
          for (size_t i = 0; i < n_choices; ++i) parsers.emplace_back(c.chat_output->format, c.chat_output->for_choice(i));
        auto write_deltas = [&](size_t i, const std::vector<runtime::Delta>& deltas,
                                std::span<const GeneratedToken> steps) {
          for (const runtime::Delta& d : deltas) made_calls[i] = made_calls[i] || d.kind == runtime::Delta::Kind::tool_call;
          for (const json& chunk : delta_chunks(c, meta, static_cast<int>(i), deltas, steps, tok()))
            if (!write(chunk)) return false;
          return true;
        };
        size_t n_closed = 0;
        while (n_closed < n_choices) {
          Channel::Event ev;
          GenerationResult fin;
          {
            std::unique_lock<std::mutex> lock(ch->mu);
            // A hang-up is seen here also while the prompt is prefilled (no
            // event, no write).
            if (!ch->wait(lock, sock, [&] { return !ch->events.empty(); })) {
              lock.unlock();
              return give_up();
            }
            ev = std::move(ch->events.front());
            ch->events.pop_front();
            if (ev.done) {
              fin = *ch->results[static_cast<size_t>(ev.index)];
              last = fin;
            }
          }
          const size_t i = static_cast<size_t>(ev.index);
          if (ev.progress) {
            if (!write(progress_chunk(c, meta, ev.index, *ev.progress, tok()))) return give_up();
            continue;
          }
          if (ev.done) {
            ++n_closed;
            // The status line (200) is already sent: an error is an event of the stream.
            if (fin.finish_reason == FinishReason::error) {
              write({{"error", error_body(error_status(fin.error_code), "generation failed: " + fin.error)["error"]}});
              continue;
            }
            if (expired_unstarted(fin)) {
              write({{"error", error_body(503, unstarted_error().what())["error"]}});
              continue;
            }
            if (!parsers.empty() && !write_deltas(i, parsers[i].finish(), {})) return give_up();
            if (!write(stream_chunk(c, meta, ev.index, "", {}, offsets[i], tok(), false, &fin, made_calls[i])))
              return give_up();
            continue;
          }
          if (!parsers.empty()) {
            if (!write_deltas(i, parsers[i].feed(ev.step.text), std::span<const GeneratedToken>(&ev.step, 1)))
              return give_up();
            continue;
          }
          const bool has_token = ev.step.id >= 0 && !ev.step.eog;
          if (ev.step.text.empty() && !has_token) continue;
          if (!write(stream_chunk(c, meta, ev.index, ev.step.text, std::span<const GeneratedToken>(&ev.step, 1),
                                  offsets[i], tok(), false, nullptr)))
            return give_up();
          if (has_token) offsets[i] += tok().token_to_piece(ev.step.id, true).size();
        }
        if (openai && c.include_usage) {
          std::vector<GenerationResult> results;
          {
            std::lock_guard<std::mutex> lock(ch->mu);
            for (auto& r : ch->results) results.push_back(*r);
          }
          if (!write(usage_chunk(c, meta, results, last))) return give_up();
        }
        if (openai || reply_sink) {
          static constexpr char kDone[] = "data: [DONE]\n\n";
          const std::string end = reply_sink ? reply_sink->end(last) : kDone;
          if (!end.empty() && !sink.write(end.data(), end.size())) return give_up();
        }
        sink.done();
        return true;
      },
      [this, ch, ids](bool success) {
        // The connection is gone before the end (or the provider never ran):
        // nothing will read the rest, so free the slots.
        if (!success) hang_up(*ch, ids);
      });
}

// --- Other APIs on the chat route ---------------------------------------------
// Anthropic's Messages (server/anthropic.hpp) and OpenAI's Responses
// (server/responses.hpp): the body is translated into a chat body, which the
// chat route's own handler serves, with a ReplySink that translates its reply.

size_t HttpServer::Impl::count_prompt_tokens(const std::string& chat_body) const {
  // The chat route's own rendering and tokenization; a count may exceed the
  // context (it is asked to decide what to cut), so n_ctx bounds nothing here.
  RequestContext counting = rc;
  counting.n_ctx = std::numeric_limits<int64_t>::max();
  return parse_completion_request(Route::chat_completions, chat_body, counting).prompts[0].size();
}

void HttpServer::Impl::install_api_routes(Listener& http) {
  using nlohmann::ordered_json;
  auto chat_text = [](const ordered_json& chat) {
    return chat.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  };

  http.Post("/v1/messages", route([this, chat_text](const httplib::Request& req, httplib::Response& res) {
    const ordered_json chat = anthropic_to_chat(parse_ordered_object(req.body, rc.limits.max_json_depth));
    auto stream = std::make_shared<AnthropicStream>();
    auto sink = std::make_shared<ReplySink>();
    sink->reply = [](const json& r, const GenerationResult& g) { return anthropic_from_chat(r, g.stopping_word); };
    sink->chunk = [stream](const json& c) { return sse_events(stream->on_chunk(c)); };
    sink->end = [stream](const GenerationResult& g) { return sse_events(stream->finish(g.stopping_word)); };
    try {
      handle_completion(Route::chat_completions, chat_text(chat), res, std::move(sink));
    } catch (const HttpError& e) {
      throw renamed_error(e, anthropic_field);
    }
  }));
  http.Post("/v1/messages/count_tokens", route([this, chat_text](const httplib::Request& req, httplib::Response& res) {
    const ordered_json chat = anthropic_count_tokens_to_chat(parse_ordered_object(req.body, rc.limits.max_json_depth));
    try {
      send_json(res, 200, {{"input_tokens", count_prompt_tokens(chat_text(chat))}});
    } catch (const HttpError& e) {
      throw renamed_error(e, anthropic_field);
    }
  }));

  http.Post("/v1/responses", route([this, chat_text](const httplib::Request& req, httplib::Response& res) {
    auto request = std::make_shared<const ordered_json>(parse_ordered_object(req.body, rc.limits.max_json_depth));
    const ordered_json chat = responses_to_chat(*request);
    auto stream = std::make_shared<ResponsesStream>(*request);
    auto sink = std::make_shared<ReplySink>();
    sink->reply = [request](const json& r, const GenerationResult&) { return responses_from_chat(r, *request); };
    sink->chunk = [stream](const json& c) { return sse_events(stream->on_chunk(c)); };
    sink->end = [stream](const GenerationResult&) { return sse_events(stream->finish()); };
    try {
      handle_completion(Route::chat_completions, chat_text(chat), res, std::move(sink));
    } catch (const HttpError& e) {
      throw renamed_error(e, responses_field);
    }
  }));
  // llama-server's count of a chat request's prompt tokens (its
  // handle_count_tokens): the chat route's own rendering of the body.
  for (const char* path : {"/v1/chat/completions/input_tokens", "/chat/completions/input_tokens"})
    http.Post(path, route([this](const httplib::Request& req, httplib::Response& res) {
      send_json(res, 200, {{"object", "response.input_tokens"}, {"input_tokens", count_prompt_tokens(req.body)}});
    }));
  http.Post("/v1/responses/input_tokens", route([this, chat_text](const httplib::Request& req, httplib::Response& res) {
    const ordered_json chat = responses_to_chat(parse_ordered_object(req.body, rc.limits.max_json_depth));
    try {
      const size_t n = count_prompt_tokens(chat_text(chat));
      send_json(res, 200, {{"object", "response.input_tokens"}, {"input_tokens", n}});
    } catch (const HttpError& e) {
      throw renamed_error(e, responses_field);
    }
  }));
}

}  // namespace synapse::server

namespace synapse::server {

// --- Ollama's API -------------------------------------------------------------
// /api/chat and /api/generate are translated onto the chat route (a raw
// generate onto the completions route) with a ReplySink that writes Ollama's
// objects (server/ollama.hpp); the listing routes describe the one model.

namespace {

int64_t ns_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

std::string now_rfc3339() { return rfc3339(std::chrono::system_clock::now()); }

}  // namespace

void HttpServer::Impl::handle_ollama(OllamaEndpoint ep, const std::string& body, httplib::Response& res) {
  const auto t0 = std::chrono::steady_clock::now();
  const nlohmann::ordered_json request = parse_ordered_object(body, rc.limits.max_json_depth);
  const std::string model = ollama_requested_model(ollama, request);
  const bool chat = ep == OllamaEndpoint::chat;
  const OllamaRequest t = chat ? ollama_chat_request(request, rc.n_ctx) : ollama_generate_request(request, rc.n_ctx);
  if (t.done_reason) return send_json(res, 200, ollama_load_reply(ep, model, now_rfc3339(), *t.done_reason));
  auto stream = std::make_shared<OllamaStream>(ep, model);
  auto sink = std::make_shared<ReplySink>();
  sink->content_type = "application/x-ndjson";
  sink->reply = [ep, model, t0](const json& r, const GenerationResult& g) {
    return ollama_reply(ep, r, model, now_rfc3339(), ollama_stats(g, ns_since(t0)));
  };
  sink->chunk = [stream](const json& c) { return ndjson(stream->on_chunk(c, now_rfc3339())); };
  sink->end = [stream, t0](const GenerationResult& g) {
    return ndjson(stream->finish(ollama_stats(g, ns_since(t0)), now_rfc3339()));
  };
  try {
    handle_completion(t.route, t.body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace), res,
                      std::move(sink));
  } catch (const HttpError& e) {
    throw renamed_error(e, chat ? ollama_chat_field : ollama_generate_field);
  }
}

void HttpServer::Impl::install_ollama_routes(Listener& http) {
  // Clients probe the root (GET and HEAD) and the version before anything else.
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("Ollama is running", "text/plain; charset=utf-8");
  });
  http.Get("/api/version", route([](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"version", kOllamaVersion}});
  }, false));
  http.Get("/api/tags", route([this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, ollama_tags(ollama));
  }));
  http.Get("/api/ps", route([this](const httplib::Request&, httplib::Response& res) {
    // Loaded for as long as the server runs: a century ahead.
    const auto far = std::chrono::system_clock::now() + std::chrono::hours(24 * 36525);
    send_json(res, 200, ollama_ps(ollama, rfc3339(far)));
  }));
  http.Post("/api/show", route([this](const httplib::Request& req, httplib::Response& res) {
    const nlohmann::ordered_json body = parse_ordered_object(req.body, rc.limits.max_json_depth);
    // Older clients send the model as "name".
    nlohmann::ordered_json named = body;
    if (!named.contains("model") && body.contains("name")) named["model"] = body["name"];
    (void)ollama_requested_model(ollama, named);
    const auto v = body.find("verbose");
    if (v != body.end() && !v->is_null() && !v->is_boolean()) throw HttpError(400, "verbose: must be a boolean", "verbose");
    const bool verbose = v != body.end() && v->is_boolean() && v->get<bool>();
    send_json(res, 200, ollama_show(ollama, ollama_model_info(sched->model(), verbose)));
  }));
  http.Post("/api/chat", route([this](const httplib::Request& req, httplib::Response& res) {
    handle_ollama(OllamaEndpoint::chat, req.body, res);
  }));
  http.Post("/api/generate", route([this](const httplib::Request& req, httplib::Response& res) {
    handle_ollama(OllamaEndpoint::generate, req.body, res);
  }));
}

// --- Embeddings and rerank ------------------------------------------------------
// llama-server's routes (server/embedding.hpp) and Ollama's /api/embed: the
// inputs go to the Scheduler's embedding queue (Scheduler::try_submit_embedding)
// and the handler waits for them; each input's vector is a function of the
// input alone.

std::vector<Embedding> HttpServer::Impl::run_embeddings(std::vector<std::vector<token_id>> inputs,
                                                        const EmbeddingParams& params) {
  struct Outcome {
    std::vector<Embedding> result;
    std::string error;
  };
  auto done = std::make_shared<std::promise<Outcome>>();
  std::future<Outcome> outcome = done->get_future();
  EmbeddingRequest r;
  r.inputs = std::move(inputs);
  r.params = params;
  r.on_done = [done](std::vector<Embedding> result, const std::string& error) {
    done->set_value({std::move(result), error});
  };
  if (!sched->try_submit_embedding(std::move(r)))
    throw HttpError(503, "the server is busy: the request queue is full; retry later");
  if (outcome.wait_for(std::chrono::seconds(p.timeout_s)) != std::future_status::ready)
    throw HttpError(500, "the embeddings did not finish within --timeout " + std::to_string(p.timeout_s) + " s");
  Outcome o = outcome.get();
  if (!o.error.empty()) {
    if (draining.load()) throw HttpError(503, "the server is shutting down");
    throw HttpError(500, "embedding failed: " + o.error);
  }
  return std::move(o.result);
}

void HttpServer::Impl::install_embedding_routes(Listener& http) {
  auto embeddings = [this](bool oai) {
    return route([this, oai](const httplib::Request& req, httplib::Response& res) {
      if (!p.embeddings)
        return send_error(res, 501, "This server does not support embeddings. Start it with `--embeddings`");
      if (oai && pooling == Pooling::none)
        throw HttpError(400, "Pooling type 'none' is not OAI compatible. Please use a different pooling type");
      // llama-server would answer with the classifier's outputs padded to n_embd.
      if (pooling == Pooling::rank)
        throw HttpError(400, "This server runs with pooling 'rank' (--reranking): it gives rerank scores "
                             "(/v1/rerank), not embeddings");
      const json body = parse_json_object(req.body, rc.limits.max_json_depth);
      EmbeddingBody e = parse_embedding_body(body, oai, tok(), sched->model().n_embd(), p.embd_normalize);
      // llama-server normalises only pooled vectors.
      const EmbeddingParams params{pooling, pooling == Pooling::none ? -1 : e.embd_normalize};
      const std::vector<Embedding> out = run_embeddings(std::move(e.inputs), params);
      send_ordered(res, 200, e.oai ? embeddings_oai_reply(e, out, p.model_name) : embeddings_native_reply(out));
    });
  };
  http.Post("/v1/embeddings", embeddings(true));
  http.Post("/embedding", embeddings(false));
  http.Post("/embeddings", embeddings(false));

  auto rerank = route([this](const httplib::Request& req, httplib::Response& res) {
    if (!p.embeddings || pooling != Pooling::rank)
      return send_error(res, 501, "This server does not support reranking. Start it with `--reranking`");
    const json body = parse_json_object(req.body, rc.limits.max_json_depth);
    RerankBody r = parse_rerank_body(body, tok(), rerank_template);
    std::vector<int64_t> n_tokens;
    for (const auto& in : r.inputs) n_tokens.push_back(static_cast<int64_t>(in.size()));
    const std::vector<Embedding> out = run_embeddings(r.inputs, {Pooling::rank, -1});
    std::vector<float> scores;
    for (const Embedding& e : out) scores.push_back(e.rows.at(0).at(0));  // send_rerank: embd[0]
    send_ordered(res, 200, rerank_reply(r, scores, n_tokens, p.model_name));
  });
  for (const char* path : {"/rerank", "/reranking", "/v1/rerank", "/v1/reranking"}) http.Post(path, rerank);

  // Ollama's: /api/embed normalises (L2), the legacy /api/embeddings does not.
  auto ollama_embed = [this](bool legacy) {
    return route([this, legacy](const httplib::Request& req, httplib::Response& res) {
      if (!p.embeddings || pooling == Pooling::none || pooling == Pooling::rank)
        return send_json(res, 501,
                         ollama_error_body("this server does not serve embeddings: start it with --embeddings "
                                           "(and a pooling other than none or rank)"));
      const auto t0 = std::chrono::steady_clock::now();
      const nlohmann::ordered_json body = parse_ordered_object(req.body, rc.limits.max_json_depth);
      const std::string model = ollama_requested_model(ollama, body);
      OllamaEmbedBody e = parse_ollama_embed(json::parse(body.dump()), legacy, tok(), rc.n_ctx, sched->model().n_embd());
      e.model = model;
      const std::vector<Embedding> out = run_embeddings(e.inputs, {pooling, legacy ? -1 : 2});
      send_ordered(res, 200, ollama_embed_reply(e, out, ns_since(t0)));
    });
  };
  http.Post("/api/embed", ollama_embed(false));
  http.Post("/api/embeddings", ollama_embed(true));
}

}  // namespace synapse::server
