#!/usr/bin/env python3
"""Makes the tiny-gemma3 test models and their golden cases (tests/data).

shared/tools/make_model.py has no gemma3 preset and shared/ is read-only, so
this script imports it as a module, registers the preset `tiny-gemma3`, adds
Gemma 3's tensors to its tensor list and runs its writer; everything else is
llama.cpp v0.5.0 (de3ff81): llama-quantize for the Q4_0 file and
shared/tools/golden_dump.cpp (compiled against the same build, its header says
how) for the logits.

The preset, as llama.cpp v0.5.0 reads gemma3 (src/models/gemma3.cpp) and as
its converter (conversion/gemma.py, Gemma3Model) writes Gemma 3 4B, scaled
down: arch gemma3, 6 layers (no sliding_window_pattern key: llama.cpp's
default 6, so layers 0-4 slide and layer 5 attends everything), sliding window
48 (the 32-token case stays inside it, the 128-token case goes past it),
n_embd 128, 4/2 heads of head dim 64 (decoupled: key_length/value_length
written, q is 256 wide, as the 4B's 8 heads of 256 over 2560), per-head q/k
RMSNorm, the norms after attention and after the FFN (post_attention_norm,
post_ffw_norm, weights near 3 so that the blocks, not the sqrt(n_embd)-scaled
embedding, carry the residual stream), GELU-gated FFN of 256, NEOX RoPE theta
1000000 with linear scaling factor 8 on the global layer and the local layers'
base 10000 (no rope.freq_base_swa key: llama.cpp's default, as the published
GGUFs), rms eps 1e-6, tied output, final_logit_softcapping 15 (Gemma 3 files
do not set it; llama.cpp's gemma3 applies it when present, so the case covers
it), a SentencePiece vocabulary of 512 (tokenizer.ggml.model "llama",
add_space_prefix false as the converter writes it) with Gemma's special tokens
first: <pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4, <start_of_turn> 5,
<end_of_turn> 6.

Usage (Debian's python3 has NumPy; gguf-py comes from the llama.cpp source):
  PYTHONPATH=/work/ref/llama.cpp/gguf-py /usr/bin/python3 scripts/golden/make_tiny_gemma3.py \\
      --shared /work/shared --llama-build /work/ref/llama-build --golden-dump /tmp/golden_dump \\
      --out tests/data
Writes models/tiny-gemma3-{f32,q4_0}.gguf and golden/tiny-gemma3-*.{short,long}.{json,logits.f32}
under --out, and prints the MANIFEST / PROVENANCE lines.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_case import parse_args, write_preset_cases  # noqa: E402

N_VOCAB = 512
SWA = 48
SOFTCAP = 15.0
POST_NORM_GAIN = 3.0
# Gemma's special tokens as its tokenizer.model numbers the first ones, then
# the two turn markers (105 and 106 in the real vocabulary).
GEMMA_SPECIALS = [("<pad>", "CONTROL"), ("<eos>", "CONTROL"), ("<bos>", "CONTROL"), ("<unk>", "UNKNOWN"),
                  ("<mask>", "CONTROL"), ("<start_of_turn>", "CONTROL"), ("<end_of_turn>", "CONTROL")]


def load_make_model(shared: str):
    sys.path.insert(0, os.path.join(shared, "tools"))
    import make_model  # noqa: E402  (shared/tools/make_model.py, read-only)
    mm = make_model
    mm.PRESETS["tiny-gemma3"] = mm.Preset(
        arch="gemma3", n_layer=6, n_embd=128, n_head=4, n_head_kv=2, n_ff=256,
        n_vocab=N_VOCAB, n_ctx=131072, rope_theta=1000000.0, rms_eps=1e-6, tied=True,
        tokenizer="spm", special="gemma", head_dim=64, qk_norm=True, sliding_window=SWA,
        rope_scaling={"type": "linear", "factor": 8.0, "original_context_length": 131072},
        gains=mm.STRUCTURED_GAINS_TIED, norm_noise=0.1,
        description="golden: Gemma 3 style, 5 sliding (window 48, RoPE base 10000) : 1 global layer (RoPE base "
                    "1e6, linear factor 8), q/k norm, post-attention and post-FFN norms, GELU FFN, "
                    "embedding x sqrt(n_embd), tied output, logit softcap 15, SPM vocab 512")

    base_specs = mm.tensor_specs

    def tensor_specs(p):
        """make_model's list; for gemma3 each layer also gets post_attention_norm (after
        attn_output) and post_ffw_norm (after the FFN), llama.cpp's gemma3 tensors."""
        ts = base_specs(p)
        if p.arch != "gemma3":
            return ts
        S = mm.TensorSpec
        out = []
        for s in ts:
            out.append(s)
            b = s.name[:s.name.index(".", 4) + 1] if s.name.startswith("blk.") else ""
            if s.role == "attn_output":
                out.append(S(b + "post_attention_norm.weight", (p.n_embd,), "norm"))
            elif s.role == "ffn_up":
                out.append(S(b + "post_ffw_norm.weight", (p.n_embd,), "norm"))
        return out

    mm.tensor_specs = tensor_specs

    base_data = mm.make_data

    def make_data(spec, p, rng, std, norm_noise, dt):
        data = base_data(spec, p, rng, std, norm_noise, dt)
        if p.arch == "gemma3" and spec.role in ("post_attention_norm", "post_ffw_norm"):
            data = (data * np.float32(POST_NORM_GAIN)).astype(np.float32)
        return data

    mm.make_data = make_data

    base_layout = mm._special_layout

    def special_layout(kind, n_vocab):
        if kind != "gemma":
            return base_layout(kind, n_vocab)
        sp = {i: (t, int(getattr(mm.TokenType, ty))) for i, (t, ty) in enumerate(GEMMA_SPECIALS)}
        return sp, dict(pad=0, eos=1, bos=2, unk=3), True

    mm._special_layout = special_layout
    base_spm = mm.make_spm_vocab
    # make_model passes only llama2/phi3 layouts to make_spm_vocab; the gemma preset is the only SPM
    # preset this script writes.
    mm.make_spm_vocab = lambda n, kind: base_spm(n, "gemma")

    class Gemma3Writer(mm.Writer):
        """make_model's writer; for gemma3 also what the converter (or this case) adds:
        tokenizer.ggml.add_space_prefix false and {arch}.final_logit_softcapping."""

        def add_tokenizer_model(self, model):
            super().add_tokenizer_model(model)
            if self.arch == "gemma3":
                self.add_add_space_prefix(False)

        def add_layer_norm_rms_eps(self, value):
            super().add_layer_norm_rms_eps(value)
            if self.arch == "gemma3":
                self.add_final_logit_softcapping(SOFTCAP)

    mm.Writer = Gemma3Writer
    return mm


def main() -> int:
    a = parse_args(__doc__)
    write_preset_cases(
        a, load_make_model(a.shared), "tiny-gemma3", "Q4_0", N_VOCAB,
        lambda note: f"scripts/golden/make_tiny_gemma3.py: preset tiny-gemma3 ({note}): arch gemma3, 6 layers "
                     f"(0-4 with a sliding window of {SWA} and RoPE base 10000, 5 full with RoPE base 1e6 and "
                     "linear scaling 1/8), n_embd 128 (embedding x sqrt(128)), 4/2 heads of head dim 64, "
                     "per-head q/k RMSNorm, q x 1/sqrt(64) after NEOX RoPE, RMSNorm of the attention and FFN "
                     "outputs before each residual add, FFN gelu(gate) * up (ggml_geglu, F16 table), tied "
                     f"output, final logit softcap {SOFTCAP:g}, SPM vocab 512")
    return 0

if __name__ == "__main__":
    sys.exit(main())
