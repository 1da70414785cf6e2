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
format. Python 3 only (no NumPy, no gguf-py); a rerun writes the same bytes.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

PRODUCER = "llama.cpp v0.5.0 de3ff81 CPU"
N_VOCAB = 512
BOS = 1  # tiny-mixtral's tokenizer.ggml.bos_token_id (golden/tiny-mixtral-f32.short.json's first id)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def lcg_ids(n, n_vocab, bos):
    """The golden README's input ids: BOS, then the MMIX LCG from 20250220."""
    x = 20250220
    ids = [bos]
    for _ in range(1, n):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        ids.append(3 + (x >> 33) % (n_vocab - 3))
    return ids


def main():
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

    name, n = "tiny-mixtral-mxfp4_moe.short", 32
    ids = lcg_ids(n, N_VOCAB, BOS)
    with open(os.path.join(golden, "tiny-mixtral-f32.short.json")) as f:
        assert json.load(f)["input_ids"] == ids, "the F32 case's ids"
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, name)
        subprocess.run([a.golden_dump, "--model", mx, "--out", prefix, "--ids", ",".join(map(str, ids)),
                        "--n-greedy", "16", "--n-ctx", "256"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(prefix + ".dump.json") as f:
            d = json.load(f)
        assert d["input_ids"] == ids and d["n_vocab"] == N_VOCAB
        with open(prefix + ".logits.f32", "rb") as f:
            logits = f.read()
        assert len(logits) == 4 * n * N_VOCAB
    with open(os.path.join(golden, name + ".logits.f32"), "wb") as f:
        f.write(logits)
    tbt, thr2 = d["self_rms_token_by_token"], d["self_rms_threads2"]
    s = d["settings"]
    case = {
        "case": name,
        "model": os.path.basename(mx),
        "model_sha256": sha256(mx),
        "producer": PRODUCER,
        "settings": {"n_threads": 1, "n_batch": s["n_batch"], "n_ubatch": s["n_ubatch"], "n_ctx": s["n_ctx"],
                     "n_ctx_seq": s["n_ctx_seq"], "flash_attn": False, "type_k": s["type_k"], "type_v": s["type_v"],
                     "n_seq_max": 1, "prompt_as_one_batch": True, "logits_for_every_position": True},
        "n_vocab": N_VOCAB,
        "input_ids": ids,
        "input_rule": "ids[0] = tokenizer.ggml.bos_token_id; for k = 1..n-1: x = (x * 6364136223846793005 + "
                      "1442695040888963407) mod 2^64 (x starts at 20250220), ids[k] = 3 + (x >> 33) mod (n_vocab - 3)",
        "logits_file": name + ".logits.f32",
        "logits_dtype": "float32 little-endian",
        "logits_shape": [n, N_VOCAB],
        "greedy_ids": d["greedy_ids"],
        "greedy_margins": d["greedy_margins"],
        "greedy_first_eog": d["greedy_first_eog"],
        "self_rms": max(tbt["max_rel_rms"], thr2["max_rel_rms"]),
        "self_rms_detail": {"token_by_token": tbt, "threads2": thr2},
        "notes": "scripts/golden/make_tiny_mixtral_mxfp4.py: llama-quantize (v0.5.0) MXFP4_MOE of "
                 "tiny-mixtral-f32.gguf: ffn_gate_exps/ffn_up_exps/ffn_down_exps MXFP4 (E8M0 block exponent, "
                 "E2M1 codes; their products with Q8_0 activations), token_embd, output and attention Q8_0, router "
                 "and norms F32. Checks MXFP4's dequantization, its dot with Q8_0 and the experts' routing on it",
    }
    with open(os.path.join(golden, name + ".json"), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    print(f"{name}: greedy min margin {min(d['greedy_margins']):.3g}, self_rms tbt {tbt['max_rel_rms']:.3g} / "
          f"2 threads {thr2['max_rel_rms']:.3g}")
    for path in (mx, os.path.join(golden, name + ".logits.f32"), os.path.join(golden, name + ".json")):
        print(f"{os.path.relpath(path, a.out)}: {os.path.getsize(path):,} bytes, sha256 {sha256(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
