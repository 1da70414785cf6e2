// `synapse serve`: the OpenAI- and llama-server-compatible HTTP front of a
// Scheduler (synapse/scheduler.hpp).
//
// Routes (shapes: server/response.hpp; fields: server/request.hpp):
//   POST /v1/chat/completions, /chat/completions   OpenAI chat (stream: SSE)
//   POST /v1/completions                           OpenAI completions
//   POST /completion, /completions                 llama-server's native completion
//   POST /infill                                   llama-server's code infill (FIM; server/infill.hpp),
//                                                  /completion's reply; 501 for a model without FIM tokens
//   POST /tokenize, /detokenize, /apply-template   llama-server's helpers
//   POST /v1/messages, /v1/messages/count_tokens   Anthropic's Messages, on the chat route (server/anthropic.hpp;
//                                                  errors in Anthropic's shape)
//   POST /v1/responses, /v1/responses/input_tokens OpenAI's Responses, stateless, on the chat route
//                                                  (server/responses.hpp)
//   POST /api/chat, /api/generate                  Ollama's, on the chat (a raw generate: completions) route
//                                                  (server/ollama.hpp; stream: NDJSON; errors {"error": "..."})
//   GET  /api/tags, /api/ps, /api/version; POST /api/show; GET|HEAD /
//                                                  Ollama's description of the model, and its probes
//   POST /v1/embeddings                            OpenAI embeddings (with --embeddings; server/embedding.hpp)
//   POST /embedding, /embeddings                   llama-server's own embeddings shape
//   POST /rerank, /reranking, /v1/rerank, /v1/reranking  Jina's / TEI's rerank (with --reranking)
//   POST /api/embed, /api/embeddings               Ollama's embeddings (with --embeddings)
//   GET  /health, /v1/health                       {"status":"ok"}, 503 while the model loads and once it shuts down
//   GET  /v1/models, /models, /props               the model served
//   POST /props                                    {"success": true}, changing nothing (with --props; else 501)
//   GET  /metrics                                  Prometheus text (with --metrics; else 501)
//   GET  /slots                                    the slots' state (llama-server's; --no-slots: 501)
//   GET  /lora-adapters                            [] (synapse loads no adapters); POST: [] only, else 400
// Errors: {"error":{"message","type","param","code"}} with 400, 401, 404,
// 413 (body over the size limit), 500, 501, 503.
//
// Every reply's text, token ids and logprobs are a function of its request
// alone (the Scheduler's contract): this layer only parses, queues and formats.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/defaults.hpp"
#include "synapse/gguf.hpp"
#include "synapse/scheduler.hpp"
#include "synapse/synapse.hpp"

