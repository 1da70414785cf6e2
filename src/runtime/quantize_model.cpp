// Requantizing a GGUF model as llama-quantize does (see quantize_model.hpp).
// Rules: llama.cpp c392e509 src/llama-quant.cpp (the `quantize` filter and
// the loop of llama_model_quantize_impl) and v0.5.0's
// llama_tensor_get_type_impl (the per-tensor types: mixed_type); file type
// names: tools/quantize/quantize.cpp (QUANT_OPTIONS); LLAMA_FTYPE values:
// include/llama.h.
#include "runtime/quantize_model.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <exception>
#include <functional>
#include <map>
#include <span>
#include <thread>

#include "base/thread_pool.hpp"
#include "model/iq_mix.hpp"
#include "quant/formats.hpp"
#include "quant/fp16.hpp"
#include "quant/quant.hpp"
#include "runtime/imatrix.hpp"
#include "synapse/error.hpp"

namespace synapse::runtime {
namespace {

struct FileTypeName {
  std::string_view name;
  FileType ftype;
};

// Canonical names first (file_type_name returns the first match), then the
// aliases llama-quantize accepts.
constexpr std::array<FileTypeName, 35> kFileTypes = {{
    {"F32", FileType::ALL_F32},
    {"F16", FileType::MOSTLY_F16},
    {"BF16", FileType::MOSTLY_BF16},
    {"Q4_0", FileType::MOSTLY_Q4_0},
    {"Q4_1", FileType::MOSTLY_Q4_1},
    {"Q5_0", FileType::MOSTLY_Q5_0},
    {"Q5_1", FileType::MOSTLY_Q5_1},
    {"Q8_0", FileType::MOSTLY_Q8_0},
    {"Q2_K", FileType::MOSTLY_Q2_K},
    {"Q3_K_S", FileType::MOSTLY_Q3_K_S},
    {"Q3_K_M", FileType::MOSTLY_Q3_K_M},
    {"Q3_K_L", FileType::MOSTLY_Q3_K_L},
    {"Q4_K_S", FileType::MOSTLY_Q4_K_S},
    {"Q4_K_M", FileType::MOSTLY_Q4_K_M},
    {"Q5_K_S", FileType::MOSTLY_Q5_K_S},
    {"Q5_K_M", FileType::MOSTLY_Q5_K_M},
    {"Q6_K", FileType::MOSTLY_Q6_K},
    {"IQ2_XXS", FileType::MOSTLY_IQ2_XXS},
    {"IQ2_XS", FileType::MOSTLY_IQ2_XS},
    {"IQ2_S", FileType::MOSTLY_IQ2_S},
    {"IQ2_M", FileType::MOSTLY_IQ2_M},
    {"IQ1_S", FileType::MOSTLY_IQ1_S},
    {"IQ1_M", FileType::MOSTLY_IQ1_M},
    {"IQ3_XXS", FileType::MOSTLY_IQ3_XXS},
    {"IQ3_XS", FileType::MOSTLY_IQ3_XS},
    {"IQ3_S", FileType::MOSTLY_IQ3_S},
    {"IQ3_M", FileType::MOSTLY_IQ3_M},
    {"IQ4_NL", FileType::MOSTLY_IQ4_NL},
    {"IQ4_XS", FileType::MOSTLY_IQ4_XS},
    {"TQ1_0", FileType::MOSTLY_TQ1_0},
    {"TQ2_0", FileType::MOSTLY_TQ2_0},
    {"MXFP4_MOE", FileType::MOSTLY_MXFP4_MOE},
    {"Q3_K", FileType::MOSTLY_Q3_K_M},
    {"Q4_K", FileType::MOSTLY_Q4_K_M},
    {"Q5_K", FileType::MOSTLY_Q5_K_M},
}};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

bool is_quantized(GgmlType t) { return type_traits(t).block_size > 1; }  // ggml_is_quantized
int64_t block_size(GgmlType t) { return type_traits(t).block_size; }

bool contains(const std::string& s, std::string_view sub) { return s.find(sub) != std::string::npos; }

// The layer of "blk.N...." (sscanf "blk.%d." as llama.cpp parses it), or -1.
int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int layer = -1;
  const char* first = name.data() + 4;
  const auto [ptr, ec] = std::from_chars(first, name.data() + name.size(), layer);
  return ec == std::errc() && ptr != first ? layer : -1;
}

// ggml_n_dims: the number of dimensions up to the last one larger than 1.
uint32_t ggml_n_dims(const std::array<int64_t, 4>& ne) {
  for (uint32_t d = 4; d > 1; --d)
    if (ne[d - 1] > 1) return d;
  return 1;
}

// The `quantize` filter of llama_model_quantize_impl: weights of 2 or more
// dimensions whose name ends in "weight", except norms, MoE routers and the
// small or positional tensors llama.cpp keeps as they are.
bool allows_quantization(const std::string& name, const std::array<int64_t, 4>& ne) {
  if (ggml_n_dims(ne) < 2) return false;
  if (name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
  static constexpr std::string_view kKept[] = {
      "_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
      "ssm_conv1d.weight", "shortconv.conv.weight", "time_mix_first.weight", "time_mix_w0.weight",
      "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
      "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
      "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
      "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd."};
  for (std::string_view k : kKept)
    if (contains(name, k)) return false;
  // LLM_TENSOR_POS_EMBD and LLM_TENSOR_TOKEN_TYPES (BERT-style models).
  return name != "position_embd.weight" && name != "token_types.weight";
}

// What llama_tensor_get_type reads from the model (llama_hparams, the tensor
// list) and the counters it keeps while walking the tensors.
struct QuantizeState {
  std::string arch;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int n_expert = 0;
  bool is_70b = false;       // LLM_TYPE_70B: llama, 80 layers, grouped-query attention
  bool has_output = false;   // false: token_embd is also the output (tied)
  int n_attention_wv = 0;
  int i_attention_wv = 0;
  int i_ffn_down = 0;
  int i_ffn_gate = 0;
  int i_ffn_up = 0;
  bool has_imatrix = false;

  int n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 0; }  // llama_hparams::n_gqa(0)
  bool falcon() const { return arch == "falcon"; }
};

// A head count that may be stored per layer (an array): layer 0's value, as
// llama_hparams::n_head(0) gives.
int head_count(const gguf::File& f, const std::string& key, int fallback) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr) return fallback;
  if (v->type == gguf::ValueType::ARRAY) {
    const auto arr = f.get_int_array(key);
    return arr && !arr->empty() ? static_cast<int>((*arr)[0]) : fallback;
  }
  return static_cast<int>(f.get_u32(key).value_or(static_cast<uint32_t>(fallback)));
}

