// Decode/prefill attention over a sequence's F16 KV cache, one KV group at a
// time: K and V rows are read (and converted from F16) once for all the query
// heads that share them (grouped-query attention, Ainslie et al. 2023), as
// seed 003 §2.5 describes kernels::attend_group. attend_block does the same
// for a block of query positions at once (prefill), with the same operations
// per output element, so both give the same bits.
//
// Rounding follows llama.cpp's CPU path with flash attention off (seed 003
// §8): q is rounded to F16 before q.k, the softmax probabilities are rounded
// to F16 before they weight V. The reduction orders are defined here (the
// scalar reference) and reproduced bit for bit by the AVX2 and AVX-512
// versions (issue 41: llama.cpp's formulas and roundings, our own fixed
// summation orders):
//   q.k: dot_kq (ggml_mul_mat(K, q): tinyBLAS<16> for hd % 16 == 0, else
//        ggml_vec_dot_f16).
//   Chunks: a row's range [first, last] is cut into chunks of kAttendChunk
//        positions from first (chunk c = [first + c C, first + (c+1) C - 1]
//        within the range). The softmax's max is the row's (exact in any
//        order); e_j = expf(s_j - max) per position; the denominator is the
//        chunks' sums added in ascending chunk order (in double, from 0),
//        each chunk's sum being llama.cpp's order over its positions
//        (ggml_vec_soft_max_f32: groups of 16 from the chunk's start, each
//        group's hsum_float_16 added to a double from 0), then the sink's
//        expf; p_j = f16(e_j * (float)(1 / sum)).
//   V:   per chunk, out[d]'s lane l = (j - first) % 16 takes fma(p_j,
//        V[j][d], lane) for the chunk's positions j in increasing order (the
//        lanes start at 0 in each chunk), the 16 lanes are summed by
//        quant::hsum_float_16, and the chunks' vectors are added in
//        ascending chunk order (out = ((P_0 + P_1) + P_2) + ...).
// Why chunks: every sum of a row is then a fixed function of the row's own
// range, yet the chunks of one row can run on different threads and be
// combined afterwards in chunk order (flash decoding, Dao et al. 2023), so a
// decode step at depth uses every thread with the same bits as prefill at
// any thread count (contract G1; attend_chunk_scores below). A range of at
// most kAttendChunk positions is one chunk: exactly llama.cpp v0.5.0
// AVX-512's order (tinyBLAS<16> along the positions for V, n_kv a multiple
// of 256), so short contexts keep the golden files' bits; beyond it only
// the summation order differs (issue 41 keeps llama.cpp's formulas and
// roundings, not its summation order). Why 1024: a multiple of 16 (lanes
// and softmax groups stay aligned) and of 256 (ggml's KV padding), long
// enough that a chunk item's fixed costs (q's rounding, its scratch, a
// partial vector) stay small beside its K and V rows, short enough that a
// 16k-32k context gives 16-32 items per KV group for the threads.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/fp16.hpp"
#include "synapse/types.hpp"

