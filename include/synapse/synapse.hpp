// The synapse C++ API: load a model, tokenize, create sequences, run batches
// of many sequences, read logits. Sampling, stopping and chat formatting:
// synapse/sampling.hpp, synapse/stop.hpp, synapse/chat.hpp; a whole program:
// examples/chat.cpp.
//
//   synapse::Model model = synapse::Model::load("model.gguf");
//   synapse::Context ctx(model);                 // threads: physical cores
//   synapse::Sequence seq = ctx.new_sequence(4096);
//   auto ids = model.tokenizer().tokenize("Once upon a time", true, false);
//   std::span<const float> logits = ctx.decode(seq, ids);   // [n_vocab], last row
//
// Every call that can fail throws synapse::Error (synapse/error.hpp); none
// aborts the process.
//
// Thread-safety: a Model is immutable after load and may be shared by any
// number of Contexts and threads. A Context (its thread pool and logits
// buffer) and a Sequence are used by one thread at a time; several Contexts
// may decode concurrently, each with its own Sequences.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "synapse/error.hpp"
#include "synapse/imatrix.hpp"
#include "synapse/tokenizer.hpp"
#include "synapse/types.hpp"

namespace synapse {

// The most threads a Context (or any other call taking a thread count) may
// use: ggml's GGML_MAX_N_THREADS. A larger count is Error(invalid_argument).
inline constexpr int max_threads = 512;

// The thread count a Context uses for n_threads <= 0: the physical cores of
// this machine (at least 1; llama.cpp's cpu_get_num_math). Thread-safe.
int default_thread_count();

// The names of the architectures synapse runs (general.architecture values:
// "llama", "qwen2", ...), in a fixed order. Thread-safe.
std::vector<std::string> supported_architectures();

// The name of the kernel table the forward pass runs ("avx512", "avx2",
// "neon", "scalar", ...): the instruction-set level chosen once per process
// from cpuid, SYNAPSE_ISA and SYNAPSE_NO_SIMD. Thread-safe.
const char* kernel_isa();

// One line describing what this process computes with, for benchmark and bug
// report headers (llama.cpp's llama_print_system_info): "kernels <kernel_isa()>".
// Thread-safe.
std::string system_info();

// How an embedding pools a sequence's final-normed hidden states:
// llama.cpp's llama_pooling_type, with its values (--pooling NAME).
enum class Pooling : int32_t {
  unspecified = -1,  // the model's <arch>.pooling_type (Model::pooling_type), else none
  none = 0,          // every token's vector
  mean = 1,          // the mean over the tokens
  cls = 2,           // the first token's
  last = 3,          // the last token's (Qwen3-Embedding)
  rank = 4,          // a reranker's score: its classifier head over the last (qwen3) or first token
};

// "none", "mean", "cls", "last", "rank" ("unspecified" for that value).
const char* pooling_name(Pooling p) noexcept;
// The Pooling a --pooling NAME gives; Error(invalid_argument) for any other name.
Pooling pooling_from_name(std::string_view name);

struct EmbeddingParams {
  Pooling pooling = Pooling::unspecified;
  // llama.cpp's embd_normalize (--embd-normalize, default 2): -1 none, 0
  // max-abs scaled to the int16 range, 1 taxicab, 2 Euclidean, p > 2 the
  // p-norm (common_embd_normalize). Applied to every returned vector but rank
  // scores.
  int embd_normalize = 2;
};

// What one input gives (Context::embed).
struct Embedding {
  // pooling none: one vector per token, [n_tokens][n_embd]; mean, cls, last:
  // one [n_embd]; rank: one vector of the classifier's outputs (a qwen3
  // reranker: softmax over (yes, no), so rows[0][0] is the relevance score).
  std::vector<std::vector<float>> rows;
  int64_t n_tokens = 0;  // the input's tokens
};

class Model {
 public:
  // Maps `path` and binds its weights (zero-copy). Throws Error(io) if the
  // file cannot be read, Error(format) for a malformed file or a missing or
  // misshapen tensor (named), Error(unsupported) for an unknown architecture
  // or a tensor type synapse cannot compute with.
  static Model load(const std::string& path);

