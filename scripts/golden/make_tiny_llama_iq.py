#!/usr/bin/env python3
"""Makes the golden cases of the lattice formats, tiny-llama-<t>.short for t in
iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m (tests/data).

  scripts/golden/make_tiny_llama_iq.py --llama-imatrix LLAMA_IMATRIX --golden-dump GOLDEN_DUMP --out tests/data

1. The importance matrix models/tiny-llama.imatrix.gguf: llama-imatrix
   (llama.cpp v0.5.0 de3ff81) on tests/data/models/tiny-llama-f32.gguf over
   the first 16 chunks of 128 tokens of text/wikitext-2-test.first100k.raw,
   1 thread, --process-output (so that output.weight has a column importance
   too). The reference build at --llama-build has no llama-imatrix; build it
   from the same tree and static libraries (one line):

     g++ -std=c++17 -O3 -DNDEBUG -DGGML_USE_CPU -DLLAMA_SUBPROCESS -I$LC/common -I$LC/vendor -I$LC/include
         -I$LC/ggml/include $LC/tools/imatrix/imatrix.cpp -o llama-imatrix $B/common/libllama-common.a
         $B/src/libllama.a $B/ggml/src/libggml.a -ldl $B/ggml/src/libggml-cpu.a $B/ggml/src/libggml-base.a
         -lm -fopenmp -lpthread $B/common/libllama-common-base.a $B/vendor/cpp-httplib/libcpp-httplib.a

   (LC=/work/ref/llama.cpp, B=/work/ref/llama-build: the flags of the
   build's own llama-imatrix target, build.ninja).
2. models/tiny-llama-<t>.gguf: llama-quantize --pure --imatrix of
   tiny-llama-f32.gguf, 1 thread, file type t (IQ2_M for t = IQ2_S: file
   type IQ2_S stands for IQ2_XS tensors): every 2-D weight type t, output.weight
   included (its imatrix entry from --process-output); token_embd.weight
   Q2_K for IQ2_XXS, IQ2_XS, IQ2_S and IQ1_S (ggml_quantize_chunk asserts an
   importance matrix for them, and a get_rows weight has none: Q2_K is what
   llama-quantize's own IQ2/IQ1 mixes give token_embd), type t for IQ3_XXS,
   IQ3_S and IQ1_M (their quantizers run without one).
3. shared/tools/golden_dump.cpp, compiled against the same static build
   (its header gives the g++ line), on the golden README's 32 input ids with
   the v0.5.0 cases' settings (1 thread, the whole input as one batch, flash
   attention off, F16 K/V, n_ctx 256): golden/tiny-llama-<t>.short.{json,
   logits.f32}.

Needs NumPy (Debian's python3 has it; scripts/golden/golden_case.py writes
the cases); a rerun writes the same bytes.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_case import lcg_ids, sha256, write_case  # noqa: E402

N_VOCAB = 1024
BOS = 1  # tiny-llama's tokenizer.ggml.bos_token_id (golden/tiny-llama-f32.short.json's first id)
TYPES = ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"]
NEED_EMBD = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S"}  # token_embd Q2_K
# llama-quantize's file type whose default tensor type is t (llama-quant.cpp,
# llama_ftype_get_default_type): file type IQ2_S means IQ2_XS tensors, IQ2_M
# means IQ2_S tensors.
FTYPE = {"IQ2_S": "IQ2_M"}

WHAT = {
    "IQ2_XXS": "IQ2_XXS (ggml type 16, 2.06 bpw): per 32 values 4 indices into iq2xxs_grid (256 groups of 8 "
               "magnitudes 8/25/43), 4 x 7 sign bits through ksigns_iq2xs (even parity), a 4-bit scale; "
               "result x 1/8",
    "IQ2_XS": "IQ2_XS (ggml type 17, 2.31 bpw): 9-bit indices into iq2xs_grid (512), 7 sign bits each, a 4-bit "
              "scale per 16",
    "IQ2_S": "IQ2_S (ggml type 22, 2.56 bpw): 10-bit indices into iq2s_grid (1024, high bits in qh), explicit "
             "sign bytes, a 4-bit scale per 16",
    "IQ3_XXS": "IQ3_XXS (ggml type 18, 3.06 bpw): 8-bit indices into iq3xxs_grid (256 groups of 4), 7-bit sign "
               "indices, a 4-bit scale per 32; result x 1/4",
    "IQ3_S": "IQ3_S (ggml type 21, 3.44 bpw): 9-bit indices into iq3s_grid (512 groups of 4), explicit sign "
             "bits, a 4-bit scale per 32",
    "IQ1_S": "IQ1_S (ggml type 19, 1.56 bpw): 11-bit indices into iq1s_grid (2048 groups of 8 values -1/0/1), a "
             "3-bit scale and a +-1/8 shift per 32 (the shift through Q8_K's bsums)",
    "IQ1_M": "IQ1_M (ggml type 29, 1.75 bpw): 11-bit indices into iq1s_grid, a +-1/8 shift per 8, 3-bit scales "
             "per 16, the F16 block scale spread over 4 nibbles",
}


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-build", default="/work/ref/llama-build")
    ap.add_argument("--llama-imatrix", required=True, help="llama-imatrix built against --llama-build")
    ap.add_argument("--golden-dump", required=True, help="golden_dump built against --llama-build")
    ap.add_argument("--out", required=True, help="tests/data")
    a = ap.parse_args()

    models = os.path.join(a.out, "models")
    golden = os.path.join(a.out, "golden")
    f32 = os.path.join(models, "tiny-llama-f32.gguf")
    imatrix = os.path.join(models, "tiny-llama.imatrix.gguf")
    text = os.path.join(a.out, "text", "wikitext-2-test.first100k.raw")
    # llama-imatrix records the text's path as given: the relative one, so
    # that the file does not depend on where the repository is.
    run([a.llama_imatrix, "-m", f32, "-f", os.path.relpath(text), "-c", "128", "--chunks", "16", "-t", "1",
         "--process-output", "-o", imatrix])
    written = [imatrix]

    n = 32
    ids = lcg_ids(n, N_VOCAB, BOS)
    with open(os.path.join(golden, "tiny-llama-f32.short.json")) as f:
        assert json.load(f)["input_ids"] == ids, "the F32 case's ids"
    for t in TYPES:
        lt = t.lower()
        model = os.path.join(models, f"tiny-llama-{lt}.gguf")
        cmd = [os.path.join(a.llama_build, "bin", "llama-quantize"), "--pure", "--imatrix", imatrix]
        if t in NEED_EMBD:
            cmd += ["--token-embedding-type", "q2_K"]
        run(cmd + [f32, model, FTYPE.get(t, t), "1"])
        name = f"tiny-llama-{lt}.short"
        embd = "Q2_K" if t in NEED_EMBD else t
        write_case(a.golden_dump, model, name, ids, N_VOCAB, golden,
                   f"scripts/golden/make_tiny_llama_iq.py: llama-quantize (v0.5.0) --pure --imatrix "
                   f"tiny-llama.imatrix.gguf {FTYPE.get(t, t)} of tiny-llama-f32.gguf: every 2-D weight {t} "
                   f"(output too), token_embd {embd}, norms F32. Checks {WHAT[t]}; its dot with Q8_K activations")
        written += [model, os.path.join(golden, name + ".logits.f32"), os.path.join(golden, name + ".json")]
    for path in written:
        print(f"{os.path.relpath(path, a.out)}: {os.path.getsize(path):,} bytes, sha256 {sha256(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