QuantizeState read_state(const gguf::File& in) {
  QuantizeState qs;
  const auto arch = in.get_string("general.architecture");
  if (!arch) throw Error(Errc::format, in.path() + ": general.architecture is missing");
  qs.arch = *arch;
  const auto n_layer = in.get_u32(qs.arch + ".block_count");
  if (!n_layer) throw Error(Errc::format, in.path() + ": " + qs.arch + ".block_count is missing");
  qs.n_layer = static_cast<int>(*n_layer);
  qs.n_head = head_count(in, qs.arch + ".attention.head_count", 0);
  qs.n_head_kv = head_count(in, qs.arch + ".attention.head_count_kv", qs.n_head);
  qs.n_expert = static_cast<int>(in.get_u32(qs.arch + ".expert_count").value_or(0));
  // llama-model.cpp, LLM_ARCH_LLAMA: 80 layers are LLM_TYPE_70B unless n_head == n_head_kv (65B).
  qs.is_70b = qs.arch == "llama" && qs.n_expert != 8 && qs.n_layer == 80 && qs.n_head != qs.n_head_kv;
  for (const gguf::TensorInfo& t : in.tensors()) {
    if (contains(t.name, "attn_v.weight") || contains(t.name, "attn_qkv.weight") ||
        contains(t.name, "attn_kv_b.weight"))
      ++qs.n_attention_wv;
    else if (t.name == "output.weight")
      qs.has_output = true;
  }
  return qs;
}

// use_more_bits in llama_tensor_get_type: the first and last eighth of the
// layers and every third one between them.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// The layer of an FFN tensor: the running counter, or, with experts (whose
// tensors llama.cpp does not count in layer order), the layer in the name.
int ffn_layer(const QuantizeState& qs, int counter, const std::string& name) {
  if (std::max(1, qs.n_expert) == 1) return counter;
  const int layer = layer_of(name);
  if (layer < 0 || layer >= qs.n_layer)
    throw Error(Errc::format, "tensor " + name + ": no layer in [0, " + std::to_string(qs.n_layer) +
                                  ") in its name (needed to choose its type in a model with experts)");
  return layer;
}

