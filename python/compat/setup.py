"""synapse-llama-cpp-compat: the top-level package `llama_cpp` over synapse,
for code written against llama-cpp-python. Opt-in, installed after synapse:

    .venv/bin/pip install --no-build-isolation --no-index ./python/compat

Refuses to install where a real llama-cpp-python is installed (the check
needs --no-build-isolation, so that it sees the target environment; the
package checks again on import)."""
import runpy
import sys
from pathlib import Path

from setuptools import setup

_guard = runpy.run_path(str(Path(__file__).resolve().parent / "llama_cpp" / "_guard.py"))
_message = _guard["refusal"]()
if _message is not None:
    sys.exit(f"synapse-llama-cpp-compat: not installed: {_message}")

setup(
    name="synapse-llama-cpp-compat",
    version="0.1.0",
    description="llama-cpp-python's module names (llama_cpp) over synapse",
    packages=["llama_cpp"],
    python_requires=">=3.9",
    install_requires=["synapse"],
    zip_safe=False,
)