  const Tokenizer& tokenizer() const;
  const std::string& architecture() const;  // general.architecture
  int64_t n_vocab() const;
  int64_t n_embd() const;
  int64_t n_layer() const;
  int64_t n_ctx_train() const;     // <arch>.context_length, 0 if absent
  uint64_t n_params() const;
  uint64_t weight_bytes() const;   // bytes of all tensor data in the file
  // Bytes one position takes in a Sequence's KV cache: F16 K and V rows of
  // every attention layer, n_layer * (n_embd_k_gqa + n_embd_v_gqa) * 2
  // (llama.cpp's llama_kv_cache size with type_k = type_v = F16, per cell);
  // a hybrid model's recurrent layers (Qwen3.5) keep a fixed-size state
  // instead and are not counted.
  uint64_t kv_bytes_per_position() const;
  // The same with K rows of type_k and V rows of type_v (Context::set_kv_types):
  // n_layer * (row_size(type_k, n_embd_k_gqa) + row_size(type_v, n_embd_v_gqa)).
  // Throws as Context::set_kv_types for a type this model cannot cache.
  uint64_t kv_bytes_per_position(GgmlType type_k, GgmlType type_v) const;
  // Whether the model has recurrent layers (Qwen3.5's Gated DeltaNet): its
  // sequences then keep a state that Sequence::truncate/fork cannot cut back
  // to an earlier position (only to n_past(), 0, or a snapshot's position:
  // Sequence::rewind_point).
  bool has_recurrent_layers() const;
  // tokenizer.chat_template, if the file has one.
  std::optional<std::string> chat_template() const;
  // The mapped file (metadata, tensors); e.g. for chat_template_for_model.
  const gguf::File& gguf() const;
  // <arch>.pooling_type, unspecified when the file has none (llama.cpp's
  // hparams.pooling_type).
  Pooling pooling_type() const;
  // Throws Error(unsupported) naming the file unless rank pooling can run:
  // the file has a classifier (cls.output.weight), or it is a qwen3 model
  // whose vocabulary has the tokens "yes" and "no" (a Qwen3-Reranker without
  // the converted head: those two rows of the output matrix are the head).
  void check_rank_head() const;

 private:
  friend class Context;
  friend class Sequence;
  struct Impl;  // the loaded weights and hyperparameters (src/runtime/api.cpp)
  std::shared_ptr<const Impl> impl_;  // shared by copies, Contexts and Sequences
};

// The KV cache type a -ctk / -ctv NAME gives (llama.cpp's
// kv_cache_type_from_str names, case-insensitive): f16, bf16, q8_0, q4_0,
// q5_0, iq4_nl. Throws Error(invalid_argument) naming `name` and the
// accepted names for any other, including llama.cpp's f32, q4_1 and q5_1,
// which synapse does not cache in.
GgmlType kv_cache_type_from_name(std::string_view name);
// Whether t is one of those types.
bool kv_cache_type_supported(GgmlType t) noexcept;

// A Context's shared KV pool (Context::share_kv), in pages.
struct KvPoolStats {
  int64_t page_size = 0;  // positions a page
  int64_t n_pages = 0;    // pages in the pool (0: no shared pool)
  int64_t n_used = 0;     // pages held by some sequence
};

// One sequence: its KV cache (K and V rows per layer, of its Context's
// KV types when it was made) and position, sized for
// the model whose Context made it (it keeps that model alive and only a
// Context of that model may decode it).
class Sequence {
 public:
  Sequence(Sequence&&) noexcept;
  Sequence& operator=(Sequence&&) noexcept;
  ~Sequence();

  int64_t n_past() const;  // positions already in the cache
  int64_t n_ctx() const;   // the most positions this sequence may reach
  // Positions of the past its cache keeps at least: n_ctx(), or fewer for a
  // sliding-window model (the window; pages wholly before it go back to the
  // pool, so it holds at most the window and two pages, and the pages its
  // snapshots keep: see rewind_point).
  int64_t capacity() const;
  void clear();            // forget everything; the next token is position 0
  // Forgets positions [n_keep, n_past()): the next token is position n_keep
  // and the rows before it are kept as they are (reusing a cached prefix
  // without copying it); a recurrent state goes back to the snapshot at
  // n_keep, and snapshots past n_keep are forgotten. Decoding on gives the
  // bits a fresh sequence fed the same tokens gives. Throws
  // Error(invalid_argument) if n_keep is outside [0, n_past()], or if a
  // sliding-window cache has already given back a position the kept prefix
  // would need and no snapshot kept it (as fork()), or if the model has
  // recurrent layers (Qwen3.5's DeltaNet: a state that folds in the whole
  // prefix and cannot be cut back) and n_keep is neither n_past(), 0 nor a
  // snapshot's position. rewind_point(n) gives the largest accepted n_keep.
  void truncate(int64_t n_keep);
  // A new sequence sharing positions [0, n_prefix) of this one, in the same
  // pool (whole pages shared, never written while shared; a partial last
  // page copied), with the snapshots at or before n_prefix (shared, not
  // copied). Error(invalid_argument) if n_prefix > n_past(), or under
  // truncate()'s rules for sliding windows and recurrent layers;
  // Error(out_of_range) when the pool has no page for the copy.
  Sequence fork(int64_t n_prefix) const;

