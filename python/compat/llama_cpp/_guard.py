"""Refuses to stand in for a real llama-cpp-python: both are the top-level
package `llama_cpp`, so installing one over the other mixes their files.
Run by this package's setup.py (before installing) and its __init__ (on
import). Standard library only."""
from importlib import metadata
from typing import Optional

# The distribution names llama-cpp-python has been published under (pip
# normalises "-" and "_", importlib.metadata does not on every version).
_NAMES = ("llama_cpp_python", "llama-cpp-python")


def real_llama_cpp_python() -> Optional[str]:
    """The version of an installed llama-cpp-python distribution, or None."""
    for name in _NAMES:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def refusal() -> Optional[str]:
    """The message explaining why this package must not be used, or None."""
    version = real_llama_cpp_python()
    if version is None:
        return None
    return (f"llama-cpp-python {version} is installed in this environment; synapse's `llama_cpp` compatibility "
            "package would shadow it (both are the package `llama_cpp`). Use one of them: keep llama-cpp-python "
            "and `import synapse` for synapse, or `pip uninstall llama-cpp-python` and reinstall "
            "synapse-llama-cpp-compat (python/compat).")
