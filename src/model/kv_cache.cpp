#include "model/kv_cache.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "base/huge_pages.hpp"
#include "synapse/error.hpp"

namespace synapse::model {

bool kv_type_supported(GgmlType t) noexcept {
  switch (t) {
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::IQ4_NL:
      return true;
    default:
      return false;
  }
}

void check_kv_type(const char* what, GgmlType t, int64_t head_size) {
  if (!kv_type_supported(t))
    throw Error(Errc::invalid_argument, std::string(what) + ": " + std::string(type_name(t)) +
                                            " is not a KV cache type (f16, bf16, q8_0, q4_0, q5_0, iq4_nl)");
  const int64_t blck = type_traits(t).block_size;
  if (head_size < 1 || head_size % blck != 0)
    throw Error(Errc::invalid_argument, std::string(what) + " " + std::string(type_name(t)) + ": the head size " +
                                            std::to_string(head_size) + " is not a multiple of its block of " +
                                            std::to_string(blck) + " values");
}

namespace {

bool block_quantized(GgmlType t) noexcept { return kv_type_supported(t) && t != GgmlType::F16 && t != GgmlType::BF16; }

}  // namespace

int64_t kv_rotation_k(GgmlType type_k, int64_t head_size_k) noexcept {
  if (!block_quantized(type_k) || head_size_k <= 0 || head_size_k % 64 != 0) return 0;
  int64_t n = 64;
  while (head_size_k % (2 * n) == 0) n *= 2;  // llama_kv_cache::build_input_k_rot
  return n;
}

int64_t kv_rotation_v(GgmlType type_v, int64_t head_size_v) noexcept {
  return block_quantized(type_v) && head_size_v > 0 && head_size_v % 64 == 0 ? 64 : 0;
}

KvPool::KvPool(int64_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int64_t max_pages, KvTypes types)
    : n_layer_(n_layer), n_embd_k_(n_embd_k), n_embd_v_(n_embd_v), max_pages_(max_pages), types_(types) {
  if (n_layer < 1 || n_embd_k < 1 || n_embd_v < 1 || max_pages < 0)
    throw Error(Errc::invalid_argument, "KV pool: bad shape (" + std::to_string(n_layer) + " layers, " +
                                            std::to_string(n_embd_k) + " K and " + std::to_string(n_embd_v) +
                                            " V values, " + std::to_string(max_pages) + " pages)");
  check_kv_type("type_k", types.k, n_embd_k);
  check_kv_type("type_v", types.v, n_embd_v);
  k_row_words_ = static_cast<int64_t>(row_size(types.k, n_embd_k) / sizeof(quant::ggml_fp16_t));
  v_row_words_ = static_cast<int64_t>(row_size(types.v, n_embd_v) / sizeof(quant::ggml_fp16_t));
}

KvPool::~KvPool() {
  for (const auto& [p, refs] : refs_) base::huge_page_free(const_cast<quant::ggml_fp16_t*>(p), page_bytes());
}

int64_t KvPool::n_used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_used_;
}

int64_t KvPool::n_allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(refs_.size());
}

int64_t KvPool::n_free() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_pages_ > 0 ? max_pages_ - n_used_ : std::numeric_limits<int32_t>::max();
}

quant::ggml_fp16_t* KvPool::take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_pages_ > 0 && n_used_ >= max_pages_)
    throw Error(Errc::out_of_range, "KV pool full: all " + std::to_string(max_pages_) + " pages of " +
                                        std::to_string(kPageSize) + " positions (" +
                                        std::to_string(max_pages_ * kPageSize) + " positions) are in use");
  quant::ggml_fp16_t* p;
  if (!free_.empty()) {
    p = free_.back();
    free_.pop_back();
  } else {
    p = static_cast<quant::ggml_fp16_t*>(base::huge_page_alloc(page_bytes()));
    refs_.emplace(p, 0);
  }
  // Zero rows: a position never written reads as 0, as a fresh cache did.
  std::memset(p, 0, page_bytes());
  refs_[p] = 1;
  ++n_used_;
  return p;
}

void KvPool::share(quant::ggml_fp16_t* p) {
  std::lock_guard<std::mutex> lock(mu_);
  ++refs_.at(p);
}

