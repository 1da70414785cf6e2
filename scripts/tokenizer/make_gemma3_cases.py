#!/usr/bin/env python3
"""Makes tests/data/tokenizer/cases/tiny-gemma3.jsonl: what llama.cpp v0.5.0
gives for a Gemma 3 style SentencePiece vocabulary (tokenizer.ggml.model
"llama", add_space_prefix false as conversion/gemma.py writes it, add_bos
true, <bos> 2, <eos> 1, <start_of_turn> / <end_of_turn> control tokens).

No Gemma vocabulary (262k pieces) is available offline, so the vocabulary is
the synthetic one of tests/data/models/tiny-gemma3-f32.gguf
(scripts/golden/make_tiny_gemma3.py): 512 pieces over a small alphabet with
byte fallback. The texts are those of every other case file (read from
qwen2.jsonl) plus the Gemma-specific ones below (no space prepended, leading
and repeated spaces, the turn markers as text and as special tokens).

Usage:
  python3 scripts/tokenizer/make_gemma3_cases.py --tool /tmp/tokenize_cases \\
      --model tests/data/models/tiny-gemma3-f32.gguf --out tests/data/tokenizer/cases/tiny-gemma3.jsonl
where the tool is scripts/tokenizer/tokenize_cases.cpp built against llama.cpp
v0.5.0 de3ff81 (its header gives the command). Rerun, it gives the same bytes.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_gpt4o_cases import main  # noqa: E402

EXTRA = [
    "hello", " hello", "  hello  world ", "hello\n\nworld", "<start_of_turn>user\nhi there<end_of_turn>\n"
    "<start_of_turn>model\n", "<bos><start_of_turn>user\n Why?<end_of_turn>", "<eos> after", "<unk><pad><mask>",
    "\u2581already marked", "tea time at 10:30", "caf\u00e9 \u00fcber", "\u4e2d\u6587",
]

if __name__ == "__main__":
    sys.exit(main(__doc__, EXTRA, "gemma3", "Gemma 3 SentencePiece cases (make_gemma3_cases.py)"))