namespace synapse::server {

struct ServerParams {
  std::string host = defaults::kHost;    // --host: loopback unless asked otherwise; "A,B,...": each of them
  int port = defaults::kPort;            // --port (0: any free port; see HttpServer::port)
  std::vector<std::string> api_keys;     // --api-key / --api-key-file; empty: no authentication
  std::string model_name;                // --alias's first name, else the model path: "model" in replies, /v1/models id
  std::vector<std::string> aliases;      // --alias a,b,...: every name, sorted (llama-server's set); /v1/models
  std::vector<std::string> tags;         // --tags a,b,...: informational, sorted; /v1/models
  std::string model_path;                // -m
  std::string chat_template;             // --chat-template NAME: a built-in format ("": the model's own)
  // --jinja (the default) / --no-jinja: chat is rendered by the model's Jinja
  // template (server/chat.hpp) when it has one; without one, or with
  // --no-jinja or --chat-template NAME, by the built-in formats (chatml
  // for a file without a template).
  bool jinja = true;
  std::optional<std::string> chat_template_source;  // --chat-template-file's text, or --chat-template's when it
                                                    // names no format (llama-server's JINJA_TEMPLATE); implies jinja
  std::string chat_template_file;        // its path, for messages
  std::string chat_template_kwargs;      // --chat-template-kwargs: "" or a JSON object (template variables)
  std::string reasoning_format = "auto"; // --reasoning-format: none, deepseek, auto (requests may override)
  int timeout_s = defaults::kTimeoutS;   // --timeout: socket read/write timeout, and the wall-clock limit of
                                         // one request from its arrival: a reply then ends with what it
                                         // has (finish_reason "length"), a request still waiting for a slot
                                         // is answered 503 and never takes one
  int idle_timeout_s = defaults::kIdleTimeoutS;  // --idle-timeout: a keep-alive connection with no request for this
                                         // long is closed; a request's header must arrive within this long
  size_t max_header_bytes = defaults::kMaxHeaderBytes;  // --max-header-size: request line and headers (431 above it)
  std::vector<std::string> cors_origins; // --cors-origin: origins a browser may call from ("*": any; no
                                         // credentials ever); empty: no CORS headers at all
  bool metrics = false;                  // --metrics: enable GET /metrics
  bool verbose = false;                  // -v/--verbose: OpenAI-shaped replies carry "__verbose" unless the
                                         // request's "verbose" says otherwise (llama-server's default)
  bool slots = true;                     // --slots / --no-slots: GET /slots (else 501, as llama-server)
  bool props = false;                    // --props: POST /props answers (it changes nothing, as llama-server's)
  size_t max_body_bytes = defaults::kMaxBodyBytes;  // request body limit (413 above it)
  int n_http_threads = 0;                // --threads-http: connections served at once (<= 0:
                                         // defaults::http_threads of one slot)
  int32_t n_predict = -1;                // -n: tokens per reply where a request gives none (< 0: none)
  bool spm_infill = false;               // --spm-infill: /infill puts the suffix before the prefix
  SamplerParams sampling;                // --temp, --top-k, ...: defaults of every request
  std::string system_fingerprint;        // the build, in every OpenAI reply
  // --embeddings: the embedding routes answer (else 501, as llama-server);
  // --reranking sets it with pooling rank.
  bool embeddings = false;
  Pooling pooling = Pooling::unspecified;  // --pooling (unspecified: the model's, else none)
  int embd_normalize = defaults::kEmbdNormalize;  // --embd-normalize (llama-server's default: Euclidean)
};

class HttpServer {
 public:
  explicit HttpServer(ServerParams params);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds port on every address of host (host_addresses: "A,B" listens on
  // A and on B, as llama-server) and starts answering, one background
  // thread per address and one pool of --threads-http connection threads for
  // all (every model route says 503 until set_scheduler). Port 0: the first
  // address takes a free port, the others the same one. With several
  // addresses an IPv6 one binds IPv6 only (IPV6_V6ONLY), so "::,0.0.0.0"
  // works. Throws Error(invalid_argument) for a --host without an address,
  // Error(io) naming the first address it cannot bind ("cannot listen on
  // [::1]:8080 ..."); the server then answers on none.
  void start();
  int port() const;  // the bound port (meaningful after start)
  const std::vector<std::string>& urls() const;  // "http://HOST:PORT" of each address (after start)

  // The model is loaded: from now on requests go to `scheduler` (kept until
  // the server is destroyed). Throws Error(invalid_argument) for an unknown
  // --chat-template name, a Jinja template (the file's or
  // --chat-template-file's) that does not parse (its line and message: the
  // server does not start, where llama-server falls back to chatml with a
  // warning), bad --chat-template-kwargs or --reasoning-format;
  // Error(unsupported) for a template the built-in formats do not know (with
  // --no-jinja).
  void set_scheduler(std::unique_ptr<Scheduler> scheduler);

  // Begins a graceful stop (SIGTERM; --shutdown-timeout): the listening
  // socket closes (no new connection), a request that still arrives on an
  // open connection is answered 503 "the server is shutting down", requests
  // waiting for a slot end at once (503 before any header, streamed or not;
  // an error event in a stream of several choices of which one has begun),
  // and every request in flight ends within `grace`: by
  // itself, or cut with finish_reason "length" (a stream with its final
  // chunk and "data: [DONE]"). Each connection closes after its reply.
  // Returns at once; wait_stopped() tells when all that is over. Thread-safe
  // against the handlers; call from one thread (with wait_stopped,
  // close_connections and stop).
  void begin_shutdown(std::chrono::milliseconds grace);

  // Waits at most `wait` for every connection to close and the listening
  // thread to end; true when they have (or the server never started).
  bool wait_stopped(std::chrono::milliseconds wait);

  // Shuts every open connection (SHUT_RDWR): a client that does not read its
  // reply can no longer hold its handler, which ends at its next write or wait.
  void close_connections();

  // begin_shutdown(0) unless begun; waits up to 1 s for the replies to be
  // written, then close_connections(); joins the listening thread; destroys
  // the scheduler. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Parses a Jinja chat template's source (--chat-template-file), so that a
// bad one is refused before the model loads. Throws Error(invalid_argument)
// "template: line L: ..." on a syntax error.
void check_chat_template(const std::string& source);

// --chat-template-kwargs' check before the model loads: throws
// Error(invalid_argument) naming the flag unless `json_text` is "" or a JSON
// object. (Defined in server/chat.cpp.)
void check_template_kwargs(std::string_view json_text);

// True when `given` equals one of `keys`; the time taken does not depend on
// where `given` first differs from a key (every key is compared in full).
bool api_key_matches(const std::vector<std::string>& keys, std::string_view given);

// The key a request presents: "Authorization: Bearer KEY" or "x-api-key: KEY"
// ("" when neither).
std::string presented_key(std::string_view authorization, std::string_view x_api_key);

// /props' model_ftype: llama.cpp's text for the file's general.file_type
// ("Q4_K - Medium", "all F32"; "unknown, may not work" for a value it does not
// know), or without that key "(guessed) " and the text of the file type its
// weights' most common type stands for (llama-model-loader.cpp). Defined in
// server/llama_ftype.cpp.
std::string llama_ftype_name(const gguf::File& f);

// What the HTTP layer counts beside the Scheduler.
struct ServerMetrics {
  uint64_t hangups_total = 0;     // requests whose client closed the connection before the reply's end
  uint64_t hangup_steps_max = 0;  // the most scheduler steps (n_decode_total) between a hang-up seen and
                                  // its request's on_done (slot free; a chat reply that was generating
                                  // keeps its slot one step more, to write the end of its turn)
};

// The /metrics text (Prometheus exposition format 0.0.4) of a snapshot, with
// llama-server's metric names (llamacpp:...) plus synapse's own.
std::string metrics_text(const SchedulerMetrics& m, const ServerMetrics& s = {});

}  // namespace synapse::server
