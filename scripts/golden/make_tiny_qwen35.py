#!/usr/bin/env python3
"""Makes the tiny-qwen35 test models and their golden cases (tests/data).

shared/tools/make_model.py has no qwen35 preset and shared/ is read-only, so
this script imports it as a module, registers the preset `tiny-qwen35`, gives
it Qwen3.5's tensors (its own tensor list: Gated DeltaNet layers and gated
attention layers) and keys, and runs its writer; everything else is llama.cpp
v0.5.0 (de3ff81): llama-quantize for the Q8_0 file and
shared/tools/golden_dump.cpp (compiled against the same build, its header says
how) for the logits.

The preset, as llama.cpp v0.5.0 reads qwen35 (src/models/qwen35.cpp) and as
its converter writes Qwen3.5 0.8B-9B, scaled down: arch qwen35, 6 layers with
full_attention_interval 3 (layers 2 and 5 attend, 0, 1, 3, 4 are Gated
DeltaNet layers), n_embd 128, FFN 256 (SwiGLU, post_attention_norm before it);
attention: 4/2 heads of head dim 64 (key_length/value_length written), q
projection 2 x 256 wide (per head q then its output gate), per-head q/k
RMSNorm, IMROPE on the first 16 dims (rope.dimension_count 16, sections
[3, 3, 2, 0]: text positions, as the real files' [11, 11, 10, 0] over 64),
theta 1e7; DeltaNet: ssm.conv_kernel 4, ssm.state_size 32 (head dim of q, k
and v), ssm.group_count 2 (q/k heads), ssm.time_step_rank 4 (v heads: twice
the q/k heads, as the 4B/9B), ssm.inner_size 128; ssm_a = -exp(A_log) in
[-1, -0.05] so the state decays slowly enough to carry context; rms eps 1e-6;
untied output; BPE vocab 512 (qwen2 pre-tokenizer).

Usage (Debian's python3 has NumPy; gguf-py comes from the llama.cpp source):
  PYTHONPATH=/work/ref/llama.cpp/gguf-py /usr/bin/python3 scripts/golden/make_tiny_qwen35.py \\
      --shared /work/shared --llama-build /work/ref/llama-build --golden-dump /tmp/golden_dump \\
      --out tests/data
Writes models/tiny-qwen35-{f32,q8_0}.gguf and golden/tiny-qwen35-*.{short,long}.{json,logits.f32}
under --out, and prints the MANIFEST / PROVENANCE lines. With --moe the same for the preset
tiny-qwen35moe (arch qwen35moe: tiny-qwen35's first 3 layers with an MoE FFN of 8 experts of 64, top 2,
softmax router renormalised, and a shared expert of 128 gated by sigmoid(ffn_gate_inp_shexp x)):
tiny-qwen35moe-{f32,q8_0}.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_case import parse_args, write_preset_cases  # noqa: E402

N_VOCAB = 512
N_ROT = 16
SECTIONS = [3, 3, 2, 0]
INTERVAL = 3
D_CONV = 4
D_STATE = 32     # ssm.state_size: head dim of q, k and v
N_GROUP = 2      # ssm.group_count: q/k heads
N_V_HEADS = 4    # ssm.time_step_rank: v heads
D_INNER = D_STATE * N_V_HEADS
N_FF_SHEXP = 128  # qwen35moe: the shared expert's width
# Gains (std = gain / sqrt(fan_in)) of the DeltaNet matrices; the rest are make_model's.
QWEN35_GAINS = {"attn_qkv": 1.0, "attn_gate": 1.0, "ssm_beta": 1.0, "ssm_alpha": 1.0, "ssm_out": 0.3}


def is_recurrent(il: int) -> bool:
    return (il + 1) % INTERVAL != 0


def load_make_model(shared: str):
    sys.path.insert(0, os.path.join(shared, "tools"))
    import make_model  # noqa: E402  (shared/tools/make_model.py, read-only)
    mm = make_model
    mm.PRESETS["tiny-qwen35"] = mm.Preset(
        arch="qwen35", n_layer=6, n_embd=128, n_head=4, n_head_kv=2, n_ff=256,
        n_vocab=N_VOCAB, n_ctx=262144, rope_theta=10000000.0, rms_eps=1e-6, tied=False,
        tokenizer="bpe", bpe_pre="qwen2", special="qwen3", head_dim=64, qk_norm=True,
        gains={**mm.STRUCTURED_GAINS, **QWEN35_GAINS}, norm_noise=0.1,
        description="golden: Qwen3.5 style hybrid, 4 Gated DeltaNet + 2 gated attention layers (interval 3), "
                    "IMROPE on 16 of 64 dims, BPE vocab 512, untied")

    base_specs = mm.tensor_specs

    def tensor_specs(p):
        """qwen35's tensors as llama.cpp's llama_model_qwen35::load_arch_tensors names and shapes them
        (numpy order: ggml ne reversed)."""
        if p.arch not in ("qwen35", "qwen35moe"):
            return base_specs(p)
        S = mm.TensorSpec
        hd = p.head_dim
        conv_dim = 2 * D_STATE * N_GROUP + D_INNER
        ts = [S("token_embd.weight", (p.n_vocab, p.n_embd), "weight")]
        for i in range(p.n_layer):
            b = f"blk.{i}."
            ts.append(S(b + "attn_norm.weight", (p.n_embd,), "norm"))
            if is_recurrent(i):
                ts += [S(b + "attn_qkv.weight", (conv_dim, p.n_embd), "weight"),
                       S(b + "attn_gate.weight", (D_INNER, p.n_embd), "weight"),
                       S(b + "ssm_conv1d.weight", (conv_dim, D_CONV), "conv"),
                       S(b + "ssm_dt.bias", (N_V_HEADS,), "dt"),
                       S(b + "ssm_a", (N_V_HEADS,), "a"),
                       S(b + "ssm_beta.weight", (N_V_HEADS, p.n_embd), "weight"),
                       S(b + "ssm_alpha.weight", (N_V_HEADS, p.n_embd), "weight"),
                       S(b + "ssm_norm.weight", (D_STATE,), "norm"),
                       S(b + "ssm_out.weight", (p.n_embd, D_INNER), "weight")]
            else:
                ts += [S(b + "attn_q.weight", (2 * hd * p.n_head, p.n_embd), "weight"),
                       S(b + "attn_k.weight", (hd * p.n_head_kv, p.n_embd), "weight"),
                       S(b + "attn_v.weight", (hd * p.n_head_kv, p.n_embd), "weight"),
                       S(b + "attn_q_norm.weight", (hd,), "norm"),
                       S(b + "attn_k_norm.weight", (hd,), "norm"),
                       S(b + "attn_output.weight", (p.n_embd, hd * p.n_head), "weight")]
            ts.append(S(b + "post_attention_norm.weight", (p.n_embd,), "norm"))
            if p.n_expert:  # qwen35moe: routed experts and the gated shared expert
                e = p.n_expert
                ts += [S(b + "ffn_gate_inp.weight", (e, p.n_embd), "router"),
                       S(b + "ffn_gate_exps.weight", (e, p.n_ff, p.n_embd), "weight"),
                       S(b + "ffn_down_exps.weight", (e, p.n_embd, p.n_ff), "weight"),
                       S(b + "ffn_up_exps.weight", (e, p.n_ff, p.n_embd), "weight"),
                       S(b + "ffn_gate_inp_shexp.weight", (p.n_embd,), "shexp_gate"),
                       S(b + "ffn_gate_shexp.weight", (N_FF_SHEXP, p.n_embd), "weight"),
                       S(b + "ffn_down_shexp.weight", (p.n_embd, N_FF_SHEXP), "weight"),
                       S(b + "ffn_up_shexp.weight", (N_FF_SHEXP, p.n_embd), "weight")]
            else:
                ts += [S(b + "ffn_gate.weight", (p.n_ff, p.n_embd), "weight"),
                       S(b + "ffn_down.weight", (p.n_embd, p.n_ff), "weight"),
                       S(b + "ffn_up.weight", (p.n_ff, p.n_embd), "weight")]
        ts.append(S("output_norm.weight", (p.n_embd,), "norm"))
        ts.append(S("output.weight", (p.n_vocab, p.n_embd), "weight"))
        return ts

    mm.tensor_specs = tensor_specs

    base_data = mm.make_data

    def make_data(spec, p, rng, std, norm_noise, dt):
        if p.arch in ("qwen35", "qwen35moe"):
            if spec.kind == "shexp_gate":  # the shared expert's gate logit: sigmoid of about N(0, 1)
                return (rng.standard_normal(spec.shape, dtype=np.float32) / np.float32(np.sqrt(p.n_embd))).astype(np.float32)
            if spec.kind == "weight" and spec.role.endswith("_shexp"):
                x = rng.standard_normal(spec.shape, dtype=np.float32)
                return (x * np.float32(mm.structured_std(spec.role.replace("_shexp", ""), spec.shape[-1],
                                                         p.gains))).astype(dt)
            if spec.kind == "conv":   # the short convolution's taps (stays F32: llama-quantize skips ssm_conv1d)
                return (rng.standard_normal(spec.shape, dtype=np.float32) * np.float32(0.5)).astype(np.float32)
            if spec.kind == "dt":     # ssm_dt.bias
                return (0.5 * rng.standard_normal(spec.shape)).astype(np.float32)
            if spec.kind == "a":      # ssm_a = -exp(A_log)
                return (-rng.uniform(0.05, 1.0, spec.shape)).astype(np.float32)
            if spec.kind == "weight" and spec.role in ("attn_qkv", "attn_gate", "ssm_beta", "ssm_alpha", "ssm_out"):
                x = rng.standard_normal(spec.shape, dtype=np.float32)
                return (x * np.float32(mm.structured_std(spec.role, spec.shape[-1], p.gains))).astype(dt)
        return base_data(spec, p, rng, std, norm_noise, dt)

    mm.make_data = make_data

    base_dtype = mm.tensor_dtype
    mm.tensor_dtype = lambda spec, dtype: (np.float32 if spec.kind in ("conv", "dt", "a", "shexp_gate")
                                           else base_dtype(spec, dtype))

    class Qwen35Writer(mm.Writer):
        """make_model's writer; for qwen35 also the keys its converter writes: the partial
        rope dimension count and its sections, the DeltaNet sizes, the attention interval."""

        def add_feed_forward_length(self, length):
            if self.arch != "qwen35moe":
                return super().add_feed_forward_length(length)
            # as Qwen3.5-MoE files: the expert and shared-expert widths
            super().add_feed_forward_length(N_FF_SHEXP)
            self.add_expert_feed_forward_length(length)
            self.add_expert_shared_feed_forward_length(N_FF_SHEXP)

        def add_rope_dimension_count(self, count):
            if self.arch not in ("qwen35", "qwen35moe"):
                return super().add_rope_dimension_count(count)
            super().add_rope_dimension_count(N_ROT)
            self.add_rope_dimension_sections(SECTIONS)
            self.add_ssm_conv_kernel(D_CONV)
            self.add_ssm_state_size(D_STATE)
            self.add_ssm_group_count(N_GROUP)
            self.add_ssm_time_step_rank(N_V_HEADS)
            self.add_ssm_inner_size(D_INNER)
            self.add_full_attention_interval(INTERVAL)

    mm.Writer = Qwen35Writer
    mm.PRESETS["tiny-qwen35moe"] = mm.Preset(
        arch="qwen35moe", n_layer=3, n_embd=128, n_head=4, n_head_kv=2, n_ff=64,
        n_vocab=N_VOCAB, n_ctx=262144, rope_theta=10000000.0, rms_eps=1e-6, tied=False,
        tokenizer="bpe", bpe_pre="qwen2", special="qwen3", head_dim=64, qk_norm=True,
        n_expert=8, n_expert_used=2,
        gains={**mm.STRUCTURED_GAINS, **QWEN35_GAINS}, norm_noise=0.1,
        description="golden: Qwen3.5-MoE style hybrid, 2 Gated DeltaNet + 1 gated attention layer with an MoE FFN (8 experts of 64, "
                    "top 2) and a sigmoid-gated shared expert of 128")
    return mm


def main() -> int:
    a = parse_args(__doc__, lambda ap: ap.add_argument(
        "--moe", action="store_true", help="write tiny-qwen35moe (qwen35moe) instead of tiny-qwen35"))
    if a.moe:
        write_preset_cases(
            a, load_make_model(a.shared), "tiny-qwen35moe", "Q8_0", N_VOCAB,
            lambda note: f"scripts/golden/make_tiny_qwen35.py --moe: preset tiny-qwen35moe ({note}): arch qwen35moe, "
                         "3 layers as tiny-qwen35's first three (0 and 1 Gated DeltaNet, 2 gated attention) with "
                         "qwen35moe's FFN: softmax router over 8 "
                         "experts of 64, top 2 renormalised, plus the shared expert of 128 times "
                         "sigmoid(ffn_gate_inp_shexp x)")
        return 0
    write_preset_cases(
        a, load_make_model(a.shared), "tiny-qwen35", "Q8_0", N_VOCAB,
        lambda note: f"scripts/golden/make_tiny_qwen35.py: preset tiny-qwen35 ({note}): arch qwen35, 6 layers "
                     f"(full_attention_interval {INTERVAL}: 2 and 5 attend, the others are Gated DeltaNet), n_embd "
                     "128, FFN 256; attention 4/2 heads of 64, q with its sigmoid output gate, per-head q/k RMSNorm, "
                     f"IMROPE on {N_ROT} dims (sections {SECTIONS}), theta 1e7; DeltaNet conv kernel {D_CONV}, "
                     f"{N_GROUP} q/k heads and {N_V_HEADS} v heads of {D_STATE}, L2-normed q/k, gated RMSNorm "
                     "output; untied output, BPE vocab 512")
    return 0


if __name__ == "__main__":
    sys.exit(main())
