#include "model/model.hpp"

#include <span>
#include <string>

#include "base/strings.hpp"
#include "quant/quant.hpp"

namespace synapse::model {
namespace {

std::string shape_str(const gguf::TensorInfo& t) {
  return join_in("[", std::span(t.ne.data(), t.n_dims), ", ", "]");
}

class Binder {
 public:
  explicit Binder(const gguf::File& f) : f_(f) {}

  const gguf::TensorInfo* find(const std::string& name) const { return f_.find_tensor(name); }

  const gguf::TensorInfo& require(const std::string& name) const {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t) throw Error(Errc::format, f_.path() + ": required tensor '" + name + "' is missing");
    return *t;
  }

  void check_shape(const gguf::TensorInfo& t, std::initializer_list<int64_t> ne) const {
    bool ok = true;
    size_t d = 0;
    for (int64_t want : ne) ok = ok && t.ne[d++] == want;
    for (; d < 4; ++d) ok = ok && t.ne[d] == 1;
    if (!ok) {
      throw Error(Errc::format, f_.path() + ": tensor '" + t.name + "' has shape " + shape_str(t) +
                                    ", expected [" + join(ne, ", ") + "]");
    }
  }

  // A matrix [n_in -> n_out] (ne = {n_in, n_out}).
  WeightView matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
    const gguf::TensorInfo& t = require(name);
    check_shape(t, {n_in, n_out});
    return view(t);
  }

  WeightView view(const gguf::TensorInfo& t) const {
    if (!quant::is_supported_weight(t.type))
      throw Error(Errc::unsupported, f_.path() + ": tensor '" + t.name + "' has type " +
                                         std::string(type_name(t.type)) + ", which synapse does not support");
    WeightView w;
    w.name = t.name;
    w.type = t.type;
    w.n_in = t.ne[0];
    w.n_out = t.ne[1] * t.ne[2] * t.ne[3];
    w.row_bytes = row_size(t.type, t.ne[0]);
    w.data = t.data;
    return w;
  }

  // A 1-D float vector of length n (norms, biases): F32/F16/BF16 to float.
  std::vector<float> vec(const std::string& name, int64_t n) const { return table(name, n, 1); }

  // A float table of n1 rows of n0 (ne = {n0, n1}; per-expert biases), row-major.
  std::vector<float> table(const std::string& name, int64_t n0, int64_t n1) const {
    const gguf::TensorInfo& t = require(name);
    if (n1 == 1) check_shape(t, {n0});
    else check_shape(t, {n0, n1});
    const int64_t n = n0 * n1;
    std::vector<float> out(static_cast<size_t>(n));
    if (t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16)
      throw Error(Errc::unsupported, f_.path() + ": tensor '" + name + "' has type " +
                                         std::string(type_name(t.type)) + "; vectors must be F32, F16 or BF16");
    quant::dequantize_row(t.type, t.data, out.data(), n);
    return out;
  }

  std::vector<float> opt_vec(const std::string& name, int64_t n) const {
    return find(name) ? vec(name, n) : std::vector<float>{};
  }

  const std::string& path() const { return f_.path(); }

 private:
  const gguf::File& f_;
};