namespace synapse::kernels {

struct OpsTable;

// The chunk length of every attention row's reductions (the top of this
// file): a multiple of 16 (the softmax's groups and V's lanes), fixed for
// contract G1, never a function of threads or batch.
constexpr int64_t kAttendChunk = 1024;

// One layer of one sequence's cache, in pages of 2^page_shift positions
// (model::KvCache): position p's K row starts at
//   pages[p >> page_shift] + k_offset + (p & (2^page_shift - 1)) * k_stride
// (in 16-bit words: F16 values, or two bytes of a k_type row), its V row the
// same with v_offset and v_stride. A page that holds no position a call
// reads may be null. sinks: the layer's attention sinks (gpt-oss:
// blk.N.attn_sinks.weight, one logit per query head, [n_head] floats; head
// h of KV group g is g * n_gqa + i), each an extra softmax column that
// weights no value (softmax_pad16's sink); null for none. k_type, v_type:
// the rows' types (model::KvTypes); anything but F16 for both runs
// attend_block_typed.
struct KvLayerView {
  const quant::ggml_fp16_t* const* pages;
  int64_t k_offset;
  int64_t v_offset;
  int64_t k_stride;
  int64_t v_stride;
  int page_shift;
  const float* sinks = nullptr;
  GgmlType k_type = GgmlType::F16;
  GgmlType v_type = GgmlType::F16;
};

struct AttentionScratch {
  std::vector<float> q, kv_row, scores, kv_block;
  std::vector<int64_t> n_kv;
  std::vector<float> vacc;  // [query vector][16 lanes][hd_v] partial sums of the weighted V
  std::vector<uint8_t> q_typed;  // attend_block_typed: queries converted to K's vec_dot_type
  std::vector<float> q_scales;   // typed_queries: the Q8_0 queries' block scales as floats
  std::vector<int32_t> q_sums;   // typed_queries: their sums of 4 and of 32 bytes
};

// The q.k order (F16-rounded values as floats, n = hd): n % 16 == 0,
// llamafile's tinyBLAS<16> (lane d % 16 by fused multiply-add,
// quant::hsum_float_16); otherwise ggml_vec_dot_f16's AVX-512 order (4
// accumulators of 16 lanes over n & ~63, (a0+a2)+(a1+a3), hsum_float_16,
// then the tail's float products added in double). Both kernels call or
// reproduce it.
float dot_kq(const float* a, const float* b, int64_t n);

// out[d] = quant::hsum_float_16(acc[0*hd_v + d], ..., acc[15*hd_v + d]) for
// d < hd_v: the weighted V's 16 position lanes summed.
void reduce_v_lanes(const float* acc, int64_t hd_v, float* out);

// Attention for the n_gqa query heads of KV group g at one query position,
// one cached position at a time: the reference the blocked kernel below is
// tested against (the forward pass runs attend_block for decode steps too,
// where dotting 8 keys at a time avoids waiting on each dot's chain),
// over cached positions [first, last] (last = the query's own position, so
// the causal mask and a sliding window are both expressed by the range).
//   q:   [n_gqa][hd] floats, the group's heads (F32, rounded to F16 here)
//   out: [n_gqa][hd_v] floats
//   scores_j = (f16(q) . K[j]) * kq_scale; p = softmax(scores) (ggml_soft_max,
//   with the head's sink when kv.sinks is set, the denominator by chunks);
//   out = sum_j f16(p_j) V[j] (by chunks, the orders at the top).
// No bounds checks beyond the documented preconditions (hot path). Two
// implementations, tests only (the forward pass runs attend_block): the
// scalar reference and its AVX2 version (x86-64 only), tested equal bit for
// bit through the ops tables (kernels/ops_table.hpp).
void attend_group_scalar(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q,
                         int64_t n_gqa, int64_t hd, int64_t hd_v, float kq_scale, float* out,
                         AttentionScratch& scratch);
void attend_group_avx2(const KvLayerView& kv, int64_t g, int64_t first, int64_t last, const float* q, int64_t n_gqa,
                       int64_t hd, int64_t hd_v, float kq_scale, float* out, AttentionScratch& scratch);

// Raw views of an AttentionScratch's buffers, sized by size_scratch (a
// generic translation unit, attention.cpp): the instruction-set kernels
// (*_avx2.cpp) touch no std::vector, whose out-of-line template code would
// otherwise be compiled with their flags and could be the copy the linker
// keeps for generic code (docs/LAYERS.md, "Instruction-set translation
// units"). Each count is in elements; 0 leaves that buffer as it is.
struct ScratchPtrs {
  float* q;
  float* kv_row;
  float* scores;
  float* kv_block;
  int64_t* n_kv;
  float* vacc;
};
ScratchPtrs size_scratch(AttentionScratch& s, int64_t q, int64_t kv_row, int64_t scores, int64_t kv_block,
                         int64_t n_kv, int64_t vacc);

// One query position of a blocked attention call (attend_block): its KV
// group's query heads and output, and the cached positions it attends.
struct QueryRow {
  const float* q;        // [n_gqa][hd] floats (F32, rounded to F16 in the kernel)
  float* out;            // [n_gqa][hd_v] floats
  int64_t first, last;   // attends cached positions [first, last], first <= last
  // Positions [first, first + n_masked) are in the range but masked: their
  // scores become -inf before the softmax (probability 0), as llama.cpp's KQ
  // mask does. A sliding window starting at w is passed as first = w - w % 16,
  // n_masked = w % 16, so the softmax's groups and the weighted V's lanes
  // start at a multiple of 16 as ggml's do (its rows start at cache cell 0,
  // the window's earlier cells masked), which keeps the bits of llama.cpp's.
  // n_masked <= last - first; those positions must be in the cache too.
  int64_t n_masked = 0;
};

// Blocked (prefill) attention: the n_gqa query heads of KV group g at n_rows
// query positions, typically 16-64 consecutive positions of one sequence.
// The blocking is FlashAttention's (Dao et al. 2022) without its online
// softmax: K is streamed in blocks of bk positions over the union of the
// rows' ranges, each block converted from F16 once and dotted with every
// query of the block while it sits in L1; each query keeps its FULL score
// row, so the softmax is ggml_soft_max's over the whole row (kernels::softmax,
// the one attend_group uses); then V is streamed the same way.
// The result is bit for bit attend_group's for each row on its own range:
//   scores_j = dot_kq(f16(q), K[j]) * kq_scale;
//   p = f16(softmax(scores over [first, last])) (the chunked denominator);
//   out[d] = the chunked 16-lane weighted sum of V described at the top.
// Composed of the table's pieces (attend_block_with): attend_scores,
// mask_scores, softmax_f16_rows, attend_values.
// A row's range is its causal mask and sliding window. Every position in a
// range must be present in the cache (its page held, kernels::KvLayerView).
// Rows whose ranges barely overlap stay correct but gain nothing.
// No bounds checks beyond these preconditions (hot path).
void attend_block(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd,
                  int64_t hd_v, float kq_scale, AttentionScratch& scratch);

// attend_block over a cache whose K or V rows are not F16 (BF16, Q8_0,
// Q4_0, Q5_0, IQ4_NL; model::KvTypes), with the mathematics of llama.cpp
// v0.5.0's flash attention for those types
// (ggml_compute_forward_flash_attn_ext_f16_one_chunk):
//   scores_j = vec_dot_K(from_float_vt(q), K[j]) * kq_scale, where vt is
//     K's vec_dot_type (Q8_0 for the block types, BF16 for BF16, F16 for
//     F16) and vec_dot_K quant's kernel for K's type (ggml_vec_dot_<t>_q8_0);
//   p = softmax(scores over [first, last]) (softmax_pad16's arithmetic with
//     the chunked denominator of the top, with the sink), kept in F32
//     (ggml's F32 V path; no F16 rounding);
//   out[d] = sum_j p_j * float(V[j][d]) (ggml_vec_mad_f32 of each row
//     converted to float): per chunk (kAttendChunk) one float accumulator
//     per output from 0, acc = fma(p_j, float(V[j][d]), acc) for j
//     increasing (ggml_vec_mad_f32's fused multiply-add); the chunks' sums
//     added in ascending chunk order (the top's V combination).
// Each output's reductions are fixed by its own query and range alone (not
// by the other rows, bk or the thread), so results are the same in decode
// and prefill and at any batch or thread count (contract G1). Masking
// (QueryRow::n_masked) as attend_block. hd (hd_v) must be a multiple of
// k_type's (v_type's) block size (model::check_kv_type). bk: positions per
// V block converted to floats at once (several rows; one row converts
// its V rows as it reads them). The active table's pieces
// (attend_block_with; OpsTable::attend_scores_typed, attend_values_typed:
// SIMD for the block types, the generic pieces otherwise), every table
// bit for bit the scalar one.
void attend_block_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                        int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& scratch);

