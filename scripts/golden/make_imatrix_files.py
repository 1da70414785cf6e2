#!/usr/bin/env python3
"""Writes the references of `synapse imatrix --in-file / --output-format /
--show-statistics` (tests/tools/imatrix_cli_test.cpp), made by llama-imatrix
v0.5.0 (built as scripts/golden/make_tiny_llama_iq.py says) from the
repository root, so that the paths it records are relative:

  tests/data/models/tiny-llama.fa-off.imatrix.dat
      --in-file tests/data/models/tiny-llama.fa-off.imatrix.gguf --output-format dat -c 128
  tests/data/models/imatrix-files.sha256: sha256sum lines of
      combined.gguf   --in-file <tiny-llama.fa-off.imatrix.gguf> --in-file <tiny-llama.imatrix.gguf> -c 128
      legacy+gguf.gguf  --in-file <tiny-llama.fa-off.imatrix.dat> --in-file <tiny-llama.imatrix.gguf> -c 128
      mixtral.dat     --in-file <tiny-mixtral.imatrix.gguf> --output-format dat -c 64
      mixtral-dat+gguf.gguf  --in-file mixtral.dat --in-file <tiny-mixtral.imatrix.gguf> -c 64
      run.dat         -f tests/data/text/wikitext-2-test.first100k.raw -c 128 --chunks 16 -t 1
                      --process-output -fa off --output-format dat (tiny-llama-f32)
  tests/data/models/tiny-llama.fa-off.imatrix.stats.txt and tiny-mixtral.imatrix.stats.txt:
      --show-statistics of the two GGUF files, llama's log prefixes removed.

(-m is tiny-llama-f32.gguf or tiny-mixtral-f32.gguf: llama-imatrix requires
one even where it loads none.) Standard library only.

  python3 scripts/golden/make_imatrix_files.py --llama-imatrix PATH
"""
import argparse
import hashlib
import os
import re
import subprocess
import tempfile

M = "tests/data/models/"
LLAMA = M + "tiny-llama-f32.gguf"
MIXTRAL = M + "tiny-mixtral-f32.gguf"
TEXT = "tests/data/text/wikitext-2-test.first100k.raw"


def run(exe, model, args):
    r = subprocess.run([exe, "-m", model] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"llama-imatrix {' '.join(args)} failed:\n{r.stderr}")
    return r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-imatrix", required=True)
    exe = ap.parse_args().llama_imatrix
    run(exe, LLAMA, ["--in-file", M + "tiny-llama.fa-off.imatrix.gguf", "--output-format", "dat", "-c", "128",
                     "-o", M + "tiny-llama.fa-off.imatrix.dat"])
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            ("combined.gguf", LLAMA, ["--in-file", M + "tiny-llama.fa-off.imatrix.gguf", "--in-file",
                                      M + "tiny-llama.imatrix.gguf", "-c", "128"]),
            ("legacy+gguf.gguf", LLAMA, ["--in-file", M + "tiny-llama.fa-off.imatrix.dat", "--in-file",
                                         M + "tiny-llama.imatrix.gguf", "-c", "128"]),
            ("mixtral.dat", MIXTRAL, ["--in-file", M + "tiny-mixtral.imatrix.gguf", "--output-format", "dat",
                                      "-c", "64"]),
            ("mixtral-dat+gguf.gguf", MIXTRAL, ["--in-file", os.path.join(tmp, "mixtral.dat"), "--in-file",
                                                M + "tiny-mixtral.imatrix.gguf", "-c", "64"]),
            ("run.dat", LLAMA, ["-f", TEXT, "-c", "128", "--chunks", "16", "-t", "1", "--process-output",
                                "-fa", "off", "--output-format", "dat"]),
        ]
        for name, model, args in cases:
            out = os.path.join(tmp, name)
            run(exe, model, args + ["-o", out])
            with open(out, "rb") as f:
                lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {name}\n")
    with open(M + "imatrix-files.sha256", "w") as f:
        f.writelines(lines)
    prefix = re.compile(r"^\d+\.\d+\.\d+\.\d+ [IWE] ?")
    for src, model, dst in [("tiny-llama.fa-off.imatrix.gguf", LLAMA, "tiny-llama.fa-off.imatrix.stats.txt"),
                            ("tiny-mixtral.imatrix.gguf", MIXTRAL, "tiny-mixtral.imatrix.stats.txt")]:
        err = run(exe, model, ["--in-file", M + src, "--show-statistics"])
        text = "".join(prefix.sub("", line) for line in err.splitlines(keepends=True))
        with open(M + dst, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