// llama.cpp's fallback table for a row length that is not a multiple of the
// block size (c392e509): 256-blocks to a 32-block type, then F16 if that does
// not fit either. llama-quantize throws "Unsupported tensor size encountered"
// for the 32-block types themselves; synapse uses F16 there too.
GgmlType fallback_type(GgmlType t, int64_t ncols, bool& fell_back) {
  fell_back = false;
  if (ncols % block_size(t) == 0) return t;
  fell_back = true;
  GgmlType r = GgmlType::F16;
  switch (t) {
    case GgmlType::TQ1_0: case GgmlType::TQ2_0: r = GgmlType::Q4_0; break;
    case GgmlType::IQ1_S: case GgmlType::IQ1_M: case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS:
    case GgmlType::IQ2_S: case GgmlType::IQ3_XXS: case GgmlType::IQ3_S: r = GgmlType::IQ4_NL; break;
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::IQ4_XS: r = GgmlType::IQ4_NL; break;
    case GgmlType::Q4_K: r = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: r = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: r = GgmlType::Q8_0; break;
    default: break;
  }
  return ncols % block_size(r) == 0 ? r : GgmlType::F16;
}

// tensor_get_category (llama-quant.cpp v0.5.0), in its order: the output
// (and a tied token_embd or per_layer_token_embd, which llama-quantize types
// as the output), token_embd, then the first name fragment that matches;
// attn_qkv (a fused QKV projection, Qwen3.5's DeltaNet input among them) and
// attn_kv_b count as attn_v (category_is_attn_v).
model::TensorRole tensor_role(const QuantizeState& qs, const std::string& name) {
  using R = model::TensorRole;
  if (name == "output.weight") return R::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return qs.has_output ? R::token_embd : R::output;
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight")) return R::attn_v;
  if (contains(name, "attn_k.weight")) return R::attn_k;
  if (contains(name, "attn_q.weight")) return R::attn_q;
  if (contains(name, "attn_output.weight")) return R::attn_output;
  if (contains(name, "ffn_up")) return R::ffn_up;
  if (contains(name, "ffn_gate")) return R::ffn_gate;
  if (contains(name, "ffn_down")) return R::ffn_down;
  return R::other;
}

// llama_tensor_get_type for the IQ file types (v0.5.0): the tensor's
// role, llama-quantize's running counts, then the shared rules of
// model/iq_mix.hpp.
GgmlType iq_mixed_type(QuantizeState& qs, GgmlType new_type, const std::string& name, const std::array<int64_t, 4>& ne,
                       FileType ft, std::optional<GgmlType> output_type) {
  using R = model::TensorRole;
  const R role = tensor_role(qs, name);
  if (role == R::output && output_type) return *output_type;

  model::IqMixModel m;
  m.llama_ftype = static_cast<uint32_t>(ft);
  m.n_layer = qs.n_layer;
  m.n_gqa = qs.n_gqa();
  m.n_expert = qs.n_expert;
  m.has_imatrix = qs.has_imatrix;
  m.is_70b = qs.is_70b;
  m.falcon = qs.falcon();
  int64_t layer = -1;
  const int i_ffn_down = qs.i_ffn_down;
  switch (role) {
    case R::attn_v: ++qs.i_attention_wv; break;
    case R::ffn_down: layer = ffn_layer(qs, qs.i_ffn_down++, name); break;
    case R::ffn_gate: layer = ffn_layer(qs, qs.i_ffn_gate++, name); break;
    case R::ffn_up: layer = ffn_layer(qs, qs.i_ffn_up++, name); break;
    default: break;
  }
  return model::iq_mix_type(m, new_type, role, ne[0], layer, i_ffn_down);
}