// The positions a block of n_rows >= 1 rows reads, [lo, hi] (the union of
// their ranges), and its longest range, ld (the score rows' stride).
struct RowSpan {
  int64_t lo, hi, ld;
};
RowSpan row_span(const QueryRow* rows, int64_t n_rows);

// Sets the scores of each row's masked positions (QueryRow::n_masked) to
// -inf: row r's query vector i is scores + (r * n_gqa + i) * ld, its element
// j position first + j. Every attend_block implementation runs it between
// the scores and the softmax.
void mask_scores(float* scores, int64_t ld, const QueryRow* rows, int64_t n_rows, int64_t n_gqa);

// The K/V block length attend_block uses for these head sizes: a multiple of
// 8 positions whose F32 K (or V) block is about 16 KiB, so it stays in L1
// (32 KiB on Zen 3) beside the query rows.
int64_t attend_block_bk(int64_t hd, int64_t hd_v);

// The two implementations behind attend_block (OpsTable::attend_block; the
// AVX2 one defined on x86-64 only), with the block length bk > 0 explicit
// (tests compare them with attend_group for several bk).
void attend_block_scalar(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                         int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& scratch);
void attend_block_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                       int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& scratch);
// The AVX-512 F/BW/DQ/VL one (x86-64 only; attention_avx512.cpp): the
// 16-lane orders in one zmm register, q.k as 4-head x 4-key register tiles
// (each K and q load serving 4 products, hsum_float_16's tree for 16 dots
// at once), the weighted V 4 heads x 64 outputs at a time. For hd (hd_v)
// not a multiple of 16 its scores (weighted V) are attend_scores_avx2's
// (attend_values_avx2's). Each of the three is attend_block_with over its
// table's pieces (below).
void attend_block_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                         int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& scratch);

