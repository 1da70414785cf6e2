// Synthetic benchmark models (see synth.hpp): presets, llama-quantize's
// per-tensor type choice, the vocabulary, and a streaming GGUF v3 writer.
#include "model/synth.hpp"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numbers>
#include <utility>
#include <vector>

#include "model/iq_mix.hpp"
#include "quant/fp16.hpp"
#include "quant/quant.hpp"
#include "synapse/error.hpp"
#include "synapse/gguf.hpp"

namespace synapse::model {
namespace {

[[noreturn]] void bad_arg(const std::string& msg) { throw Error(Errc::invalid_argument, "synth: " + msg); }

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// A file type: the default tensor type, llama.cpp's llama_ftype id
// (general.file_type) and whether the K-quant mixture rules of Q4_K_M /
// Q5_K_M apply. The IQ file types (llama_ftype 19-31) take llama-quantize's
// IQ mixture rules instead (model/iq_mix.hpp).
struct FileType {
  const char* name;
  GgmlType type;
  uint32_t llama_ftype;
  bool km_mixture;
};

constexpr FileType kFileTypes[] = {
    {"F32", GgmlType::F32, 0, false},     {"F16", GgmlType::F16, 1, false},
    {"BF16", GgmlType::BF16, 32, false},  {"Q4_0", GgmlType::Q4_0, 2, false},
    {"Q4_1", GgmlType::Q4_1, 3, false},   {"Q5_0", GgmlType::Q5_0, 8, false},
    {"Q5_1", GgmlType::Q5_1, 9, false},   {"Q8_0", GgmlType::Q8_0, 7, false},
    {"Q6_K", GgmlType::Q6_K, 18, false},  {"Q4_K_M", GgmlType::Q4_K, 15, true},
    {"Q5_K_M", GgmlType::Q5_K, 17, true},
    {"IQ4_NL", GgmlType::IQ4_NL, 25, false}, {"IQ4_XS", GgmlType::IQ4_XS, 30, false},
    {"MXFP4_MOE", GgmlType::MXFP4, 38, false},
    // The IQ file types and their default tensor types (llama-quant.cpp,
    // llama_ftype_get_default_type: IQ2_S means IQ2_XS tensors, IQ2_M IQ2_S,
    // IQ3_XS and IQ3_M IQ3_S).
    {"IQ2_XXS", GgmlType::IQ2_XXS, kIQ2_XXS, false}, {"IQ2_XS", GgmlType::IQ2_XS, kIQ2_XS, false},
    {"IQ2_S", GgmlType::IQ2_XS, kIQ2_S, false},      {"IQ2_M", GgmlType::IQ2_S, kIQ2_M, false},
    {"IQ3_XXS", GgmlType::IQ3_XXS, kIQ3_XXS, false}, {"IQ3_XS", GgmlType::IQ3_S, kIQ3_XS, false},
    {"IQ3_S", GgmlType::IQ3_S, kIQ3_S, false},       {"IQ3_M", GgmlType::IQ3_S, kIQ3_M, false},
    {"IQ1_S", GgmlType::IQ1_S, kIQ1_S, false},       {"IQ1_M", GgmlType::IQ1_M, kIQ1_M, false},
};

bool is_iq_ftype(const FileType& ft) { return model::is_iq_ftype(ft.llama_ftype); }

// The lattice formats: no quantizer (synth writes random valid blocks).
bool is_lattice(GgmlType t) {
  switch (t) {
    case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS: case GgmlType::IQ2_S: case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S: case GgmlType::IQ1_S: case GgmlType::IQ1_M: return true;
    default: return false;
  }
}

using Role = TensorRole;

const FileType& file_type(std::string_view name) {
  const std::string u = upper(name);
  for (const FileType& ft : kFileTypes)
    if (u == ft.name) return ft;
  std::string known;
  for (const FileType& ft : kFileTypes) known += (known.empty() ? "" : ", ") + std::string(ft.name);
  bad_arg("unknown type '" + std::string(name) + "' (known: " + known + ")");
}

bool is_quantized(GgmlType t) { return t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16; }

// llama-quantize's use_more_bits(i_layer, n_layers): the first and last
// eighth of the layers and every third one in between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama-quantize's fallback for a row length the chosen type cannot hold
// (v0.5.0 tensor_type_fallback: the lattice formats and IQ4_XS -> IQ4_NL,
// Q2_K and Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; F16 if
// even that fails).
GgmlType fallback(GgmlType t, int64_t ne0) {
  if (ne0 % type_traits(t).block_size == 0) return t;
  switch (t) {
    case GgmlType::IQ1_S: case GgmlType::IQ1_M: case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S: case GgmlType::IQ3_XXS: case GgmlType::IQ3_S: case GgmlType::IQ4_XS:
      t = GgmlType::IQ4_NL;
      break;
    case GgmlType::Q2_K: case GgmlType::Q3_K: t = GgmlType::Q4_0; break;
    case GgmlType::Q4_K: t = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: t = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: t = GgmlType::Q8_0; break;
    default: break;
  }
  return ne0 % type_traits(t).block_size == 0 ? t : GgmlType::F16;
}

// Splitmix64 (Steele, Lea, Flood 2014): the row seed and the stream.
inline uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

// `n` approximately normal values of standard deviation `sd`: the Irwin-Hall
// sum of four 16-bit uniforms (mean 131070, sd 65536/sqrt(3)), standardised.
void fill_normal(float* x, int64_t n, float sd, uint64_t seed) {
  const float scale = sd * static_cast<float>(std::sqrt(3.0) / 65536.0);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix64(seed);
    const int64_t s = static_cast<int64_t>(r & 0xFFFF) + static_cast<int64_t>((r >> 16) & 0xFFFF) +
                      static_cast<int64_t>((r >> 32) & 0xFFFF) + static_cast<int64_t>(r >> 48);
    x[i] = static_cast<float>(s - 131070) * scale;
  }
}

// Llama 3 rope frequency factors [head_dim / 2], as convert_hf_to_gguf.py's
// LlamaModel.generate_extra_tensors computes them from rope_scaling
// (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings).
std::vector<float> llama3_rope_factors(const SynthPreset& p) {
  const int64_t dim = p.head_size();
  const double low_wavelen = static_cast<double>(p.rope_orig_ctx) / p.rope_low_freq_factor;
  const double high_wavelen = static_cast<double>(p.rope_orig_ctx) / p.rope_high_freq_factor;
  std::vector<float> f;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(p.rope_theta, static_cast<float>(i) / static_cast<float>(dim));
    const double wavelen = 2.0 * std::numbers::pi / static_cast<double>(freq);
    double factor;
    if (wavelen < high_wavelen) {
      factor = 1.0;
    } else if (wavelen > low_wavelen) {
      factor = p.rope_factor;
    } else {
      const double smooth = (static_cast<double>(p.rope_orig_ctx) / wavelen - p.rope_low_freq_factor) /
                            (p.rope_high_freq_factor - p.rope_low_freq_factor);
      factor = 1.0 / ((1.0 - smooth) / p.rope_factor + smooth);
    }
    f.push_back(static_cast<float>(factor));
  }
  return f;
}

