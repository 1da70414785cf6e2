#!/usr/bin/env python3
"""Makes the tiny-qwen3moe test models and their golden cases (tests/data).

shared/tools/make_model.py has no qwen3moe preset and shared/ is read-only, so
this script imports it as a module, registers the preset `tiny-qwen3moe` and
runs its writer; everything else is llama.cpp v0.5.0 (de3ff81): llama-quantize
for the Q4_K_M file and shared/tools/golden_dump.cpp (compiled against the same
build, its header says how) for the logits.

The preset, as llama.cpp v0.5.0 reads qwen3moe (src/models/qwen3moe.cpp):
arch qwen3moe, 2 layers, n_embd 256, 4/2 heads of head dim 128 (decoupled,
as tiny-qwen3 and the real Qwen3 models), per-head q/k RMSNorm, NEOX RoPE
theta 1e6, every layer an MoE FFN of 8 experts of which 4 are used, each
expert 256 -> 256 -> 256 (qwen3moe.expert_feed_forward_length 256; the file's
feed_forward_length is 768, the dense intermediate size, which llama.cpp does
not use when expert_feed_forward_length is there), router ffn_gate_inp F32,
merged ffn_{gate,up,down}_exps, no shared expert, untied output (as
Qwen3-30B-A3B), GPT-2 BPE vocab 512 with Qwen3's special tokens (pre qwen2).

Usage (Debian's python3 has NumPy; gguf-py comes from the llama.cpp source):
  PYTHONPATH=/work/ref/llama.cpp/gguf-py /usr/bin/python3 scripts/golden/make_tiny_qwen3moe.py \
      --shared /work/shared --llama-build /work/ref/llama-build --golden-dump /tmp/golden_dump \
      --out tests/data
Writes models/tiny-qwen3moe-{f32,q4_k_m}.gguf and golden/tiny-qwen3moe-*.{short,long}.{json,logits.f32}
under --out, and prints the MANIFEST / PROVENANCE lines.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_case import parse_args, write_preset_cases  # noqa: E402

FF_DENSE = 768  # qwen3moe.feed_forward_length as the converter writes it (config intermediate_size); unused


def load_make_model(shared: str):
    sys.path.insert(0, os.path.join(shared, "tools"))
    import make_model  # noqa: E402  (shared/tools/make_model.py, read-only)
    mm = make_model
    mm.PRESETS["tiny-qwen3moe"] = mm.Preset(
        arch="qwen3moe", n_layer=2, n_embd=256, n_head=4, n_head_kv=2, n_ff=256,
        n_vocab=512, n_ctx=40960, rope_theta=1000000.0, rms_eps=1e-6, tied=False,
        tokenizer="bpe", bpe_pre="qwen2", special="qwen3", head_dim=128, qk_norm=True,
        n_expert=8, n_expert_used=4,
        gains=mm.STRUCTURED_GAINS, norm_noise=0.1,
        description="golden: Qwen3-MoE style, 8 experts top-4 (expert_feed_forward_length 256), per-head q/k "
                    "RMSNorm, head dim 128 (decoupled), NEOX rope theta 1e6, BPE qwen2 vocab 512, untied")

    base = mm.Writer

    class Qwen3MoeWriter(base):
        """make_model's writer; for qwen3moe the preset's n_ff is the expert size: it goes to
        {arch}.expert_feed_forward_length, and feed_forward_length gets the dense size (as
        convert_hf_to_gguf.py writes Qwen3-MoE files)."""

        def add_feed_forward_length(self, length):
            if self.arch == "qwen3moe":
                super().add_feed_forward_length(FF_DENSE)
                super().add_expert_feed_forward_length(length)
            else:
                super().add_feed_forward_length(length)

    mm.Writer = Qwen3MoeWriter
    return mm


def main() -> int:
    a = parse_args(__doc__)
    write_preset_cases(
        a, load_make_model(a.shared), "tiny-qwen3moe", "Q4_K_M", 512,
        lambda note: f"scripts/golden/make_tiny_qwen3moe.py: make_model.py preset tiny-qwen3moe ({note}): arch "
                     "qwen3moe, 2 layers, n_embd 256, 4/2 heads of head dim 128, per-head q/k RMSNorm before NEOX "
                     "RoPE (theta 1e6), every layer an MoE FFN: softmax router over 8 experts, top 4, weights "
                     "renormalised to sum 1, experts of 256 (expert_feed_forward_length; feed_forward_length 768 "
                     "is not used), untied output, BPE vocab 512. Checks qwen3moe's keys, the routing and the "
                     "weighted sum of the chosen experts in selection order")
    return 0

if __name__ == "__main__":
    sys.exit(main())