// The attention probabilities of n_rows score rows, in place: row i (x + i*ld,
// n[i] >= 1 values) becomes f16(kernels::softmax_pad16(row, sink_i)), where
// sink_i = sinks[i % n_sinks] when sinks is not null (attention sinks; the
// kernels above pass their group's n_gqa sinks for rows ordered (query, head)), i.e.
// ggml_soft_max over the row padded with -inf to a multiple of 16 (max;
// ggml_v_expf(x - max) 16 at a time, each group's float horizontal sum
// (hsum_float_16) added to a double per chunk of kAttendChunk, the chunks'
// doubles added in order; one multiply by (float)(1/sum)) then rounded to
// F16: softmax_rows_with over the table's pieces. The AVX2 pieces are
// bit-equal to the scalar ones for all non-NaN scores: the max 8 lanes wide
// (max is exact in any order; +-0 ties do not change x - max's exp),
// expf_ggml_avx2 on each group as two halves (the last one zero-masked),
// scaling and rounding 8 wide.
void softmax_f16_rows_scalar(float* x, int64_t ld, const int64_t* n, int64_t n_rows, const float* sinks,
                             int64_t n_sinks);
void softmax_f16_rows_avx2(float* x, int64_t ld, const int64_t* n, int64_t n_rows, const float* sinks,
                           int64_t n_sinks);
// AVX-512: the reference's loop itself (16 lanes, the last group masked,
// ggml_v_expf's _mm512_scalef_ps form), F16 rounding 16 wide.
void softmax_f16_rows_avx512(float* x, int64_t ld, const int64_t* n, int64_t n_rows, const float* sinks,
                             int64_t n_sinks);

