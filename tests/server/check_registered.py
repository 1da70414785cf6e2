#!/usr/bin/env python3
"""Fails when a pytest file of tests/server/ would not run under CTest.

CMakeLists.txt registers each server test file by hand
(synapse_pytest_file(NAME FILE TIMEOUT): one CTest test per file, which runs
every test in it). A file with a `def test_...` missing from those calls would
silently never run; this check names each one (and each registered file that
does not exist).
Usage: check_registered.py [REPO_ROOT] (default: two levels above this file).
"""
import pathlib
import re
import sys


def registered(cmake_text):
    """The FILE of every synapse_pytest_file(...) call."""
    out = set()
    for call in re.finditer(r"synapse_pytest_file\(([^)]*)\)", cmake_text):
        words = call.group(1).split()
        if len(words) < 3 or not words[1].endswith(".py"):
            continue  # the function's own definition
        out.add(words[1])
    return out


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    files_registered = registered((root / "CMakeLists.txt").read_text())
    problems = []
    files = sorted((root / "tests" / "server").glob("*_test.py")) + sorted((root / "tests" / "server").glob("test_*.py"))
    for path in files:
        rel = path.relative_to(root).as_posix()
        if not re.search(r"^def test_\w+\(", path.read_text(), re.M):
            continue
        if rel not in files_registered:
            problems.append(f"{rel}: not registered (add synapse_pytest_file(NAME {rel} TIMEOUT) to CMakeLists.txt)")
    for rel in sorted(files_registered):
        if not (root / rel).is_file():
            problems.append(f"{rel}: registered but there is no such file")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"{len(files)} files, every one registered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
