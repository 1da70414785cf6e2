"""`synapse serve`'s defaults (issue 47 item 8): defined once (src/server/defaults.hpp, and the
engine's in SchedulerParams), printed by --help, and docs/SERVING.md's table says the same.

Registered in CTest by the top CMakeLists.txt (serve.defaults.*).
"""
import os
import re
import subprocess

from test_serve import SYNAPSE

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def documented():
    """docs/SERVING.md's table: flag -> default."""
    with open(os.path.join(ROOT, "docs", "SERVING.md")) as f:
        rows = re.findall(r"^\| `(--[a-z-]+)` \| ([^|]+?) \|$", f.read(), re.M)
    return dict(rows)


def help_text():
    r = subprocess.run([SYNAPSE, "serve", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # One option per entry: CLI11 may wrap a description onto indented lines.
    return re.sub(r"\n {20,}", " ", r.stdout)


def test_help_prints_the_documented_defaults():
    docs, text = documented(), help_text()
    assert len(docs) == 11, docs
    for flag, value in docs.items():
        line = next((ln for ln in text.splitlines() if re.search(r"(^|[ ,])" + re.escape(flag) + r"\b", ln)), None)
        assert line is not None, flag
        assert re.search(r"default:? " + re.escape(value) + r"\b", line), (flag, value, line)