// Bijective base-26 letters of k: 0 -> "a", 25 -> "z", 26 -> "aa", ...
std::string letters(uint64_t k) {
  std::string s;
  for (;;) {
    s.insert(s.begin(), static_cast<char>('a' + k % 26));
    if (k < 26) break;
    k = k / 26 - 1;
  }
  return s;
}

// ---- GGUF v3 serialisation (ggml docs/gguf.md), streamed to a FILE ----

struct Sink {
  std::FILE* f;
  const std::string& path;
  uint64_t written = 0;
  void raw(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f) != n) throw Error(Errc::io, path + ": write failed: " + std::strerror(errno));
    written += n;
  }
  template <typename T>
  void put(T v) { raw(&v, sizeof v); }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    raw(s.data(), s.size());
  }
  void pad(uint64_t alignment) {
    static const uint8_t zeros[64] = {};
    uint64_t n = (alignment - written % alignment) % alignment;
    while (n) {
      const uint64_t k = std::min<uint64_t>(n, sizeof zeros);
      raw(zeros, k);
      n -= k;
    }
  }
};

// Metadata values of the kinds a synthetic file holds.
struct Meta {
  enum Kind { u32, f32, boolean, string, str_array, f32_array, i32_array, bool_array };
  Meta(Kind k, std::string name, uint64_t v = 0) : kind(k), key(std::move(name)), u(v) {}
  Kind kind;
  std::string key;
  uint64_t u = 0;
  float f = 0;
  std::string s;
  std::vector<std::string> strs;
  std::vector<float> floats;
  std::vector<int32_t> ints;  // i32_array; bool_array: 0 / 1
};

void put_meta(Sink& o, const Meta& m) {
  using gguf::ValueType;
  o.str(m.key);
  switch (m.kind) {
    case Meta::u32: o.put<uint32_t>(static_cast<uint32_t>(ValueType::UINT32)); o.put<uint32_t>(static_cast<uint32_t>(m.u)); break;
    case Meta::f32: o.put<uint32_t>(static_cast<uint32_t>(ValueType::FLOAT32)); o.put<float>(m.f); break;
    case Meta::boolean: o.put<uint32_t>(static_cast<uint32_t>(ValueType::BOOL)); o.put<uint8_t>(m.u ? 1 : 0); break;
    case Meta::string: o.put<uint32_t>(static_cast<uint32_t>(ValueType::STRING)); o.str(m.s); break;
    case Meta::str_array:
      o.put<uint32_t>(static_cast<uint32_t>(ValueType::ARRAY));
      o.put<uint32_t>(static_cast<uint32_t>(ValueType::STRING));
      o.put<uint64_t>(m.strs.size());
      for (const std::string& s : m.strs) o.str(s);
      break;
    case Meta::f32_array:
      o.put<uint32_t>(static_cast<uint32_t>(ValueType::ARRAY));
      o.put<uint32_t>(static_cast<uint32_t>(ValueType::FLOAT32));
      o.put<uint64_t>(m.floats.size());
      o.raw(m.floats.data(), m.floats.size() * sizeof(float));
      break;
    case Meta::i32_array:
      o.put<uint32_t>(static_cast<uint32_t>(ValueType::ARRAY));
      o.put<uint32_t>(static_cast<uint32_t>(ValueType::INT32));
      o.put<uint64_t>(m.ints.size());
      o.raw(m.ints.data(), m.ints.size() * sizeof(int32_t));
      break;
    case Meta::bool_array:
      o.put<uint32_t>(static_cast<uint32_t>(ValueType::ARRAY));
      o.put<uint32_t>(static_cast<uint32_t>(ValueType::BOOL));
      o.put<uint64_t>(m.ints.size());
      for (int32_t b : m.ints) o.put<uint8_t>(b != 0 ? 1 : 0);
      break;
  }
}