void KvPool::give_back(quant::ggml_fp16_t* p) {
  std::lock_guard<std::mutex> lock(mu_);
  if (--refs_.at(p) == 0) {
    free_.push_back(p);
    --n_used_;
  }
}

int32_t KvPool::refs(const quant::ggml_fp16_t* p) const {
  std::lock_guard<std::mutex> lock(mu_);
  return refs_.at(p);
}

namespace {

int64_t n_page_slots(int64_t n_ctx) { return (n_ctx + kPageSize - 1) >> kPageShift; }

}  // namespace

KvCache::KvCache(int64_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int64_t n_ctx, int64_t window, KvTypes types)
    : KvCache(std::make_shared<KvPool>(n_layer, n_embd_k, n_embd_v, 0, types), n_ctx, window) {}

KvCache::KvCache(std::shared_ptr<KvPool> pool, int64_t n_ctx, int64_t window)
    : pool_(std::move(pool)), n_ctx_(n_ctx), window_(std::max<int64_t>(0, window)) {
  if (n_ctx < 1) throw Error(Errc::invalid_argument, "context size must be at least 1, got " + std::to_string(n_ctx));
  capacity_ = window_ > 0 ? std::min(window_, n_ctx) : n_ctx;
  pages_.assign(static_cast<size_t>(n_page_slots(n_ctx)), nullptr);
}

KvCache::~KvCache() {
  if (pool_) drop_pages_from(0);
}

KvCache::KvCache(KvCache&& o) noexcept
    : pool_(std::move(o.pool_)),
      n_ctx_(o.n_ctx_),
      window_(o.window_),
      capacity_(o.capacity_),
      n_past_(o.n_past_),
      pages_(std::move(o.pages_)),
      recurrent_(std::move(o.recurrent_)),
      snapshots_(std::move(o.snapshots_)),
      requested_(o.requested_) {
  o.pages_.clear();
  o.snapshots_.clear();
  o.n_past_ = 0;
}

KvCache& KvCache::operator=(KvCache&& o) noexcept {
  if (this != &o) {
    if (pool_) drop_pages_from(0);
    pool_ = std::move(o.pool_);
    n_ctx_ = o.n_ctx_;
    window_ = o.window_;
    capacity_ = o.capacity_;
    n_past_ = o.n_past_;
    pages_ = std::move(o.pages_);
    recurrent_ = std::move(o.recurrent_);
    snapshots_ = std::move(o.snapshots_);
    requested_ = o.requested_;
    o.pages_.clear();
    o.snapshots_.clear();
    o.n_past_ = 0;
  }
  return *this;
}

void KvCache::drop_pages_from(int64_t first_page) {
  for (size_t i = static_cast<size_t>(std::max<int64_t>(0, first_page)); i < pages_.size(); ++i)
    if (pages_[i]) {
      pool_->give_back(pages_[i]);
      pages_[i] = nullptr;
    }
}

// The next row (position n_past) reads from n_past - window + 1 on (rounded
// down to a multiple of 16 at most, which stays in the same page): a page
// wholly before that is read by no row to come, unless a snapshot at P keeps
// it (P's next row reads [P - window + 1, P)).
void KvCache::release_window() {
  if (window_ <= 0) return;
  const int64_t first_read = n_past_ - window_ + 1;
  for (int64_t i = 0; (i + 1) * kPageSize <= first_read && i < static_cast<int64_t>(pages_.size()); ++i) {
    quant::ggml_fp16_t*& p = pages_[static_cast<size_t>(i)];
    if (!p) continue;
    const bool kept = std::any_of(snapshots_.begin(), snapshots_.end(), [&](const Snapshot& s) {
      return s.pos > i * kPageSize && (i + 1) * kPageSize > s.pos - window_ + 1;
    });
    if (kept) continue;
    pool_->give_back(p);
    p = nullptr;
  }
}

void KvCache::set_n_past(int64_t n) {
  n_past_ = n;
  release_window();
}

void KvCache::clear() {
  snapshots_.clear();
  requested_ = -1;
  drop_pages_from(0);
  n_past_ = 0;
  recurrent_.clear();
}

