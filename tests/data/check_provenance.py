#!/usr/bin/env python3
"""Checks tests/data/PROVENANCE.md: every file it lists (a line
"- `path` | origin | `sha256`") exists under tests/data and has that SHA-256,
and every file of the folders whose files are all listed (models/, golden/,
embedding/) is listed. Exit status 1 and one line per problem otherwise.

PROVENANCE.md is the referee's record: a golden file or model replaced
without its line (or a line left stale after an edit) is an error here, not
a silent change of what the tests compare against.
"""
import hashlib
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINE = re.compile(r"^- `([^`]+)` \|.*\| `([0-9a-f]{64})`\s*$")


def main() -> int:
    listed = {}
    for line in (HERE / "PROVENANCE.md").read_text(encoding="utf-8").splitlines():
        m = LINE.match(line.strip())
        if m:
            listed[m.group(1)] = m.group(2)
    problems = []
    if len(listed) < 100:
        problems.append(f"PROVENANCE.md: only {len(listed)} file lines parsed (format changed?)")
    for path, digest in sorted(listed.items()):
        f = HERE / path
        if not f.is_file():
            problems.append(f"{path}: listed in PROVENANCE.md but missing")
        elif hashlib.sha256(f.read_bytes()).hexdigest() != digest:
            problems.append(f"{path}: its SHA-256 is not the one PROVENANCE.md lists")
    for folder in ("models", "golden", "embedding"):
        for f in sorted((HERE / folder).rglob("*")):
            rel = f.relative_to(HERE).as_posix()
            if f.is_file() and rel not in listed:
                problems.append(f"{rel}: not listed in PROVENANCE.md")
    for p in problems:
        print(p)
    print(f"{len(listed)} files listed, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
