#!/usr/bin/env python3
"""Makes the embedding golden cases (tests/data/embedding/embedding.*.json) with llama.cpp v0.5.0's
llama-embedding.

The reference build (/work/ref/llama-build) does not build llama-embedding, so this script
compiles llama.cpp's own examples/embedding/embedding.cpp against that build's static
libraries (unchanged source; --llama-embedding skips this with a binary already built).
Each case runs it once on all of its prompts (one llama_decode of every prompt, one sequence
each), 1 thread, n_ctx 256, with `--pooling P --embd-normalize 2 --embd-output-format raw
--verbose-prompt`, and records the token ids it printed and the vectors it printed (raw:
"%1.7f", so each component is known to 5e-8).

Usage:
  python3 scripts/golden/make_embedding_golden.py --out tests/data [--llama-embedding BIN]
Prints the PROVENANCE lines of the files it wrote.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

PRODUCER = "llama.cpp v0.5.0 de3ff81 CPU (examples/embedding/embedding.cpp)"
PROMPTS = ["Hello world", "The quick brown fox jumps over the lazy dog", "Once upon a time there was a cat"]
# (model file, pooling): Qwen3-Embedding's last-token pooling on a qwen3 model, mean pooling on
# qwen3 (BPE, no BOS) and on llama (SentencePiece, BOS first).
CASES = [("tiny-qwen3-f32.gguf", "last"), ("tiny-qwen3-f32.gguf", "mean"), ("stories260K.gguf", "mean")]


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_llama_embedding(src: str, build: str, out: str) -> None:
    libs = ["common/libllama-common.a", "common/libllama-common-base.a", "src/libllama.a", "ggml/src/libggml.a",
            "ggml/src/libggml-cpu.a", "ggml/src/libggml-base.a", "vendor/cpp-httplib/libcpp-httplib.a",
            "vendor/hash/libvendor-hash.a"]
    cmd = ["g++", "-O2", "-std=c++17", os.path.join(src, "examples/embedding/embedding.cpp"),
           "-I" + os.path.join(src, "include"), "-I" + os.path.join(src, "ggml/include"),
           "-I" + os.path.join(src, "common"), "-I" + os.path.join(src, "vendor")]
    cmd += [os.path.join(build, lib) for lib in libs]
    cmd += ["-fopenmp", "-lpthread", "-lssl", "-lcrypto", "-o", out]
    subprocess.run(cmd, check=True)


def run_once(cmd: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    # llama.cpp's logger writes the printed vectors to stdout or stderr: read both, in order.
    p = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tokens: list[list[int]] = []
    vectors: list[list[float]] = []
    for line in p.stdout.splitlines():
        if "number of tokens in prompt" in line:
            tokens.append([])
        elif (m := re.match(r"^\s*(\d+) -> '", line)) and tokens:
            tokens[-1].append(int(m.group(1)))
        elif re.match(r"^-?\d+\.\d{7}( |$)", line):
            vectors.append([float(x) for x in line.split()])
    return tokens, vectors


def run_case(binary: str, model: str, pooling: str) -> tuple[list[list[int]], list[list[float]]]:
    # Eight last prompts whose vectors are dropped: the logger loses the tail of its output at
    # exit (seen: up to ~120 values), so the vectors kept are never the last ones printed.
    cmd = [binary, "-m", model, "-p", "\n".join(PROMPTS + ["end"] * 8), "--pooling", pooling, "--embd-normalize", "2",
           "--embd-output-format", "raw", "--verbose-prompt", "-t", "1", "-c", "256", "-b", "256", "-ub", "256", "-fa", "off"]
    # Runs are repeated until two with every kept vector complete agree.
    complete = []
    for _ in range(10):
        tokens, vectors = run_once(cmd)
        tokens, vectors = tokens[:len(PROMPTS)], vectors[:len(PROMPTS)]
        if len(tokens) == len(PROMPTS) and len(vectors) == len(PROMPTS) and len({len(v) for v in vectors}) == 1:
            complete.append((tokens, vectors))
            if len(complete) == 2:
                assert complete[0] == complete[1], "two complete runs differ"
                return tokens, vectors
    raise RuntimeError(f"llama-embedding gave no two complete outputs in 10 runs: {cmd}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", default="/work/ref/llama.cpp")
    ap.add_argument("--llama-build", default="/work/ref/llama-build")
    ap.add_argument("--llama-embedding", help="a llama-embedding already built (else built into /tmp)")
    ap.add_argument("--out", required=True, help="tests/data")
    a = ap.parse_args()

    binary = a.llama_embedding or "/tmp/llama-embedding-v0.5.0"
    if not a.llama_embedding:
        build_llama_embedding(a.llama_cpp, a.llama_build, binary)
    for model_file, pooling in CASES:
        model = os.path.join(a.out, "models", model_file)
        tokens, vectors = run_case(binary, model, pooling)
        stem = model_file.removesuffix(".gguf")
        name = f"embedding.{stem}.{pooling}.json"
        case = {
            "case": name.removesuffix(".json"),
            "model": model_file,
            "model_sha256": sha256(model),
            "producer": PRODUCER,
            "command": f"llama-embedding -m {model_file} -p '<prompts and 8 x \"end\" joined by \\n>' --pooling {pooling} "
                       "--embd-normalize 2 --embd-output-format raw --verbose-prompt -t 1 -c 256 -b 256 -ub 256 -fa off",
            "flash_attn": "off: synapse rounds as llama.cpp's CPU path without flash attention (K/V F16, "
                          "softmax F32); llama.cpp's default (auto) turns it on for these models",
            "pooling": pooling,
            "embd_normalize": 2,
            "prompts": PROMPTS,
            "tokens": tokens,
            "embeddings": vectors,
            "embeddings_precision": "printed with %1.7f: each component rounded to 5e-8",
        }
        path = os.path.join(a.out, "embedding", name)
        with open(path, "w") as f:
            json.dump(case, f, indent=1)
            f.write("\n")
        print(f"- `embedding/{name}` | `python3 scripts/golden/make_embedding_golden.py --out tests/data`: "
              f"llama-embedding (llama.cpp v0.5.0 de3ff81, examples/embedding/embedding.cpp built against the "
              f"reference build) of `models/{model_file}`, --pooling {pooling} --embd-normalize 2, 1 thread | "
              f"`{sha256(path)}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