void bind_experts(const Binder& b, const HParams& hp, int il, Layer& L) {
  const std::string p = "blk." + std::to_string(il) + ".";
  L.ffn_gate_inp = b.matrix(p + "ffn_gate_inp.weight", hp.n_embd, hp.n_expert);
  const struct {
    const char* name;
    int64_t n_in, n_out;
    std::vector<WeightView>* dst;
  } parts[] = {{"ffn_gate", hp.n_embd, hp.n_ff, &L.gate_exps},
               {"ffn_up", hp.n_embd, hp.n_ff, &L.up_exps},
               {"ffn_down", hp.n_ff, hp.n_embd, &L.down_exps}};
  for (const auto& part : parts) {
    const std::string merged = p + part.name + "_exps.weight";
    if (const gguf::TensorInfo* t = b.find(merged)) {
      // Merged layout: one 3-D tensor [n_in, n_out, n_expert] sliced into views.
      b.check_shape(*t, {part.n_in, part.n_out, hp.n_expert});
      const WeightView all = b.view(*t);
      for (int64_t e = 0; e < hp.n_expert; ++e)
        part.dst->push_back(all.rows(e * part.n_out, part.n_out, merged + "[" + std::to_string(e) + "]"));
    } else if (b.find(p + part.name + ".0.weight")) {
      // Older split layout: blk.N.ffn_gate.E.weight, one 2-D tensor per expert.
      for (int64_t e = 0; e < hp.n_expert; ++e)
        part.dst->push_back(b.matrix(p + part.name + "." + std::to_string(e) + ".weight", part.n_in, part.n_out));
    } else {
      b.require(merged);  // throws, naming the merged tensor
    }
  }
  if (hp.n_ff_shexp > 0) {  // qwen35moe's shared expert (llama.cpp v0.5.0 requires it)
    L.ffn_gate_inp_shexp = b.matrix(p + "ffn_gate_inp_shexp.weight", hp.n_embd, 1);
    L.ffn_gate_shexp = b.matrix(p + "ffn_gate_shexp.weight", hp.n_embd, hp.n_ff_shexp);
    L.ffn_up_shexp = b.matrix(p + "ffn_up_shexp.weight", hp.n_embd, hp.n_ff_shexp);
    L.ffn_down_shexp = b.matrix(p + "ffn_down_shexp.weight", hp.n_ff_shexp, hp.n_embd);
  }
  if (hp.arch == Arch::gpt_oss) {  // llama.cpp's openai-moe requires every bias
    L.ffn_gate_inp_b = b.vec(p + "ffn_gate_inp.bias", hp.n_expert);
    L.gate_exps_b = b.table(p + "ffn_gate_exps.bias", hp.n_ff, hp.n_expert);
    L.up_exps_b = b.table(p + "ffn_up_exps.bias", hp.n_ff, hp.n_expert);
    L.down_exps_b = b.table(p + "ffn_down_exps.bias", hp.n_embd, hp.n_expert);
  }
}

// A Gated DeltaNet layer's tensors (llama.cpp v0.5.0 llama_model_qwen35::
// load_arch_tensors); attn_qkv and attn_gate are required here (the fused
// ssm_ba / qkvz layouts of other converters are not read).
void bind_delta_net(const Binder& b, const HParams& hp, int il, Layer& L) {
  const std::string p = "blk." + std::to_string(il) + ".";
  const int64_t channels = hp.ssm_conv_channels();
  L.wqkv = b.matrix(p + "attn_qkv.weight", hp.n_embd, channels);
  L.wqkv_gate = b.matrix(p + "attn_gate.weight", hp.n_embd, hp.ssm_d_inner);
  const gguf::TensorInfo& conv = b.require(p + "ssm_conv1d.weight");
  if (conv.type != GgmlType::F32)
    throw Error(Errc::unsupported, b.path() + ": tensor '" + conv.name + "' has type " +
                                       std::string(type_name(conv.type)) + "; ggml_ssm_conv reads F32 only");
  L.ssm_conv1d = b.table(p + "ssm_conv1d.weight", hp.ssm_d_conv, channels);
  L.ssm_dt = b.vec(p + "ssm_dt.bias", hp.ssm_dt_rank);
  L.ssm_a = b.vec(p + "ssm_a", hp.ssm_dt_rank);
  L.ssm_beta = b.matrix(p + "ssm_beta.weight", hp.n_embd, hp.ssm_dt_rank);
  L.ssm_alpha = b.matrix(p + "ssm_alpha.weight", hp.n_embd, hp.ssm_dt_rank);
  L.ssm_norm = b.vec(p + "ssm_norm.weight", hp.ssm_d_state);
  L.ssm_out = b.matrix(p + "ssm_out.weight", hp.ssm_d_inner, hp.n_embd);
}

// Every matrix the active ISA runs faster interleaved
// (kernels::interleave_weight: Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4, Q4_K and Q6_K
// under AVX2 and AVX-512; each MoE expert's view too) gets its
// interleaved copy (the views of one file never share rows, except a tied
// token_embd, which takes the output's copy). The speed-ups are in the
// commits that added each type and in docs/PERFORMANCE.md.
void interleave_weights(Model& m) {
  const quant::Isa isa = quant::active_isa();
  const auto one = [&](WeightView& w) {
    const uint8_t* plain = w.data;
    if (kernels::interleave_weight(w, m.interleaved, isa)) {
      // Nothing reads the plain rows now: their pages leave the resident
      // set (without this a Q4_0 model's RSS held both copies).
      m.file.release_pages(plain, static_cast<size_t>(w.n_out) * w.row_bytes);
    }
  };
  // token_embd only when it is also the output: else it is read one row
  // per token (get_row), where the copy gains nothing.
  const bool tied = m.tok_embd.data == m.output.data && m.tok_embd.n_out == m.output.n_out;
  one(m.output);
  if (tied && m.output.interleaved) {
    m.tok_embd.data = m.output.data;
    m.tok_embd.interleaved = true;
    m.tok_embd.group_bytes = m.output.group_bytes;
  }
  for (Layer& L : m.layers) {
    for (WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_gate, &L.ffn_up, &L.ffn_down, &L.ffn_gate_inp, &L.wqkv,
                          &L.wqkv_gate, &L.ssm_out, &L.ffn_gate_shexp, &L.ffn_up_shexp, &L.ffn_down_shexp})
      one(*w);
    for (auto* exps : {&L.gate_exps, &L.up_exps, &L.down_exps})
      for (WeightView& w : *exps) one(w);
  }
}

}  // namespace

