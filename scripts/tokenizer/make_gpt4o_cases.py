#!/usr/bin/env python3
"""Makes tests/data/tokenizer/cases/tiny-gpt-oss.jsonl: what llama.cpp v0.5.0
gives for the gpt-4o pre-tokenizer (LLAMA_VOCAB_PRE_TYPE_GPT4O, gpt-oss's).

No o200k vocabulary is available offline, so the vocabulary is the synthetic
one of tests/data/models/tiny-gpt-oss-f32.gguf (byte-level BPE, 512 tokens,
tokenizer.ggml.pre gpt-4o; scripts/golden/make_tiny_gpt_oss.py): its merges
join common ASCII pairs ("eC", "t'", "ĠT", ...), so where the gpt-4o regex
cuts words differently from another pre-tokenizer (camelCase runs,
contractions kept on their word, "/" after punctuation, 3-digit numbers) the
ids differ too. The texts are those of every other case file (read from
qwen2.jsonl) plus gpt-4o-specific ones below.

Usage:
  python3 scripts/tokenizer/make_gpt4o_cases.py --tool /tmp/tokenize_cases \\
      --model tests/data/models/tiny-gpt-oss-f32.gguf --out tests/data/tokenizer/cases/tiny-gpt-oss.jsonl
where the tool is scripts/tokenizer/tokenize_cases.cpp built against llama.cpp
v0.5.0 de3ff81 (its header gives the command). Rerun, it gives the same bytes.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys

SOURCE = "llama.cpp v0.5.0 de3ff81 (scripts/tokenizer/tokenize_cases.cpp)"
EXTRA = [
    "HelloWorld", "theCat sat", "HTTPServer and XMLHttpRequest", "getElementById", "iPhone iPad macOS",
    "it's", "IT'S", "They'll don't we've I'm you'd she's", "O'Neil's cat's", "'s 't 're 've 'm 'll 'd",
    "a/b/c", "path/to/file.txt\n", "!!!/\n\n", "...\r\n/", "x = 1234567", "12345 678 9", "3.14159",
    "ÀBC déjà Émile", "ΑΒΓ αβγ ΑβΓ", "ПРИВЕТмир", "İstanbul", "ǅemal", "Straße STRASSE",
    "naïve café", "\u00e9t\u00e9 E\u0301TE\u0301", "tab\tsep\tarated", "  leading and trailing  ",
    "line1\nline2\r\nline3", "emoji 🙂👍🏽 mix", "中文字符 and 日本語", "<|start|>user<|message|>hi<|end|>",
]


def load_texts(path: str, extra: list[str], prefix: str, source: str) -> list[dict]:
    """The texts of the case file `path`, then each of `extra` twice (plain, and with BOS and
    special-token parsing), named <prefix>-NN[+bos+ps]."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            j = json.loads(line)
            text = j["text"].encode("utf-8", "surrogatepass") if "text" in j else base64.b64decode(j["text_b64"])
            out.append(dict(name=j["name"], source=j.get("source", ""), text=text,
                            add_special=j["add_special"], parse_special=j["parse_special"]))
    for i, t in enumerate(extra):
        for add, parse, suffix in ((False, False, ""), (True, True, "+bos+ps")):
            out.append(dict(name=f"{prefix}-{i:02d}{suffix}", source=source,
                            text=t.encode("utf-8"), add_special=add, parse_special=parse))
    return out


def utf8(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def field(d: dict, key: str, b: bytes) -> None:
    s = utf8(b)
    if s is None:
        d[key + "_b64"] = base64.b64encode(b).decode()
    else:
        d[key] = s


def main(doc: str = __doc__, extra: list[str] = EXTRA, prefix: str = "gpt4o",
         source: str = "gpt-4o pre-tokenizer cases (this script)") -> int:
    """Writes --out from the texts of --texts plus `extra` (load_texts), tokenized by --tool."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--texts", default=os.path.join(os.path.dirname(__file__), "../../tests/data/tokenizer/cases/qwen2.jsonl"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    cases = load_texts(a.texts, extra, prefix, source)
    tsv = "".join(f"{c['name']}\t{int(c['add_special'])}\t{int(c['parse_special'])}\t"
                  f"{base64.b64encode(c['text']).decode()}\n" for c in cases)
    r = subprocess.run(["bash", "-c", 'ulimit -s unlimited && exec "$0" "$1"', a.tool, a.model],
                       input=tsv.encode(), capture_output=True, check=True)
    rows = r.stdout.decode().splitlines()
    assert len(rows) == len(cases), (len(rows), len(cases))
    with open(a.out, "w", encoding="utf-8") as f:
        for c, row in zip(cases, rows):
            name, ids, pieces, detok, detok_plain = row.split("\t")
            assert name == c["name"]
            d = {"name": name, "source": c["source"]}
            field(d, "text", c["text"])
            d["add_special"] = c["add_special"]
            d["parse_special"] = c["parse_special"]
            d["ids"] = [int(x) for x in ids.split()]
            pb = [base64.b64decode(p) for p in pieces.split(",")] if pieces else []
            if all(utf8(p) is not None for p in pb):
                d["pieces"] = [p.decode("utf-8") for p in pb]
            else:
                d["pieces_b64"] = [base64.b64encode(p).decode() for p in pb]
            field(d, "detok", base64.b64decode(detok))
            field(d, "detok_plain", base64.b64decode(detok_plain))
            line = json.dumps(d, ensure_ascii=False)
            for ch in ("\u0085", "\u2028", "\u2029"):
                line = line.replace(ch, "\\u%04x" % ord(ch))
            f.write(line + "\n")
    print(f"{a.out}: {len(cases)} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