std::vector<Meta> metadata(const SynthPreset& p, const FileType& ft) {
  std::vector<Meta> md;
  const auto u32 = [&](std::string k, uint64_t v) { md.push_back(Meta{Meta::u32, std::move(k), v}); };
  const auto f32 = [&](std::string k, float v) {
    Meta m{Meta::f32, std::move(k)};
    m.f = v;
    md.push_back(std::move(m));
  };
  const auto str = [&](std::string k, std::string v) {
    Meta m{Meta::string, std::move(k)};
    m.s = std::move(v);
    md.push_back(std::move(m));
  };
  const std::string a = p.arch;
  str("general.architecture", a);
  str("general.name", p.name);
  str("general.description", "synthetic model with random weights at the shapes of " + p.name + " (synapse synth)");
  u32("general.file_type", ft.llama_ftype);
  if (is_quantized(ft.type)) u32("general.quantization_version", 2);
  u32(a + ".context_length", static_cast<uint64_t>(p.n_ctx_train));
  u32(a + ".embedding_length", static_cast<uint64_t>(p.n_embd));
  u32(a + ".block_count", static_cast<uint64_t>(p.n_layer));
  if (p.n_ff > 0) u32(a + ".feed_forward_length", static_cast<uint64_t>(p.n_ff));
  u32(a + ".attention.head_count", static_cast<uint64_t>(p.n_head));
  u32(a + ".attention.head_count_kv", static_cast<uint64_t>(p.n_head_kv));
  u32(a + ".rope.dimension_count", static_cast<uint64_t>(p.rope_dims()));
  if (p.head_dim > 0) {
    u32(a + ".attention.key_length", static_cast<uint64_t>(p.head_dim));
    u32(a + ".attention.value_length", static_cast<uint64_t>(p.head_dim));
  }
  f32(a + ".rope.freq_base", p.rope_theta);
  f32(a + ".attention.layer_norm_rms_epsilon", p.rms_eps);
  if (p.n_expert > 0) {
    u32(a + ".expert_count", static_cast<uint64_t>(p.n_expert));
    u32(a + ".expert_used_count", static_cast<uint64_t>(p.n_expert_used));
    u32(a + ".expert_feed_forward_length", static_cast<uint64_t>(p.n_ff_exp));
  }
  if (p.n_ff_shexp > 0) u32(a + ".expert_shared_feed_forward_length", static_cast<uint64_t>(p.n_ff_shexp));
  if (p.rope_sections != std::array<int32_t, 4>{0, 0, 0, 0}) {
    Meta m{Meta::i32_array, a + ".rope.dimension_sections"};
    m.ints.assign(p.rope_sections.begin(), p.rope_sections.end());
    md.push_back(std::move(m));
  }
  if (p.full_attention_interval > 0) {
    // As llama.cpp v0.5.0's converter writes them (conversion/qwen.py,
    // Qwen3NextModel.set_gguf_parameters): the five ssm.* sizes, the layer
    // types from config.json's layer_types as attention.recurrent_layers,
    // and full_attention_interval.
    u32(a + ".ssm.conv_kernel", static_cast<uint64_t>(p.ssm_conv));
    u32(a + ".ssm.state_size", static_cast<uint64_t>(p.ssm_state));
    u32(a + ".ssm.group_count", static_cast<uint64_t>(p.ssm_groups));
    u32(a + ".ssm.time_step_rank", static_cast<uint64_t>(p.ssm_v_heads));
    u32(a + ".ssm.inner_size", static_cast<uint64_t>(p.ssm_state * p.ssm_v_heads));
    Meta layers{Meta::bool_array, a + ".attention.recurrent_layers"};
    for (int64_t il = 0; il < p.n_layer; ++il) layers.ints.push_back(p.is_recurrent(il) ? 1 : 0);
    md.push_back(std::move(layers));
    u32(a + ".full_attention_interval", static_cast<uint64_t>(p.full_attention_interval));
  }
  if (p.sliding_window > 0) u32(a + ".attention.sliding_window", static_cast<uint64_t>(p.sliding_window));
  if (p.yarn_factor != 0.0f) {
    str(a + ".rope.scaling.type", "yarn");
    f32(a + ".rope.scaling.factor", p.yarn_factor);
    u32(a + ".rope.scaling.original_context_length", static_cast<uint64_t>(p.yarn_orig_ctx));
  }
  if (p.linear_factor != 0.0f) {
    str(a + ".rope.scaling.type", "linear");
    f32(a + ".rope.scaling.factor", p.linear_factor);
  }
  if (a == "llama") u32(a + ".vocab_size", static_cast<uint64_t>(p.n_vocab));

  // SentencePiece-style vocabulary: specials, 256 byte tokens, generated pieces.
  Meta tokens{Meta::str_array, "tokenizer.ggml.tokens"};
  Meta scores{Meta::f32_array, "tokenizer.ggml.scores"};
  Meta types{Meta::i32_array, "tokenizer.ggml.token_type"};
  const auto add = [&](std::string text, float score, int32_t type) {
    tokens.strs.push_back(std::move(text));
    scores.floats.push_back(score);
    types.ints.push_back(type);
  };
  add("<unk>", 0.0f, 2);
  add("<s>", 0.0f, 3);
  add("</s>", 0.0f, 3);
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0.0f, 6);
  for (int64_t j = 0; static_cast<int64_t>(tokens.strs.size()) < p.n_vocab; ++j)
    add((j % 2 == 0 ? "\xE2\x96\x81" : "") + letters(static_cast<uint64_t>(j / 2)), -static_cast<float>(j), 1);
  str("tokenizer.ggml.model", "llama");
  md.push_back(std::move(tokens));
  md.push_back(std::move(scores));
  md.push_back(std::move(types));
  u32("tokenizer.ggml.bos_token_id", 1);
  u32("tokenizer.ggml.eos_token_id", 2);
  u32("tokenizer.ggml.unknown_token_id", 0);
  md.push_back(Meta{Meta::boolean, "tokenizer.ggml.add_bos_token", 1});
  md.push_back(Meta{Meta::boolean, "tokenizer.ggml.add_eos_token", 0});
  return md;
}

