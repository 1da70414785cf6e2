#!/usr/bin/env python3
"""Writes src/quant/iq_grids.hpp: the lattice tables of ggml's IQ1/IQ2/IQ3
formats, copied value for value out of ggml-common.h (data, not code).

    python3 scripts/quant/gen_iq_grids.py /work/ref/llama.cpp/ggml/src/ggml-common.h \
        > src/quant/iq_grids.hpp

Source: llama.cpp v0.5.0 (de3ff815ea7d559ee917f063901b8986f038abc6),
ggml/src/ggml-common.h. A rerun on that file writes the same bytes.
"""
import hashlib
import re
import sys

# (ggml name, C type, entries, entries per line, hex digits or 0 for decimal)
TABLES = [
    ("kmask_iq2xs", "uint8_t", 8, 8, 0),
    ("ksigns_iq2xs", "uint8_t", 128, 16, 0),
    ("iq2xxs_grid", "uint64_t", 256, 4, 16),
    ("iq2xs_grid", "uint64_t", 512, 4, 16),
    ("iq2s_grid", "uint64_t", 1024, 4, 16),
    ("iq3xxs_grid", "uint32_t", 256, 8, 8),
    ("iq3s_grid", "uint32_t", 512, 8, 8),
    ("iq1s_grid", "uint64_t", 2048, 4, 16),
]


def table(text, name, ctype, n):
    m = re.search(r"GGML_TABLE_BEGIN\(\s*%s\s*,\s*%s\s*,\s*(\w+)\s*\)(.*?)GGML_TABLE_END\(\)" % (ctype, name), text,
                  re.S)
    if not m:
        sys.exit("no table %s in the header" % name)
    values = [int(v, 0) for v in re.findall(r"0x[0-9a-fA-F]+|\d+", m.group(2))]
    if len(values) != n:
        sys.exit("%s: %d values, expected %d" % (name, len(values), n))
    return values


def main():
    src = open(sys.argv[1], encoding="utf-8").read()
    out = []
    w = out.append
    w("// The lattice tables of ggml's IQ1_S/IQ1_M, IQ2_XXS/IQ2_XS/IQ2_S and")
    w("// IQ3_XXS/IQ3_S formats and their sign tables: data copied value for value")
    w("// from llama.cpp v0.5.0 (de3ff815ea7d559ee917f063901b8986f038abc6)")
    w("// ggml/src/ggml-common.h by scripts/quant/gen_iq_grids.py (do not edit by")
    w("// hand; rerun it). sha256 of the values as the script reads them, one per")
    w("// line in decimal, tables in the order below:")
    w("//   {digest}")
    w("//")
    w("// Each grid entry holds one group of 8 (uint64_t: IQ2, IQ1) or 4 (uint32_t:")
    w("// IQ3) unsigned magnitudes, one byte per element, element 0 in the low byte;")
    w("// iq1s_grid's bytes are int8 -1, 0, +1. Index widths (the formats read no")
    w("// other bits, so no index can leave its table): iq2xxs 8 bits (256), iq2xs")
    w("// 9 (512), iq2s 10 (1024), iq3xxs 8 (256), iq3s 9 (512), iq1s 11 (2048),")
    w("// ksigns_iq2xs 7 (128).")
    w("//")
    w("// Data only (inline constexpr, no code), so any translation unit may include")
    w("// it, the instruction-set ones too (docs/LAYERS.md).")
    w("#pragma once")
    w("")
    w("#include <cstdint>")
    w("")
    w("namespace synapse::quant {")
    h = hashlib.sha256()
    for name, ctype, n, per_line, digits in TABLES:
        values = table(src, name, ctype, n)
        for v in values:
            h.update(b"%d\n" % v)
        w("")
        w("inline constexpr %s %s[%d] = {" % (ctype, name, n))
        for i in range(0, n, per_line):
            chunk = values[i:i + per_line]
            if digits:
                w("    " + " ".join("0x%0*x," % (digits, v) for v in chunk))
            else:
                w("    " + " ".join("%3d," % v for v in chunk))
        w("};")
    w("")
    w("// IQ1S_DELTA, IQ1M_DELTA: the shift of IQ1_S / IQ1_M values off the grid.")
    w("inline constexpr float kIq1sDelta = 0.125f;")
    w("inline constexpr float kIq1mDelta = 0.125f;")
    w("")
    w("}  // namespace synapse::quant")
    text = "\n".join(out) + "\n"
    sys.stdout.write(text.replace("{digest}", h.hexdigest()))


if __name__ == "__main__":
    main()
