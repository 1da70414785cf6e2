// What the typed-cache attention kernels of both widths share
// (attention_typed_avx2.cpp, attention_typed_avx512.cpp): the cache formats
// they read, where a position's slice starts, which positions of a tile or
// block the rows read, and the per-format dispatch. Include only from
// instruction-set translation units.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/attention.hpp"
#include "quant/formats.hpp"

namespace synapse::kernels {
// Internal linkage (an anonymous namespace, as attention_f16.hpp): each
// instruction-set file gets its own copy (scripts/check-isa-objects.sh).
namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max64(int64_t a, int64_t b) { return a < b ? b : a; }

// The cache formats these kernels read (K: the first four; V: all).
enum class Fmt { q8_0, q4_0, q5_0, iq4_nl, f16, bf16 };

template <Fmt F>
using FmtTag = std::integral_constant<Fmt, F>;

// Calls fn(FmtTag<F>{}) with t's format and returns true, or returns false
// for a type these kernels do not read.
template <class Fn>
bool with_fmt(GgmlType t, Fn&& fn) {
  switch (t) {
    case GgmlType::Q8_0:
      fn(FmtTag<Fmt::q8_0>{});
      return true;
    case GgmlType::Q4_0:
      fn(FmtTag<Fmt::q4_0>{});
      return true;
    case GgmlType::Q5_0:
      fn(FmtTag<Fmt::q5_0>{});
      return true;
    case GgmlType::IQ4_NL:
      fn(FmtTag<Fmt::iq4_nl>{});
      return true;
    case GgmlType::F16:
      fn(FmtTag<Fmt::f16>{});
      return true;
    case GgmlType::BF16:
      fn(FmtTag<Fmt::bf16>{});
      return true;
    default:
      return false;
  }
}

constexpr bool block_fmt(Fmt f) { return f != Fmt::f16 && f != Fmt::bf16; }

// Bytes of a block of 32 values (F16 / BF16: 32 values too).
constexpr int64_t block_bytes(Fmt f) {
  return f == Fmt::q8_0     ? int64_t{sizeof(quant::block_q8_0)}
         : f == Fmt::q4_0   ? int64_t{sizeof(quant::block_q4_0)}
         : f == Fmt::q5_0   ? int64_t{sizeof(quant::block_q5_0)}
         : f == Fmt::iq4_nl ? int64_t{sizeof(quant::block_iq4_nl)}
                            : int64_t{64};
}

// Bytes of one group's slice of a row of format F (n values).
template <Fmt F>
constexpr int64_t slice_bytes(int64_t n) {
  return block_fmt(F) ? n / 32 * block_bytes(F) : 2 * n;
}

// Where position p's slice of the group starts (KvLayerView's pages; the
// group's first byte group_bytes into the row).
inline const uint8_t* slice_at(const KvLayerView& kv, int64_t offset, int64_t stride, int64_t p, int64_t group_bytes) {
  return reinterpret_cast<const uint8_t*>(kv.pages[p >> kv.page_shift] + offset +
                                          (p & ((int64_t{1} << kv.page_shift) - 1)) * stride) +
         group_bytes;
}

inline int32_t load_i32(const uint8_t* p) {
  int32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// The positions of [j0, j1) that some row reads: [lo, hi] (lo > hi: none).
// The kernels read only those (a page holding none may be absent).
struct ReadRange {
  int64_t lo, hi;
};
inline ReadRange read_range(const QueryRow* rows, int64_t n_rows, int64_t j0, int64_t j1) {
  ReadRange rr{j1, j0 - 1};
  for (int64_t r = 0; r < n_rows; ++r) {
    if (rows[r].first >= j1 || rows[r].last < j0) continue;
    rr.lo = min64(rr.lo, max64(rows[r].first, j0));
    rr.hi = max64(rr.hi, min64(rows[r].last, j1 - 1));
  }
  return rr;
}

// Row r's positions [a0, b0] cut at its chunk ends (kAttendChunk from
// rows[r].first): fn(a, b, end) for each piece in order, end when the piece
// closes its chunk (or the row).
template <class Fn>
void for_chunk_pieces(const QueryRow& row, int64_t a0, int64_t b0, Fn&& fn) {
  for (int64_t a = a0; a <= b0;) {
    const int64_t chunk_end = row.first + ((a - row.first) / kAttendChunk + 1) * kAttendChunk - 1;
    const int64_t b = min64(b0, chunk_end);
    fn(a, b, b == chunk_end || b == row.last);
    a = b + 1;
  }
}

// The score tiles of L keys (L = a register's lanes) over the rows' span,
// for a K of format F (hd = nb blocks): for each tile [j, j + L) that some
// row reads, kp[l] = the slice of position j + l clamped to the positions
// read (the other lanes computed, never stored; in one page, the usual
// case as rows and chunks start at multiples of 16 and pages hold 64, by
// stride), load(kp) builds the tile's K registers once, then for every
// row reading it and its query vectors in groups of up to max_group,
// dots(n, v, sc, from, count): query vectors v[0 .. n) (the group's last
// repeated to 4), their scores to store at sc + v[h] * ld from lane from,
// count lanes.
template <int L, class Load, class Dots>
void score_tiles(const KvLayerView& kv, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t group_bytes,
                 int64_t max_group, float* scores, Load&& load, Dots&& dots) {
  const RowSpan span = row_span(rows, n_rows);
  alignas(64) const uint8_t* kp[L];
  for (int64_t j = span.lo; j <= span.hi; j += L) {
    const ReadRange rr = read_range(rows, n_rows, j, j + L);
    if (rr.lo > rr.hi) continue;
    if (rr.lo == j && rr.hi == j + L - 1 && (j >> kv.page_shift) == ((j + L - 1) >> kv.page_shift)) {
      const uint8_t* k0 = slice_at(kv, kv.k_offset, kv.k_stride, j, group_bytes);
      for (int l = 0; l < L; ++l) kp[l] = k0 + l * 2 * kv.k_stride;
    } else {
      for (int l = 0; l < L; ++l)
        kp[l] = slice_at(kv, kv.k_offset, kv.k_stride, min64(max64(j + l, rr.lo), rr.hi), group_bytes);
    }
    load(static_cast<const uint8_t* const*>(kp));
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = max64(rows[r].first, j), e = min64(rows[r].last, j + L - 1);
      if (a > e) continue;
      const int64_t v0 = r * n_gqa;
      for (int64_t i = 0; i < n_gqa; i += max_group) {
        const int64_t v[4] = {v0 + i, v0 + min64(i + 1, n_gqa - 1), v0 + min64(i + 2, n_gqa - 1),
                              v0 + min64(i + 3, n_gqa - 1)};
        dots(min64(max_group, n_gqa - i), v, scores + (a - rows[r].first), a - j, e - a + 1);
      }
    }
  }
}

// The weighted V of every row over its positions in [j0, j1), cut at its
// chunk ends: weighted(group, p, o, a, b) for each group of up to 4 heads
// (p: their probabilities from position a, o: their accumulators in vacc,
// [n_q][hd_v]), then at a chunk's end flush(acc, out, add) per head (the
// chunk's sums into the output, or added to it after the first chunk).
template <class Weighted, class Flush>
void value_rows(const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd_v, int64_t j0, int64_t j1,
                const float* probs, int64_t ld, float* vacc, Weighted&& weighted, Flush&& flush) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t first = rows[r].first;
    for_chunk_pieces(rows[r], max64(j0, first), min64(j1 - 1, rows[r].last), [&](int64_t a, int64_t b, bool end) {
      const float* p[4];
      float* o[4];
      int64_t i = 0;
      for (; i + 4 <= n_gqa; i += 4) {
        for (int h = 0; h < 4; ++h) {
          p[h] = probs + (r * n_gqa + i + h) * ld + (a - first);
          o[h] = vacc + (r * n_gqa + i + h) * hd_v;
        }
        weighted(std::integral_constant<int, 4>{}, p, o, a, b);
      }
      for (; i < n_gqa; ++i) {
        p[0] = probs + (r * n_gqa + i) * ld + (a - first);
        o[0] = vacc + (r * n_gqa + i) * hd_v;
        weighted(std::integral_constant<int, 1>{}, p, o, a, b);
      }
      if (end)
        for (int64_t h = 0; h < n_gqa; ++h)
          flush(vacc + (r * n_gqa + h) * hd_v, rows[r].out + h * hd_v, a - first >= kAttendChunk);
    });
  }
}