void check_preset(const SynthPreset& p) {
  const bool qwen35 = p.arch == "qwen35" || p.arch == "qwen35moe";
  if (p.arch != "llama" && p.arch != "qwen2" && p.arch != "qwen3moe" && p.arch != "gpt-oss" && p.arch != "gemma3" &&
      !qwen35)
    bad_arg(p.name + ": architecture '" + p.arch + "' (llama, qwen2, qwen3moe, gpt-oss, gemma3, qwen35 or qwen35moe)");
  if (p.n_layer < 1 || p.n_embd < 1 || p.n_head < 1 || p.n_head_kv < 1 || p.n_ff < 0 ||
      (p.n_ff == 0 && p.n_expert == 0) || p.n_ctx_train < 1)
    bad_arg(p.name + ": layers, n_embd, heads, n_ff (but in an MoE model) and context must be positive");
  if ((p.head_dim == 0 && p.n_embd % p.n_head != 0) || p.n_head % p.n_head_kv != 0 || p.head_size() % 2 != 0 ||
      p.head_dim < 0 || p.head_dim > 1024)
    bad_arg(p.name + ": n_embd must be a multiple of n_head (or head_dim given), n_head of n_head_kv, the head size "
                     "even");
  if (p.arch == "qwen3moe" && (p.n_expert < 1 || !p.qk_norm))
    bad_arg(p.name + ": qwen3moe has experts and q/k norms in every layer");
  if (p.arch == "gpt-oss" && (p.n_expert < 1 || !p.qkv_bias || p.tied || p.sliding_window < 1))
    bad_arg(p.name + ": gpt-oss has experts, q/k/v biases, its own output and a sliding window");
  if (p.arch == "gemma3" && (p.n_expert > 0 || !p.qk_norm || p.qkv_bias || !p.tied))
    bad_arg(p.name + ": gemma3 is dense, with q/k norms, no biases and a tied output");
  if (qwen35) {
    // llama.cpp v0.5.0's qwen35 graph: q/k norms, no biases, the gated delta
    // rule's asserts (v heads a multiple of the k heads), the IMROPE sections.
    if (!p.qk_norm || p.qkv_bias || (p.arch == "qwen35") != (p.n_expert == 0))
      bad_arg(p.name + ": qwen35 is dense and qwen35moe has experts, both with q/k norms and no biases");
    if (p.full_attention_interval < 1 || p.full_attention_interval > p.n_layer)
      bad_arg(p.name + ": full_attention_interval " + std::to_string(p.full_attention_interval) +
              " leaves no attention layer in " + std::to_string(p.n_layer) + " (every Qwen3.5 has some: give at least " +
              std::to_string(std::max<int64_t>(p.full_attention_interval, 1)) + " layers)");
    if (p.ssm_conv < 1 || p.ssm_conv > 64 || p.ssm_state < 1 || p.ssm_state > 4096 || p.ssm_groups < 1 ||
        p.ssm_v_heads < 1 || p.ssm_v_heads % p.ssm_groups != 0)
      bad_arg(p.name + ": DeltaNet needs a conv kernel in [1, 64], a state size in [1, 4096] and v heads a positive "
                       "multiple of the k heads");
    int64_t sections = 0;
    for (int32_t s : p.rope_sections) {
      if (s < 0) bad_arg(p.name + ": negative rope section");
      sections += s;
    }
    if (sections == 0 || p.rope_dims() % 2 != 0 || p.rope_dims() > p.head_size())
      bad_arg(p.name + ": qwen35 needs rope sections and an even rope dimension count up to the head size");
    if (p.arch == "qwen35moe" && p.n_ff_shexp < 1) bad_arg(p.name + ": qwen35moe has a shared expert");
  } else if (p.full_attention_interval != 0 || p.n_ff_shexp != 0 || p.n_rot != 0) {
    bad_arg(p.name + ": DeltaNet layers, a shared expert and partial RoPE are qwen35 / qwen35moe only");
  }
  if (p.n_ff_shexp < 0 || p.n_ff_shexp > (1 << 18)) bad_arg(p.name + ": shared expert width out of range");
  if (p.linear_factor != 0.0f && (p.linear_factor < 1.0f || p.yarn_factor != 0.0f))
    bad_arg(p.name + ": linear rope scaling needs factor >= 1 and no YaRN");
  if (p.yarn_factor != 0.0f && (p.yarn_factor < 1.0f || p.yarn_orig_ctx < 1))
    bad_arg(p.name + ": YaRN needs factor >= 1 and the original context length");
  if (p.n_expert < 0 || p.n_expert > 512 ||
      (p.n_expert > 0 && (p.n_expert_used < 1 || p.n_expert_used > p.n_expert || p.n_ff_exp < 1 ||
                          p.n_ff_exp > (1 << 18))))
    bad_arg(p.name + ": experts need 0 < n_expert_used <= n_expert <= 512 and a positive n_ff_exp");
  if (p.n_vocab < 259) bad_arg(p.name + ": vocabulary of " + std::to_string(p.n_vocab) + " tokens (at least 259: 3 specials and 256 bytes)");
  if (p.n_layer > 4096 || p.n_embd > (1 << 16) || p.n_ff > (1 << 18) || p.n_vocab > (1 << 22))
    bad_arg(p.name + ": shape out of range");
  if (p.rope_factor != 0.0f &&
      (p.rope_factor < 1.0f || p.rope_low_freq_factor <= 0.0f || p.rope_high_freq_factor <= p.rope_low_freq_factor))
    bad_arg(p.name + ": Llama 3 rope scaling needs factor >= 1 and 0 < low_freq_factor < high_freq_factor");
}

}  // namespace

int64_t SynthTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

