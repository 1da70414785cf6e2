#!/usr/bin/env python3
"""Makes tests/data/server/infill.tiny-qwen2-f32.json: llama-server's (llama.cpp v0.5.0) replies to
POST /infill on models/tiny-qwen2-f32.gguf (a Qwen2 vocabulary: <|fim_prefix|>, <|fim_suffix|>,
<|fim_middle|>, <|fim_pad|>, <|repo_name|> and <|file_sep|>, found by their texts as the
vocabulary loader finds them), and on models/stories260K.gguf (no FIM token: 501).

llama-server -m MODEL -t 1 -c 1024 -b 256 -np 1 -fa off --port P. -b 256 makes the prefix keep
its last 192 tokens and the suffix its first 62 - |prompt| (format_prompt_infill), so the long
case is cut; -c 1024 leaves 770 tokens for the extra files. Each body of REQUESTS is POSTed and
the reply stored as it came (status and JSON body; a stream as its list of events). Greedy
(temperature 0), so the reply is a function of the prompt alone.

Usage: python3 scripts/golden/make_infill_golden.py --out tests/data [--llama-server BIN]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

from make_embedding_golden import sha256
from make_rerank_golden import llama_server, write_golden

PRODUCER = "llama.cpp v0.5.0 de3ff81 CPU (llama-server)"
MODEL = "tiny-qwen2-f32.gguf"
NO_FIM_MODEL = "stories260K.gguf"
ARGS = ["-t", "1", "-c", "1024", "-b", "256", "-np", "1", "-fa", "off"]
PREFIX = "#include <cstdio>\n#include \"llama.h\"\n\nint main() {\n"
BASE = {"input_prefix": PREFIX, "prompt": "    int n_threads = llama_", "input_suffix": "}\n",
        "n_predict": 8, "temperature": 0, "return_tokens": True, "cache_prompt": False}
LONG_PREFIX = "".join(f"int f{i}(int x) {{ return x * {i}; }}\n" for i in range(40))
LONG_SUFFIX = "".join(f"// line {i} of the rest\n" for i in range(30))
REQUESTS = [
    BASE,
    {**BASE, "input_extra": [{"filename": "llama.h", "text": "LLAMA_API int32_t llama_n_threads();\n"},
                             {"text": "int helper(void);\n"}]},
    {**BASE, "input_prefix": LONG_PREFIX, "input_suffix": LONG_SUFFIX, "prompt": ""},
    {**BASE, "input_prefix": ["int a = ", 15, " + <|fim_pad|>;\n"], "input_suffix": [17, "return a;\n"]},
    {k: v for k, v in BASE.items() if k != "prompt"},
    {**BASE, "stream": True},
]
# Bad bodies: llama-server's status and message for each (the invalid_input_extra cases of its
# own test_infill.py, a prompt that is not a string, a missing input_suffix).
BAD_REQUESTS = [
    {**BASE, "input_extra": [{}]},
    {**BASE, "input_extra": [{"filename": 123, "text": "abc"}]},
    {**BASE, "input_extra": {"text": "abc"}},
    {**BASE, "prompt": 5},
    {k: v for k, v in BASE.items() if k != "input_suffix"},
]


def post(port: int, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/infill", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    if body.get("stream") and status == 200:
        events = [json.loads(line[len("data: "):]) for line in text.split("\n") if line.startswith("data: ")]
        return {"status": status, "events": events}
    return {"status": status, "body": json.loads(text)}


def run(server: str, model: str, port: int, bodies: list) -> list:
    with llama_server(server, model, ARGS, port):
        return [{"request": b, "reply": post(port, b)} for b in bodies]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-server", default="/work/ref/llama-build/bin/llama-server")
    ap.add_argument("--out", required=True, help="tests/data")
    ap.add_argument("--port", type=int, default=18932)
    a = ap.parse_args()
    model = os.path.join(a.out, "models", MODEL)
    no_fim = os.path.join(a.out, "models", NO_FIM_MODEL)
    golden = {
        "case": "infill.tiny-qwen2-f32",
        "model": MODEL,
        "model_sha256": sha256(model),
        "no_fim_model": NO_FIM_MODEL,
        "producer": PRODUCER,
        "command": f"llama-server -m MODEL {' '.join(ARGS)}; POST /infill",
        "cases": run(a.llama_server, model, a.port, REQUESTS),
        "bad_cases": run(a.llama_server, model, a.port, BAD_REQUESTS),
        "no_fim_cases": run(a.llama_server, no_fim, a.port, [BASE]),
    }
    write_golden(os.path.join(a.out, "server", "infill.tiny-qwen2-f32.json"), golden,
                 "- `server/infill.tiny-qwen2-f32.json` | `python3 scripts/golden/make_infill_golden.py --out tests/data`: "
                 f"llama-server (llama.cpp v0.5.0 de3ff81) {' '.join(ARGS)} replies to POST /infill on `models/{MODEL}` "
                 f"and `models/{NO_FIM_MODEL}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