  // Snapshots (hybrid and sliding-window models; every call below does
  // nothing, or answers as if every position were a snapshot, for a model
  // whose cache can be cut anywhere). What a cache cannot rewind (the
  // recurrent state; the pages a sliding window would give back) is kept at
  // chosen positions: when a decode reaches the position request_snapshot
  // asked for, and every 256 positions (multiples of 256). At most 4 are
  // kept, the oldest periodic one dropped first, then the oldest. A snapshot
  // holds a copy of the recurrent state (snapshot_bytes) and keeps the
  // window's pages before its position out of the pool (kv_pages counts them).
  //
  // The largest n <= n_most (clamped to [0, n_past()]) that truncate and fork
  // accept: n_most itself when they can, else the latest snapshot before it,
  // else 0.
  int64_t rewind_point(int64_t n_most) const;
  // Asks for a snapshot when a decode brings the sequence to `pos`
  // positions (one request; a later call replaces it; pos == n_past() takes
  // it now; an earlier pos asks for none). The decode cuts its pass there:
  // the rows' bits are the same.
  void request_snapshot(int64_t pos);
  // The snapshots' positions, ascending.
  std::vector<int64_t> snapshot_positions() const;
  // Bytes of recurrent state the snapshots hold (one shared with a fork
  // counts in each).
  size_t snapshot_bytes() const;
  // Forgets every snapshot (a sliding window's pages they kept go back to the
  // pool); true when there was one.
  bool drop_snapshots();
  // Pages of its pool it holds, and the pages a decode of n_new more
  // positions would take from the pool (new pages, and shared ones copied
  // before they are written).
  int64_t kv_pages() const;
  int64_t kv_pages_needed(int64_t n_new) const;
  // The token ids at positions [0, n_past()), as decoded (-1 where a
  // position was decoded from an embedding row); clear, truncate and fork
  // keep them in step with the cache. Valid until the next call that
  // changes the sequence.
  std::span<const token_id> tokens() const;
  // Prompt-prefix reuse (llama-server's cache_prompt, llama-cpp-python's
  // reuse of the context's tokens): keeps the longest prefix of tokens()
  // that `prompt` starts with, at most prompt.size() - 1 positions (the last
  // prompt token is always computed again, for its logits), and forgets the
  // rest. When the cache cannot be cut back to it (truncate's rules: a
  // sliding window has given back a position it needs, or a recurrent
  // state holds the whole sequence) it goes back to the latest snapshot
  // before it (rewind_point), else to 0. Then asks for a snapshot at
  // prompt.size() - 1 (request_snapshot), the prefix a later prompt that
  // starts with this one keeps. Returns the positions kept: prompt[0, kept)
  // need not be decoded again.
  int64_t keep_common_prefix(std::span<const token_id> prompt);