SynthPreset synth_preset(std::string_view name) {
  SynthPreset p;
  p.name = std::string(name);
  if (name == "smollm2-135m") {
    // HuggingFaceTB/SmolLM2-135M config.json.
    p.arch = "llama";
    p.n_layer = 30, p.n_embd = 576, p.n_head = 9, p.n_head_kv = 3, p.n_ff = 1536, p.n_vocab = 49152;
    p.n_ctx_train = 8192, p.tied = true, p.rope_theta = 100000.0f, p.rms_eps = 1e-5f;
  } else if (name == "qwen2.5-0.5b") {
    // Qwen/Qwen2.5-0.5B config.json.
    p.arch = "qwen2";
    p.n_layer = 24, p.n_embd = 896, p.n_head = 14, p.n_head_kv = 2, p.n_ff = 4864, p.n_vocab = 151936;
    p.n_ctx_train = 32768, p.tied = true, p.qkv_bias = true, p.rope_theta = 1000000.0f, p.rms_eps = 1e-6f;
  } else if (name == "llama-3.2-1b") {
    // meta-llama/Llama-3.2-1B config.json (rope_scaling llama3, factor 32).
    p.arch = "llama";
    p.n_layer = 16, p.n_embd = 2048, p.n_head = 32, p.n_head_kv = 8, p.n_ff = 8192, p.n_vocab = 128256;
    p.n_ctx_train = 131072, p.tied = true, p.rope_theta = 500000.0f, p.rms_eps = 1e-5f;
    p.rope_factor = 32.0f;
  } else if (name == "llama-3.1-8b") {
    // meta-llama/Llama-3.1-8B config.json (rope_scaling llama3, factor 8).
    p.arch = "llama";
    p.n_layer = 32, p.n_embd = 4096, p.n_head = 32, p.n_head_kv = 8, p.n_ff = 14336, p.n_vocab = 128256;
    p.n_ctx_train = 131072, p.tied = false, p.rope_theta = 500000.0f, p.rms_eps = 1e-5f;
    p.rope_factor = 8.0f;
  } else if (name == "qwen3-30b-a3b") {
    // Qwen/Qwen3-30B-A3B-Instruct-2507 config.json (the original Qwen3-30B-A3B
    // differs in rope_theta 1e6 and context 40960 only): 48 layers, 32/4
    // heads of 128 (not 2048 / 32), q/k norms, 128 experts of 768, 8 used,
    // intermediate_size 6144 (written as feed_forward_length), untied.
    p.arch = "qwen3moe";
    p.n_layer = 48, p.n_embd = 2048, p.n_head = 32, p.n_head_kv = 4, p.n_ff = 6144, p.n_vocab = 151936;
    p.n_ctx_train = 262144, p.tied = false, p.rope_theta = 10000000.0f, p.rms_eps = 1e-6f;
    p.head_dim = 128, p.qk_norm = true;
    p.n_expert = 128, p.n_expert_used = 8, p.n_ff_exp = 768;
  } else if (name == "gpt-oss-20b") {
    // ggml-org/gpt-oss-20b-GGUF (gpt-oss-20b-mxfp4.gguf) metadata, as
    // llama.cpp v0.5.0 prints it: 24 layers, n_embd 2880, 64/8 heads of 64
    // (not 2880 / 64), 32 experts of 2880, 4 used, sliding window 128, YaRN
    // factor 32 over 4096, rope theta 150000, vocab 201088, untied.
    p.arch = "gpt-oss";
    p.n_layer = 24, p.n_embd = 2880, p.n_head = 64, p.n_head_kv = 8, p.n_ff = 2880, p.n_vocab = 201088;
    p.n_ctx_train = 131072, p.tied = false, p.qkv_bias = true, p.rope_theta = 150000.0f, p.rms_eps = 1e-5f;
    p.head_dim = 64;
    p.n_expert = 32, p.n_expert_used = 4, p.n_ff_exp = 2880;
    p.sliding_window = 128, p.yarn_factor = 32.0f, p.yarn_orig_ctx = 4096;
  } else if (name == "gemma-3-4b") {
    // google/gemma-3-4b-it config.json (text_config) as llama.cpp v0.5.0's
    // converter writes it (conversion/gemma.py): 34 layers, n_embd 2560, 8/4
    // heads of 256 (not 2560 / 8), FFN 10240, the vocabulary of its
    // tokenizer.model (262144; the embedding's 262208 rows are cut to it),
    // sliding window 1024 on five layers of six, RoPE theta 1e6 with linear
    // factor 8 on the global layers, q/k norms, tied output.
    p.arch = "gemma3";
    p.n_layer = 34, p.n_embd = 2560, p.n_head = 8, p.n_head_kv = 4, p.n_ff = 10240, p.n_vocab = 262144;
    p.n_ctx_train = 131072, p.tied = true, p.rope_theta = 1000000.0f, p.rms_eps = 1e-6f;
    p.head_dim = 256, p.qk_norm = true;
    p.sliding_window = 1024, p.linear_factor = 8.0f;
  } else if (name == "qwen3.5-4b" || name == "qwen3.5-35b-a3b") {
    // Qwen/Qwen3.5-4B and Qwen/Qwen3.5-35B-A3B config.json (text_config) as
    // llama.cpp v0.5.0's converter writes them (conversion/qwen.py,
    // Qwen3_5TextModel / Qwen3_5MoeTextModel), without the MTP layer
    // (mtp_num_hidden_layers 1: llama.cpp skips it, and the common GGUFs
    // have none). Both: head_dim 256 with partial_rotary_factor 0.25 (rope
    // dimension count 64), mrope_section [11, 11, 10] (IMROPE), rope_theta
    // 1e7, rms eps 1e-6, context 262144, vocab 248320, layer_types three
    // linear_attention then one full_attention (full_attention_interval 4),
    // DeltaNet linear_conv_kernel_dim 4, linear_key_head_dim =
    // linear_value_head_dim 128, 16 key heads, 32 value heads.
    p.rope_theta = 10000000.0f, p.rms_eps = 1e-6f, p.n_ctx_train = 262144, p.n_vocab = 248320;
    p.head_dim = 256, p.n_rot = 64, p.rope_sections = {11, 11, 10, 0}, p.qk_norm = true;
    p.full_attention_interval = 4, p.ssm_conv = 4, p.ssm_state = 128, p.ssm_groups = 16, p.ssm_v_heads = 32;
    if (name == "qwen3.5-4b") {
      // 32 layers, hidden 2560, 16/4 heads, intermediate_size 9216, tied
      // embedding (Qwen3.5-4B's lm_head is embed_tokens).
      p.arch = "qwen35";
      p.n_layer = 32, p.n_embd = 2560, p.n_head = 16, p.n_head_kv = 4, p.n_ff = 9216, p.tied = true;
    } else {
      // 40 layers, hidden 2048, 16/2 heads, 256 experts of
      // moe_intermediate_size 512, 8 used, shared_expert_intermediate_size
      // 512, no intermediate_size (so no feed_forward_length), untied.
      p.arch = "qwen35moe";
      p.n_layer = 40, p.n_embd = 2048, p.n_head = 16, p.n_head_kv = 2, p.n_ff = 0, p.tied = false;
      p.n_expert = 256, p.n_expert_used = 8, p.n_ff_exp = 512, p.n_ff_shexp = 512;
    }
  } else {
    std::string known;
    for (const std::string& n : synth_preset_names()) known += (known.empty() ? "" : ", ") + n;
    bad_arg("unknown preset '" + std::string(name) + "' (known: " + known + ")");
  }
  return p;
}

