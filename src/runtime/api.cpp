// The public API (include/synapse/synapse.hpp) over the model and runtime layers.
#include <algorithm>

#include "model/forward.hpp"
#include "synapse/synapse.hpp"

namespace synapse {

Model Model::load(const std::string& path) {
  Model m;
  m.impl_ = std::shared_ptr<model::Model>(model::load_model(path));
  return m;
}

const Tokenizer& Model::tokenizer() const { return *impl_->tokenizer; }
const std::string& Model::architecture() const { return impl_->hp.arch_name; }
int64_t Model::n_vocab() const { return impl_->hp.n_vocab; }
int64_t Model::n_embd() const { return impl_->hp.n_embd; }
int64_t Model::n_layer() const { return impl_->hp.n_layer; }
int64_t Model::n_ctx_train() const { return impl_->hp.n_ctx_train; }
uint64_t Model::n_params() const { return impl_->n_params(); }
uint64_t Model::weight_bytes() const { return impl_->weight_bytes(); }
const gguf::File& Model::gguf() const { return impl_->file; }
std::optional<std::string> Model::chat_template() const {
  return impl_->file.get_string("tokenizer.chat_template");
}

Sequence::Sequence(std::shared_ptr<const model::Model> model, std::unique_ptr<runtime::KvCache> kv)
    : model_(std::move(model)), kv_(std::move(kv)) {}
Sequence::Sequence(Sequence&&) noexcept = default;
Sequence& Sequence::operator=(Sequence&&) noexcept = default;
Sequence::~Sequence() = default;
int64_t Sequence::n_past() const { return kv_->n_past(); }
int64_t Sequence::n_ctx() const { return kv_->n_ctx(); }
void Sequence::clear() { kv_->clear(); }
void Sequence::truncate(int64_t n_keep) { kv_->truncate(n_keep); }
Sequence Sequence::fork(int64_t n_prefix) const {
  return Sequence(model_, std::make_unique<runtime::KvCache>(kv_->fork(n_prefix)));
}

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
    : model_(model.impl_),
      pool_(std::make_unique<runtime::ThreadPool>(n_threads > 0 ? n_threads : runtime::default_thread_count())) {}
Context::Context(Context&&) noexcept = default;
Context::~Context() = default;

int Context::n_threads() const { return pool_->n_threads(); }
const Tokenizer& Context::tokenizer() const { return *model_->tokenizer; }

Sequence Context::new_sequence(int64_t n_ctx) const {
  const int64_t train = model_->hp.n_ctx_train;
  if (n_ctx <= 0) n_ctx = train > 0 ? std::min<int64_t>(train, 4096) : 4096;
  return Sequence(model_, std::make_unique<runtime::KvCache>(model::make_kv_cache(*model_, n_ctx)));
}

namespace {

// A sequence's cache is sized for its model's layers and heads; another
// model's forward pass would write past it (contract 4).
void check_same_model(const Sequence& seq, const model::Model* model, const std::shared_ptr<const model::Model>& own) {
  if (own.get() != model)
    throw Error(Errc::invalid_argument, "decode: the sequence was made by a Context of another model (" +
                                            own->file.path() + "), not " + model->file.path());
}

}  // namespace

std::span<const float> Context::decode(const Batch& batch) {
  std::vector<runtime::KvCache*> seqs;
  std::vector<model::BatchRow> rows;
  rows.reserve(batch.rows_.size());
  for (const Batch::Row& r : batch.rows_) {
    check_same_model(*r.seq, model_.get(), r.seq->model_);
    auto it = std::find(seqs.begin(), seqs.end(), r.seq->kv_.get());
    if (it == seqs.end()) it = seqs.insert(seqs.end(), r.seq->kv_.get());
    model::BatchRow row{r.token, nullptr, static_cast<int32_t>(it - seqs.begin()), r.logits};
    if (r.embd_offset >= 0) {
      if (r.embd_len != model_->hp.n_embd)
        throw Error(Errc::invalid_argument, "batch embedding row of " + std::to_string(r.embd_len) +
                                                " floats; the model's n_embd is " + std::to_string(model_->hp.n_embd));
      row.embd = batch.embd_.data() + r.embd_offset;
    }
    rows.push_back(row);
  }
  model::forward_batch(*model_, seqs, rows, logits_, *pool_);
  return logits_;
}

std::span<const float> Context::decode(Sequence& seq, std::span<const token_id> tokens) {
  check_same_model(seq, model_.get(), seq.model_);
  model::forward(*model_, *seq.kv_, tokens, false, logits_, *pool_);
  return logits_;
}

}  // namespace synapse
