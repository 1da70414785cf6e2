#!/usr/bin/env python3
"""Makes the MXFP4 golden case tiny-mixtral-mxfp4_moe.short (tests/data).

  scripts/golden/make_tiny_mixtral_mxfp4.py --golden-dump GOLDEN_DUMP --out tests/data

Quantizes tests/data/models/tiny-mixtral-f32.gguf with llama-quantize
MXFP4_MOE (llama.cpp v0.5.0 de3ff81, --llama-build: the merged expert
tensors MXFP4, every other matrix Q8_0) into
models/tiny-mixtral-mxfp4_moe.gguf, and runs shared/tools/golden_dump.cpp,
compiled against the same static build (its header gives the g++ line), on
the golden README's 32 input ids with the v0.5.0 cases' settings (1 thread,
the whole input as one batch, flash attention off, F16 K/V, n_ctx 256).
Writes golden/tiny-mixtral-mxfp4_moe.short.{json,logits.f32} in the golden
format (scripts/golden/golden_case.py). Needs NumPy (Debian's python3 has it); a
rerun writes the same bytes.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_case import lcg_ids, sha256, write_case  # noqa: E402

N_VOCAB = 512
BOS = 1  # tiny-mixtral's tokenizer.ggml.bos_token_id (golden/tiny-mixtral-f32.short.json's first id)


def main():
    import argparse
    import json
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-build", default="/work/ref/llama-build")
    ap.add_argument("--golden-dump", required=True, help="golden_dump built against --llama-build")
    ap.add_argument("--out", required=True, help="tests/data")
    a = ap.parse_args()

    models = os.path.join(a.out, "models")
    golden = os.path.join(a.out, "golden")
    f32 = os.path.join(models, "tiny-mixtral-f32.gguf")
    mx = os.path.join(models, "tiny-mixtral-mxfp4_moe.gguf")
    subprocess.run([os.path.join(a.llama_build, "bin", "llama-quantize"), f32, mx, "MXFP4_MOE"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    name = "tiny-mixtral-mxfp4_moe.short"
    ids = lcg_ids(32, N_VOCAB, BOS)
    with open(os.path.join(golden, "tiny-mixtral-f32.short.json")) as f:
        assert json.load(f)["input_ids"] == ids, "the F32 case's ids"
    write_case(a.golden_dump, mx, name, ids, N_VOCAB, golden,
               "scripts/golden/make_tiny_mixtral_mxfp4.py: llama-quantize (v0.5.0) MXFP4_MOE of "
               "tiny-mixtral-f32.gguf: ffn_gate_exps/ffn_up_exps/ffn_down_exps MXFP4 (E8M0 block exponent, "
               "E2M1 codes; their products with Q8_0 activations), token_embd, output and attention Q8_0, router "
               "and norms F32. Checks MXFP4's dequantization, its dot with Q8_0 and the experts' routing on it")
    for path in (mx, os.path.join(golden, name + ".logits.f32"), os.path.join(golden, name + ".json")):
        print(f"{os.path.relpath(path, a.out)}: {os.path.getsize(path):,} bytes, sha256 {sha256(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
