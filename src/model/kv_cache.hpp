// The KV cache in pages: a KvPool holds fixed-size pages of kPageSize
// positions, each page holding those positions' K and V rows for every layer
// (of the pool's KvTypes: F16 by default, as llama.cpp's type_k = type_v =
// f16; BF16 or a 32-value block format, -ctk/-ctv); a KvCache (one
// sequence) holds a page table, page i holding positions
// [i * kPageSize, (i + 1) * kPageSize). Sequences of one pool share its
// memory: the server's `-c` is one pool's positions, used by all `-np`
// sequences (llama-server's unified KV cache), and a page is taken when a
// sequence first writes one of its positions.
//
// Why 64 positions a page: a power of two (the kernels address position p as
// pages[p >> 6] + (p & 63) * stride, no division), a multiple of 16 (the
// attention kernels' lanes and a sliding window's start rounded down to 16
// stay inside one page: kernels::QueryRow::n_masked), a waste below one page
// per sequence (small against a request's context), and for llama-3.2-1b's
// shapes (16 layers x 1024 F16 K+V values) exactly 2 MiB, one huge page.
//
// Sharing (fork): pages are reference-counted; a fork shares every full page
// of its prefix and copies the partial last one. A page held by more than one
// sequence is never written: a write to a position of a shared page first
// gives the writer a private copy (copy on write).
//
// Sliding-window models (HParams::kv_window > 0) give a page back to the pool
// once every position in it is out of the window of every position still to
// come: a sequence holds at most window + 2 pages' worth of positions however
// long it runs (seed 000 "Sliding Window"), plus the pages its snapshots keep
// (below: at most kMaxSnapshots windows). A model whose layers mix windowed
// and full attention (gpt-oss, Gemma 3) keeps every position in every layer:
// its windowed layers read only their window, but their rows are not stored
// apart (llama.cpp's llama_kv_cache_iswa does).
//
// Snapshots (issue 50 item 4): a recurrent state (Qwen3.5) folds the whole
// prefix in, and a sliding window gives back rows a shorter prefix needs, so
// neither can be cut back to an arbitrary position. A sequence with either
// keeps snapshots of what cannot be rewound at chosen positions P: a copy of
// the recurrent state after P positions, and (sliding window) the pages
// holding [P - window + 1, P), which release_window then does not give back
// while the snapshot lives. truncate and fork accept any snapshot position.
// A snapshot is taken when the sequence reaches a requested position
// (request_snapshot: the scheduler and keep_common_prefix ask for the end of
// each prompt) and every kSnapshotInterval positions; at most kMaxSnapshots
// are kept, the oldest periodic one dropped first, then the oldest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "model/recurrent_state.hpp"
#include "quant/fp16.hpp"
#include "synapse/types.hpp"

