#!/usr/bin/env python3
"""Summarizes bench/serve_ab.sh's JSON lines (stdin): per engine and round,
the median over cycles of 1-client and N-client aggregate t/s, their ratio
(per cycle, then the median), TTFT p50 and TPOT p50; and each engine's
N-client t/s against the last engine's (per cycle, then the median)."""
import json
import statistics
import sys
from collections import defaultdict

rows = [json.loads(l) for l in sys.stdin if l.strip().startswith("{")]
by = defaultdict(dict)  # (engine, round, cycle) -> {clients: row}
engines = []
for r in rows:
    by[(r["engine"], r["round"], r["cycle"])][r["clients"]] = r
    if r["engine"] not in engines:
        engines.append(r["engine"])
med = statistics.median
print("| engine | round | 1 client t/s | N clients t/s | N / 1 | TTFT p50 1 / N (s) | TPOT p50 1 / N (ms) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for e in engines:
    for rnd in (1, 2):
        cyc = [v for (en, ro, _), v in sorted(by.items()) if en == e and ro == rnd and len(v) == 2]
        if not cyc:
            continue
        one = [min(v, key=int) for v in [sorted(c) for c in cyc]]
        ones = [c[min(c)] for c in cyc]
        ns = [c[max(c)] for c in cyc]
        ratio = [b["aggregate_tps"] / a["aggregate_tps"] for a, b in zip(ones, ns)]
        print("| %s | %s | %.1f | %.1f | %.2fx (%s) | %.2f / %.2f | %.1f / %.1f |" % (
            e, "1 (cold)" if rnd == 1 else "2 (warm)", med([a["aggregate_tps"] for a in ones]),
            med([b["aggregate_tps"] for b in ns]), med(ratio), ", ".join("%.2f" % x for x in ratio),
            med([a["ttft_ms_p50"] for a in ones]) / 1e3, med([b["ttft_ms_p50"] for b in ns]) / 1e3,
            med([a["tpot_ms_p50"] for a in ones]), med([b["tpot_ms_p50"] for b in ns])))
if len(engines) > 1:
    ref = engines[-1]
    for e in engines[:-1]:
        for rnd in (1, 2):
            rs = []
            for (en, ro, cy), v in by.items():
                w = by.get((ref, ro, cy))
                if en == e and ro == rnd and w and max(v) in w:
                    rs.append(v[max(v)]["aggregate_tps"] / w[max(v)]["aggregate_tps"])
            if rs:
                print("%s / %s, N clients, round %d: %.2fx (%s)" % (e, ref, rnd, med(rs), ", ".join("%.2f" % x for x in rs)))
