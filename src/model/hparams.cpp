#include "model/hparams.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "base/strings.hpp"

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

// general.architecture values and what they select.
constexpr std::pair<std::string_view, Arch> kArchs[] = {
    {"llama", Arch::llama},       {"mistral", Arch::mistral},   {"qwen2", Arch::qwen2}, {"qwen3", Arch::qwen3},
    {"qwen3moe", Arch::qwen3moe}, {"mistral3", Arch::mistral3}, {"phi3", Arch::phi3},
    {"gpt-oss", Arch::gpt_oss},   {"gemma3", Arch::gemma3},     {"qwen35", Arch::qwen35},
    {"qwen35moe", Arch::qwen35moe}};

// llama.cpp's load_swa_pattern: attention.sliding_window_pattern as one bool
// per layer, or an integer n (default n_pattern): layer il slides when
// il % n < n - 1 (n = 0: every layer).
void read_swa_pattern(const Keys& k, HParams& hp, int64_t n_pattern) {
  const std::string key = k.name("attention.sliding_window_pattern");
  const gguf::Value* v = k.f.find(key);
  hp.swa_layers.assign(static_cast<size_t>(hp.n_layer), 0);
  if (v && v->type == gguf::ValueType::ARRAY) {
    if (v->elem_type != gguf::ValueType::BOOL || static_cast<int64_t>(v->items.size()) != hp.n_layer)
      fail(k.f, key, "expected an integer or one bool per layer (" + std::to_string(hp.n_layer) + ")");
    for (int64_t il = 0; il < hp.n_layer; ++il) hp.swa_layers[il] = v->items[il].b ? 1 : 0;
    return;
  }
  if (auto n = k.i64("attention.sliding_window_pattern")) n_pattern = *n;
  if (n_pattern < 0) fail(k.f, key, "negative pattern " + std::to_string(n_pattern));
  for (int64_t il = 0; il < hp.n_layer; ++il)
    hp.swa_layers[il] = n_pattern == 0 || il % n_pattern < n_pattern - 1 ? 1 : 0;
}

// llama.cpp v0.5.0 src/models/gemma3.cpp (load_arch_hparams, the graph):
// with a window (attention.sliding_window > 0) the layers slide in
// sliding_window_pattern (default 6: five local, one global), the local ones
// with their own RoPE (rope.freq_base_swa, default 10000, unscaled), the
// global ones with rope.freq_base and the file's scaling; without one every
// layer is global. layer_norm_rms_epsilon is required; final_logit_softcapping
// optional. q is scaled before q.k by f_attention_scale, which Gemma's
// reference (gemma_pytorch config.py, query_pre_attn_scalar) sets to
// 1/sqrt(n_embd / n_head) for the 27B (llama.cpp: 62 layers) and
// 1/sqrt(head dim) for the others.
void read_gemma3(const Keys& k, HParams& hp) {
  if (hp.n_swa > 0) {
    read_swa_pattern(k, hp, 6);
    hp.swa_rope = true;
    hp.rope_freq_base_swa = k.f32("rope.freq_base_swa").value_or(10000.0f);
    hp.rope_freq_scale_swa = 1.0f;
  }
  if (!k.f32("attention.layer_norm_rms_epsilon"))
    fail(k.f, k.name("attention.layer_norm_rms_epsilon"), "required key is missing");
  hp.f_final_logit_softcapping = k.f32("final_logit_softcapping").value_or(0.0f);
  if (!std::isfinite(hp.f_final_logit_softcapping) || hp.f_final_logit_softcapping < 0.0f)
    fail(k.f, k.name("final_logit_softcapping"), "not a finite number >= 0");
  hp.qk_norm = true;
  hp.scale_q_before_kq = true;
  hp.f_attention_scale = hp.n_layer == 62 ? 1.0f / std::sqrt(static_cast<float>(hp.n_embd / hp.n_head))
                                          : 1.0f / std::sqrt(static_cast<float>(hp.n_embd_head_k));
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  hp.post_norms = true;
  hp.gelu_ffn = true;
}