namespace synapse::model {

// The types of a pool's K and V rows (llama.cpp's type_k, type_v; -ctk,
// -ctv). Supported: F16, BF16, Q8_0, Q4_0, Q5_0, IQ4_NL (llama.cpp's
// kv_cache_types but F32, Q4_1 and Q5_1, which it allows and nobody uses).
struct KvTypes {
  GgmlType k = GgmlType::F16;
  GgmlType v = GgmlType::F16;
  bool is_f16() const { return k == GgmlType::F16 && v == GgmlType::F16; }
  bool operator==(const KvTypes&) const = default;
};

// Whether t may be a K or V cache type (KvTypes).
bool kv_type_supported(GgmlType t) noexcept;
// Throws Error(invalid_argument) naming `what` ("type_k"), the type and the
// head size unless t is a supported cache type whose block divides
// head_size (a block never straddles two heads, so a head's slice of a row
// is whole blocks: llama.cpp's flash attention asserts the same).
void check_kv_type(const char* what, GgmlType t, int64_t head_size);

// llama.cpp v0.5.0 rotates attention around a quantized cache
// (llama_kv_cache's attn_rot_k / attn_rot_v, unless LLAMA_ATTN_ROT_DISABLE):
// with a block-quantized K (Q8_0, Q4_0, Q5_0, IQ4_NL) and a head size that is
// a multiple of 64, q and k go through kernels::fwht in chunks of
// kv_rotation_k values (the largest power of 2 dividing the head size)
// before k is stored and q meets it; with a block-quantized V and hd_v a
// multiple of 64, v goes through it in chunks of 64 before it is stored and
// the attention output after (the rotation is its own inverse). An
// orthonormal rotation leaves q.k and the output unchanged in exact
// arithmetic and spreads a block's outliers before it is quantized. 0: no
// rotation (F16, BF16, or another head size).
int64_t kv_rotation_k(GgmlType type_k, int64_t head_size_k) noexcept;
int64_t kv_rotation_v(GgmlType type_v, int64_t head_size_v) noexcept;

// Positions per page, and its log2 (kernels::KvLayerView::page_shift).
inline constexpr int kPageShift = 6;
inline constexpr int64_t kPageSize = int64_t{1} << kPageShift;

// Snapshots (see the top): one every kSnapshotInterval positions (position
// multiples of it), so that a prompt diverging from the cached sequence past
// its last requested snapshot recomputes at most that many positions more
// than it must; 256 is forward_batch's pass (kMaxPassRows), so a prefill from
// a multiple of it takes them at pass boundaries it cuts anyway. At most
// kMaxSnapshots per sequence: a real hybrid's state is tens of MiB (a
// DeltaNet layer with 32 value heads of 128 x 128 floats holds 2 MiB) and a
// window's snapshot keeps up to the window's pages, so few; 4 keeps the end of
// the last prompts of a chat beside the latest periodic one.
inline constexpr int64_t kSnapshotInterval = 256;
inline constexpr size_t kMaxSnapshots = 4;

// A pool of pages of one model's shapes. Pages are allocated when first
// needed (memory grows to the most pages ever in use at once, never past
// max_pages) and reused after they are given back. Thread-safe: a mutex
// guards the free list and reference counts (sequences of one pool may live
// on different threads; the forward pass itself takes pages before it runs).
class KvPool {
 public:
  // n_layer layers of n_embd_k K and n_embd_v V values a position, stored
  // as `types`; at most max_pages pages (0: no limit, the pool of a
  // standalone sequence, bounded by that sequence's n_ctx). Throws
  // Error(invalid_argument) for shapes < 1, max_pages < 0, an unsupported
  // type or a row length that is not a multiple of its type's block.
  KvPool(int64_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int64_t max_pages, KvTypes types = {});
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  int64_t n_layer() const { return n_layer_; }
  int64_t n_embd_k() const { return n_embd_k_; }
  int64_t n_embd_v() const { return n_embd_v_; }
  int64_t max_pages() const { return max_pages_; }  // 0: no limit
  const KvTypes& types() const { return types_; }
  // A page is addressed in 16-bit words (quant::ggml_fp16_t): one F16 or
  // BF16 value, or two bytes of a block row (every supported block is an
  // even number of bytes: Q8_0 34, Q4_0 18, Q5_0 22, IQ4_NL 18). Words of
  // one K (V) row: row_size(types.k, n_embd_k) / 2.
  int64_t k_row_words() const { return k_row_words_; }
  int64_t v_row_words() const { return v_row_words_; }
  // Words in one page: per layer, kPageSize K rows then kPageSize V rows.
  int64_t page_elems() const { return n_layer_ * kPageSize * (k_row_words_ + v_row_words_); }
  size_t page_bytes() const { return static_cast<size_t>(page_elems()) * sizeof(quant::ggml_fp16_t); }
  // Bytes one position takes in every layer's K and V rows.
  size_t bytes_per_position() const { return page_bytes() / kPageSize; }
  // Word offsets of layer il's first K (V) row from a page's start.
  int64_t k_offset(int64_t il) const { return il * kPageSize * (k_row_words_ + v_row_words_); }
  int64_t v_offset(int64_t il) const { return k_offset(il) + kPageSize * k_row_words_; }

  int64_t n_used() const;       // pages held by some sequence
  int64_t n_allocated() const;  // pages whose memory exists (used + kept for reuse)
  // Pages that can still be taken: max_pages - n_used (a large number when
  // there is no limit).
  int64_t n_free() const;