std::vector<std::string> synth_preset_names() {
  return {"smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b",  "llama-3.1-8b",   "qwen3-30b-a3b",
          "gpt-oss-20b",  "gemma-3-4b",   "qwen3.5-4b",    "qwen3.5-35b-a3b"};
}

std::vector<std::string> synth_type_names() {
  std::vector<std::string> v;
  for (const FileType& ft : kFileTypes) v.emplace_back(ft.name);
  return v;
}

std::vector<SynthTensor> synth_plan(const SynthPreset& p, std::string_view ftype) {
  check_preset(p);
  const FileType& ft = file_type(ftype);
  const int64_t head = p.head_size(), n_q = head * p.n_head, n_kv = head * p.n_head_kv;
  std::vector<SynthTensor> plan;
  int64_t i_attn_v = 0, i_ffn_down = 0;
  const bool iq4 = ft.type == GgmlType::IQ4_NL || ft.type == GgmlType::IQ4_XS;
  // kind: 0 other weight, 1 output (or tied embedding), 2 attn_v, 3 ffn_down
  // (ffn_down_exps: llama-quantize reads its layer from the name); role: the
  // IQ rules' finer one. ne2: experts of a merged 3-D expert tensor, else 1.
  // attn_v and the DeltaNet layers' attn_qkv are one role (llama-quantize's
  // category_is_attn_v), once per layer. No preset has exactly 8 experts,
  // for which llama-quantize has rules of its own (Mixtral 8x).
  const auto matrix = [&](std::string name, int64_t ne0, int64_t ne1, int kind, int64_t layer, Role role,
                          int64_t ne2 = 1) {
    GgmlType t = ft.type;
    const int64_t ffn_down_before = i_ffn_down;
    if (role == Role::ffn_down) ++i_ffn_down;
    if (is_iq_ftype(ft)) {
      // With an importance matrix (llama-quantize refuses IQ2_XXS, IQ2_XS,
      // IQ2_S, IQ1_S and IQ1_M without one, and the files users download
      // have one). The FFN's layer is the layer (llama-quantize's running
      // count in a dense model, the name's with experts); the low-bit types
      // read the running count of ffn_down matrices (two a layer with a
      // shared expert: ffn_down_exps, then ffn_down_shexp as names sort).
      IqMixModel m;
      m.llama_ftype = ft.llama_ftype;
      m.n_layer = p.n_layer;
      m.n_gqa = p.n_head / p.n_head_kv;
      m.n_expert = p.n_expert;
      t = fallback(iq_mix_type(m, ft.type, kind == 1 ? Role::output : role, ne0, layer, ffn_down_before), ne0);
    } else if (ft.type == GgmlType::MXFP4) {
      // llama-quantize's MXFP4_MOE: the merged experts (3-D) MXFP4, every
      // other matrix Q8_0, the output included.
      t = ne2 > 1 ? GgmlType::MXFP4 : fallback(GgmlType::Q8_0, ne0);
      if (ne0 % type_traits(t).block_size != 0)
        bad_arg(name + ": row length " + std::to_string(ne0) + " is not a multiple of the " +
                std::string(type_name(t)) + " block");
    } else if (is_quantized(ft.type)) {
      if (kind == 1) {
        t = ne0 % 256 != 0 ? GgmlType::Q8_0 : (ft.type == GgmlType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q6_K);
      } else if (kind == 2) {
        // n_attention_wv: one attn_v-like matrix a layer in every preset.
        if (ft.km_mixture && use_more_bits(i_attn_v, p.n_layer)) t = GgmlType::Q6_K;
        else if (iq4 && p.n_head / p.n_head_kv >= 4) t = GgmlType::Q5_K;
        ++i_attn_v;
      } else if (kind == 3) {
        // IQ4_NL / IQ4_XS: llama-quantize's Q5_K for the first eighth applies
        // only without an importance matrix; synth follows the files made
        // with one, as for the other IQ types.
        if (ft.km_mixture && use_more_bits(layer, p.n_layer)) t = GgmlType::Q6_K;
      }
      t = fallback(t, ne0);
      if (ne0 % type_traits(t).block_size != 0)
        bad_arg(name + ": row length " + std::to_string(ne0) + " is not a multiple of the " +
                std::string(type_name(t)) + " block");
    }
    std::vector<int64_t> ne = {ne0, ne1};
    if (ne2 > 1) ne.push_back(ne2);
    plan.push_back(SynthTensor{std::move(name), std::move(ne), t, row_size(t, ne0) * static_cast<uint64_t>(ne1 * ne2)});
  };
  // A float matrix llama-quantize leaves as it is (the MoE router, gpt-oss's expert biases).
  const auto f32_matrix = [&](std::string name, int64_t ne0, int64_t ne1) {
    plan.push_back(SynthTensor{std::move(name), {ne0, ne1}, GgmlType::F32, static_cast<uint64_t>(ne0 * ne1) * 4});
  };
  const auto vec = [&](std::string name, int64_t n) {
    plan.push_back(SynthTensor{std::move(name), {n}, GgmlType::F32, static_cast<uint64_t>(n) * 4});
  };
  const bool gpt_oss = p.arch == "gpt-oss", gemma3 = p.arch == "gemma3";
  const bool qwen35 = p.arch == "qwen35" || p.arch == "qwen35moe";
  const int64_t key_dim = p.ssm_state * p.ssm_groups, value_dim = p.ssm_state * p.ssm_v_heads;
  matrix("token_embd.weight", p.n_embd, p.n_vocab, p.tied ? 1 : 0, -1, Role::token_embd);
  if (p.rope_factor != 0.0f) vec("rope_freqs.weight", head / 2);
  for (int64_t il = 0; il < p.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    vec(b + "attn_norm.weight", p.n_embd);
    if (p.is_recurrent(il)) {  // Gated DeltaNet (SynthPreset's comment)
      matrix(b + "attn_qkv.weight", p.n_embd, 2 * key_dim + value_dim, 2, il, Role::attn_v);
      matrix(b + "attn_gate.weight", p.n_embd, value_dim, 0, il, Role::other);
      f32_matrix(b + "ssm_conv1d.weight", p.ssm_conv, 2 * key_dim + value_dim);
      vec(b + "ssm_dt.bias", p.ssm_v_heads);
      vec(b + "ssm_a", p.ssm_v_heads);
      matrix(b + "ssm_beta.weight", p.n_embd, p.ssm_v_heads, 0, il, Role::other);
      matrix(b + "ssm_alpha.weight", p.n_embd, p.ssm_v_heads, 0, il, Role::other);
      vec(b + "ssm_norm.weight", p.ssm_state);
      matrix(b + "ssm_out.weight", value_dim, p.n_embd, 0, il, Role::other);
    } else {
      matrix(b + "attn_q.weight", p.n_embd, qwen35 ? 2 * n_q : n_q, 0, il, Role::attn_q);
      if (p.qkv_bias) vec(b + "attn_q.bias", n_q);
      matrix(b + "attn_k.weight", p.n_embd, n_kv, 0, il, Role::attn_k);
      if (p.qkv_bias) vec(b + "attn_k.bias", n_kv);
      matrix(b + "attn_v.weight", p.n_embd, n_kv, 2, il, Role::attn_v);
      if (p.qkv_bias) vec(b + "attn_v.bias", n_kv);
      if (p.qk_norm) {
        vec(b + "attn_q_norm.weight", head);
        vec(b + "attn_k_norm.weight", head);
      }
      matrix(b + "attn_output.weight", n_q, p.n_embd, 0, il, Role::attn_output);
      if (gpt_oss) {
        vec(b + "attn_output.bias", p.n_embd);
        vec(b + "attn_sinks.weight", p.n_head);
      }
    }
    if (gemma3) vec(b + "post_attention_norm.weight", p.n_embd);
    vec(b + (gpt_oss || qwen35 ? "post_attention_norm.weight" : "ffn_norm.weight"), p.n_embd);
    if (p.n_expert > 0) {
      f32_matrix(b + "ffn_gate_inp.weight", p.n_embd, p.n_expert);
      if (gpt_oss) vec(b + "ffn_gate_inp.bias", p.n_expert);
      matrix(b + "ffn_gate_exps.weight", p.n_embd, p.n_ff_exp, 0, il, Role::ffn_gate, p.n_expert);
      matrix(b + "ffn_up_exps.weight", p.n_embd, p.n_ff_exp, 0, il, Role::ffn_up, p.n_expert);
      matrix(b + "ffn_down_exps.weight", p.n_ff_exp, p.n_embd, 3, il, Role::ffn_down, p.n_expert);
      if (gpt_oss) {  // 2-D biases: llama-quantize quantizes only *.weight
        f32_matrix(b + "ffn_gate_exps.bias", p.n_ff_exp, p.n_expert);
        f32_matrix(b + "ffn_up_exps.bias", p.n_ff_exp, p.n_expert);
        f32_matrix(b + "ffn_down_exps.bias", p.n_embd, p.n_expert);
      }
      if (p.n_ff_shexp > 0) {  // qwen35moe's shared expert and its 1-D gate
        vec(b + "ffn_gate_inp_shexp.weight", p.n_embd);
        matrix(b + "ffn_gate_shexp.weight", p.n_embd, p.n_ff_shexp, 0, il, Role::ffn_gate);
        matrix(b + "ffn_up_shexp.weight", p.n_embd, p.n_ff_shexp, 0, il, Role::ffn_up);
        matrix(b + "ffn_down_shexp.weight", p.n_ff_shexp, p.n_embd, 3, il, Role::ffn_down);
      }
    } else {
      matrix(b + "ffn_gate.weight", p.n_embd, p.n_ff, 0, il, Role::ffn_gate);
      matrix(b + "ffn_up.weight", p.n_embd, p.n_ff, 0, il, Role::ffn_up);
      matrix(b + "ffn_down.weight", p.n_ff, p.n_embd, 3, il, Role::ffn_down);
    }
    if (gemma3) vec(b + "post_ffw_norm.weight", p.n_embd);
  }
  vec("output_norm.weight", p.n_embd);
  if (!p.tied) matrix("output.weight", p.n_embd, p.n_vocab, 1, -1, Role::output);
  return plan;
}