const float* Model::rope_factors(int64_t n_ctx) const {
  if (!rope_freqs.empty()) return rope_freqs.data();
  if (rope_factors_long.empty()) return nullptr;
  const int64_t n_ctx_seq = (n_ctx + 255) / 256 * 256;
  return n_ctx_seq > hp.n_ctx_orig_yarn ? rope_factors_long.data() : rope_factors_short.data();
}

uint64_t Model::weight_bytes() const {
  uint64_t n = 0;
  for (const auto& t : file.tensors()) n += t.n_bytes;
  return n;
}

uint64_t Model::n_params() const {
  uint64_t n = 0;
  for (const auto& t : file.tensors()) n += static_cast<uint64_t>(t.n_elements());
  return n;
}

std::unique_ptr<Model> load_model(const std::string& path) { return load_model(gguf::File::open(path)); }

std::unique_ptr<Model> load_model(gguf::File file) {
  auto m = std::make_unique<Model>(Model{std::move(file), {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, -1, -1});
  const gguf::File& f = m->file;
  m->hp = read_hparams(f);
  const HParams& hp = m->hp;
  const Binder b(f);

  m->tok_embd = b.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  m->output_norm = b.vec("output_norm.weight", hp.n_embd);
  // gpt-oss requires its own output (llama.cpp's openai-moe); the others may tie it.
  m->output = b.find("output.weight") || hp.arch == Arch::gpt_oss ? b.matrix("output.weight", hp.n_embd, hp.n_vocab)
                                                                  : m->tok_embd;
  m->rope_freqs = b.opt_vec("rope_freqs.weight", hp.n_rot / 2);
  if (const gguf::TensorInfo* cls = b.find("cls.output.weight")) {
    if (hp.n_cls_labels > 0) b.check_shape(*cls, {hp.n_embd, hp.n_cls_labels});
    m->cls_out = b.matrix("cls.output.weight", hp.n_embd, cls->ne[1]);
    m->cls_out_b = b.opt_vec("cls.output.bias", cls->ne[1]);
  }
  if (hp.arch == Arch::phi3 && (b.find("rope_factors_long.weight") || b.find("rope_factors_short.weight"))) {
    // Phi-3 LongRoPE (llama.cpp loads these for phi3): both sets, since the
    // context size picks one at run time.
    m->rope_factors_long = b.vec("rope_factors_long.weight", hp.n_rot / 2);
    m->rope_factors_short = b.vec("rope_factors_short.weight", hp.n_rot / 2);
    if (hp.n_ctx_orig_yarn <= 0)
      throw Error(Errc::format, f.path() + ": " + hp.key_prefix +
                                    ".rope.scaling.original_context_length: LongRoPE factors need the original "
                                    "context length (or context_length)");
  }

  const int64_t n_q = hp.n_embd_head_k * hp.n_head, n_k = hp.n_embd_k_gqa(), n_v = hp.n_embd_v_gqa();
  const int64_t n_attn_out = hp.n_embd_head_v * hp.n_head;
  m->layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    Layer& L = m->layers[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    L.attn_norm = b.vec(p + "attn_norm.weight", hp.n_embd);
    // gpt-oss and qwen35 name their FFN norm post_attention_norm (llama.cpp's LLM_TENSOR_ATTN_POST_NORM; the same
    // place in the layer).
    const bool post_attention_ffn_norm =
        hp.arch == Arch::gpt_oss || hp.arch == Arch::qwen35 || hp.arch == Arch::qwen35moe;
    L.ffn_norm = b.vec(p + (post_attention_ffn_norm ? "post_attention_norm.weight" : "ffn_norm.weight"), hp.n_embd);
    if (hp.is_recurrent(il)) {
      bind_delta_net(b, hp, il, L);
    } else if (hp.attn_output_gate) {  // qwen35: q and its gate, per head
      L.wq = b.matrix(p + "attn_q.weight", hp.n_embd, 2 * n_q);
      L.wk = b.matrix(p + "attn_k.weight", hp.n_embd, n_k);
      L.wv = b.matrix(p + "attn_v.weight", hp.n_embd, n_v);
    } else if (hp.fused_qkv) {
      const WeightView qkv = b.matrix(p + "attn_qkv.weight", hp.n_embd, n_q + n_k + n_v);
      L.wq = qkv.rows(0, n_q, p + "attn_qkv.weight[q]");
      L.wk = qkv.rows(n_q, n_k, p + "attn_qkv.weight[k]");
      L.wv = qkv.rows(n_q + n_k, n_v, p + "attn_qkv.weight[v]");
    } else {
      L.wq = b.matrix(p + "attn_q.weight", hp.n_embd, n_q);
      L.wk = b.matrix(p + "attn_k.weight", hp.n_embd, n_k);
      L.wv = b.matrix(p + "attn_v.weight", hp.n_embd, n_v);
    }
    if (!hp.is_recurrent(il)) L.wo = b.matrix(p + "attn_output.weight", n_attn_out, hp.n_embd);
    L.bq = b.opt_vec(p + "attn_q.bias", n_q);
    L.bk = b.opt_vec(p + "attn_k.bias", n_k);
    L.bv = b.opt_vec(p + "attn_v.bias", n_v);
    L.bo = hp.arch == Arch::gpt_oss ? b.vec(p + "attn_output.bias", hp.n_embd)
                                    : b.opt_vec(p + "attn_output.bias", hp.n_embd);
    if (hp.attn_sinks) L.attn_sinks = b.vec(p + "attn_sinks.weight", hp.n_head);
    if (hp.qk_norm && !hp.is_recurrent(il)) {
      L.attn_q_norm = b.vec(p + "attn_q_norm.weight", hp.n_embd_head_k);
      L.attn_k_norm = b.vec(p + "attn_k_norm.weight", hp.n_embd_head_k);
    }
    if (hp.post_norms) {
      L.attn_post_norm = b.vec(p + "post_attention_norm.weight", hp.n_embd);
      L.ffn_post_norm = b.vec(p + "post_ffw_norm.weight", hp.n_embd);
    }
    if (hp.n_expert > 0) {
      bind_experts(b, hp, il, L);
    } else if (hp.fused_qkv) {
      const WeightView up = b.matrix(p + "ffn_up.weight", hp.n_embd, 2 * hp.n_ff);
      L.ffn_gate = up.rows(0, hp.n_ff, p + "ffn_up.weight[gate]");
      L.ffn_up = up.rows(hp.n_ff, hp.n_ff, p + "ffn_up.weight[up]");
      L.ffn_down = b.matrix(p + "ffn_down.weight", hp.n_ff, hp.n_embd);
    } else {
      L.ffn_gate = b.matrix(p + "ffn_gate.weight", hp.n_embd, hp.n_ff);
      L.ffn_up = b.matrix(p + "ffn_up.weight", hp.n_embd, hp.n_ff);
      L.ffn_down = b.matrix(p + "ffn_down.weight", hp.n_ff, hp.n_embd);
    }
  }
  m->tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_gguf(f));
  // Every token id the tokenizer can produce needs an embedding row and an
  // output row (llama.cpp refuses the file at load: token_embd's shape
  // must be [n_embd, n_vocab]); output.weight was bound at n_vocab rows above.
  if (m->tokenizer->n_vocab() != hp.n_vocab)
    throw Error(Errc::format, f.path() + ": the vocabulary has " + std::to_string(m->tokenizer->n_vocab()) +
                                  " tokens (tokenizer.ggml.tokens) but token_embd.weight has " +
                                  std::to_string(hp.n_vocab) + " rows");
  if (!m->cls_out.data && hp.arch == Arch::qwen3) {
    for (token_id id = 0; id < m->tokenizer->n_vocab(); ++id) {
      const std::string& text = m->tokenizer->text(id);
      if (text == "yes" && m->rank_yes < 0) m->rank_yes = id;
      if (text == "no" && m->rank_no < 0) m->rank_no = id;
    }
    if (m->rank_yes < 0 || m->rank_no < 0) m->rank_yes = m->rank_no = -1;
  }
  interleave_weights(*m);
  return m;
}

}  // namespace synapse::model