 private:
  friend class Context;
  struct Impl;  // its KV cache and the model the cache was sized for (src/runtime/api.cpp)
  explicit Sequence(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Rows for one Context::decode: each row is a token id or an embedding row
// of n_embd floats, for one sequence, with or without logits. Rows of one
// sequence take consecutive positions from its n_past, in the order added.
class Batch {
 public:
  void add(Sequence& seq, token_id token, bool logits);
  // `embd` is copied; it replaces the token embedding at that position.
  void add_embedding(Sequence& seq, std::span<const float> embd, bool logits);
  void clear();
  size_t size() const { return rows_.size(); }
  size_t n_logits() const;

 private:
  friend class Context;
  struct Row {
    Sequence* seq;
    token_id token;
    int64_t embd_offset;  // into embd_, or -1
    int64_t embd_len;
    bool logits;
  };
  std::vector<Row> rows_;
  std::vector<float> embd_;
};

class Context {
 public:
  // n_threads <= 0: the number of physical cores.
  explicit Context(const Model& model, int n_threads = 0);
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  ~Context();

  int n_threads() const;
  // The model's tokenizer (valid while the Context lives).
  const Tokenizer& tokenizer() const;

  // A new empty sequence that may hold n_ctx positions (n_ctx <= 0: the
  // model's training context, at most 4096). Its KV cache is in pages of
  // KvPoolStats::page_size positions, taken as positions are first written
  // (memory follows the positions in use, not n_ctx). Without share_kv
  // each sequence has a pool of its own, shared only with its forks and
  // bounded by its n_ctx; after share_kv it draws from the Context's pool.
  // Sliding-window models keep only the window's pages. For Phi-3 LongRoPE
  // files n_ctx also picks the factor set as llama.cpp's n_ctx does (long
  // when n_ctx rounded up to a multiple of 256 exceeds
  // rope.scaling.original_context_length), per sequence.
  Sequence new_sequence(int64_t n_ctx = 0) const;

  // From now on new_sequence draws every sequence's pages from one pool of
  // n_positions positions (rounded up to whole pages) owned by this Context
  // and shared by all of them (llama-server's unified KV cache: -c is the
  // total). A decode whose new rows need more pages than are free throws
  // Error(out_of_range) ("KV pool full ...") and changes no sequence.
  // Sequences made before keep their own pools. Throws
  // Error(invalid_argument) for n_positions < 1. Not thread-safe with
  // new_sequence.
  void share_kv(int64_t n_positions);
  // The shared pool's counts (share_kv); n_pages 0 without one. Thread-safe.
  KvPoolStats kv_pool() const;

  // From now on new_sequence and share_kv make caches whose K rows are
  // type_k and V rows type_v (llama.cpp's type_k / type_v, -ctk / -ctv;
  // default F16 and F16); a shared pool made before is replaced by an empty
  // one of the same size (sequences made before keep their own caches).
  // F16/F16 is the kernels' own path (bits of llama.cpp without flash
  // attention); any other pair runs flash attention's mathematics for those
  // types (kernels::attend_block_typed). Every pair keeps decode's
  // guarantees (bit-identical at any batch and thread count). Throws
  // Error(invalid_argument) naming the type for one that is not
  // kv_cache_type_supported, or whose block (32 values) does not divide the
  // model's head size. Not thread-safe with new_sequence.
  void set_kv_types(GgmlType type_k, GgmlType type_v);
  GgmlType type_k() const;
  GgmlType type_v() const;

  // Runs every row of `batch` (through the layers in passes of at most 256
  // rows, in batch order: buffers kept in the Context, reused by the next
  // call). Returns the logits of the rows
  // added with logits = true, in order: [n_logits][n_vocab] floats, valid
  // until the next decode. Each row's result is bit-identical to running its
  // sequence alone. Throws Error(out_of_range) for a token id outside the
  // vocabulary, Error(invalid_argument) for an embedding row of the wrong
  // size, a sequence made by a Context of another model (its cache has
  // another shape) or a sequence that would pass its n_ctx (nothing is
  // changed then).
  std::span<const float> decode(const Batch& batch);

  // One sequence: runs `tokens` and returns the last row's logits [n_vocab].
  std::span<const float> decode(Sequence& seq, std::span<const token_id> tokens);

  // Embeddings, as llama.cpp v0.5.0's llama-embedding and llama-server give
  // them: every input runs as a sequence of its own from position 0, all in
  // one batched forward pass without the vocabulary projection; each is
  // pooled (params.pooling, resolved: unspecified takes the model's
  // pooling_type, else none) and normalised (params.embd_normalize). One
  // result per input, in order. An input's vectors are bit-identical whatever
  // else is in the call and at any thread count. n_ctx: the longest input
  // accepted (<= 0: as new_sequence). Throws Error(invalid_argument) for no
  // inputs, an empty input or one longer than n_ctx (naming its index),
  // Error(out_of_range) for a token id outside the vocabulary,
  // Error(unsupported) for rank pooling without a head (check_rank_head).
  std::vector<Embedding> embed(std::span<const std::vector<token_id>> inputs, const EmbeddingParams& params,
                               int64_t n_ctx = 0);

  // Runs fn(begin, end) over [0, n) in ranges of at least `grain`, on this
  // Context's threads (the caller's among them), and returns when all are
  // done: for the caller's per-row work on decode's logits (scoring them, as
  // llama-perplexity does) without a second set of threads. fn runs
  // concurrently with itself and must not call this Context; an exception
  // from fn is rethrown here. Same thread rules as decode.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

  // While `collector` is set (not null), every decode adds its weight
  // products' inputs to it (synapse/imatrix.hpp); null detaches it. The
  // collector must outlive its use here.
  void set_imatrix(ImatrixCollector* collector);

 private:
  struct Impl;  // the model, the thread pool, the logits buffer (src/runtime/api.cpp)
  std::unique_ptr<Impl> impl_;
};

}  // namespace synapse
