#!/usr/bin/env python3
"""Draws docs/performance.svg from the table scripts/perf.sh writes (chart.json).

One panel per test (pp512, tg128, ...), grouped bars per model and thread
count: synapse, llama.cpp and ik_llama.cpp tokens/s from the same run on the
same machine. Needs matplotlib (Debian: python3-matplotlib).

    perf_chart.py CHART_JSON OUT_SVG
"""
import json
import sys

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

ENGINES = [("synapse", "synapse", "#1f77b4"), ("llama", "llama.cpp", "#ff7f0e"), ("ik", "ik_llama.cpp", "#2ca02c")]


def main(src, dst):
    data = json.load(open(src))
    rows, title = data["rows"], data["title"]
    tests = []
    for r in rows:
        if r["test"] not in tests:
            tests.append(r["test"])
    fig, axes = plt.subplots(len(tests), 1, figsize=(13, 4.2 * len(tests)), squeeze=False)
    for ax, test in zip(axes[:, 0], tests):
        sub = [r for r in rows if r["test"] == test]
        labels = [r["model"].replace(" ", "\n") + f"\n{r['threads']} thread{'s' if r['threads'] > 1 else ''}" for r in sub]
        width = 0.8 / len(ENGINES)
        for k, (key, name, color) in enumerate(ENGINES):
            xs = [i + (k - (len(ENGINES) - 1) / 2) * width for i in range(len(sub))]
            ys = [r.get(key) or 0 for r in sub]
            bars = ax.bar(xs, ys, width, label=name, color=color)
            for bar, r in zip(bars, sub):
                v = r.get(key)
                ax.annotate("n/a" if not v else f"{v:.0f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7, xytext=(0, 1), textcoords="offset points")
        ax.set_xticks(range(len(sub)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylabel("tokens/s")
        ax.set_title(test, fontsize=10, loc="left")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(fontsize=8, frameon=False, ncols=3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, metadata={"Date": None})


if __name__ == "__main__":
    main(*sys.argv[1:3])
