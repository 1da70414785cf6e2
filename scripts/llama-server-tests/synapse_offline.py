"""pytest plugin (-p synapse_offline) for llama.cpp's server tests run against synapse serve
offline, loaded before their conftest.py:

- `wget` (used only to download models) and `filelock` (used only to serialize those downloads
  across pytest-xdist workers; this runs one worker) are stand-ins when not installed: a download
  fails with a message, the lock is a no-op;
- `openai` (the Python client; not a Debian package, and PyPI is out of reach here) is a stand-in
  whose OpenAI() skips the test that makes one, so those tests show as skipped, not passed
  (ctest's tests/server/openai_client.mjs runs the official Node client against synapse serve);
- ServerPreset.load_all, which starts every preset once to fetch its model from Hugging Face, is
  skipped: the shim (./llama-server) maps the test model to a local file.
"""
import contextlib
import importlib.util
import sys
import types

if importlib.util.find_spec("wget") is None:
    wget = types.ModuleType("wget")

    def _no_download(url, out=None):
        raise RuntimeError("offline: cannot download " + url)

    wget.download = _no_download
    sys.modules["wget"] = wget

if importlib.util.find_spec("filelock") is None:
    filelock = types.ModuleType("filelock")

    class FileLock(contextlib.nullcontext):
        def __init__(self, path, *args, **kwargs):
            super().__init__()

    filelock.FileLock = FileLock
    sys.modules["filelock"] = filelock

if importlib.util.find_spec("openai") is None:
    openai = types.ModuleType("openai")

    class OpenAI:
        def __init__(self, *args, **kwargs):
            import pytest

            pytest.skip("the Python openai package is not installed")

    openai.OpenAI = OpenAI
    sys.modules["openai"] = openai


def pytest_sessionstart(session):
    import utils  # the suite's own module, on sys.path through its rootdir

    utils.ServerPreset.load_all = staticmethod(lambda: None)