// llama_tensor_get_type_impl (v0.5.0) without its fallback step, restricted
// to the file types synapse writes (the IQ file types: iq_mixed_type).
GgmlType mixed_type(QuantizeState& qs, GgmlType new_type, const std::string& name, const std::array<int64_t, 4>& ne,
                    FileType ft, std::optional<GgmlType> output_type) {
  using F = FileType;
  using T = GgmlType;
  using R = model::TensorRole;
  if (model::is_iq_ftype(static_cast<uint32_t>(ft))) return iq_mixed_type(qs, new_type, name, ne, ft, output_type);
  const int64_t ncols = ne[0];
  const R role = tensor_role(qs, name);
  if (role == R::output) {
    if (output_type) return *output_type;
    if (ft == F::MOSTLY_MXFP4_MOE || qs.falcon() || ncols % block_size(new_type) != 0) return T::Q8_0;
    return new_type != T::Q8_0 ? T::Q6_K : new_type;
  }
  if (ft == F::MOSTLY_MXFP4_MOE) {
    // The merged experts (a third dimension above 1) MXFP4, every other
    // matrix Q8_0; bailingmoe3's 3-D MLA projections are not experts, so
    // there only the FFN roles qualify.
    const bool ffn = role == R::ffn_up || role == R::ffn_gate || role == R::ffn_down;
    return ne[2] > 1 && (qs.arch != "bailingmoe3" || ffn) ? T::MXFP4 : T::Q8_0;
  }
  switch (role) {
    case R::token_embd: return ft == F::MOSTLY_TQ1_0 || ft == F::MOSTLY_TQ2_0 ? T::Q4_K : new_type;
    case R::attn_v: {
      // attn_v, attn_qkv and attn_kv_b share one counter (n_attention_wv
      // counts all three), so a hybrid's DeltaNet attn_qkv and its attention
      // layers' attn_v take use_more_bits turns in layer order.
      if (ft == F::MOSTLY_Q2_K) new_type = qs.n_gqa() >= 4 ? T::Q4_K : T::Q3_K;
      else if (ft == F::MOSTLY_Q3_K_M) new_type = qs.i_attention_wv < 2 ? T::Q5_K : T::Q4_K;
      else if (ft == F::MOSTLY_Q3_K_L) new_type = T::Q5_K;
      else if ((ft == F::MOSTLY_IQ4_NL || ft == F::MOSTLY_IQ4_XS) && qs.n_gqa() >= 4) new_type = T::Q5_K;
      else if ((ft == F::MOSTLY_Q4_K_M || ft == F::MOSTLY_Q5_K_M) && use_more_bits(qs.i_attention_wv, qs.n_attention_wv))
        new_type = T::Q6_K;
      else if (ft == F::MOSTLY_Q4_K_S && qs.i_attention_wv < 4) new_type = T::Q5_K;
      // 70B: 8 heads share attn_v, so a few more bits cost little.
      if (qs.is_70b && (new_type == T::Q3_K || new_type == T::Q4_K)) new_type = T::Q5_K;
      if (qs.n_expert == 8) new_type = T::Q8_0;
      ++qs.i_attention_wv;
      return new_type;
    }
    case R::attn_k: return qs.n_expert == 8 ? T::Q8_0 : new_type;
    case R::ffn_down: {
      const int i_layer = ffn_layer(qs, qs.i_ffn_down, name);
      const int n_layer = qs.n_layer;
      if (ft == F::MOSTLY_Q2_K) new_type = T::Q3_K;
      else if (ft == F::MOSTLY_Q3_K_M)
        new_type = i_layer < n_layer / 16 ? T::Q5_K
                   : !qs.falcon() || use_more_bits(i_layer, n_layer) ? T::Q4_K
                                                                     : T::Q3_K;
      else if (ft == F::MOSTLY_Q3_K_L) new_type = qs.falcon() ? T::Q4_K : T::Q5_K;
      else if (ft == F::MOSTLY_Q4_K_M) {
        if (qs.falcon())
          new_type = i_layer < n_layer / 16 ? T::Q6_K : use_more_bits(i_layer, n_layer) ? T::Q5_K : T::Q4_K;
        else if (use_more_bits(i_layer, n_layer))
          new_type = T::Q6_K;
      } else if (i_layer < n_layer / 8 && (ft == F::MOSTLY_IQ4_NL || ft == F::MOSTLY_IQ4_XS) && !qs.has_imatrix) {
        new_type = T::Q5_K;
      } else if (ft == F::MOSTLY_Q5_K_M && use_more_bits(i_layer, n_layer)) {
        new_type = T::Q6_K;
      } else if (ft == F::MOSTLY_Q4_K_S && !qs.falcon() && i_layer < n_layer / 8) {
        new_type = T::Q5_K;
      } else if ((ft == F::MOSTLY_Q4_0 || ft == F::MOSTLY_Q5_0) && qs.has_imatrix && i_layer < n_layer / 8) {
        // llama.cpp guards the first ffn_down layers of Q4_0 / Q5_0 with
        // the 1-variants, only with an imatrix (so that a plain run keeps
        // its old types).
        new_type = ft == F::MOSTLY_Q4_0 ? T::Q4_1 : T::Q5_1;
      }
      ++qs.i_ffn_down;
      return new_type;
    }
    case R::attn_output:
      if (!qs.falcon()) {
        if (qs.n_expert == 8) {
          if (ft == F::MOSTLY_Q2_K || ft == F::MOSTLY_Q3_K_S || ft == F::MOSTLY_Q3_K_M || ft == F::MOSTLY_IQ4_NL ||
              ft == F::MOSTLY_Q4_K_S || ft == F::MOSTLY_Q4_K_M || ft == F::MOSTLY_IQ4_XS)
            new_type = T::Q5_K;
        } else if (ft == F::MOSTLY_Q2_K) {
          new_type = T::Q3_K;
        } else if (ft == F::MOSTLY_Q3_K_M) {
          new_type = T::Q4_K;
        } else if (ft == F::MOSTLY_Q3_K_L) {
          new_type = T::Q5_K;
        }
      } else if (ft == F::MOSTLY_Q3_K_L) {
        new_type = T::Q4_K;
      }
      return new_type;
    // attn_q, ffn_gate and ffn_up only change for the IQ file types.
    default: return new_type;
  }
}

