// The public API (include/synapse/synapse.hpp) over the model and runtime layers.
#include <algorithm>
#include <functional>
#include <string_view>
#include <utility>

#include "base/thread_pool.hpp"
#include "model/embedding.hpp"
#include "model/forward.hpp"
#include "model/hparams.hpp"
#include "quant/kernel_table.hpp"
#include "runtime/imatrix.hpp"
#include "quant/simd.hpp"
#include "synapse/synapse.hpp"

namespace synapse {

static_assert(max_threads == base::kMaxThreads, "synapse.hpp's max_threads is the thread pool's limit");

std::vector<std::string> supported_architectures() { return model::architecture_names(); }

int default_thread_count() { return base::default_thread_count(); }

const char* kernel_isa() { return quant::isa_name(quant::active_kernels().isa); }

std::string system_info() { return std::string("kernels ") + kernel_isa(); }

static_assert(static_cast<int>(Pooling::rank) == static_cast<int>(model::Pooling::rank) &&
                  static_cast<int>(Pooling::unspecified) == static_cast<int>(model::Pooling::unspecified),
              "synapse::Pooling mirrors model::Pooling (llama_pooling_type's values)");

namespace {
constexpr std::pair<std::string_view, Pooling> kPoolings[] = {
    {"none", Pooling::none}, {"mean", Pooling::mean}, {"cls", Pooling::cls}, {"last", Pooling::last},
    {"rank", Pooling::rank}};
}  // namespace

const char* pooling_name(Pooling p) noexcept {
  for (const auto& [name, v] : kPoolings)
    if (v == p) return name.data();
  return "unspecified";
}

Pooling pooling_from_name(std::string_view name) {
  for (const auto& [n, v] : kPoolings)
    if (n == name) return v;
  throw Error(Errc::invalid_argument, "unknown pooling type '" + std::string(name) + "' (none, mean, cls, last, rank)");
}

// The public classes hold only these, so that no type of the layers below
// appears in an installed header.
struct Model::Impl {
  std::unique_ptr<const model::Model> m;
};
struct Sequence::Impl {
  std::shared_ptr<const Model::Impl> model;  // the model its cache was sized for
  model::KvCache kv;
  std::vector<token_id> tokens;  // the id at each position of kv, -1 for an embedding row
};
struct Context::Impl {
  Impl(std::shared_ptr<const Model::Impl> model, int n_threads) : model(std::move(model)), pool(n_threads) {}
  std::shared_ptr<const Model::Impl> model;
  base::ThreadPool pool;  // not movable: the Context moves its Impl pointer
  std::vector<float> logits;
  model::ForwardScratch scratch;  // reused by every decode: no allocation per step
  model::ProductObserver* observer = nullptr;  // set_imatrix's collector, or null
  std::shared_ptr<model::KvPool> kv_pool;     // share_kv's pool, or null
  model::KvTypes kv_types;                    // set_kv_types'
};

Model Model::load(const std::string& path) {
  Model m;
  m.impl_ = std::make_shared<const Impl>(Impl{model::load_model(path)});
  return m;
}

const Tokenizer& Model::tokenizer() const { return *impl_->m->tokenizer; }
const std::string& Model::architecture() const { return impl_->m->hp.arch_name; }
int64_t Model::n_vocab() const { return impl_->m->hp.n_vocab; }
int64_t Model::n_embd() const { return impl_->m->hp.n_embd; }
int64_t Model::n_layer() const { return impl_->m->hp.n_layer; }
int64_t Model::n_ctx_train() const { return impl_->m->hp.n_ctx_train; }
uint64_t Model::n_params() const { return impl_->m->n_params(); }
uint64_t Model::weight_bytes() const { return impl_->m->weight_bytes(); }
uint64_t Model::kv_bytes_per_position() const {
  const model::HParams& hp = impl_->m->hp;
  return static_cast<uint64_t>(hp.n_layer_kv()) * static_cast<uint64_t>(hp.n_embd_k_gqa() + hp.n_embd_v_gqa()) * 2;
}
uint64_t Model::kv_bytes_per_position(GgmlType type_k, GgmlType type_v) const {
  const model::HParams& hp = impl_->m->hp;
  model::check_kv_type("type_k", type_k, hp.n_embd_head_k);
  model::check_kv_type("type_v", type_v, hp.n_embd_head_v);
  return static_cast<uint64_t>(hp.n_layer_kv()) *
         (row_size(type_k, hp.n_embd_k_gqa()) + row_size(type_v, hp.n_embd_v_gqa()));
}
bool Model::has_recurrent_layers() const { return impl_->m->hp.has_recurrent(); }
const gguf::File& Model::gguf() const { return impl_->m->file; }
std::optional<std::string> Model::chat_template() const {
  return impl_->m->file.get_string("tokenizer.chat_template");
}

Pooling Model::pooling_type() const { return static_cast<Pooling>(impl_->m->hp.pooling_type); }
void Model::check_rank_head() const { model::check_rank_head(*impl_->m); }

Sequence::Sequence(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Sequence::Sequence(Sequence&&) noexcept = default;
Sequence& Sequence::operator=(Sequence&&) noexcept = default;
Sequence::~Sequence() = default;
int64_t Sequence::n_past() const { return impl_->kv.n_past(); }
int64_t Sequence::n_ctx() const { return impl_->kv.n_ctx(); }
int64_t Sequence::capacity() const { return impl_->kv.capacity(); }
void Sequence::clear() {
  impl_->kv.clear();
  impl_->tokens.clear();
}
void Sequence::truncate(int64_t n_keep) {
  impl_->kv.truncate(n_keep);
  impl_->tokens.resize(static_cast<size_t>(n_keep));
}
Sequence Sequence::fork(int64_t n_prefix) const {
  model::KvCache kv = impl_->kv.fork(n_prefix);  // checks n_prefix
  std::vector<token_id> tokens(impl_->tokens.begin(), impl_->tokens.begin() + n_prefix);
  return Sequence(std::make_unique<Impl>(Impl{impl_->model, std::move(kv), std::move(tokens)}));
}
std::span<const token_id> Sequence::tokens() const { return impl_->tokens; }
int64_t Sequence::keep_common_prefix(std::span<const token_id> prompt) {
  const std::vector<token_id>& have = impl_->tokens;
  const size_t most = prompt.empty() ? 0 : prompt.size() - 1;
  size_t keep = 0;
  while (keep < most && keep < have.size() && have[keep] == prompt[keep]) ++keep;
  truncate(rewind_point(static_cast<int64_t>(keep)));
  // A follow-up prompt that starts with this one keeps at least this.
  request_snapshot(static_cast<int64_t>(most));
  return n_past();
}
int64_t Sequence::rewind_point(int64_t n_most) const { return impl_->kv.rewind_point(n_most); }
void Sequence::request_snapshot(int64_t pos) { impl_->kv.request_snapshot(pos); }
std::vector<int64_t> Sequence::snapshot_positions() const { return impl_->kv.snapshot_positions(); }
size_t Sequence::snapshot_bytes() const { return impl_->kv.snapshot_bytes(); }
bool Sequence::drop_snapshots() { return impl_->kv.drop_snapshots(); }
int64_t Sequence::kv_pages() const { return impl_->kv.n_pages(); }
int64_t Sequence::kv_pages_needed(int64_t n_new) const { return impl_->kv.pages_needed(n_new); }

void Batch::add(Sequence& seq, token_id token, bool logits) { rows_.push_back({&seq, token, -1, 0, logits}); }

void Batch::add_embedding(Sequence& seq, std::span<const float> embd, bool logits) {
  // The length is checked against the model's n_embd in Context::decode.
  rows_.push_back({&seq, 0, static_cast<int64_t>(embd_.size()), static_cast<int64_t>(embd.size()), logits});
  embd_.insert(embd_.end(), embd.begin(), embd.end());
}

void Batch::clear() {
  rows_.clear();
  embd_.clear();
}

size_t Batch::n_logits() const {
  return static_cast<size_t>(std::count_if(rows_.begin(), rows_.end(), [](const Row& r) { return r.logits; }));
}

Context::Context(const Model& model, int n_threads)
    : impl_(std::make_unique<Impl>(model.impl_, n_threads > 0 ? n_threads : base::default_thread_count())) {}
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;
Context::~Context() = default;

int Context::n_threads() const { return impl_->pool.n_threads(); }
const Tokenizer& Context::tokenizer() const { return *impl_->model->m->tokenizer; }

namespace {

// new_sequence's n_ctx <= 0: the training context, at most 4096.
int64_t new_sequence_n_ctx(const model::Model& m) {
  const int64_t train = m.hp.n_ctx_train;
  return train > 0 ? std::min<int64_t>(train, 4096) : 4096;
}

}  // namespace

Sequence Context::new_sequence(int64_t n_ctx) const {
  const model::Model& m = *impl_->model->m;
  if (n_ctx <= 0) n_ctx = new_sequence_n_ctx(m);
  return Sequence(std::make_unique<Sequence::Impl>(
      Sequence::Impl{impl_->model, model::make_kv_cache(m, n_ctx, impl_->kv_pool, impl_->kv_types), {}}));
}

void Context::share_kv(int64_t n_positions) {
  if (n_positions < 1)
    throw Error(Errc::invalid_argument, "share_kv: the pool needs at least 1 position, got " +
                                            std::to_string(n_positions));
  impl_->kv_pool = model::make_kv_pool(*impl_->model->m, (n_positions + model::kPageSize - 1) / model::kPageSize,
                                       impl_->kv_types);
}

void Context::set_kv_types(GgmlType type_k, GgmlType type_v) {
  const model::Model& m = *impl_->model->m;
  model::check_kv_type("type_k", type_k, m.hp.n_embd_head_k);
  model::check_kv_type("type_v", type_v, m.hp.n_embd_head_v);
  impl_->kv_types = {type_k, type_v};
  if (impl_->kv_pool) impl_->kv_pool = model::make_kv_pool(m, impl_->kv_pool->max_pages(), impl_->kv_types);
}

GgmlType Context::type_k() const { return impl_->kv_types.k; }
GgmlType Context::type_v() const { return impl_->kv_types.v; }

bool kv_cache_type_supported(GgmlType t) noexcept { return model::kv_type_supported(t); }

GgmlType kv_cache_type_from_name(std::string_view name) {
  GgmlType t{};
  if (!type_from_name(name, t) || !model::kv_type_supported(t))
    throw Error(Errc::invalid_argument, "unsupported KV cache type '" + std::string(name) +
                                            "' (allowed: f16, bf16, q8_0, q4_0, q5_0, iq4_nl)");
  return t;
}

KvPoolStats Context::kv_pool() const {
  KvPoolStats st;
  st.page_size = model::kPageSize;
  if (impl_->kv_pool) {
    st.n_pages = impl_->kv_pool->max_pages();
    st.n_used = impl_->kv_pool->n_used();
  }
  return st;
}

namespace {

// A sequence's cache is sized for its model's layers and heads; another
// model's forward pass would write past it (contract 4).
void check_same_model(const model::Model& ctx_model, const model::Model& seq_model) {
  if (&ctx_model != &seq_model)
    throw Error(Errc::invalid_argument, "decode: the sequence was made by a Context of another model (" +
                                            seq_model.file.path() + "), not " + ctx_model.file.path());
}

}  // namespace

std::span<const float> Context::decode(const Batch& batch) {
  const model::Model& m = *impl_->model->m;
  std::vector<model::KvCache*> seqs;
  std::vector<model::BatchRow> rows;
  rows.reserve(batch.rows_.size());
  for (const Batch::Row& r : batch.rows_) {
    Sequence::Impl& seq = *r.seq->impl_;
    check_same_model(m, *seq.model->m);
    auto it = std::find(seqs.begin(), seqs.end(), &seq.kv);
    if (it == seqs.end()) it = seqs.insert(seqs.end(), &seq.kv);
    model::BatchRow row{r.token, nullptr, static_cast<int32_t>(it - seqs.begin()), r.logits};
    if (r.embd_offset >= 0) {
      if (r.embd_len != m.hp.n_embd)
        throw Error(Errc::invalid_argument, "batch embedding row of " + std::to_string(r.embd_len) +
                                                " floats; the model's n_embd is " + std::to_string(m.hp.n_embd));
      row.embd = batch.embd_.data() + r.embd_offset;
    }
    rows.push_back(row);
  }
  model::forward_batch(m, seqs, rows, impl_->logits, impl_->pool, &impl_->scratch, model::ForwardOutput::logits,
                       impl_->observer);
  for (const Batch::Row& r : batch.rows_) r.seq->impl_->tokens.push_back(r.embd_offset >= 0 ? -1 : r.token);
  return impl_->logits;
}

std::span<const float> Context::decode(Sequence& seq, std::span<const token_id> tokens) {
  const model::Model& m = *impl_->model->m;
  check_same_model(m, *seq.impl_->model->m);
  model::forward(m, seq.impl_->kv, tokens, false, impl_->logits, impl_->pool, &impl_->scratch, impl_->observer);
  seq.impl_->tokens.insert(seq.impl_->tokens.end(), tokens.begin(), tokens.end());
  return impl_->logits;
}

std::vector<Embedding> Context::embed(std::span<const std::vector<token_id>> inputs, const EmbeddingParams& params,
                                     int64_t n_ctx) {
  const model::Model& m = *impl_->model->m;
  if (n_ctx <= 0) n_ctx = new_sequence_n_ctx(m);
  const model::Pooling pooling = model::resolve_pooling(m, static_cast<model::Pooling>(params.pooling));
  std::vector<model::EmbeddingRows> rows =
      model::embed(m, inputs, pooling, params.embd_normalize, n_ctx, impl_->pool, &impl_->scratch);
  std::vector<Embedding> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) out[i] = {std::move(rows[i].rows), rows[i].n_tokens};
  return out;
}

void Context::set_imatrix(ImatrixCollector* collector) {
  impl_->observer = collector ? &collector->impl_->acc : nullptr;
}

void Context::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  impl_->pool.parallel_for(n, grain, fn);
}

}  // namespace synapse