// The table entries' bodies (attend_scores_typed_<isa>,
// attend_values_typed_<isa>): K of a block format with hd a multiple of
// 32 up to kTypedMaxHead runs K::template scores<F>(..., queries) on the
// queries converted for it; V of any format here with hd_v a multiple of
// 32 (of v_fp_step for F16 / BF16) runs K::template values<F>; anything
// else the generic pieces (attend_scores_typed, attend_values_typed).
template <class K>
void scores_entry(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd,
                  float kq_scale, int64_t bk, float* scores, int64_t ld, AttentionScratch& s) {
  const GgmlType t = kv.k_type;
  const bool block_k = t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q5_0 || t == GgmlType::IQ4_NL;
  if (!block_k || hd % 32 != 0 || hd > kTypedMaxHead) {
    attend_scores_typed(kv, g, rows, n_rows, n_gqa, hd, kq_scale, bk, scores, ld, s);
    return;
  }
  if (n_rows <= 0) return;
  const TypedQueries tq = typed_queries(t, rows, n_rows, n_gqa, hd, true, s);
  with_fmt(t, [&](auto f) {
    constexpr Fmt F = decltype(f)::value;
    if constexpr (block_fmt(F)) K::template scores<F>(kv, g, rows, n_rows, n_gqa, hd, kq_scale, scores, ld, tq);
  });
}

template <class K>
void values_entry(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd_v,
                  int64_t bk, const float* p, int64_t ld, AttentionScratch& s) {
  const bool fp = kv.v_type == GgmlType::F16 || kv.v_type == GgmlType::BF16;
  const bool simd = hd_v % (fp ? K::v_fp_step : 32) == 0 && with_fmt(kv.v_type, [&](auto f) {
                      if (n_rows > 0)
                        K::template values<decltype(f)::value>(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s);
                    });
  if (!simd) attend_values_typed(kv, g, rows, n_rows, n_gqa, hd_v, bk, p, ld, s);
}

}  // namespace
}  // namespace synapse::kernels