uint64_t tensor_bytes(GgmlType t, const std::array<int64_t, 4>& ne) {
  return row_size(t, ne[0]) * static_cast<uint64_t>(ne[1] * ne[2] * ne[3]);
}

// Converts the rows [r0, r1) of one tensor: source rows (any type synapse can
// read) to floats, checked finite, then to `to`. imatrix: nullptr, or
// [ne[2] * ne[0]] importances, one slice per expert (rows of ne[1]).
void convert_rows(const TensorPlan& p, const uint8_t* src, uint8_t* dst, int64_t r0, int64_t r1,
                  const float* imatrix) {
  const int64_t n = p.ne[0];
  const size_t rs_in = row_size(p.from, n), rs_out = row_size(p.to, n);
  std::vector<float> buf(p.from == GgmlType::F32 ? 0 : static_cast<size_t>(n));
  for (int64_t r = r0; r < r1; ++r) {
    const float* x;
    if (p.from == GgmlType::F32) {
      x = reinterpret_cast<const float*>(src + r * rs_in);
    } else {
      quant::dequantize_row(p.from, src + r * rs_in, buf.data(), n);
      x = buf.data();
    }
    for (int64_t j = 0; j < n; ++j)
      if (!std::isfinite(x[j]))
        throw Error(Errc::format, "tensor " + p.name + ": non-finite value at row " + std::to_string(r) +
                                      ", column " + std::to_string(j));
    // A weighted search with no defined result (values or importances whose
    // squares pass FLT_MAX) throws; the error names the tensor and row.
    try {
      quant::quantize_weights(p.to, x, dst + r * rs_out, n, imatrix ? imatrix + (r / p.ne[1]) * n : nullptr);
    } catch (const Error& e) {
      throw Error(e.code(), "tensor " + p.name + ", row " + std::to_string(r) + ", to " +
                                std::string(type_name(p.to)) + ": " + e.what());
    }
  }
}

}  // namespace
}  // namespace synapse::runtime

// The public half (synapse/quantize.hpp).
namespace synapse {

FileType parse_file_type(std::string_view name) {
  for (const runtime::FileTypeName& f : runtime::kFileTypes)
    if (runtime::iequals(f.name, name)) return f.ftype;
  throw Error(Errc::invalid_argument,
              "unknown quantization type '" + std::string(name) + "' (valid: " + file_type_names() + ")");
}

std::string_view file_type_name(FileType ft) noexcept {
  for (const runtime::FileTypeName& f : runtime::kFileTypes)
    if (f.ftype == ft) return f.name;
  return "unknown";
}

std::string file_type_names() {
  std::string s;
  for (const runtime::FileTypeName& f : runtime::kFileTypes) {
    if (!s.empty()) s += ", ";
    s += f.name;
    if (f.name == "Q3_K" || f.name == "Q4_K" || f.name == "Q5_K") s += " (= " + std::string(f.name) + "_M)";
  }
  return s;
}

std::vector<TensorPlan> quantize_model(const std::string& fname_inp, const std::string& fname_out,
                                       const QuantizeParams& params,
                                       const std::function<void(const TensorPlan&)>& on_tensor) {
  if (params.nthread > base::kMaxThreads)
    throw Error(Errc::invalid_argument, "nthread " + std::to_string(params.nthread) + " is above " +
                                            std::to_string(base::kMaxThreads) + " (ggml's GGML_MAX_N_THREADS)");
  runtime::QuantizeOptions opt;
  opt.ftype = params.ftype;
  opt.pure = params.pure;
  opt.allow_requantize = params.allow_requantize;
  opt.quantize_output_tensor = params.quantize_output_tensor;
  opt.output_tensor_type = params.output_tensor_type;
  opt.token_embedding_type = params.token_embedding_type;
  opt.imatrix_file = params.imatrix;
  opt.n_threads = params.nthread > 0 ? params.nthread : base::default_thread_count();
  return runtime::quantize_file(fname_inp, fname_out, opt, on_tensor);
}

}  // namespace synapse