// The pieces every attention kernel is made of, one set per instruction-set
// table (OpsTable; *_scalar in attention.cpp, *_avx2, *_avx512), each bit
// for bit the scalar one:
//
// attend_scores: the scores of n_rows rows of KV group g (QueryRow's q, the
// ranges; out and n_masked unused): query vector (r, i) (row r, head i < n_gqa)
// at position j of [rows[r].first, rows[r].last] gets
//   scores[(r * n_gqa + i) * ld + (j - rows[r].first)] = dot_kq(f16(q), K[j]) * kq_scale,
// K read in blocks of bk positions over the rows' union. A score is a
// function of its query and position alone, whatever the rows' ranges.
void attend_scores_scalar(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                          int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld, AttentionScratch& s);
void attend_scores_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                        int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld, AttentionScratch& s);
void attend_scores_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                          int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld, AttentionScratch& s);
// attend_values: rows[r].out + i * hd_v (hd_v floats) = the chunked weighted
// V (the top) of query vector (r, i) with the probabilities p + (r * n_gqa +
// i) * ld (element j - rows[r].first for position j), V read in blocks of bk
// positions over the rows' union.
void attend_values_scalar(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                          int64_t hd_v, int64_t bk, const float* p, int64_t ld, AttentionScratch& s);
void attend_values_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                        int64_t hd_v, int64_t bk, const float* p, int64_t ld, AttentionScratch& s);
void attend_values_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                          int64_t hd_v, int64_t bk, const float* p, int64_t ld, AttentionScratch& s);
// The softmax's steps: row_max = max(x[0 .. n)), n >= 1 (exact in any
// order); exp_sum: x[j] = expf_ggml(x[j] - mx) for j < n, returning the
// groups of 16 from x[0] (the last one padded with zeros), each group's
// hsum_float_16 added to a double from 0 in order (n <= kAttendChunk: one
// chunk's sum; the scalar one is kernels::exp_sum_pad16); scale_round_f16:
// x[j] = f16(x[j] * inv).
float row_max_scalar(const float* x, int64_t n);
float row_max_avx2(const float* x, int64_t n);
float row_max_avx512(const float* x, int64_t n);
double exp_sum_avx2(float* x, int64_t n, float mx);
double exp_sum_avx512(float* x, int64_t n, float mx);
void scale_round_f16_scalar(float* x, int64_t n, float inv);
void scale_round_f16_avx2(float* x, int64_t n, float inv);
void scale_round_f16_avx512(float* x, int64_t n, float inv);

// The typed cache's pieces (attend_block_typed's scores and values), one
// per table (OpsTable::attend_scores_typed, attend_values_typed), each bit
// for bit the generic one: scores as attend_scores with
// vec_dot_K(from_float_vt(q), K[j]) * kq_scale; values as attend_values
// with F32 probabilities and one accumulator per output and chunk
// (o = fma(p_j, float(V[j][d]), o), attend_block_typed).
//   attend_scores_typed, attend_values_typed: generic code through quant's
//     active table (every type; the scalar table's entries).
//   _avx512 (attention_typed_avx512.cpp): K of Q8_0, Q4_0, Q5_0 and IQ4_NL
//     16 keys at a time, one key per lane of the results: exact integer
//     dots by vpdpbusd (K's values offset to unsigned bytes, the offset
//     times the query's sums taken off), then quant's float steps per
//     block in quant's order (legacy.cpp's Q4_0 order for all four:
//     acc = fma(float(isum), d_k * d_q, acc)). V of
//     those types and F16 / BF16 converted 16 values at a time, 4 heads x
//     64 outputs in registers. Other types, hd (hd_v) not a multiple of 32
//     (16 for F16 / BF16 V), or hd above kTypedMaxHead: the generic pieces.
//   _avx2 (attention_typed_avx2.cpp): the same types, 8 keys at a time
//     (vpmaddubsw with K's levels, or K's magnitudes against the query's
//     bytes signed by K as ggml's AVX2 dots), V 8 values at a time.
void attend_scores_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                         int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld, AttentionScratch& s);
void attend_values_typed(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                         int64_t hd_v, int64_t bk, const float* p, int64_t ld, AttentionScratch& s);
void attend_scores_typed_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                              int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld, AttentionScratch& s);
void attend_values_typed_avx2(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows, int64_t n_gqa,
                              int64_t hd_v, int64_t bk, const float* p, int64_t ld, AttentionScratch& s);
void attend_scores_typed_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows,
                                int64_t n_gqa, int64_t hd, float kq_scale, int64_t bk, float* scores, int64_t ld,
                                AttentionScratch& s);
void attend_values_typed_avx512(const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows,
                                int64_t n_gqa, int64_t hd_v, int64_t bk, const float* p, int64_t ld,
                                AttentionScratch& s);

// The largest head size the SIMD typed scores take (their per-tile blocks
// sit on the stack); larger ones run the generic piece.
constexpr int64_t kTypedMaxHead = 512;

