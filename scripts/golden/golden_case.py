"""One golden case of the v0.5.0 format (tests/data/golden/README.md): runs
shared/tools/golden_dump.cpp (built against llama.cpp v0.5.0) on a model and
ids, writes <name>.logits.f32 and <name>.json under the golden folder.
Shared by the make_tiny_*.py scripts that write whole cases."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

PRODUCER = "llama.cpp v0.5.0 de3ff81 CPU"


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def lcg_ids(n: int, n_vocab: int, bos: int) -> list[int]:
    """The golden README's input ids: BOS, then the MMIX LCG from 20250220."""
    x = 20250220
    ids = [bos]
    for _ in range(1, n):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        ids.append(3 + (x >> 33) % (n_vocab - 3))
    return ids


def tensor_types(path: str) -> dict[str, list[str]]:
    import gguf
    r = gguf.GGUFReader(path)
    by_type: dict[str, list[str]] = {}
    for t in r.tensors:
        role = t.name
        parts = role.split(".")
        if parts[0] == "blk":
            role = ".".join(parts[2:])
        role = role.removesuffix(".weight")
        name = t.tensor_type.name
        if role not in by_type.setdefault(name, []):
            by_type[name].append(role)
    return by_type


def per_layer_types(path: str) -> list[str]:
    import gguf
    r = gguf.GGUFReader(path)
    return [f"{t.name} {t.tensor_type.name}" for t in r.tensors]


def report(f32: str, quantized: str) -> None:
    """Prints the MANIFEST / PROVENANCE facts of the two model files and the quantized one's types."""
    for path in (f32, quantized):
        print(f"{os.path.basename(path)}: {os.path.getsize(path):,} bytes, sha256 {sha256(path)}")
        for t, roles in tensor_types(path).items():
            print(f"  {t}: {', '.join(roles)}")
    print("\n".join(per_layer_types(quantized)))


def write_case(golden_dump: str, model: str, name: str, ids: list[int], n_vocab: int, golden: str,
               notes: str) -> dict:
    """Dumps the case (1 thread, one batch, 16 greedy steps, n_ctx 256), writes its files and
    returns golden_dump's record (self_rms and greedy margins included)."""
    n = len(ids)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, name)
        subprocess.run([golden_dump, "--model", model, "--out", prefix, "--ids", ",".join(map(str, ids)),
                        "--n-greedy", "16", "--n-ctx", "256"], check=True)
        d = json.load(open(prefix + ".dump.json"))
        assert d["input_ids"] == ids and d["n_vocab"] == n_vocab
        logits = np.fromfile(prefix + ".logits.f32", dtype="<f4")
        assert logits.size == n * n_vocab
        logits.tofile(os.path.join(golden, name + ".logits.f32"))
    tbt, thr2 = d["self_rms_token_by_token"], d["self_rms_threads2"]
    s = d["settings"]
    case = {
        "case": name,
        "model": os.path.basename(model),
        "model_sha256": sha256(model),
        "producer": PRODUCER,
        "settings": {"n_threads": 1, "n_batch": s["n_batch"], "n_ubatch": s["n_ubatch"], "n_ctx": s["n_ctx"],
                     "n_ctx_seq": s["n_ctx_seq"], "flash_attn": False, "type_k": s["type_k"],
                     "type_v": s["type_v"], "n_seq_max": 1, "prompt_as_one_batch": True,
                     "logits_for_every_position": True},
        "n_vocab": n_vocab,
        "input_ids": ids,
        "input_rule": "ids[0] = tokenizer.ggml.bos_token_id; for k = 1..n-1: x = (x * 6364136223846793005 + "
                      "1442695040888963407) mod 2^64 (x starts at 20250220), ids[k] = 3 + (x >> 33) mod (n_vocab - 3)",
        "logits_file": name + ".logits.f32",
        "logits_dtype": "float32 little-endian",
        "logits_shape": [n, n_vocab],
        "greedy_ids": d["greedy_ids"],
        "greedy_margins": d["greedy_margins"],
        "greedy_first_eog": d["greedy_first_eog"],
        "self_rms": max(tbt["max_rel_rms"], thr2["max_rel_rms"]),
        "self_rms_detail": {"token_by_token": tbt, "threads2": thr2},
        "notes": notes,
    }
    with open(os.path.join(golden, name + ".json"), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    print(f"{name}: greedy min margin {min(d['greedy_margins']):.3g}, self_rms tbt "
          f"{tbt['max_rel_rms']:.3g} / 2 threads {thr2['max_rel_rms']:.3g}", file=sys.stderr)
    return d


def parse_args(doc: str, extra=None):
    """The make_tiny_*.py scripts' command line: --shared, --llama-build, --golden-dump, --out;
    extra(parser), if given, adds a script's own options."""
    import argparse
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default="/work/shared")
    ap.add_argument("--llama-build", default="/work/ref/llama-build")
    ap.add_argument("--golden-dump", required=True, help="golden_dump built against --llama-build")
    ap.add_argument("--out", required=True, help="tests/data")
    if extra:
        extra(ap)
    return ap.parse_args()


def write_models(mm, preset: str, f32: str, quantized: str, ftype: str, llama_build: str) -> int:
    """Writes make_model.py's `preset` as F32 to f32 (mm: the imported make_model with the
    preset registered), quantizes it with llama-quantize `ftype` (2 threads) to `quantized`;
    returns the vocabulary's BOS id."""
    import sys
    sys.argv = ["make_model.py", preset, "-o", f32, "--dtype", "f32"]
    if mm.main() != 0:
        raise SystemExit(1)
    subprocess.run([os.path.join(llama_build, "bin", "llama-quantize"), f32, quantized, ftype, "2"], check=True,
                   stdout=subprocess.DEVNULL)
    import gguf
    return int(gguf.GGUFReader(f32).fields["tokenizer.ggml.bos_token_id"].parts[-1][0])


def write_preset_cases(a, mm, preset: str, qtype: str, n_vocab: int, notes) -> None:
    """The whole run of a make_tiny_<arch>.py script: write_models() of `preset` to
    <a.out>/models/<preset>-f32.gguf and its llama-quantize `qtype` copy
    <preset>-<qtype in lower case>.gguf, the short (32 ids) and long (128 ids) case of each
    under <a.out>/golden (write_case), then report(). a: parse_args()'s; mm: the imported
    make_model with the preset registered; notes(label): a case's notes, label "F32" or qtype."""
    models = os.path.join(a.out, "models")
    golden = os.path.join(a.out, "golden")
    stems = (f"{preset}-f32", f"{preset}-{qtype.lower()}")
    f32, quantized = (os.path.join(models, stem + ".gguf") for stem in stems)
    bos = write_models(mm, preset, f32, quantized, qtype, a.llama_build)
    for model, stem, label in ((f32, stems[0], "F32"), (quantized, stems[1], qtype)):
        for kind, n in (("short", 32), ("long", 128)):
            write_case(a.golden_dump, model, f"{stem}.{kind}", lcg_ids(n, n_vocab, bos), n_vocab, golden,
                       notes(label))
    report(f32, quantized)