namespace synapse::runtime {

GgmlType default_tensor_type(FileType ft) noexcept {
  switch (ft) {
    case FileType::ALL_F32: return GgmlType::F32;
    case FileType::MOSTLY_F16: return GgmlType::F16;
    case FileType::MOSTLY_BF16: return GgmlType::BF16;
    case FileType::MOSTLY_Q4_0: return GgmlType::Q4_0;
    case FileType::MOSTLY_Q4_1: return GgmlType::Q4_1;
    case FileType::MOSTLY_Q5_0: return GgmlType::Q5_0;
    case FileType::MOSTLY_Q5_1: return GgmlType::Q5_1;
    case FileType::MOSTLY_Q8_0: return GgmlType::Q8_0;
    case FileType::MOSTLY_Q2_K: return GgmlType::Q2_K;
    case FileType::MOSTLY_Q3_K_S: case FileType::MOSTLY_Q3_K_M: case FileType::MOSTLY_Q3_K_L: return GgmlType::Q3_K;
    case FileType::MOSTLY_Q4_K_S: case FileType::MOSTLY_Q4_K_M: return GgmlType::Q4_K;
    case FileType::MOSTLY_Q5_K_S: case FileType::MOSTLY_Q5_K_M: return GgmlType::Q5_K;
    case FileType::MOSTLY_Q6_K: return GgmlType::Q6_K;
    case FileType::MOSTLY_IQ4_NL: return GgmlType::IQ4_NL;
    case FileType::MOSTLY_IQ4_XS: return GgmlType::IQ4_XS;
    case FileType::MOSTLY_TQ1_0: return GgmlType::TQ1_0;
    case FileType::MOSTLY_TQ2_0: return GgmlType::TQ2_0;
    case FileType::MOSTLY_MXFP4_MOE: return GgmlType::MXFP4;
    case FileType::MOSTLY_IQ2_XXS: case FileType::MOSTLY_IQ2_XS: case FileType::MOSTLY_IQ2_S:
    case FileType::MOSTLY_IQ2_M: case FileType::MOSTLY_IQ1_S: case FileType::MOSTLY_IQ1_M:
    case FileType::MOSTLY_IQ3_XXS: case FileType::MOSTLY_IQ3_XS: case FileType::MOSTLY_IQ3_S:
    case FileType::MOSTLY_IQ3_M:
      return model::iq_default_type(static_cast<uint32_t>(ft));
  }
  return GgmlType::F32;
}

namespace {
// A type given for one tensor (--output-tensor-type, --token-embedding-type):
// one synapse writes, whose block divides the tensor's rows (llama.cpp would
// fail on the row later). Throws Error(invalid_argument) naming `field`.
GgmlType explicit_type(GgmlType type, const gguf::TensorInfo& t, const char* field) {
  bool writable = false;
  for (const FileTypeName& f : kFileTypes) writable = writable || default_tensor_type(f.ftype) == type;
  if (!writable)
    throw Error(Errc::invalid_argument, std::string(field) + " " + std::string(type_name(type)) +
                                            ": synapse does not write this type");
  if (t.ne[0] % type_traits(type).block_size != 0)
    throw Error(Errc::invalid_argument, std::string(field) + " " + std::string(type_name(type)) + ": tensor " +
                                            t.name + " has rows of " + std::to_string(t.ne[0]) +
                                            ", not a multiple of its block of " +
                                            std::to_string(type_traits(type).block_size));
  return type;
}
}  // namespace

std::vector<TensorPlan> plan_quantization(const gguf::File& in, const QuantizeOptions& opt) {
  QuantizeState qs = read_state(in);
  qs.has_imatrix = !opt.imatrix_file.empty();

  // llama_model_loader::weights_map order (weight_name_comparer).
  std::vector<const gguf::TensorInfo*> order;
  for (const gguf::TensorInfo& t : in.tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const gguf::TensorInfo* a, const gguf::TensorInfo* b) {
    const int la = layer_of(a->name), lb = layer_of(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });

  const GgmlType default_type = default_tensor_type(opt.ftype);
  std::vector<TensorPlan> plan;
  plan.reserve(order.size());
  for (const gguf::TensorInfo* t : order) {
    TensorPlan p;
    p.name = t->name;
    p.ne = t->ne;
    p.n_dims = ggml_n_dims(t->ne);  // what gguf_add_tensor writes
    p.from = p.to = t->type;
    p.bytes_in = t->n_bytes;
    p.quantizable = allows_quantization(t->name, t->ne) && (opt.quantize_output_tensor || t->name != "output.weight");
    const bool token_embd = t->name == "token_embd.weight" || t->name == "per_layer_token_embd.weight";
    if (p.quantizable && opt.token_embedding_type && token_embd) {
      p.to = explicit_type(*opt.token_embedding_type, *t, "token_embedding_type");  // as given, no fallback
    } else if (p.quantizable && opt.output_tensor_type && t->name == "output.weight") {
      p.to = explicit_type(*opt.output_tensor_type, *t, "output_tensor_type");
    } else if (p.quantizable) {
      GgmlType new_type = default_type;
      if (is_quantized(default_type)) {
        // llama-quantize --pure skips both the mix and the fallbacks (and
        // then fails on a row that fits no block); synapse keeps the fallbacks.
        if (!opt.pure) new_type = mixed_type(qs, new_type, t->name, t->ne, opt.ftype, opt.output_tensor_type);
        new_type = fallback_type(new_type, t->ne[0], p.fallback);
      }
      p.to = new_type;
    }
    p.bytes_out = p.to == p.from ? t->n_bytes : tensor_bytes(p.to, t->ne);
    plan.push_back(std::move(p));
  }
  return plan;
}

namespace {

// tensor_requires_imatrix (llama-quant.cpp v0.5.0): the lattice types but
// IQ3_S, except for token_embd and output. (Its Q2_K case is for file type
// Q2_K_S, which synapse does not write.)
bool requires_imatrix(const TensorPlan& p) {
  if (p.name == "token_embd.weight" || p.name == "per_layer_token_embd.weight" || p.name == "output.weight")
    return false;
  switch (p.to) {
    case GgmlType::IQ3_XXS: case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS: case GgmlType::IQ2_S:
    case GgmlType::IQ1_M: case GgmlType::IQ1_S: return true;
    default: return false;
  }
}

// The importance matrix as llama-quantize holds it: per tensor name the
// normalised importances (imatrix.hpp), with what it records in the output.
struct ImatrixData {
  std::map<std::string, std::vector<float>> importance;
  std::string dataset;  // the first of imatrix.datasets, if any
  int32_t chunk_count = 0;
};

// tools/quantize/quantize.cpp load_imatrix and llama_model_quantize_impl's
// check for non-finite values; negative ones (a mean of squares cannot be
// negative: only a damaged or made-up file has them) are refused too, as the
// weighted searches have no defined result for them.
ImatrixData read_imatrix_data(const std::string& path) {
  const Imatrix m = load_imatrix(path);
  if (!m.is_legacy && !m.has_metadata)
    throw Error(Errc::format, "imatrix " + path + ": missing imatrix metadata (imatrix.datasets, chunk_count, chunk_size)");
  ImatrixData d;
  for (const auto& [name, e] : m.entries) {
    std::vector<float> v = imatrix_importance(e, m.is_legacy);
    for (float f : v)
      if (!std::isfinite(f))
        throw Error(Errc::format, "imatrix " + path + ": imatrix contains non-finite value " + std::to_string(f) +
                                      " (entry " + name + ")");
      else if (f < 0.0f)
        throw Error(Errc::format, "imatrix " + path + ": imatrix contains negative value " + std::to_string(f) +
                                      " (entry " + name + ")");
    d.importance.emplace(name, std::move(v));
  }
  if (!m.datasets.empty()) d.dataset = m.datasets[0];
  d.chunk_count = m.chunk_count;
  return d;
}

// llama-quantize's kv override strings: at most 127 bytes (val_str[128]).
std::string kv_override_string(const std::string& s) { return s.substr(0, std::min<size_t>(s.size(), 127)); }

}  // namespace

gguf::Writer quantize_model(const gguf::File& in, const QuantizeOptions& opt,
                            const std::function<void(const TensorPlan&)>& on_tensor) {
  const std::vector<TensorPlan> plan = plan_quantization(in, opt);
  const bool with_imatrix = !opt.imatrix_file.empty();
  const ImatrixData imx = with_imatrix ? read_imatrix_data(opt.imatrix_file) : ImatrixData{};

  // llama_model_quantize_impl's first pass: refuse before writing anything.
  for (const TensorPlan& p : plan) {
    if (!p.quantizable || p.to == p.from) continue;
    if (!with_imatrix && requires_imatrix(p))
      throw Error(Errc::invalid_argument, "this quantization requires an importance matrix (--imatrix FILE): "
                                          "offending tensor " + p.name + ", target type " +
                                              std::string(type_name(p.to)));
  }

  gguf::Writer w;
  const auto overridden = [&](const std::string& key) {
    return key == "general.quantization_version" || key == "general.file_type" ||
           (with_imatrix && (key == "quantize.imatrix.file" || key == "quantize.imatrix.dataset" ||
                             key == "quantize.imatrix.entries_count" || key == "quantize.imatrix.chunks_count"));
  };
  for (const gguf::KeyValue& kv : in.metadata())
    if (!overridden(kv.key)) w.set_value(kv.key, kv.value);
  w.set_u32("general.quantization_version", 2);  // GGML_QNT_VERSION
  w.set_u32("general.file_type", static_cast<uint32_t>(opt.ftype));
  if (with_imatrix) {
    // tools/quantize/quantize.cpp's kv overrides, in its order.
    w.set_string("quantize.imatrix.file", kv_override_string(opt.imatrix_file));
    if (!imx.dataset.empty()) w.set_string("quantize.imatrix.dataset", kv_override_string(imx.dataset));
    w.set_u32("quantize.imatrix.entries_count", static_cast<uint32_t>(imx.importance.size()));
    if (imx.chunk_count > 0) w.set_u32("quantize.imatrix.chunks_count", static_cast<uint32_t>(imx.chunk_count));
  }

  const int n_threads = std::max(1, opt.n_threads);
  std::vector<uint8_t> out;
  for (const TensorPlan& p : plan) {
    const gguf::TensorInfo& t = *in.find_tensor(p.name);
    const std::span<const int64_t> ne(p.ne.data(), p.n_dims);
    if (p.to == p.from) {
      w.add_tensor(p.name, p.to, ne, std::span<const uint8_t>(t.data, t.n_bytes));
    } else {
      const TypeTraits& from = type_traits(p.from);
      if (!from.known || !(from.supported || p.from == GgmlType::F32))
        throw Error(Errc::unsupported, "tensor " + p.name + " has type " + std::string(from.name) +
                                           ", which synapse cannot convert to " + std::string(type_name(p.to)));
      if (is_quantized(p.from) && !opt.allow_requantize)
        throw Error(Errc::invalid_argument, "tensor " + p.name + " is already quantized (" + std::string(from.name) +
                                                "); requantizing loses accuracy, pass --allow-requantize to do it");
      // The matrix's importances: llama-quantize's lookup by name, used
      // when they cover ne[0] columns of every expert (token_embd's
      // mismatch is ignored, as llama-quantize ignores it).
      const float* imatrix = nullptr;
      if (const auto it = imx.importance.find(p.name); it != imx.importance.end()) {
        if (it->second.size() == static_cast<size_t>(p.ne[0] * p.ne[2])) {
          imatrix = it->second.data();
        } else if (p.name != "token_embd.weight" && p.name != "per_layer_token_embd.weight") {
          throw Error(Errc::format, "imatrix size " + std::to_string(it->second.size()) +
                                        " is different from tensor size " + std::to_string(p.ne[0] * p.ne[2]) +
                                        " for " + p.name);
        }
      }
      if (imatrix == nullptr && requires_imatrix(p))
        throw Error(Errc::invalid_argument, "Missing importance matrix for tensor " + p.name +
                                                " in a very low-bit quantization");
      out.assign(p.bytes_out, 0);
      const int64_t n_rows = p.ne[1] * p.ne[2] * p.ne[3];
      const int64_t n_use = std::min<int64_t>(n_threads, n_rows);
      if (n_use <= 1) {
        convert_rows(p, t.data, out.data(), 0, n_rows, imatrix);
      } else {
        std::vector<std::thread> workers;
        std::vector<std::exception_ptr> errors(static_cast<size_t>(n_use));
        for (int64_t k = 0; k < n_use; ++k)
          workers.emplace_back([&, k] {
            try {
              convert_rows(p, t.data, out.data(), n_rows * k / n_use, n_rows * (k + 1) / n_use, imatrix);
            } catch (...) {
              errors[static_cast<size_t>(k)] = std::current_exception();
            }
          });
        for (std::thread& th : workers) th.join();
        for (const std::exception_ptr& e : errors)
          if (e) std::rethrow_exception(e);
      }
      w.add_tensor(p.name, p.to, ne, out);
    }
    if (on_tensor) on_tensor(p);
  }
  return w;
}

std::vector<TensorPlan> quantize_file(const std::string& in_path, const std::string& out_path,
                                      const QuantizeOptions& opt,
                                      const std::function<void(const TensorPlan&)>& on_tensor) {
  const gguf::File in = gguf::File::open(in_path);
  const gguf::Writer w = quantize_model(in, opt, on_tensor);
  w.write(out_path);
  return plan_quantization(in, opt);
}

}  // namespace synapse::runtime