// llama.cpp v0.5.0 src/models/qwen35.cpp (load_arch_hparams): rms eps,
// rope.dimension_sections (4 integers) and the five ssm.* sizes are required;
// attention.recurrent_layers (one bool per layer) marks the DeltaNet layers,
// else full_attention_interval n (default 4): layer il attends when
// (il + 1) % n == 0. The graph (delta-net-base.cpp) asserts q/k and v heads
// of one size (d_inner / time_step_rank == state_size) and v heads a
// multiple of the q/k heads; its attention layers assert key_length ==
// value_length. MTP layers (nextn_predict_layers) are not run. qwen35moe
// reads the same (its FFN aside).
// An array item's integer (signed or unsigned), a bool as 0/1; -1 for any other type.
int64_t item_int(const gguf::Value& v) {
  switch (v.type) {
    case gguf::ValueType::UINT8: case gguf::ValueType::UINT16: case gguf::ValueType::UINT32:
    case gguf::ValueType::UINT64: return v.u > (uint64_t{1} << 62) ? -1 : static_cast<int64_t>(v.u);
    case gguf::ValueType::INT8: case gguf::ValueType::INT16: case gguf::ValueType::INT32:
    case gguf::ValueType::INT64: return v.i;
    case gguf::ValueType::BOOL: return v.b ? 1 : 0;
    default: return -1;
  }
}

void read_qwen35(const Keys& k, HParams& hp) {
  if (!k.f32("attention.layer_norm_rms_epsilon"))
    fail(k.f, k.name("attention.layer_norm_rms_epsilon"), "required key is missing");
  const std::string sections_key = k.name("rope.dimension_sections");
  const gguf::Value* sections = k.f.find(sections_key);
  if (!sections) fail(k.f, sections_key, "required key is missing");
  if (sections->type != gguf::ValueType::ARRAY || sections->items.size() < 4)
    fail(k.f, sections_key, "expected an array of 4 integers");
  for (int s = 0; s < 4; ++s) {
    const int64_t v = item_int(sections->items[static_cast<size_t>(s)]);
    if (v < 0 || v > hp.n_rot) fail(k.f, sections_key, "section " + std::to_string(v) + " out of range");
    hp.rope_sections[s] = static_cast<int32_t>(v);
  }
  if (hp.rope_sections[0] + hp.rope_sections[1] + hp.rope_sections[2] + hp.rope_sections[3] == 0)
    fail(k.f, sections_key, "all sections are 0");
  hp.ssm_d_conv = k.required("ssm.conv_kernel");
  hp.ssm_d_inner = k.required("ssm.inner_size");
  hp.ssm_d_state = k.required("ssm.state_size");
  hp.ssm_dt_rank = k.required("ssm.time_step_rank");
  hp.ssm_n_group = k.required("ssm.group_count");
  if (hp.ssm_d_conv < 1 || hp.ssm_d_conv > 64) fail(k.f, k.name("ssm.conv_kernel"), "out of range [1, 64]");
  if (hp.ssm_d_state < 1 || hp.ssm_d_state > 4096) fail(k.f, k.name("ssm.state_size"), "out of range [1, 4096]");
  if (hp.ssm_n_group < 1 || hp.ssm_dt_rank < 1 || hp.ssm_dt_rank % hp.ssm_n_group != 0)
    fail(k.f, k.name("ssm.time_step_rank"),
         "v heads " + std::to_string(hp.ssm_dt_rank) + " must be a positive multiple of ssm.group_count " +
             std::to_string(hp.ssm_n_group));
  if (hp.ssm_d_inner != hp.ssm_dt_rank * hp.ssm_d_state)
    fail(k.f, k.name("ssm.inner_size"),
         std::to_string(hp.ssm_d_inner) + " is not time_step_rank x state_size (" + std::to_string(hp.ssm_dt_rank) +
             " x " + std::to_string(hp.ssm_d_state) + ")");
  if (hp.n_embd_head_k != hp.n_embd_head_v)
    fail(k.f, k.name("attention.value_length"), "qwen35 needs key_length == value_length");
  hp.n_layer -= k.i64("nextn_predict_layers").value_or(0);
  if (hp.n_layer <= 0) fail(k.f, k.name("nextn_predict_layers"), "leaves no layer to run");
  hp.recurrent_layers.assign(static_cast<size_t>(hp.n_layer), 0);
  const std::string layers_key = k.name("attention.recurrent_layers");
  if (const gguf::Value* v = k.f.find(layers_key); v && v->type == gguf::ValueType::ARRAY) {
    if (static_cast<int64_t>(v->items.size()) < hp.n_layer)
      fail(k.f, layers_key, "expected one value per layer (" + std::to_string(hp.n_layer) + ")");
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const int64_t r = item_int(v->items[static_cast<size_t>(il)]);
      if (r < 0) fail(k.f, layers_key, "expected bools or integers");
      hp.recurrent_layers[il] = r != 0 ? 1 : 0;
    }
  } else {
    const int64_t interval = k.i64("full_attention_interval").value_or(4);
    if (interval < 1) fail(k.f, k.name("full_attention_interval"), "must be at least 1");
    for (int64_t il = 0; il < hp.n_layer; ++il) hp.recurrent_layers[il] = (il + 1) % interval != 0 ? 1 : 0;
  }
  hp.qk_norm = true;
  hp.attn_output_gate = true;
  hp.imrope = true;
}

}  // namespace