namespace {

// Writes the F16 scale h into every block of a lattice-format row (IQ1_M:
// the top nibbles of its four scale words; the others: the leading d).
void set_lattice_scale(GgmlType t, uint8_t* row, int64_t ne0, uint16_t h) {
  const size_t bytes = type_traits(t).type_size;
  for (uint8_t* b = row; b < row + static_cast<size_t>(ne0 / 256) * bytes; b += bytes) {
    if (t == GgmlType::IQ1_M) {
      for (int w = 0; w < 4; ++w) b[48 + 2 * w + 1] = static_cast<uint8_t>((b[48 + 2 * w + 1] & 0x0F) | (((h >> (4 * w)) & 0xF) << 4));
    } else {
      b[0] = static_cast<uint8_t>(h & 0xFF);
      b[1] = static_cast<uint8_t>(h >> 8);
    }
  }
}

// The lattice formats have no quantizer (ggml's needs an importance
// matrix), and a benchmark's speed depends only on the blocks' layout: synth
// writes random blocks (every index, sign and sub-block scale drawn at
// random) with one F16 scale per type, chosen once so that the values'
// RMS is about 0.02 like the other types' weights (measured on 16 random
// blocks with scale 1).
uint16_t lattice_scale(GgmlType t) {
  static const auto scales = [] {
    std::vector<std::pair<GgmlType, uint16_t>> v;
    for (GgmlType u : {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S, GgmlType::IQ3_XXS, GgmlType::IQ3_S,
                       GgmlType::IQ1_S, GgmlType::IQ1_M}) {
      const int64_t n = 16 * 256;
      std::vector<uint8_t> row(row_size(u, n));
      uint64_t s = 0x1A77;
      for (auto& b : row) b = static_cast<uint8_t>(splitmix64(s));
      set_lattice_scale(u, row.data(), n, 0x3C00);  // 1.0
      std::vector<float> y(static_cast<size_t>(n));
      quant::dequantize_row(u, row.data(), y.data(), n);
      double ss = 0;
      for (float x : y) ss += static_cast<double>(x) * x;
      v.emplace_back(u, quant::fp32_to_fp16(static_cast<float>(0.02 / std::sqrt(ss / static_cast<double>(n)))));
    }
    return v;
  }();
  for (const auto& [u, h] : scales)
    if (u == t) return h;
  return 0;
}

void random_lattice_row(GgmlType t, uint8_t* row, int64_t ne0, uint64_t seed) {
  const size_t n = row_size(t, ne0);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t r = splitmix64(seed);
    std::memcpy(row + i, &r, 8);
  }
  for (; i < n; ++i) row[i] = static_cast<uint8_t>(splitmix64(seed));
  set_lattice_scale(t, row, ne0, lattice_scale(t));
}

