#!/usr/bin/env python3
"""Fails when a pytest test of tests/server/ would not run under CTest.

CMakeLists.txt registers each server test file's cases by hand
(synapse_pytest_cases(NAME FILE TIMEOUT CASE...), one CTest test per case, run
as `pytest FILE -k test_CASE`), so that each runs alone within its timeout. A
file or a `def test_...` missing from those lists would silently never run;
this check names each one (and each registered case with no such function).
Usage: check_registered.py [REPO_ROOT] (default: two levels above this file).
"""
import pathlib
import re
import sys


def registered(cmake_text):
    """{file: set of case names} from every synapse_pytest_cases(...) call."""
    out = {}
    for call in re.finditer(r"synapse_pytest_cases\(([^)]*)\)", cmake_text):
        words = call.group(1).split()
        if len(words) < 3 or not words[1].endswith(".py"):
            continue  # the function's own definition
        out.setdefault(words[1], set()).update(words[3:])
    return out


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    cases = registered((root / "CMakeLists.txt").read_text())
    problems = []
    files = sorted((root / "tests" / "server").glob("*_test.py")) + sorted((root / "tests" / "server").glob("test_*.py"))
    for path in files:
        rel = path.relative_to(root).as_posix()
        defined = set(re.findall(r"^def test_(\w+)\(", path.read_text(), re.M))
        if not defined:
            continue
        if rel not in cases:
            problems.append(f"{rel}: not registered (add synapse_pytest_cases(... {rel} ...) to CMakeLists.txt)")
            continue
        for name in sorted(defined - cases[rel]):
            problems.append(f"{rel}: test_{name} is not in its synapse_pytest_cases list")
        for name in sorted(cases[rel] - defined):
            problems.append(f"{rel}: case {name} is registered but no test_{name} is defined")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"{len(files)} files, every test registered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
