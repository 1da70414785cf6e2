#include "model/hparams.hpp"

#include <string>

namespace synapse::model {
namespace {

[[noreturn]] void fail(const gguf::File& f, const std::string& key, const std::string& what) {
  throw Error(Errc::format, f.path() + ": " + key + ": " + what);
}

struct Keys {
  const gguf::File& f;
  std::string prefix;

  std::string name(const char* k) const { return prefix + "." + k; }
  std::optional<int64_t> i64(const char* k) const { return f.get_i64(name(k)); }
  int64_t required(const char* k) const {
    auto v = i64(k);
    if (!v) fail(f, name(k), "required key is missing");
    return *v;
  }
  std::optional<float> f32(const char* k) const { return f.get_f32(name(k)); }
};

}  // namespace

HParams read_hparams(const gguf::File& f) {
  HParams hp;
  const auto arch = f.get_string("general.architecture");
  if (!arch) fail(f, "general.architecture", "required key is missing");
  hp.arch_name = *arch;
  if (*arch == "llama") hp.arch = Arch::llama;
  else if (*arch == "mistral") hp.arch = Arch::mistral;
  else if (*arch == "qwen2") hp.arch = Arch::qwen2;
  else if (*arch == "phi3") hp.arch = Arch::phi3;
  else
    throw Error(Errc::unsupported, f.path() + ": unknown model architecture '" + *arch +
                                       "' (supported: llama, mistral, qwen2, phi3)");
  // "mistral" files keep the llama.* keys.
  hp.key_prefix = *arch;
  if (hp.arch == Arch::mistral && !f.find("mistral.block_count")) hp.key_prefix = "llama";
  const Keys k{f, hp.key_prefix};

  hp.n_embd = k.required("embedding_length");
  hp.n_layer = k.required("block_count");
  hp.n_head = k.required("attention.head_count");
  hp.n_head_kv = k.i64("attention.head_count_kv").value_or(hp.n_head);
  hp.n_ctx_train = k.i64("context_length").value_or(0);
  hp.n_expert = k.i64("expert_count").value_or(0);
  hp.n_expert_used = k.i64("expert_used_count").value_or(0);
  hp.n_ff = k.required("feed_forward_length");
  if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_head <= 0 || hp.n_head_kv <= 0 || hp.n_ff <= 0)
    fail(f, hp.key_prefix + ".*", "embedding_length, block_count, head counts and feed_forward_length must be positive");
  if (hp.n_layer > 4096 || hp.n_head > 4096 || hp.n_embd > (1 << 20) || hp.n_ff > (1 << 22))
    fail(f, hp.key_prefix + ".*", "hyperparameters out of any plausible range");
  if (hp.n_head % hp.n_head_kv != 0)
    fail(f, k.name("attention.head_count_kv"),
         "n_head " + std::to_string(hp.n_head) + " is not a multiple of n_head_kv " + std::to_string(hp.n_head_kv));
  if (hp.n_embd % hp.n_head != 0 && !k.i64("attention.key_length"))
    fail(f, k.name("attention.head_count"), "n_embd is not a multiple of n_head");
  hp.n_embd_head_k = k.i64("attention.key_length").value_or(hp.n_embd / hp.n_head);
  hp.n_embd_head_v = k.i64("attention.value_length").value_or(hp.n_embd_head_k);
  hp.n_rot = k.i64("rope.dimension_count").value_or(hp.n_embd_head_k);
  if (hp.n_embd_head_k <= 0 || hp.n_embd_head_v <= 0 || hp.n_embd_head_k > 4096 || hp.n_embd_head_v > 4096)
    fail(f, k.name("attention.key_length"), "head dimension out of range");
  if (hp.n_rot <= 0 || hp.n_rot > hp.n_embd_head_k || hp.n_rot % 2 != 0)
    fail(f, k.name("rope.dimension_count"),
         std::to_string(hp.n_rot) + " does not fit head dimension " + std::to_string(hp.n_embd_head_k));
  if (hp.n_expert < 0 || hp.n_expert > 512 || hp.n_expert_used < 0 || hp.n_expert_used > hp.n_expert ||
      (hp.n_expert > 0 && hp.n_expert_used == 0))
    fail(f, k.name("expert_used_count"), "expert counts are inconsistent");

  hp.f_norm_rms_eps = k.f32("attention.layer_norm_rms_epsilon").value_or(1e-5f);
  hp.rope_freq_base = k.f32("rope.freq_base").value_or(10000.0f);
  hp.rope_type = (hp.arch == Arch::qwen2 || hp.arch == Arch::phi3) ? RopeType::neox : RopeType::normal;

  // RoPE scaling: llama.cpp's llm_load_hparams + llama_context.
  const std::string scaling = f.get_string(k.name("rope.scaling.type")).value_or("linear");
  const float factor = k.f32("rope.scaling.factor").value_or(0.0f);
  if (scaling != "none" && scaling != "linear" && scaling != "yarn")
    throw Error(Errc::unsupported, f.path() + ": " + k.name("rope.scaling.type") + ": '" + scaling +
                                       "' is not supported (none, linear, yarn)");
  if (factor < 0.0f) fail(f, k.name("rope.scaling.factor"), "negative scaling factor");
  hp.rope_freq_scale = (scaling == "none" || factor == 0.0f) ? 1.0f : 1.0f / factor;
  hp.yarn_ext_factor = scaling == "yarn" ? 1.0f : 0.0f;
  hp.yarn_attn_factor = k.f32("rope.scaling.attn_factor").value_or(1.0f);
  if (hp.yarn_attn_factor == 0.0f) hp.yarn_attn_factor = 1.0f;
  // Newer converters store the YaRN parameters themselves; they override the
  // values derived above (llama.cpp's LLM_KV_ROPE_SCALING_YARN_* keys).
  if (auto v = k.f32("rope.scaling.yarn_ext_factor"); v && *v >= 0.0f) hp.yarn_ext_factor = *v;
  if (auto v = k.f32("rope.scaling.yarn_attn_factor"); v && *v > 0.0f) hp.yarn_attn_factor = *v;
  if (auto v = k.f32("rope.scaling.yarn_beta_fast"); v && *v > 0.0f) hp.yarn_beta_fast = *v;
  if (auto v = k.f32("rope.scaling.yarn_beta_slow"); v && *v > 0.0f) hp.yarn_beta_slow = *v;
  hp.n_ctx_orig_yarn = k.i64("rope.scaling.original_context_length").value_or(hp.n_ctx_train);
  if (hp.yarn_ext_factor != 0.0f && hp.n_ctx_orig_yarn <= 0)
    fail(f, k.name("rope.scaling.original_context_length"), "YaRN needs the original context length");

  hp.n_swa = k.i64("attention.sliding_window").value_or(0);
  if (hp.n_swa < 0) fail(f, k.name("attention.sliding_window"), "negative window");
  hp.fused_qkv = hp.arch == Arch::phi3;
  hp.scale_q_before_kq = hp.arch == Arch::phi3;

  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) fail(f, "token_embd.weight", "required tensor is missing");
  hp.n_vocab = embd->ne[1];
  return hp;
}

}  // namespace synapse::model