SynthResult write_file(const SynthPreset& p, std::string_view ftype, uint64_t seed, const std::string& path,
                       base::ThreadPool& pool, bool& created) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<SynthTensor> plan = synth_plan(p, ftype);
  const FileType& ft = file_type(ftype);
  const std::vector<Meta> md = metadata(p, ft);
  const std::vector<float> rope_factors = p.rope_factor != 0.0f ? llama3_rope_factors(p) : std::vector<float>{};
  constexpr uint64_t kAlign = 32;

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) throw Error(Errc::io, path + ": cannot create: " + std::strerror(errno));
  created = true;
  Sink o{f.get(), path};
  o.put<uint32_t>(0x46554747);  // "GGUF"
  o.put<uint32_t>(3);
  o.put<uint64_t>(plan.size());
  o.put<uint64_t>(md.size());
  for (const Meta& m : md) put_meta(o, m);
  uint64_t offset = 0;
  SynthResult res;
  for (const SynthTensor& t : plan) {
    o.str(t.name);
    o.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) o.put<uint64_t>(static_cast<uint64_t>(n));
    o.put<uint32_t>(static_cast<uint32_t>(t.type));
    o.put<uint64_t>(offset);
    offset += (t.n_bytes + kAlign - 1) / kAlign * kAlign;
    res.n_params += static_cast<uint64_t>(t.n_elements());
    res.tensor_bytes += t.n_bytes;
  }
  o.pad(kAlign);

  std::vector<uint8_t> data;
  for (const SynthTensor& t : plan) {
    data.resize(t.n_bytes);
    const int64_t ne0 = t.ne[0], rows = t.n_elements() / ne0;
    const size_t rb = row_size(t.type, ne0);
    const uint64_t tseed = seed ^ fnv1a(t.name);
    const bool is_norm = t.name.find("_norm.weight") != std::string::npos;
    const bool is_rope = t.name == "rope_freqs.weight";
    // DeltaNet's A (= -exp(A_log)) must be negative for the state to decay,
    // as in every trained model: -1 (A_log 0), so a long benchmark prompt
    // keeps the state finite.
    const bool is_ssm_a = t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, ".ssm_a") == 0;
    pool.parallel_for(rows, 8, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(ne0));
      for (int64_t r = r0; r < r1; ++r) {
        if (is_norm || is_ssm_a) {
          std::fill(row.begin(), row.end(), is_norm ? 1.0f : -1.0f);
        } else if (is_rope) {
          std::copy(rope_factors.begin(), rope_factors.end(), row.begin());
        } else {
          uint64_t s = tseed + static_cast<uint64_t>(r) * 0xD1B54A32D192ED03ull;
          fill_normal(row.data(), ne0, 0.02f, splitmix64(s));
        }
        uint8_t* out = data.data() + static_cast<size_t>(r) * rb;
        if (is_lattice(t.type)) {
          uint64_t s = tseed + static_cast<uint64_t>(r) * 0xD1B54A32D192ED03ull;
          random_lattice_row(t.type, out, ne0, splitmix64(s));
        } else {
          quant::quantize_row(t.type, row.data(), out, ne0);
        }
      }
    });
    o.raw(data.data(), data.size());
    o.pad(kAlign);
  }
  if (std::fflush(f.get()) != 0) throw Error(Errc::io, path + ": write failed: " + std::strerror(errno));
  std::FILE* raw = f.release();
  if (std::fclose(raw) != 0) throw Error(Errc::io, path + ": close failed: " + std::strerror(errno));
  res.file_bytes = o.written;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace

SynthResult synth_write(const SynthPreset& p, std::string_view ftype, uint64_t seed, const std::string& path,
                        base::ThreadPool& pool) {
  synth_plan(p, ftype);  // bad arguments throw before the file is created
  bool created = false;
  try {
    return write_file(p, ftype, seed, path, pool, created);
  } catch (...) {
    if (created) std::remove(path.c_str());  // no half-written model is left behind
    throw;
  }
}

}  // namespace synapse::model
