// synapse/synth.hpp: write_synthetic_model writes a file Model::load accepts
// at the requested shape, the same bytes for any thread count, and rejects
// bad parameters with Error(invalid_argument). Also the accessors synapse
// bench uses: kv_bytes_per_position, Sequence::capacity, system_info.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "synapse/synapse.hpp"
#include "synapse/synth.hpp"

namespace synapse {
namespace {

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("synapse_synth_api_" + name)).string();
}

std::string bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

TEST(SynthApi, WritesALoadableModelOfTheRequestedShape) {
  const std::string p1 = tmp("t1.gguf"), p2 = tmp("t2.gguf");
  SynthParams params{.preset = "smollm2-135m", .type = "Q8_0", .seed = 7, .n_layer = 2, .n_vocab = 512,
                     .n_threads = 1};
  const SynthStats s = write_synthetic_model(p1, params);
  params.n_threads = 2;
  write_synthetic_model(p2, params);
  EXPECT_EQ(bytes(p1), bytes(p2));  // values depend on the seed, not the threads
  EXPECT_EQ(s.file_bytes, std::filesystem::file_size(p1));
  const Model m = Model::load(p1);
  EXPECT_EQ(m.architecture(), "llama");
  EXPECT_EQ(m.n_layer(), 2);
  EXPECT_EQ(m.n_vocab(), 512);
  EXPECT_EQ(m.n_embd(), 576);  // SmolLM2-135M's hidden size
  EXPECT_EQ(m.n_params(), s.n_params);
  EXPECT_EQ(m.weight_bytes(), s.tensor_bytes);
  // F16 K and V rows of 3 KV heads x 64 per layer: 2 x (192 + 192) x 2 bytes.
  EXPECT_EQ(m.kv_bytes_per_position(), 1536u);
  Context ctx(m, 1);
  Sequence seq = ctx.new_sequence(64);
  EXPECT_EQ(seq.capacity(), 64);  // no sliding window: every position is stored
  const token_id ids[2] = {1, 300};
  EXPECT_EQ(ctx.decode(seq, ids).size(), 512u);
  std::filesystem::remove(p1);
  std::filesystem::remove(p2);
}

// n_expert shrinks an MoE preset's expert count (the 3-D expert tensors and
// the router with it), for files small enough to test llama.cpp on.
TEST(SynthApi, ExpertCountOverride) {
  const std::string p = tmp("experts.gguf");
  const SynthStats s = write_synthetic_model(
      p, {.preset = "qwen3-30b-a3b", .type = "Q4_0", .n_layer = 1, .n_vocab = 512, .n_expert = 8, .n_threads = 2});
  const Model m = Model::load(p);
  // Qwen3-30B-A3B's layer at 8 experts: attention 2048 x (4096 + 512 + 512)
  // and 4096 x 2048, q/k norms 2 x 128, two norms 2 x 2048, the router
  // 2048 x 8, the experts 8 x 3 x 2048 x 768; the embedding and output
  // 2 x 512 x 2048 and the output norm 2048.
  EXPECT_EQ(m.n_params(), 2048u * 5120u + 4096u * 2048u + 256u + 4096u + 2048u * 8u + 8u * 3u * 2048u * 768u +
                              2u * 512u * 2048u + 2048u);
  EXPECT_EQ(m.n_params(), s.n_params);
  std::filesystem::remove(p);
}

TEST(SynthApi, RejectsBadParameters) {
  const std::string p = tmp("bad.gguf");
  EXPECT_THROW(write_synthetic_model(p, {.preset = "gpt-5"}), Error);
  EXPECT_THROW(write_synthetic_model(p, {.preset = "smollm2-135m", .type = "Q3_XYZ", .n_layer = 1}), Error);
  EXPECT_THROW(write_synthetic_model(p, {.preset = "smollm2-135m", .n_layer = -1}), Error);
  // n_expert: only on an MoE preset, positive, and at least its experts used (8).
  EXPECT_THROW(write_synthetic_model(p, {.preset = "smollm2-135m", .n_layer = 1, .n_expert = 8}), Error);
  EXPECT_THROW(write_synthetic_model(p, {.preset = "qwen3-30b-a3b", .n_layer = 1, .n_expert = -1}), Error);
  EXPECT_THROW(write_synthetic_model(p, {.preset = "qwen3-30b-a3b", .n_layer = 1, .n_expert = 4}), Error);
  EXPECT_FALSE(std::filesystem::exists(p));
  EXPECT_EQ(synth_preset_names().front(), "smollm2-135m");
}

TEST(SystemInfo, NamesTheKernelTable) {
  const std::string isa = kernel_isa();
  EXPECT_FALSE(isa.empty());
  EXPECT_EQ(system_info(), "kernels " + isa);
}

}  // namespace
}  // namespace synapse
