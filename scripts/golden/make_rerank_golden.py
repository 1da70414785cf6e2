#!/usr/bin/env python3
"""Makes tests/data/embedding/rerank.tiny-qwen3-reranker-f32.json: llama-server's (llama.cpp v0.5.0)
replies to rerank requests on models/tiny-qwen3-reranker-f32.gguf (made by
make_tiny_qwen3_reranker.py).

llama-server -m MODEL --rerank -t 1 -c 1024 -np 1 -fa off --port P (flash attention off: synapse rounds as that path); each request of REQUESTS is POSTed
to /v1/rerank and the reply body is stored as it came (its JSON parsed; llama-server writes the
scores as JSON doubles of the float32 score, so they are exact). Each document is its own
sequence: the reply does not depend on the other documents.

Usage: python3 scripts/golden/make_rerank_golden.py --out tests/data [--llama-server BIN]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request

from make_embedding_golden import sha256

PRODUCER = "llama.cpp v0.5.0 de3ff81 CPU (llama-server)"
MODEL = "tiny-qwen3-reranker-f32.gguf"
REQUESTS = [
    {"model": "reranker", "query": "what is a cat?",
     "documents": ["A cat is a small animal.", "The stock market fell.", "Cats purr when they are happy."],
     "top_n": 3},
    {"model": "reranker", "query": "Once upon a time", "documents": ["there was a dog", "x", "the end", "a time"],
     "top_n": 2},
    {"query": "what is a cat?", "texts": ["A cat", "B"], "return_text": True},
]


def post(port: int, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/rerank", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


@contextlib.contextmanager
def llama_server(binary: str, model: str, args: list[str], port: int):
    """llama-server -m MODEL ARGS --port PORT, from the moment /health says 200 to the end of the block.
    (Shared with make_infill_golden.py.)"""
    proc = subprocess.Popen([binary, "-m", model, *args, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def write_golden(path: str, golden: dict, provenance: str) -> None:
    """Writes `golden` as indented JSON and prints its tests/data/PROVENANCE.md line (`provenance`, then the hash)."""
    with open(path, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"{provenance} | `{sha256(path)}`")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-server", default="/work/ref/llama-build/bin/llama-server")
    ap.add_argument("--out", required=True, help="tests/data")
    ap.add_argument("--port", type=int, default=18931)
    a = ap.parse_args()
    model = os.path.join(a.out, "models", MODEL)
    with llama_server(a.llama_server, model, ["--rerank", "-t", "1", "-c", "1024", "-np", "1", "-fa", "off"], a.port):
        cases = [{"request": body, "reply": post(a.port, body)} for body in REQUESTS]
    golden = {
        "case": "rerank.tiny-qwen3-reranker-f32",
        "model": MODEL,
        "model_sha256": sha256(model),
        "producer": PRODUCER,
        "command": f"llama-server -m {MODEL} --rerank -t 1 -c 1024 -np 1 -fa off; POST /v1/rerank",
        "cases": cases,
    }
    write_golden(os.path.join(a.out, "embedding", "rerank.tiny-qwen3-reranker-f32.json"), golden,
                 "- `embedding/rerank.tiny-qwen3-reranker-f32.json` | `python3 scripts/golden/make_rerank_golden.py "
                 f"--out tests/data`: llama-server (llama.cpp v0.5.0 de3ff81) --rerank -fa off replies on `models/{MODEL}`, "
                 "1 thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