const char* arch_name(Arch arch) {
  for (const auto& [name, a] : kArchs)
    if (a == arch) return name.data();
  return "?";
}

std::optional<Arch> arch_from_name(std::string_view name) {
  for (const auto& [n, a] : kArchs)
    if (n == name) return a;
  return std::nullopt;
}

std::vector<std::string> architecture_names() {
  std::vector<std::string> names;
  for (const auto& entry : kArchs) names.emplace_back(entry.first);
  return names;
}

std::string supported_architectures() { return join(architecture_names(), ", ", [](const std::string& n) { return n; }); }

float attn_temperature(const HParams& hp, int64_t pos) {
  if (hp.attn_temp_scale == 0.0f) return 1.0f;
  const float scaled = static_cast<float>(pos) / static_cast<float>(hp.n_attn_temp_floor_scale);
  return static_cast<float>(std::log(static_cast<double>(std::floor(scaled)) + 1.0) * hp.attn_temp_scale + 1.0);
}

HParams read_hparams(const gguf::File& f) {
  HParams hp;
  const auto arch = f.get_string("general.architecture");
  if (!arch) fail(f, "general.architecture", "required key is missing");
  hp.arch_name = *arch;
  const std::optional<Arch> known = arch_from_name(*arch);
  if (!known)
    throw Error(Errc::unsupported, f.path() + ": unknown model architecture '" + *arch +
                                       "' (supported: " + supported_architectures() + ")");
  hp.arch = *known;
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
  if (hp.arch == Arch::qwen3moe || hp.arch == Arch::qwen35moe) {
    // llama.cpp v0.5.0 src/models/qwen3moe.cpp and qwen35moe.cpp: every layer
    // is MoE; an expert's width is expert_feed_forward_length, else n_ff /
    // n_expert_used (feed_forward_length is then the dense width, unused).
    if (hp.n_expert <= 0) fail(f, k.name("expert_count"), hp.arch_name + " needs experts (expert_count > 0)");
    if (hp.n_expert_used <= 0) fail(f, k.name("expert_used_count"), hp.arch_name + " needs expert_used_count > 0");
    if (auto v = k.i64("expert_feed_forward_length")) {
      hp.n_ff = *v;
    } else {
      const int64_t n_ff_dense = k.required("feed_forward_length");
      if (n_ff_dense % hp.n_expert_used != 0)
        fail(f, k.name("expert_feed_forward_length"),
             "missing, and feed_forward_length " + std::to_string(n_ff_dense) +
                 " is not a multiple of expert_used_count " + std::to_string(hp.n_expert_used));
      hp.n_ff = n_ff_dense / hp.n_expert_used;
    }
    if (hp.arch == Arch::qwen35moe) {  // qwen35moe.cpp: the shared expert's width, default n_ff
      const std::optional<int64_t> dense = k.i64("feed_forward_length");
      hp.n_ff_shexp = k.i64("expert_shared_feed_forward_length").value_or(dense.value_or(0));
      if (hp.n_ff_shexp <= 0 || hp.n_ff_shexp > (1 << 22))
        fail(f, k.name("expert_shared_feed_forward_length"), "missing (and no feed_forward_length) or out of range");
    }
  } else if (hp.arch == Arch::gpt_oss) {
    // llama.cpp v0.5.0 src/models/openai-moe.cpp: every layer is MoE, an
    // expert's width is expert_feed_forward_length (required).
    if (hp.n_expert <= 0) fail(f, k.name("expert_count"), "gpt-oss needs experts (expert_count > 0)");
    if (hp.n_expert_used <= 0) fail(f, k.name("expert_used_count"), "gpt-oss needs expert_used_count > 0");
    hp.n_ff = k.required("expert_feed_forward_length");
  } else {
    hp.n_ff = k.required("feed_forward_length");
  }
  if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_head <= 0 || hp.n_head_kv <= 0 || hp.n_ff <= 0)
    fail(f, hp.key_prefix + ".*",
         "embedding_length, block_count, head counts and (expert_)feed_forward_length must be positive");
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
  // llama_model_rope_type: NEOX for qwen2, qwen3, qwen3moe, phi3, gpt-oss and gemma3, IMROPE for qwen35;
  // mistral3 is normal.
  const bool neox = hp.arch == Arch::qwen2 || hp.arch == Arch::qwen3 || hp.arch == Arch::qwen3moe ||
                    hp.arch == Arch::phi3 || hp.arch == Arch::gpt_oss || hp.arch == Arch::gemma3 ||
                    hp.arch == Arch::qwen35 || hp.arch == Arch::qwen35moe;  // IMROPE rotates NEOX's pairs
  hp.rope_type = neox ? RopeType::neox : RopeType::normal;

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

  if (hp.arch == Arch::mistral3) {
    // YaRN magnitude with rope.scaling.yarn_log_multiplier M (mscale_all_dim):
    // llama.cpp v0.5.0's llama_context (src/llama-context.cpp:177-214) passes
    // RoPE attn_factor = get_mscale(f, 1) / get_mscale(f, M) / (1 + 0.1 ln f)
    // * rope.scaling.attn_factor, get_mscale(f, m) = 1 + 0.1 m ln f (float, in
    // that order), and ggml's rope_yarn multiplies by 1 + 0.1 ln f again
    // (kernels::rope_cache): for M = 1 cos and sin are not scaled. Without the
    // key the older 1 + 0.1 ln f stays, as for the other architectures.
    const float log_mul = k.f32("rope.scaling.yarn_log_multiplier").value_or(0.0f);
    if (log_mul != 0.0f && hp.yarn_ext_factor != 0.0f) {
      const auto get_mscale = [](float scale, float mscale) {
        return scale <= 1.0f ? 1.0f : 0.1f * mscale * std::log(scale) + 1.0f;
      };
      const float factor = 1.0f / hp.rope_freq_scale;
      float af = get_mscale(factor, 1.0f) / get_mscale(factor, log_mul);
      af *= 1.0f / (1.0f + 0.1f * std::log(factor));
      hp.yarn_attn_factor = af * hp.yarn_attn_factor;
    }
    hp.attn_temp_scale = k.f32("attention.temperature_scale").value_or(0.0f);
    if (!std::isfinite(hp.attn_temp_scale)) fail(f, k.name("attention.temperature_scale"), "not a finite number");
    if (hp.attn_temp_scale != 0.0f) {
      hp.n_attn_temp_floor_scale = hp.n_ctx_orig_yarn;
      if (hp.n_attn_temp_floor_scale <= 0)
        fail(f, k.name("rope.scaling.original_context_length"),
             "the attention temperature needs the original context length (or context_length)");
    }
  }

  if (hp.arch == Arch::gpt_oss) {
    hp.n_swa = k.required("attention.sliding_window");
    if (hp.n_swa <= 0) fail(f, k.name("attention.sliding_window"), "gpt-oss needs a window > 0");
    read_swa_pattern(k, hp, 2);
    // llama.cpp gives the sliding layers rope.freq_base_swa (default: the
    // full layers' base); one RoPE table serves every layer here.
    if (auto base_swa = k.f32("rope.freq_base_swa"); base_swa && *base_swa != hp.rope_freq_base)
      throw Error(Errc::unsupported, f.path() + ": " + k.name("rope.freq_base_swa") + " " +
                                         std::to_string(*base_swa) + " differs from rope.freq_base " +
                                         std::to_string(hp.rope_freq_base) + ", which synapse does not support");
    hp.attn_sinks = true;
    hp.swiglu_oai = true;
    hp.expert_gating = ExpertGating::softmax_weight;
  } else {
    hp.n_swa = k.i64("attention.sliding_window").value_or(0);
    if (hp.n_swa < 0) fail(f, k.name("attention.sliding_window"), "negative window");
  }
  hp.fused_qkv = hp.arch == Arch::phi3;
  hp.scale_q_before_kq = hp.arch == Arch::phi3;
  hp.qk_norm = hp.arch == Arch::qwen3 || hp.arch == Arch::qwen3moe;
  if (hp.arch == Arch::gemma3) read_gemma3(k, hp);
  if (hp.arch == Arch::qwen35 || hp.arch == Arch::qwen35moe) read_qwen35(k, hp);
  // llama.cpp v0.5.0 src/llama-model.cpp:1258 (optional key) and :1403-1408.
  hp.pooling_type = static_cast<int32_t>(k.i64("pooling_type").value_or(-1));
  if (hp.pooling_type < -1 || hp.pooling_type > 4)
    fail(f, k.name("pooling_type"), std::to_string(hp.pooling_type) + " is not a pooling type (0 to 4)");
  if (const gguf::Value* labels = f.find(k.name("classifier.output_labels")))
    hp.n_cls_labels = static_cast<int64_t>(labels->items.size());

  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) fail(f, "token_embd.weight", "required tensor is missing");
  hp.n_vocab = embd->ne[1];
  return hp;
}

}  // namespace synapse::model