  // A page with reference count 1, its rows zero. Throws Error(out_of_range)
  // naming the pool's size when max_pages are all in use, std::bad_alloc
  // when the memory cannot be had.
  quant::ggml_fp16_t* take();
  // Adds one reference to page p (a page of this pool in use).
  void share(quant::ggml_fp16_t* p);
  // Drops one reference; at zero the page goes back to the free list.
  void give_back(quant::ggml_fp16_t* p);
  int32_t refs(const quant::ggml_fp16_t* p) const;

 private:
  int64_t n_layer_, n_embd_k_, n_embd_v_, max_pages_;
  KvTypes types_;
  int64_t k_row_words_, v_row_words_;
  mutable std::mutex mu_;
  std::unordered_map<const quant::ggml_fp16_t*, int32_t> refs_;  // every page allocated: its references
  std::vector<quant::ggml_fp16_t*> free_;                        // allocated pages with no reference
  int64_t n_used_ = 0;
};

class KvCache {
 public:
  // A sequence with a pool of its own (no page limit; n_ctx bounds it).
  // n_ctx: the most positions this sequence may reach. window: 0 for full
  // attention, else the sliding window in positions. Throws
  // Error(invalid_argument) for n_ctx < 1, or as KvPool's constructor.
  KvCache(int64_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int64_t n_ctx, int64_t window, KvTypes types = {});
  // A sequence drawing its pages from `pool` (shared with other sequences).
  KvCache(std::shared_ptr<KvPool> pool, int64_t n_ctx, int64_t window);
  ~KvCache();
  KvCache(KvCache&& o) noexcept;
  KvCache& operator=(KvCache&& o) noexcept;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t n_ctx() const { return n_ctx_; }
  // Positions of the past it keeps at least: n_ctx, or the window when it is
  // smaller (older pages go back to the pool).
  int64_t capacity() const { return capacity_; }
  int64_t window() const { return window_; }
  int64_t n_past() const { return n_past_; }  // positions 0 .. n_past-1 are cached
  // Sets n_past to n >= n_past() (positions written through k()/v() by the
  // caller, after reserve) and gives back the pages a sliding window no
  // longer reads; going back is truncate's.
  void set_n_past(int64_t n);
  void clear();  // n_past 0, every page given back, the recurrent state zeroed

  // A sequence holding positions [0, n_prefix) of this one, in the same pool:
  // full pages shared, a partial last page copied, the recurrent state
  // copied (from the snapshot at n_prefix when n_prefix < n_past()), the
  // snapshots at or before n_prefix shared. Throws Error(invalid_argument)
  // if n_prefix > n_past(), if a sliding window has given back a page the
  // copy would need to read (no snapshot keeps it), or if the sequence has a
  // recurrent state and n_prefix is neither n_past(), 0 nor a snapshot's
  // position (RecurrentState::check_keep: such a state cannot be cut back);
  // Error(out_of_range) when the pool has no page for the copy.
  KvCache fork(int64_t n_prefix) const;
  // Keeps positions [0, n_keep) (the next row is position n_keep); pages
  // past them go back to the pool, and so do snapshots past n_keep. A
  // recurrent state is restored from the snapshot at n_keep. Throws
  // Error(invalid_argument) as fork().
  void truncate(int64_t n_keep);

  // Whether this cache has state that cannot be cut back to any position
  // (a recurrent state, or a sliding window shorter than n_ctx), so that it
  // keeps snapshots; false: truncate and fork accept any prefix, and the
  // snapshot calls below do nothing.
  bool keeps_snapshots() const { return !recurrent_.empty() || (window_ > 0 && window_ < n_ctx_); }
  // The largest n <= n_most that truncate(n) and fork(n) accept: n_most
  // itself when possible, else the latest snapshot at or before it, else 0.
  // n_most is clamped to [0, n_past()].
  int64_t rewind_point(int64_t n_most) const;
  // Asks for a snapshot when the sequence reaches `pos` positions (one
  // request at a time: a later call replaces it; pos <= n_past() takes one
  // now if pos == n_past(), else nothing). No-op unless keeps_snapshots().
  void request_snapshot(int64_t pos);
  // The next position > n_past() at which a forward pass takes a snapshot
  // (the requested one or the next multiple of kSnapshotInterval); the
  // largest int64_t when this cache keeps none.
  int64_t next_snapshot() const;
  // Takes the snapshot due at n_past() (forward_batch calls it after a pass
  // that ends there; nothing when none is due or one is already there).
  void take_due_snapshot();
  // Forgets every snapshot (their pages go back to the pool when no position
  // to come reads them); true when there was one.
  bool drop_snapshots();
  // The snapshot positions, ascending.
  std::vector<int64_t> snapshot_positions() const;
  // Bytes of the recurrent-state copies the snapshots hold (a copy shared
  // with a fork counts in each holder); their pinned pages are in n_pages().
  size_t snapshot_bytes() const;

