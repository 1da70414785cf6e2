"""save_state / load_state and the prompt caches: a loaded state continues
byte for byte as the context it was saved from."""
import pickle

import numpy as np
import pytest

from synapse import Llama, LlamaDiskCache, LlamaRAMCache, LlamaState

PROMPT = "Once upon a time, there was a little"


def _continue(llm, n=10):
    """n sampled tokens after what the context holds (seeded sampler, no reset)."""
    gen = llm.generate([], reset=False, temp=0.9)
    out = [next(gen) for _ in range(n)]
    gen.close()
    return out


def _spy_load_state(llm):
    """The states the cache makes llm load, in order."""
    loaded, real = [], llm.load_state

    def spy(state):
        loaded.append(state)
        real(state)

    llm.load_state = spy
    return loaded


def test_round_trip_is_byte_identical(stories_path):
    llm = Llama(stories_path, n_threads=1, seed=4, verbose=False)
    llm.eval(llm.tokenize(PROMPT.encode()))
    state = llm.save_state()
    assert isinstance(state, LlamaState) and state.n_tokens == llm.n_tokens
    assert list(state.input_ids) == list(llm.input_ids) and state.seed == 4
    assert state.llama_state_size == llm.n_ctx() * llm._model.kv_bytes_per_position
    logits = np.array(llm.logits)
    want = _continue(llm)
    text = llm(PROMPT, max_tokens=12, temperature=0.9)["choices"][0]["text"]

    # Something else in between: another prompt, another seed.
    llm.reset()
    llm.eval(llm.tokenize(b"The dog"))
    llm.set_seed(99)
    llm.load_state(state)
    assert llm.n_tokens == state.n_tokens and list(llm.input_ids) == list(state.input_ids)
    assert np.array_equal(llm.logits, logits)
    assert _continue(llm) == want
    llm.load_state(state)  # a state loads again (the Llama got a copy of its KV cache)
    assert _continue(llm) == want
    assert llm(PROMPT, max_tokens=12, temperature=0.9)["choices"][0]["text"] == text

    # Pickled (as a disk cache stores it): the KV cache is recomputed, the same bits.
    restored = pickle.loads(pickle.dumps(state))
    assert restored.llama_state is None
    other = Llama(stories_path, n_threads=1, verbose=False)
    other.load_state(restored)
    assert np.array_equal(other.logits, logits) and other._seed == 4
    assert _continue(other) == want


def test_load_state_refuses_what_does_not_fit(stories_path):
    big = Llama(stories_path, n_ctx=64, n_threads=1, verbose=False)
    big.eval(list(range(3, 40)))
    small = Llama(stories_path, n_ctx=16, n_threads=1, verbose=False)
    with pytest.raises(ValueError, match="do not fit in n_ctx 16"):
        small.load_state(big.save_state())
    with pytest.raises(TypeError):
        small.load_state("state")


def test_ram_cache_restores_the_longest_prefix(stories_path):
    llm = Llama(stories_path, n_threads=1, seed=2, verbose=False)
    cache = LlamaRAMCache(capacity_bytes=1 << 20)
    llm.set_cache(cache)
    first = llm(PROMPT, max_tokens=6)["choices"][0]["text"]
    assert len(cache.cache_state) == 1 and cache.cache_size > 0
    key = next(iter(cache.cache_state))
    assert list(key) == list(llm.input_ids)
    llm.reset()
    assert llm.tokenize(PROMPT.encode()) in cache
    # After a reset the cached state is loaded; the reply is the same.
    loaded = _spy_load_state(llm)
    assert llm(PROMPT, max_tokens=6)["choices"][0]["text"] == first
    assert len(loaded) == 1 and list(loaded[0].input_ids) == list(key)
    assert llm(PROMPT, max_tokens=6)["choices"][0]["text"] == first
    assert len(loaded) == 1  # the context already holds as long a prefix: nothing loaded
    # Past capacity the least recently used states leave.
    tiny = LlamaRAMCache(capacity_bytes=cache.cache_size)
    tiny[[1, 2]] = cache[list(key)]
    tiny[[1, 3]] = cache[list(key)]
    assert list(tiny.cache_state) == [(1, 3)]
    with pytest.raises(KeyError):
        tiny[[5]]


def test_disk_cache(stories_path, tmp_path):
    llm = Llama(stories_path, n_threads=1, seed=2, verbose=False)
    llm.set_cache(LlamaDiskCache(cache_dir=str(tmp_path / "c")))
    first = llm(PROMPT, max_tokens=6)["choices"][0]["text"]
    # A new Llama with a new cache object over the same directory gets the state from disk.
    again = Llama(stories_path, n_threads=1, seed=2, verbose=False)
    disk = LlamaDiskCache(cache_dir=str(tmp_path / "c"))
    assert disk.cache_size > 0 and llm.tokenize(PROMPT.encode()) in disk
    again.set_cache(disk)
    loaded = _spy_load_state(again)
    assert again(PROMPT, max_tokens=6)["choices"][0]["text"] == first
    assert len(loaded) == 1 and loaded[0].llama_state is None  # unpickled: KV recomputed
    assert again.n_tokens > 0
    with pytest.raises(TypeError):
        llm.set_cache({})
