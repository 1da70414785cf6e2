#!/usr/bin/env python3
"""Makes the tiny-gpt-oss test models and their golden cases (tests/data).

shared/tools/make_model.py has no gpt-oss preset and shared/ is read-only, so
this script imports it as a module, registers the preset `tiny-gpt-oss`, adds
gpt-oss's tensors to its tensor list and runs its writer; everything else is
llama.cpp v0.5.0 (de3ff81): llama-quantize for the MXFP4_MOE file and
shared/tools/golden_dump.cpp (compiled against the same build, its header says
how) for the logits.

The preset, as llama.cpp v0.5.0 reads gpt-oss (src/models/openai-moe.cpp) and
as the published ggml-org/gpt-oss-20b GGUF lays it out, scaled down: arch
gpt-oss, 2 layers (layer 0 slides, layer 1 attends everything: the default
sliding_window_pattern 2), n_embd 128, 4/2 heads of head dim 64 (decoupled:
key_length/value_length written, q is 256 wide), q/k/v and output biases, one
attention sink per head (attn_sinks), the FFN norm named post_attention_norm (LLM_TENSOR_ATTN_POST_NORM), NEOX
RoPE theta 150000 with YaRN (factor 32, original context 4096, as the real
model), sliding window 48 (so the 32-token case stays inside it and the
128-token case goes past it), every layer an MoE FFN of 8 experts of 128 of
which 4 are used, router with bias, expert biases, untied output, a byte-level
BPE vocab of 512 with pre-tokenizer gpt-4o and gpt-oss's special tokens at its
end. The experts' gate/up weights are large (gain 4) so that swiglu_oai's
clamp at 7 is reached.

Usage (Debian's python3 has NumPy; gguf-py comes from the llama.cpp source):
  PYTHONPATH=/work/ref/llama.cpp/gguf-py /usr/bin/python3 scripts/golden/make_tiny_gpt_oss.py \\
      --shared /work/shared --llama-build /work/ref/llama-build --golden-dump /tmp/golden_dump \\
      --out tests/data
Writes models/tiny-gpt-oss-{f32,mxfp4_moe}.gguf and golden/tiny-gpt-oss-*.{short,long}.{json,logits.f32}
under --out, and prints the MANIFEST / PROVENANCE lines.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_case import parse_args, write_preset_cases  # noqa: E402

N_VOCAB = 512
SWA = 48
# gpt-oss's special tokens (o200k_harmony ids 199998 .. 200018), kept in order
# at the end of the tiny vocabulary; None: a reserved slot.
GPT_OSS_SPECIALS = ["<|startoftext|>", "<|endoftext|>", None, None, "<|return|>", "<|constrain|>", None,
                    "<|channel|>", "<|start|>", "<|end|>", "<|message|>", None, None, None, "<|call|>",
                    None, None, None, None, None, "<|endofprompt|>"]


def load_make_model(shared: str):
    sys.path.insert(0, os.path.join(shared, "tools"))
    import make_model  # noqa: E402  (shared/tools/make_model.py, read-only)
    mm = make_model
    gains = {**mm.STRUCTURED_GAINS, "ffn_gate_exps": 4.0, "ffn_up_exps": 4.0, "ffn_down_exps": 0.1,
             "attn_sinks": 2.0, "attn_output.bias": 0.1, "ffn_gate_inp.bias": 0.5,
             "ffn_gate_exps.bias": 0.5, "ffn_up_exps.bias": 0.5, "ffn_down_exps.bias": 0.05}
    mm.PRESETS["tiny-gpt-oss"] = mm.Preset(
        arch="gpt-oss", n_layer=2, n_embd=128, n_head=4, n_head_kv=2, n_ff=128,
        n_vocab=N_VOCAB, n_ctx=131072, rope_theta=150000.0, rms_eps=1e-5, tied=False,
        tokenizer="bpe", bpe_pre="gpt-4o", special="gpt-oss", head_dim=64, qkv_bias=True,
        n_expert=8, n_expert_used=4, sliding_window=SWA,
        rope_scaling={"type": "yarn", "factor": 32.0, "original_context_length": 4096},
        gains=gains, norm_noise=0.1,
        description="golden: gpt-oss style, 8 experts top-4 (softmax after top-k, router and expert biases, "
                    "swiglu_oai), attention sinks, sliding window 48 on even layers, YaRN, BPE gpt-4o vocab 512")

    base_specs = mm.tensor_specs

    def tensor_specs(p):
        """make_model's list; for gpt-oss the FFN norm is post_attention_norm, and every layer gets
        its output bias, sinks, router bias and expert biases (llama.cpp's openai-moe)."""
        ts = base_specs(p)
        if p.arch != "gpt-oss":
            return ts
        S = mm.TensorSpec
        out = []
        for s in ts:
            if s.role == "ffn_norm":
                out.append(S(s.name.replace("ffn_norm", "post_attention_norm"), s.shape, s.kind))
                continue
            out.append(s)
            b = s.name[:s.name.index(".", 4) + 1] if s.name.startswith("blk.") else ""
            if s.role == "attn_output":
                out.append(S(b + "attn_output.bias", (p.n_embd,), "bias"))
                out.append(S(b + "attn_sinks.weight", (p.n_head,), "bias"))
            elif s.role == "ffn_gate_inp":
                out.append(S(b + "ffn_gate_inp.bias", (p.n_expert,), "bias"))
            elif s.role in ("ffn_gate_exps", "ffn_up_exps"):
                out.append(S(b + s.role + ".bias", (p.n_expert, p.n_ff), "bias"))
            elif s.role == "ffn_down_exps":
                out.append(S(b + "ffn_down_exps.bias", (p.n_expert, p.n_embd), "bias"))
        return out

    mm.tensor_specs = tensor_specs

    base_layout = mm._special_layout

    def special_layout(kind, n_vocab):
        if kind != "gpt-oss":
            return base_layout(kind, n_vocab)
        base = n_vocab - len(GPT_OSS_SPECIALS)
        C = int(mm.TokenType.CONTROL)
        sp = {}
        for i, t in enumerate(GPT_OSS_SPECIALS):
            sp[base + i] = (t or f"<|reserved_{199998 + i}|>", C)
        # as the ggml-org file: bos <|startoftext|>, eos <|return|>, pad <|endoftext|>
        return sp, dict(bos=base, eos=base + 4, pad=base + 1), False

    mm._special_layout = special_layout
    base_bpe = mm.make_bpe_vocab
    mm.make_bpe_vocab = lambda n, kind, pre: base_bpe(n, "gpt-oss" if pre == "gpt-4o" else kind, pre)

    class GptOssWriter(mm.Writer):
        """make_model's writer; for gpt-oss the preset's n_ff is also
        {arch}.expert_feed_forward_length (the converter writes both, 2880 in the real model)."""

        def add_feed_forward_length(self, length):
            super().add_feed_forward_length(length)
            if self.arch == "gpt-oss":
                super().add_expert_feed_forward_length(length)

    mm.Writer = GptOssWriter
    return mm


def main() -> int:
    a = parse_args(__doc__)
    write_preset_cases(
        a, load_make_model(a.shared), "tiny-gpt-oss", "MXFP4_MOE", N_VOCAB,
        lambda note: f"scripts/golden/make_tiny_gpt_oss.py: preset tiny-gpt-oss ({note}): arch gpt-oss, 2 layers "
                     f"(layer 0 with a sliding window of {SWA}, layer 1 full), n_embd 128, 4/2 heads of head dim "
                     "64, q/k/v/output biases, a learned sink per head in the softmax, NEOX RoPE theta 150000 "
                     "with YaRN (factor 32, original context 4096), every layer an MoE FFN: router logits + "
                     "bias, top 4 of 8, softmax over the 4 chosen logits, experts' gate/up + bias, swiglu_oai "
                     "(alpha 1.702, limit 7, up + 1), down + bias, added in selection order; FFN norm "
                     "post_attention_norm; untied output, BPE vocab 512")
    return 0

if __name__ == "__main__":
    sys.exit(main())
