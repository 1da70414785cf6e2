"""Finding a file in the local Hugging Face hub cache, for Llama.from_pretrained.

huggingface_hub's layout (its documented cache structure):
    $HF_HUB_CACHE (else $HF_HOME/hub, else ~/.cache/huggingface/hub)
      models--{org}--{name}/refs/{revision}        the commit hash of a branch or tag
      models--{org}--{name}/snapshots/{commit}/... the files of that commit
Nothing is downloaded: synapse has no network access by design.
"""
from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import List, Optional

from ._synapse import ModelNotFoundError


def hub_cache_dir(cache_dir: Optional[str] = None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def find_cached_file(repo_id: str, filename: str, cache_dir: Optional[str] = None,
                     revision: str = "main") -> str:
    """The path of the one file of `repo_id` (at `revision`'s snapshot) whose
    path in the repository matches the glob `filename`. ModelNotFoundError (a
    FileNotFoundError and a ValueError) naming the cache directory when the
    repository, the revision or a matching file is not there; ValueError when
    several files match."""
    if not isinstance(repo_id, str) or repo_id.count("/") != 1:
        raise ValueError(f"repo_id = {repo_id!r}: expected 'org/name'")
    root = hub_cache_dir(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    no_download = ("synapse does not download models: fetch it with `huggingface-cli download "
                   f"{repo_id} {filename}` (or pass model_path=)")
    ref = root / "refs" / revision
    commit = ref.read_text().strip() if ref.is_file() else revision
    snapshot = root / "snapshots" / commit
    if not snapshot.is_dir():
        raise ModelNotFoundError(f"{repo_id}: not in the Hugging Face cache {root.parent} "
                                 f"(no snapshot for revision {revision!r}); {no_download}")
    files: List[str] = sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_file())
    matches = [f for f in files if fnmatch.fnmatch(f, filename)]
    if not matches:
        raise ModelNotFoundError(f"{repo_id}: no file matching {filename!r} in the cached snapshot {snapshot} "
                                 f"(files: {files}); {no_download}")
    if len(matches) > 1:
        raise ValueError(f"{repo_id}: several files match {filename!r}: {matches}")
    return str(snapshot / matches[0])
