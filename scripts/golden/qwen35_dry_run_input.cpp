// qwen35_dry_run_input: writes the F32 input of make_qwen35_dry_run.py, a
// width-shrunk 8-layer synthetic model of a Qwen3.5 preset (qwen3.5-4b or
// qwen3.5-35b-a3b; model/synth.hpp), whose llama-quantize --dry-run types
// are the reference of tests/runtime/quantize_model_test.cpp's
// Qwen35TypesMatchLlamaQuantizeDryRun. The shrink (n_embd 256, 4/1 heads of
// 64, DeltaNet 2 key heads and 4 value heads of 64, FFN 512, 8 experts of
// 256 and a shared expert of 256) is the test's qwen35_shape(); the data file
// lists every tensor's shape, so a drift between the two fails the test.
//
// Not part of synapse's build: it links the Release build's libraries.
// Build and run from the repository root (one line each):
//
//   g++ -O1 -std=c++20 -Isrc -Iinclude scripts/golden/qwen35_dry_run_input.cpp -Lbuild -Wl,--start-group
//       -lsynapse_model -lsynapse_tokenizer -lsynapse_template -lsynapse_grammar -lsynapse_quant
//       -lsynapse_kernels -lsynapse_gguf -lsynapse_base -Wl,--end-group -lpcre2-8 -lpthread
//       -o /tmp/qwen35_dry_run_input
//   /tmp/qwen35_dry_run_input qwen3.5-4b OUT.gguf
#include <cstdio>
#include <string>

#include "base/thread_pool.hpp"
#include "model/synth.hpp"

int main(int argc, char** argv) {
  using namespace synapse;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PRESET OUT.gguf\n", argv[0]);
    return 2;
  }
  model::SynthPreset p = model::synth_preset(argv[1]);
  p.n_layer = 8, p.n_vocab = 512, p.n_embd = 256, p.n_head = 4, p.n_head_kv = 1, p.head_dim = 64, p.n_rot = 16;
  p.rope_sections = {3, 3, 2, 0};
  p.ssm_state = 64, p.ssm_groups = 2, p.ssm_v_heads = 4;
  if (p.n_expert > 0) p.n_expert = 8, p.n_expert_used = 2, p.n_ff_exp = 256, p.n_ff_shexp = 256;
  else p.n_ff = 512;
  base::ThreadPool pool(2);
  model::synth_write(p, "F32", 3, argv[2], pool);
  return 0;
}
