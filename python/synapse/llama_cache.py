"""Saved states and prompt caches, as llama-cpp-python's LlamaState and llama_cache.

A LlamaState is what `Llama.save_state()` returns and `Llama.load_state()`
takes back: the tokens in the context, their logits, the seed, and a copy of
the KV cache (`llama_state`, a snapshot of the library's Sequence; no bytes are
copied out of the engine). Pickling a state keeps everything but the KV copy;
loading such a state recomputes the KV cache from `input_ids`, which gives the
same bits (the engine's results do not depend on how tokens are batched).

A cache (`Llama.set_cache`) maps token sequences to states: before a
completion, the state whose tokens share the longest prefix with the prompt is
loaded when that prefix is longer than what the context already holds; after
it, the context's state is stored under its tokens. LlamaRAMCache keeps states
in memory (least recently used dropped past capacity_bytes); LlamaDiskCache
keeps pickled states in a directory (KV recomputed on load; oldest files
dropped past capacity_bytes). Neither is thread-safe on its own; the Llama
that uses one calls it under its lock.
"""
from __future__ import annotations

import hashlib
import os
import pickle
from collections import OrderedDict
from typing import Any, Optional, Sequence, Tuple

import numpy as np

__all__ = ["LlamaState", "BaseLlamaCache", "LlamaRAMCache", "LlamaCache", "LlamaDiskCache"]


class LlamaState:
    """A saved context (llama-cpp-python's fields).

    Attributes:
        input_ids: the tokens in the context, int32 [n_tokens].
        scores: their logits, float32 [n_tokens, n_vocab] with logits_all,
            else the last token's row only [1, n_vocab] ([0, n_vocab] when
            none is kept: an empty context, or a completion ran last).
        n_tokens: len(input_ids).
        llama_state: the KV cache snapshot (opaque; None after unpickling).
        llama_state_size: bytes of K and V the snapshot holds (a whole KV
            cache: n_ctx positions, or the sliding window).
        seed: the Llama's seed when saved (restored by load_state).
    """

    def __init__(self, input_ids: np.ndarray, scores: np.ndarray, n_tokens: int, llama_state: Any,
                 llama_state_size: int, seed: int):
        self.input_ids = input_ids
        self.scores = scores
        self.n_tokens = n_tokens
        self.llama_state = llama_state
        self.llama_state_size = llama_state_size
        self.seed = seed

    def __getstate__(self):
        # The KV snapshot lives in the engine; a pickled state is recomputed on load.
        return {**self.__dict__, "llama_state": None}


def longest_token_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens a and b share (llama-cpp-python's Llama.longest_token_prefix)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class BaseLlamaCache:
    """A map from token sequences to LlamaStates, looked up by longest shared prefix."""

    def __init__(self, capacity_bytes: int = (2 << 30)):
        if not isinstance(capacity_bytes, int) or capacity_bytes < 0:
            raise ValueError(f"capacity_bytes = {capacity_bytes!r}: must be an integer >= 0")
        self.capacity_bytes = capacity_bytes

    @property
    def cache_size(self) -> int:
        raise NotImplementedError

    def _keys(self):
        raise NotImplementedError

    def _find_longest_prefix_key(self, key: Tuple[int, ...]) -> Optional[Tuple[int, ...]]:
        best, best_len = None, 0
        for k in self._keys():
            n = longest_token_prefix(k, key)
            if n > best_len:
                best, best_len = k, n
        return best

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._find_longest_prefix_key(tuple(key)) is not None


class LlamaRAMCache(BaseLlamaCache):
    """States in memory; the least recently used leave once their KV bytes
    (llama_state_size) pass capacity_bytes."""

    def __init__(self, capacity_bytes: int = (2 << 30)):
        super().__init__(capacity_bytes)
        self.cache_state: "OrderedDict[Tuple[int, ...], LlamaState]" = OrderedDict()

    @property
    def cache_size(self) -> int:
        return sum(s.llama_state_size for s in self.cache_state.values())

    def _keys(self):
        return self.cache_state.keys()

    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        found = self._find_longest_prefix_key(tuple(key))
        if found is None:
            raise KeyError("no cached state shares a prefix with these tokens")
        self.cache_state.move_to_end(found)
        return self.cache_state[found]

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        key = tuple(key)
        self.cache_state.pop(key, None)
        self.cache_state[key] = value
        while self.cache_state and self.cache_size > self.capacity_bytes:
            self.cache_state.popitem(last=False)


LlamaCache = LlamaRAMCache  # llama-cpp-python's older name


class LlamaDiskCache(BaseLlamaCache):
    """Pickled states in `cache_dir` (two files per entry: NAME.key, the
    tokens; NAME.state, the LlamaState without its KV snapshot). The oldest
    entries leave once the .state files pass capacity_bytes. Pickles are
    trusted: use a directory only this program writes."""

    def __init__(self, cache_dir: str = ".cache/llama_cache", capacity_bytes: int = (2 << 30)):
        super().__init__(capacity_bytes)
        self.cache_dir = os.fspath(cache_dir)
        os.makedirs(self.cache_dir, exist_ok=True)

    def _path(self, key: Tuple[int, ...], ext: str) -> str:
        name = hashlib.sha256(np.asarray(key, dtype="<i4").tobytes()).hexdigest()
        return os.path.join(self.cache_dir, name + ext)

    def _entries(self):
        return [e for e in os.scandir(self.cache_dir) if e.name.endswith(".key")]

    def _keys(self):
        for e in self._entries():
            with open(e.path, "rb") as f:
                yield pickle.load(f)

    @property
    def cache_size(self) -> int:
        return sum(e.stat().st_size for e in os.scandir(self.cache_dir) if e.name.endswith(".state"))

    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        found = self._find_longest_prefix_key(tuple(key))
        if found is None:
            raise KeyError("no cached state shares a prefix with these tokens")
        path = self._path(found, ".state")
        with open(path, "rb") as f:
            state = pickle.load(f)
        os.utime(path)  # most recently used
        return state

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        key = tuple(key)
        with open(self._path(key, ".state"), "wb") as f:
            pickle.dump(value, f)
        with open(self._path(key, ".key"), "wb") as f:
            pickle.dump(key, f)
        states = sorted((e for e in os.scandir(self.cache_dir) if e.name.endswith(".state")),
                        key=lambda e: e.stat().st_mtime_ns)
        total = sum(e.stat().st_size for e in states)
        for e in states:
            if total <= self.capacity_bytes:
                break
            total -= e.stat().st_size
            os.remove(e.path)
            os.remove(e.path[:-len(".state")] + ".key")