int64_t KvCache::n_pages() const {
  return static_cast<int64_t>(std::count_if(pages_.begin(), pages_.end(), [](const auto* p) { return p != nullptr; }));
}

void KvCache::check_prefix(const char* what, int64_t n_prefix) const {
  if (n_prefix < 0 || n_prefix > n_past_)
    throw Error(Errc::invalid_argument, std::string(what) + ": prefix of " + std::to_string(n_prefix) +
                                            " positions, the sequence has " + std::to_string(n_past_));
  if (!has_snapshot(n_prefix)) recurrent_.check_keep(what, n_prefix, n_past_);
  if (n_prefix == 0 || n_prefix == n_past_ || window_ <= 0) return;
  if (const int64_t i = first_missing_window_page(n_prefix); i >= 0)
    throw Error(Errc::invalid_argument, std::string(what) + ": positions before " +
                                            std::to_string((i + 1) * kPageSize) +
                                            " have left the sliding-window cache; cannot keep a prefix of " +
                                            std::to_string(n_prefix));
}

// The rows the next position (n_prefix) reads, from n_prefix - window + 1
// (rounded down to 16, the same page).
int64_t KvCache::first_missing_window_page(int64_t n_prefix) const {
  const int64_t first_read = std::max<int64_t>(0, n_prefix - window_ + 1);
  for (int64_t i = first_read >> kPageShift; i <= (n_prefix - 1) >> kPageShift; ++i)
    if (!pages_[static_cast<size_t>(i)]) return i;
  return -1;
}

bool KvCache::can_keep(int64_t n_prefix) const {
  if (n_prefix < 0 || n_prefix > n_past_) return false;
  if (!has_snapshot(n_prefix) && !recurrent_.can_keep(n_prefix, n_past_)) return false;
  if (n_prefix == 0 || n_prefix == n_past_ || window_ <= 0) return true;
  return first_missing_window_page(n_prefix) < 0;
}

KvCache KvCache::fork(int64_t n_prefix) const {
  check_prefix("fork", n_prefix);
  KvCache copy(pool_, n_ctx_, window_);
  const int64_t n_full = n_prefix >> kPageShift;
  const bool partial = (n_prefix & (kPageSize - 1)) != 0;
  if (partial && pool_->n_free() < 1)
    throw Error(Errc::out_of_range, "fork: the KV pool has no free page for the copy of a partial page");
  for (int64_t i = 0; i < n_full; ++i)
    if (quant::ggml_fp16_t* p = pages_[static_cast<size_t>(i)]) {
      pool_->share(p);
      copy.pages_[static_cast<size_t>(i)] = p;
    }
  if (partial) {
    if (const quant::ggml_fp16_t* src = pages_[static_cast<size_t>(n_full)]) {
      quant::ggml_fp16_t* p = pool_->take();
      std::memcpy(p, src, pool_->page_bytes());
      copy.pages_[static_cast<size_t>(n_full)] = p;
    }
  }
  copy.n_past_ = n_prefix;
  for (const Snapshot& sn : snapshots_)
    if (sn.pos <= n_prefix) copy.snapshots_.push_back(sn);
  if (requested_ > n_prefix) copy.requested_ = requested_;
  copy.release_window();
  copy.recurrent_ = recurrent_;  // its shape, and the state at n_past_
  if (n_prefix == 0)
    copy.recurrent_.clear();
  else if (n_prefix < n_past_ && !recurrent_.empty())
    copy.recurrent_ = *copy.snapshots_.back().state;  // check_prefix: the snapshot at n_prefix
  return copy;
}

void KvCache::truncate(int64_t n_keep) {
  check_prefix("truncate", n_keep);
  if (n_keep == n_past_) return;
  while (!snapshots_.empty() && snapshots_.back().pos > n_keep) snapshots_.pop_back();
  if (n_keep == 0) {
    recurrent_.clear();
  } else if (!recurrent_.empty()) {
    recurrent_ = *snapshots_.back().state;  // check_prefix: the snapshot at n_keep
  }
  n_past_ = n_keep;
  drop_pages_from(n_page_slots(n_keep));
  release_window();
}

bool KvCache::has_snapshot(int64_t pos) const {
  return std::any_of(snapshots_.begin(), snapshots_.end(), [&](const Snapshot& s) { return s.pos == pos; });
}

