// Weight quantizers of the 256-element formats against llama-quantize.
//
// tests/data/models/tiny-llama-<type>.gguf were made by llama-quantize
// (llama.cpp c392e509) --pure from tiny-llama-f32.gguf, without an importance
// matrix. Each 2-D F32 tensor is quantized here with synapse's quantizer and
// compared with the file's tensor: the fraction of byte-identical blocks is
// printed, and the RMS error of synapse's dequantized weights must be at most
// 1.02x that of llama-quantize's (both against the F32 master).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "quant/quant.hpp"
#include "synapse/gguf.hpp"
#include "synapse/types.hpp"

namespace synapse::quant {
namespace {

const std::string kModels = std::string(SYNAPSE_TEST_DATA) + "/models/";

struct TypeReport {
  int64_t blocks = 0;
  int64_t identical = 0;
  double worst_ratio = 0;
};

// Compares every tensor of `quantized` stored as `t` with synapse's
// quantization of the same tensor of `master` (F32); returns the totals.
TypeReport compare_tensors(GgmlType t, const std::string& master, const std::string& quantized, int& n_tensors) {
  const gguf::File f32 = gguf::File::open(kModels + master);
  const gguf::File ref = gguf::File::open(kModels + quantized);
  const TypeTraits& tt = type_traits(t);
  TypeReport rep;
  for (const gguf::TensorInfo& ti : ref.tensors()) {
    if (ti.type != t) continue;
    const gguf::TensorInfo* src = f32.find_tensor(ti.name);
    if (src == nullptr || src->type != GgmlType::F32) {
      ADD_FAILURE() << ti.name << " missing from tiny-llama-f32.gguf";
      continue;
    }
    ++n_tensors;
    const int64_t n_per_row = ti.ne[0];
    const int64_t n_rows = ti.n_elements() / n_per_row;
    const size_t rs = row_size(t, n_per_row);
    EXPECT_EQ(ti.n_bytes, rs * static_cast<size_t>(n_rows)) << ti.name;
    const auto* x = reinterpret_cast<const float*>(src->data);
    std::vector<uint8_t> mine(rs);
    std::vector<float> deq_mine(n_per_row), deq_ref(n_per_row);
    double err_mine = 0, err_ref = 0;
    int64_t same = 0, blocks = 0;
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* xr = x + r * n_per_row;
      const uint8_t* theirs = ti.data + r * rs;
      quantize_row(t, xr, mine.data(), n_per_row);
      for (int64_t b = 0; b < n_per_row / tt.block_size; ++b) {
        ++blocks;
        same += std::memcmp(mine.data() + b * tt.type_size, theirs + b * tt.type_size, tt.type_size) == 0;
      }
      dequantize_row(t, mine.data(), deq_mine.data(), n_per_row);
      dequantize_row(t, theirs, deq_ref.data(), n_per_row);
      for (int64_t j = 0; j < n_per_row; ++j) {
        err_mine += std::pow(static_cast<double>(deq_mine[j]) - xr[j], 2);
        err_ref += std::pow(static_cast<double>(deq_ref[j]) - xr[j], 2);
      }
    }
    const double ratio = err_ref > 0 ? std::sqrt(err_mine / err_ref) : (err_mine > 0 ? INFINITY : 1.0);
    std::printf("[ %-7s ] %-24s identical blocks %6lld / %6lld (%.4f)  rms ratio %.6f\n",
                std::string(tt.name).c_str(), ti.name.c_str(), static_cast<long long>(same),
                static_cast<long long>(blocks), static_cast<double>(same) / blocks, ratio);
    EXPECT_LE(ratio, 1.02) << ti.name;
    rep.blocks += blocks;
    rep.identical += same;
    rep.worst_ratio = std::max(rep.worst_ratio, ratio);
  }
  return rep;
}

// tiny-llama-<suffix>.gguf (llama-quantize --pure) against tiny-llama-f32.gguf.
TypeReport compare_with_llama_quantize(GgmlType t, const std::string& suffix) {
  int n_tensors = 0;
  const TypeReport rep = compare_tensors(t, "tiny-llama-f32.gguf", "tiny-llama-" + suffix + ".gguf", n_tensors);
  const TypeTraits& tt = type_traits(t);
  EXPECT_EQ(n_tensors, 16) << "tiny-llama has 16 2-D weights: 7 per layer x 2 layers, token_embd, output";
  std::printf("[ %-7s ] all tensors: identical blocks %.6f, worst rms ratio %.6f\n",
              std::string(tt.name).c_str(), rep.blocks ? static_cast<double>(rep.identical) / rep.blocks : 0.0,
              rep.worst_ratio);
  return rep;
}

TEST(KQuantModel, Q2_KMatchesLlamaQuantize) { compare_with_llama_quantize(GgmlType::Q2_K, "q2_k"); }
TEST(KQuantModel, Q3_KMatchesLlamaQuantize) { compare_with_llama_quantize(GgmlType::Q3_K, "q3_k"); }
TEST(KQuantModel, Q4_KMatchesLlamaQuantize) { compare_with_llama_quantize(GgmlType::Q4_K, "q4_k"); }
TEST(KQuantModel, Q5_KMatchesLlamaQuantize) { compare_with_llama_quantize(GgmlType::Q5_K, "q5_k"); }
TEST(KQuantModel, Q6_KMatchesLlamaQuantize) { compare_with_llama_quantize(GgmlType::Q6_K, "q6_k"); }
TEST(KQuantModel, IQ4_XSMatchesLlamaQuantize) { compare_with_llama_quantize(GgmlType::IQ4_XS, "iq4_xs"); }
// The Q4_K_M mixes (Q4_K, Q5_K, Q6_K tensors, 3-D merged experts included)
// of the other test models.
TEST(KQuantModel, Q4_K_MMixesMatchLlamaQuantize) {
  const struct {
    const char* master;
    const char* quantized;
  } models[] = {{"tiny-llama-f32.gguf", "tiny-llama-q4_k_m.gguf"},
                {"tiny-llama3-f32.gguf", "tiny-llama3-q4_k_m.gguf"},
                {"tiny-qwen2-f32.gguf", "tiny-qwen2-q4_k_m.gguf"},
                {"tiny-phi3-f32.gguf", "tiny-phi3-q4_k_m.gguf"},
                {"tiny-mixtral-f32.gguf", "tiny-mixtral-q4_k_m.gguf"}};
  for (const auto& m : models) {
    int n_tensors = 0;
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
      const TypeReport rep = compare_tensors(t, m.master, m.quantized, n_tensors);
      if (rep.blocks > 0)
        std::printf("[ %-7s ] %s: identical blocks %.6f, worst rms ratio %.6f\n",
                    std::string(type_name(t)).c_str(), m.quantized,
                    static_cast<double>(rep.identical) / rep.blocks, rep.worst_ratio);
    }
    EXPECT_GT(n_tensors, 4) << m.quantized;
  }
}

TEST(TernaryModel, TQ1_0MatchesLlamaQuantize) { compare_with_llama_quantize(GgmlType::TQ1_0, "tq1_0"); }
TEST(TernaryModel, TQ2_0MatchesLlamaQuantize) { compare_with_llama_quantize(GgmlType::TQ2_0, "tq2_0"); }

}  // namespace
}  // namespace synapse::quant
