"""Llama(embedding=True): embed() and create_embedding() as llama-cpp-python shapes them, with the
vectors of llama.cpp v0.5.0's llama-embedding (tests/data/embedding/embedding.*.json, L2-normalised
there: normalize=True here) within the engine's stated bound (2e-7 per component)."""
import json

import numpy as np
import pytest

from conftest import DATA

import synapse
from synapse import Llama

GOLDEN_ABS = 2e-7


def golden(name):
    with open(DATA / "embedding" / name) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def qwen3_last():
    llm = Llama(str(DATA / "models" / "tiny-qwen3-f32.gguf"), embedding=True,
                pooling_type=synapse.LLAMA_POOLING_TYPE_LAST, n_threads=2, verbose=False)
    yield llm
    llm.close()


def test_embed_matches_llama_embedding(qwen3_last):
    g = golden("embedding.tiny-qwen3-f32.last.json")
    got = qwen3_last.embed(g["prompts"], normalize=True)
    assert isinstance(got, list) and len(got) == 3 and all(len(v) == 256 for v in got)
    for v, want in zip(got, g["embeddings"]):
        assert np.max(np.abs(np.array(v) - np.array(want))) <= GOLDEN_ABS
    # A str gives one vector; each input's vector is the same alone and batched.
    assert qwen3_last.embed(g["prompts"][1], normalize=True) == got[1]
    vectors, count = qwen3_last.embed(g["prompts"], normalize=True, return_count=True)
    assert vectors == got and count == sum(len(t) for t in g["tokens"])


def test_create_embedding_shape_and_no_normalisation(qwen3_last):
    reply = qwen3_last.create_embedding(["Hello world", "Once upon a time"], model="m")
    assert reply["object"] == "list" and reply["model"] == "m"
    assert [d["index"] for d in reply["data"]] == [0, 1]
    assert all(d["object"] == "embedding" and len(d["embedding"]) == 256 for d in reply["data"])
    n = len(qwen3_last.tokenize(b"Hello world")) + len(qwen3_last.tokenize(b"Once upon a time"))
    assert reply["usage"] == {"prompt_tokens": n, "total_tokens": n}
    raw = np.array(reply["data"][0]["embedding"])  # llama-cpp-python's create_embedding does not normalise
    unit = np.array(qwen3_last.embed("Hello world", normalize=True))
    assert abs(np.linalg.norm(raw) - 1) > 1e-3
    assert np.max(np.abs(raw / np.linalg.norm(raw) - unit)) < 1e-6
    assert qwen3_last.create_embedding("Hello world")["model"] == qwen3_last.model_path


def test_pooling_none_and_mean():
    g = golden("embedding.stories260K.mean.json")
    path = str(DATA / "models" / "stories260K.gguf")
    mean = Llama(path, embedding=True, pooling_type=synapse.LLAMA_POOLING_TYPE_MEAN, verbose=False)
    for v, want in zip(mean.embed(g["prompts"], normalize=True), g["embeddings"]):
        assert np.max(np.abs(np.array(v) - np.array(want))) <= GOLDEN_ABS
    none = Llama(path, embedding=True, verbose=False)  # no pooling_type key: NONE, a vector per token
    assert none.pooling_type() == synapse.LLAMA_POOLING_TYPE_NONE
    rows = none.embed("Once upon a time")
    assert len(rows) == len(none.tokenize(b"Once upon a time")) and all(len(r) == 64 for r in rows)
    # truncate: at most n_batch tokens, else refused.
    short = Llama(path, embedding=True, pooling_type=synapse.LLAMA_POOLING_TYPE_MEAN, n_batch=4, verbose=False)
    _, count = short.embed("Once upon a time there was a little dog", return_count=True)
    assert count == 4
    with pytest.raises(synapse.InvalidArgumentError, match="n_batch 4"):
        short.embed("Once upon a time there was a little dog", truncate=False)


def test_rank_pooling_scores():
    g = golden("rerank.tiny-qwen3-reranker-f32.json")
    llm = Llama(str(DATA / "models" / "tiny-qwen3-reranker-f32.gguf"), embedding=True, verbose=False)
    assert llm.pooling_type() == synapse.LLAMA_POOLING_TYPE_RANK
    out = llm.embed("anything")
    assert len(out) == 2 and abs(sum(out) - 1) < 1e-6  # softmax over (yes, no)


def test_errors():
    path = str(DATA / "models" / "stories260K.gguf")
    plain = Llama(path, verbose=False)
    with pytest.raises(RuntimeError, match="embedding=True"):
        plain.embed("hi")
    with pytest.raises(synapse.InvalidArgumentError, match="pooling_type"):
        Llama(path, embedding=True, pooling_type=7, verbose=False)
    llm = Llama(path, embedding=True, pooling_type=synapse.LLAMA_POOLING_TYPE_RANK, verbose=False)
    with pytest.raises(synapse.UnsupportedError, match="classifier head"):
        llm.embed("hi")
    with pytest.raises(synapse.InvalidArgumentError):
        llm.embed([])