int64_t KvCache::rewind_point(int64_t n_most) const {
  const int64_t n = std::clamp<int64_t>(n_most, 0, n_past_);
  if (!keeps_snapshots() || can_keep(n)) return n;
  for (auto it = snapshots_.rbegin(); it != snapshots_.rend(); ++it)
    if (it->pos <= n && can_keep(it->pos)) return it->pos;
  return 0;
}

void KvCache::request_snapshot(int64_t pos) {
  if (!keeps_snapshots()) return;
  requested_ = pos > n_past_ ? pos : -1;
  if (pos == n_past_ && pos > 0 && !has_snapshot(pos)) add_snapshot(false);
}

int64_t KvCache::next_snapshot() const {
  if (!keeps_snapshots()) return std::numeric_limits<int64_t>::max();
  const int64_t periodic = (n_past_ / kSnapshotInterval + 1) * kSnapshotInterval;
  return requested_ > n_past_ ? std::min(requested_, periodic) : periodic;
}

void KvCache::take_due_snapshot() {
  if (!keeps_snapshots() || n_past_ == 0) return;
  const bool requested = n_past_ == requested_;
  if (requested) requested_ = -1;
  if (!requested && n_past_ % kSnapshotInterval != 0) return;
  if (has_snapshot(n_past_)) return;
  add_snapshot(!requested);
}

void KvCache::add_snapshot(bool periodic) {
  Snapshot sn{n_past_, periodic, nullptr};
  if (!recurrent_.empty()) sn.state = std::make_shared<const RecurrentState>(recurrent_);
  snapshots_.push_back(std::move(sn));  // n_past_ is past every other one
  if (snapshots_.size() > kMaxSnapshots) {
    // The oldest periodic one but the new one, else the oldest.
    auto drop = std::find_if(snapshots_.begin(), snapshots_.end() - 1, [](const Snapshot& s) { return s.periodic; });
    snapshots_.erase(drop != snapshots_.end() - 1 ? drop : snapshots_.begin());
    release_window();
  }
}

bool KvCache::drop_snapshots() {
  if (snapshots_.empty()) return false;
  snapshots_.clear();
  release_window();
  return true;
}

std::vector<int64_t> KvCache::snapshot_positions() const {
  std::vector<int64_t> out;
  for (const Snapshot& s : snapshots_) out.push_back(s.pos);
  return out;
}

size_t KvCache::snapshot_bytes() const {
  size_t n = 0;
  for (const Snapshot& s : snapshots_) n += s.state ? s.state->bytes() : 0;
  return n;
}

int64_t KvCache::pages_needed(int64_t n_new) const {
  if (n_new <= 0) return 0;
  const int64_t last = std::min(n_past_ + n_new, n_ctx_) - 1;
  int64_t n = 0;
  for (int64_t i = n_past_ >> kPageShift; i <= last >> kPageShift; ++i) {
    const quant::ggml_fp16_t* p = pages_[static_cast<size_t>(i)];
    if (!p || pool_->refs(p) > 1) ++n;
  }
  return n;
}

void KvCache::reserve(int64_t n_new) {
  const int64_t need = pages_needed(n_new);
  if (need == 0) return;
  if (need > pool_->n_free())
    throw Error(Errc::out_of_range, "KV pool full: " + std::to_string(need) + " pages of " +
                                        std::to_string(kPageSize) + " positions needed, " +
                                        std::to_string(pool_->n_free()) + " free of " +
                                        std::to_string(pool_->max_pages()));
  const int64_t last = std::min(n_past_ + n_new, n_ctx_) - 1;
  for (int64_t i = n_past_ >> kPageShift; i <= last >> kPageShift; ++i) {
    quant::ggml_fp16_t*& p = pages_[static_cast<size_t>(i)];
    if (!p) {
      p = pool_->take();
    } else if (pool_->refs(p) > 1) {  // shared: written only through a private copy
      quant::ggml_fp16_t* own = pool_->take();
      std::memcpy(own, p, pool_->page_bytes());
      pool_->give_back(p);
      p = own;
    }
  }
}

}  // namespace synapse::model