// The queries of n_rows rows converted for a cache whose K is k_type, in
// s (generic code, so the instruction-set kernels touch no std::vector):
// query vector v = r * n_gqa + i (row r, head i) becomes the row of hd
// values of K's vec_dot_type that ggml's flash attention makes of it
// (q_to_vec_dot: quant's from_float of that type), at q + v * q_bytes.
// When that type is Q8_0 and with_sums, also block b's scale as a float,
// scales[v * nb + b] (nb = hd / 32), and its sums of signed bytes:
// sums[(v * nb + b) * 9 + w] for w < 8 the 4 bytes 4w .. 4w + 3, w = 8 all
// 32. Pointers stay valid until s is next resized.
struct TypedQueries {
  const uint8_t* q;
  int64_t q_bytes;
  const float* scales;
  const int32_t* sums;
};
TypedQueries typed_queries(GgmlType k_type, const QueryRow* rows, int64_t n_rows, int64_t n_gqa, int64_t hd,
                           bool with_sums, AttentionScratch& s);

// The softmax of n_rows score rows with table t's pieces: row i (x + i * ld,
// n[i] >= 1 values) becomes softmax_pad16's probabilities with the chunked
// denominator (the top), sink_i = sinks[i % n_sinks] when sinks is set,
// rounded to F16 when round_f16 (the F16 cache), else left in F32 (typed).
void softmax_rows_with(const OpsTable& t, float* x, int64_t ld, const int64_t* n, int64_t n_rows,
                       const float* sinks, int64_t n_sinks, bool round_f16);

// attend_block (bk explicit) made of table t's pieces: what every table's
// attend_block entry runs.
void attend_block_with(const OpsTable& t, const KvLayerView& kv, int64_t g, const QueryRow* rows, int64_t n_rows,
                       int64_t n_gqa, int64_t hd, int64_t hd_v, float kq_scale, int64_t bk, AttentionScratch& s);

// Decode at depth (flash decoding): one row's attention for KV group g split
// into its chunks (kAttendChunk positions from row.first), each chunk a work
// item any thread may take, in three phases with every item of a phase
// finished before the next begins, then a combination in chunk order. The
// result (row.out, [n_gqa][hd_v]) is bit for bit attend_block's for the row
// (either cache type, the sinks of kv), whatever thread runs which item:
//   1. attend_chunk_scores(c) for every chunk c: the chunk's scores into
//      scores ([n_gqa][n_kv], n_kv = row.last - row.first + 1; the masked
//      positions -inf) and their maxima into chunk_max[i * n_chunks + c];
//   2. attend_chunk_exp(c): e_j of the chunk (over the row's max) in place
//      and its sums into chunk_sum[i * n_chunks + c];
//   3. attend_chunk_values(c): the chunk's probabilities (the denominator
//      of all the chunk sums, in order) and its weighted V into
//      partial + (c * n_gqa + i) * hd_v;
//   4. attend_chunks_combine: row.out = the partials added in chunk order.
// n_chunks = attend_chunk_count(row). The caller owns the buffers (sized as
// above) and the phases' order; items of one phase touch disjoint parts of
// them, so any number of threads may run a phase at once. s: the calling
// thread's scratch. No bounds checks beyond these (hot path).
int64_t attend_chunk_count(const QueryRow& row);
void attend_chunk_scores(const KvLayerView& kv, int64_t g, const QueryRow& row, int64_t c, int64_t n_gqa, int64_t hd,
                         int64_t hd_v, float kq_scale, float* scores, float* chunk_max, AttentionScratch& s);
void attend_chunk_exp(const KvLayerView& kv, int64_t g, const QueryRow& row, int64_t c, int64_t n_gqa, float* scores,
                      const float* chunk_max, double* chunk_sum);
void attend_chunk_values(const KvLayerView& kv, int64_t g, const QueryRow& row, int64_t c, int64_t n_gqa, int64_t hd,
                         int64_t hd_v, float* scores, const float* chunk_max, const double* chunk_sum,
                         float* partial, AttentionScratch& s);
void attend_chunks_combine(const QueryRow& row, int64_t n_gqa, int64_t hd_v, const float* partial);

}  // namespace synapse::kernels
