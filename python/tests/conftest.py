"""Shared fixtures of the Python package's tests (run by scripts/test.sh).

Data comes from the repository's tests/data (see its PROVENANCE.md); the
`synapse` command line the tests compare against is $SYNAPSE_BINARY or
build/synapse (scripts/build.sh builds it). A missing binary fails the tests
that need it: nothing is skipped silently.
"""
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
STORIES = DATA / "models" / "stories260K.gguf"


@pytest.fixture(scope="session")
def stories_path() -> str:
    return str(STORIES)


@pytest.fixture(scope="session")
def golden():
    with open(DATA / "golden" / "stories260K.once-upon-a-time.json") as f:
        return json.load(f)


@pytest.fixture(scope="session")
def synapse_bin() -> str:
    path = Path(os.environ.get("SYNAPSE_BINARY", ROOT / "build" / "synapse"))
    if not path.is_file():
        pytest.fail(f"{path}: the synapse command is needed (scripts/build.sh, or set SYNAPSE_BINARY)")
    return str(path)


@pytest.fixture
def llm(stories_path):
    from synapse import Llama
    # One thread: stories260K is far too small to gain from more, and on a
    # shared 2-core machine a second thread mostly waits for a core.
    model = Llama(stories_path, n_ctx=512, n_threads=1, verbose=False)
    yield model
    model.close()