  // Pages the pool must provide for positions [n_past, n_past + n_new) to be
  // writable (missing pages, and shared pages to copy).
  int64_t pages_needed(int64_t n_new) const;
  // Makes positions [n_past, n_past + n_new) writable: takes missing pages,
  // copies shared ones. Throws Error(out_of_range) when the pool has fewer
  // than pages_needed(n_new) pages free, before taking any.
  void reserve(int64_t n_new);

  // Row of a reserved (or cached) position, KvPool::k_row_words (v_row_words)
  // words of the pool's type_k (type_v); precondition: its page is held.
  quant::ggml_fp16_t* k(int64_t layer, int64_t pos) { return row(pos) + pool_->k_offset(layer) + (pos & (kPageSize - 1)) * pool_->k_row_words(); }
  quant::ggml_fp16_t* v(int64_t layer, int64_t pos) { return row(pos) + pool_->v_offset(layer) + (pos & (kPageSize - 1)) * pool_->v_row_words(); }
  const quant::ggml_fp16_t* k(int64_t layer, int64_t pos) const {
    return const_cast<KvCache*>(this)->k(layer, pos);
  }
  const quant::ggml_fp16_t* v(int64_t layer, int64_t pos) const {
    return const_cast<KvCache*>(this)->v(layer, pos);
  }
  // The page table: entry i is page i's start, or null (not taken yet, or
  // given back by a sliding window).
  const quant::ggml_fp16_t* const* pages() const { return pages_.data(); }
  const KvPool& pool() const { return *pool_; }
  const std::shared_ptr<KvPool>& shared_pool() const { return pool_; }

  int64_t n_pages() const;  // pages held
  // Bytes of the pages held (a shared page counts in each holder).
  size_t bytes() const { return static_cast<size_t>(n_pages()) * pool_->page_bytes(); }

  // The sequence's recurrent state beside its K/V rows (hybrid models, e.g.
  // Qwen3.5's DeltaNet layers; empty otherwise): cleared, forked and
  // truncated with the cache, under RecurrentState's rules.
  RecurrentState& recurrent() { return recurrent_; }
  const RecurrentState& recurrent() const { return recurrent_; }

 private:
  quant::ggml_fp16_t* row(int64_t pos) { return pages_[static_cast<size_t>(pos >> kPageShift)]; }
  // Error(invalid_argument) unless positions [0, n_prefix) can be kept.
  void check_prefix(const char* what, int64_t n_prefix) const;
  // Whether check_prefix(_, n_prefix) would pass, without building its error.
  bool can_keep(int64_t n_prefix) const;
  // The first page a row at position n_prefix reads (its sliding window) that
  // has gone back to the pool, or -1 when every one is held (0 < n_prefix < n_past_).
  int64_t first_missing_window_page(int64_t n_prefix) const;
  void drop_pages_from(int64_t first_page);  // gives back pages [first_page, ...)
  // Gives back pages no future row reads and no snapshot keeps.
  void release_window();
  bool has_snapshot(int64_t pos) const;
  void add_snapshot(bool periodic);  // at n_past_
  struct Snapshot {
    int64_t pos = 0;
    bool periodic = false;  // taken at a multiple of kSnapshotInterval, not requested
    std::shared_ptr<const RecurrentState> state;  // null for a cache without one; shared with forks
  };
  std::shared_ptr<KvPool> pool_;
  int64_t n_ctx_ = 0, window_ = 0, capacity_ = 0;
  int64_t n_past_ = 0;
  std::vector<quant::ggml_fp16_t*> pages_;  // ceil(n_ctx / kPageSize) entries
  RecurrentState recurrent_;
  std::vector<Snapshot> snapshots_;  // ascending pos, all <= n_past_
  int64_t requested_ = -1;           // request_snapshot's position, -1: none
};

}  // namespace synapse::model
