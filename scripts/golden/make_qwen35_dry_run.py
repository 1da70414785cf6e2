#!/usr/bin/env python3
"""Writes tests/data/quant/qwen35-dry-run.txt: the per-tensor types
llama-quantize (llama.cpp v0.5.0) --dry-run picks for width-shrunk 8-layer
qwen3.5-4b and qwen3.5-35b-a3b files (scripts/golden/qwen35_dry_run_input.cpp
writes them), for every file type `synapse quantize` writes, without and with
an importance matrix (tests/data/models/tiny-llama.imatrix.gguf: only its
presence matters to the types). The reference of
tests/runtime/quantize_model_test.cpp's Qwen35TypesMatchLlamaQuantizeDryRun.

Run from the repository root:
  python3 scripts/golden/make_qwen35_dry_run.py --writer /tmp/qwen35_dry_run_input \\
      --llama-quantize /work/ref/llama-build/bin/llama-quantize

Format: for each preset, "tensors PRESET N" and N lines "NAME NE0 NE1 NE2"
in llama-quantize's order; then per (imatrix, file type) one line
"types PRESET IMATRIX FTYPE T1 ... TN" (IMATRIX "-" or "imatrix"; the types
as ggml names them, in the tensors' order).
"""
import argparse
import re
import subprocess
import tempfile
from pathlib import Path

FTYPES = ("F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K "
          "IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ1_S IQ1_M IQ3_XXS IQ3_XS IQ3_S IQ3_M IQ4_NL IQ4_XS TQ1_0 TQ2_0 "
          "MXFP4_MOE").split()
LINE = re.compile(r"\[\s*\d+/\s*\d+\]\s+(\S+)\s+- \[\s*(\d+),\s*(\d+),\s*(\d+),\s*\d+\], type =\s+(\w+),"
                  r".*?(?:\((\w+)\))?\s*$")


def dry_run(lq, path, ftype, imatrix):
    cmd = [lq, "--dry-run"] + (["--imatrix", imatrix] if imatrix else []) + [path, ftype]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rows = []
    for line in (out.stdout + out.stderr).splitlines():
        m = LINE.match(line)
        if m:
            rows.append((m.group(1), (m.group(2), m.group(3), m.group(4)), m.group(6) or m.group(5)))
    if not rows:
        raise SystemExit(f"{ftype}: no tensor lines from {' '.join(cmd)}")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--writer", required=True)
    ap.add_argument("--llama-quantize", required=True)
    ap.add_argument("--imatrix", default="tests/data/models/tiny-llama.imatrix.gguf")
    ap.add_argument("--out", default="tests/data/quant/qwen35-dry-run.txt")
    a = ap.parse_args()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for preset in ("qwen3.5-4b", "qwen3.5-35b-a3b"):
            path = str(Path(tmp) / f"{preset}.gguf")
            subprocess.run([a.writer, preset, path], check=True)
            shapes = None
            for imatrix in (None, a.imatrix):
                for ftype in FTYPES:
                    rows = dry_run(a.llama_quantize, path, ftype, imatrix)
                    if shapes is None:
                        shapes = [(n, ne) for n, ne, _ in rows]
                        lines.append(f"tensors {preset} {len(rows)}")
                        lines += [f"{n} {' '.join(ne)}" for n, ne in shapes]
                    if [(n, ne) for n, ne, _ in rows] != shapes:
                        raise SystemExit(f"{preset} {ftype}: another tensor list")
                    tag = "imatrix" if imatrix else "-"
                    lines.append(f"types {preset} {tag} {ftype} " + " ".join(t for _, _, t in rows))
    Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
