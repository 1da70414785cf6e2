#!/usr/bin/env python3
"""Writes tests/data/quant/tiny-llama-imatrix.sha256: the SHA-256 of
llama-quantize v0.5.0's files (and of each of their tensors' data) for the
types whose weighted quantizers are ggml's quantize_row_<t>_impl beside the
lattice ones: Q3_K, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS (--pure), and the
Q3_K_M and IQ4_XS mixes, all with tiny-llama's importance matrix.

  scripts/golden/make_imatrix_quant_sha.py --llama-quantize /work/ref/llama-build/bin/llama-quantize

Runs from the repository root (llama-quantize records the imatrix path as
given, so the test gives it the same way):

  llama-quantize [--pure] --imatrix tests/data/models/tiny-llama.imatrix.gguf
      tests/data/models/tiny-llama-f32.gguf OUT TYPE 1

Lines are sha256sum's: "<sha256>  <case>" for the whole file and
"<sha256>  <case>/<tensor name>" for each tensor's bytes (GGUF tensor data,
padding excluded), in file order. A case is the type as given to
llama-quantize, "+pure" when --pure. tests/runtime/quantize_model_test.cpp
compares synapse's in-memory output with them. Standard library only; a
rerun writes the same bytes.
"""
import argparse
import hashlib
import os
import struct
import subprocess
import sys
import tempfile

CASES = [("Q3_K_S", True), ("Q4_0", True), ("Q4_1", True), ("Q5_0", True), ("Q5_1", True),
         ("IQ4_NL", True), ("IQ4_XS", True), ("Q3_K_M", False), ("IQ4_XS", False)]
IMATRIX = "tests/data/models/tiny-llama.imatrix.gguf"
MODEL = "tests/data/models/tiny-llama-f32.gguf"
OUT = "tests/data/quant/tiny-llama-imatrix.sha256"

# ggml type -> (block elements, block bytes), the types these files hold.
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
          10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
          20: (32, 18), 23: (256, 136)}
# GGUF value type -> struct format of its scalar (8 string, 9 array).
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.take("Q")
        s = self.data[self.at:self.at + n].decode()
        self.at += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("I"), self.take("Q")
            return [self.value(et) for _ in range(n)]
        return self.take(SCALARS[t])


def tensors(path):
    """(name, bytes) of every tensor of the GGUF file at path, in file order."""
    data = open(path, "rb").read()
    r = Reader(data)
    if r.take("I") != 0x46554747 or r.take("I") != 3:
        sys.exit(f"{path}: not a GGUF v3 file")
    n_tensors, n_kv = r.take("Q"), r.take("Q")
    alignment = 32
    for _ in range(n_kv):
        key = r.string()
        v = r.value(r.take("I"))
        if key == "general.alignment":
            alignment = v
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        ne = [r.take("Q") for _ in range(r.take("I"))]
        t, off = r.take("I"), r.take("Q")
        n = 1
        for d in ne:
            n *= d
        blk, size = BLOCKS[t]
        infos.append((name, off, n // blk * size))
    base = (r.at + alignment - 1) // alignment * alignment
    return [(name, data[base + off:base + off + n]) for name, off, n in infos]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-quantize", required=True)
    args = ap.parse_args()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for ftype, pure in CASES:
            case = ftype + ("+pure" if pure else "")
            out = os.path.join(tmp, case + ".gguf")
            cmd = [args.llama_quantize] + (["--pure"] if pure else []) + ["--imatrix", IMATRIX, MODEL, out, ftype, "1"]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            lines.append(f"{hashlib.sha256(open(out, 'rb').read()).hexdigest()}  {case}")
            for name, blob in tensors(out):
                lines.append(f"{hashlib.sha256(blob).hexdigest()}  {case}/{name}")
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {OUT}: {len(lines)} lines")


if __name__ == "__main__":
    main()
