"""Embeddings and rerank through `synapse serve` (issue 49 item 1): llama-server's
/v1/embeddings, /embedding, /embeddings and /v1/rerank (src/server/embedding.cpp), Ollama's
/api/embed and /api/embeddings, and the `openai` npm client's embeddings.create.

References: llama.cpp v0.5.0's llama-embedding vectors (tests/data/embedding/embedding.*.json) and
llama-server's /v1/rerank replies (tests/data/embedding/rerank.tiny-qwen3-reranker-f32.json), each
within the bound the engine's tests state (tests/model/embedding_test.cpp). Batch invariance: an
input's vector is the same JSON alone, batched, and under concurrent load.
"""
import base64
import json
import os
import struct
import subprocess
import threading

import pytest
import requests

from test_serve import DATA, NODE_DIR, SYNAPSE, Server

GOLDEN_ABS = 2e-7  # per component of a unit vector (llama-embedding prints %1.7f; tests/model/embedding_test.cpp)


def golden(name):
    with open(os.path.join(DATA, "embedding", name)) as f:
        return json.load(f)


def close_to(got, want, bound):
    assert len(got) == len(want)
    worst = max(abs(a - b) for a, b in zip(got, want))
    assert worst <= bound, worst


@pytest.fixture(scope="module")
def last():
    """Qwen3-Embedding's layout: last-token pooling, L2-normalised."""
    with Server("tiny-qwen3-f32.gguf", "--embeddings", "--pooling", "last", "-np", "2", "-t", "2", "-c", "512",
                "--alias", "tiny") as s:
        yield s


def test_v1_embeddings_match_llama_embedding(last):
    g = golden("embedding.tiny-qwen3-f32.last.json")
    r = last.post("/v1/embeddings", {"input": g["prompts"]})
    assert r.status_code == 200, r.text
    reply = r.json()
    assert list(reply) == ["model", "object", "usage", "data"]  # llama-server's key order
    assert reply["model"] == "tiny" and reply["object"] == "list"
    n_tokens = sum(len(t) for t in g["tokens"])
    assert reply["usage"] == {"prompt_tokens": n_tokens, "total_tokens": n_tokens}
    for i, d in enumerate(reply["data"]):
        assert list(d) == ["embedding", "index", "object"] and d["index"] == i and d["object"] == "embedding"
        close_to(d["embedding"], g["embeddings"][i], GOLDEN_ABS)
    # base64: the same float32 bytes.
    b = last.post("/v1/embeddings", {"input": g["prompts"], "encoding_format": "base64", "model": "m"}).json()
    assert b["model"] == "m"
    for i, d in enumerate(b["data"]):
        assert d["encoding_format"] == "base64"
        raw = base64.b64decode(d["embedding"])
        assert list(struct.unpack("<%df" % (len(raw) // 4), raw)) == reply["data"][i]["embedding"]


def test_each_input_is_the_same_alone_batched_and_under_load(last):
    inputs = ["Hello world", "a b c d e f g", "Once upon a time there was a cat", "x" * 300, [5, 6, 7, 8]]
    batched = last.post("/v1/embeddings", {"input": inputs}).json()["data"]
    alone = [last.post("/v1/embeddings", {"input": x}).json()["data"][0]["embedding"] for x in inputs]
    for i in range(len(inputs)):
        assert batched[i]["embedding"] == alone[i], i
    # Concurrent requests of different mixes: every vector is still the same.
    results, errors = {}, []

    def worker(k):
        try:
            mix = [inputs[(k + j) % len(inputs)] for j in range(1 + k % 3)]
            data = last.post("/v1/embeddings", {"input": mix}).json()["data"]
            results[k] = [(inputs.index(mix[j]), d["embedding"]) for j, d in enumerate(data)]
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, pairs in results.items():
        for i, v in pairs:
            assert v == alone[i], (k, i)
    # A generation request still runs beside the embeddings.
    assert last.post("/completion", {"prompt": "Hello", "n_predict": 4}).status_code == 200


def test_input_shapes_and_llama_server_shape(last):
    one = last.post("/v1/embeddings", {"input": "Hello world"}).json()["data"][0]["embedding"]
    ids = last.post("/tokenize", {"content": "Hello world", "add_special": True}).json()["tokens"]
    assert last.post("/v1/embeddings", {"input": ids}).json()["data"][0]["embedding"] == one
    # A list of prompts: token ids, a string, strings and ids mixed (llama-server's tokenize_mixed).
    three = last.post("/v1/embeddings", {"input": [ids, "Hello world", ["Hello world", ids[0]]]}).json()["data"]
    assert [d["embedding"] for d in three[:2]] == [one, one]
    mixed = last.post("/v1/embeddings", {"input": ids + ids[:1]}).json()["data"][0]["embedding"]
    assert three[2]["embedding"] == mixed != one
    expect_error(last, "/v1/embeddings", {"input": [["Hello", " world"]]}, 400, "input[0]", "input[0]")
    # llama-server's own shape: [{"index", "embedding": [[...]]}]; "content" in place of "input".
    for path in ("/embedding", "/embeddings"):
        native = last.post(path, {"content": "Hello world"}).json()
        assert native == [{"index": 0, "embedding": [one]}]
    # "content" on the OpenAI route turns to the native shape too, as llama-server.
    assert last.post("/v1/embeddings", {"content": "Hello world"}).json() == [{"index": 0, "embedding": [one]}]
    # embd_normalize -1: the raw pooled state, which normalised is the vector above.
    raw = last.post("/v1/embeddings", {"input": "Hello world", "embd_normalize": -1}).json()["data"][0]["embedding"]
    norm = sum(x * x for x in raw) ** 0.5
    close_to([x / norm for x in raw], one, 1e-6)
    assert abs(norm - 1) > 1e-3
    # dimensions: only the model's own size.
    assert last.post("/v1/embeddings", {"input": "Hi", "dimensions": 256}).status_code == 200


def expect_error(srv, path, body, status, text, param=None):
    r = srv.post(path, body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert text in err["message"], err
    if param is not None:
        assert err["param"] == param, err
    return err


def test_bad_requests(last):
    expect_error(last, "/v1/embeddings", {}, 400, '"input" or "content" must be provided')
    expect_error(last, "/v1/embeddings", {"input": "a", "encoding_format": "int8"}, 400,
                 "Can be either float or base64", "encoding_format")
    expect_error(last, "/v1/embeddings", {"input": "a", "dimensions": 64}, 400, "embedding size 256", "dimensions")
    expect_error(last, "/v1/embeddings", {"input": ""}, 400, "Input content cannot be empty")
    expect_error(last, "/v1/embeddings", {"input": [1, 99999]}, 400, "99999", "input[1]")
    expect_error(last, "/v1/embeddings", {"input": [{"a": 1}]}, 400, "input[0]", "input[0]")
    expect_error(last, "/v1/embeddings", {"input": "x " * 600}, 400, "longer than the context")
    # No reranking on an embedding server: 501 in llama-server's words and type.
    err = expect_error(last, "/v1/rerank", {"query": "q", "documents": ["d"]}, 501,
                       "This server does not support reranking. Start it with `--reranking`")
    assert err["type"] == "not_supported_error"
    assert last.post("/v1/embeddings", {"input": "still fine"}).status_code == 200


def test_embeddings_off_and_pooling_none():
    with Server("stories260K.gguf", "-np", "1") as s:
        err = expect_error(s, "/v1/embeddings", {"input": "hi"}, 501,
                           "This server does not support embeddings. Start it with `--embeddings`")
        assert err["type"] == "not_supported_error"
        expect_error(s, "/embedding", {"content": "hi"}, 501, "--embeddings")
        r = s.post("/api/embed", {"model": "x", "input": "hi"})
        assert r.status_code == 501 and list(r.json()) == ["error"], r.text
    # Pooling none (the default without a pooling_type key): one vector per token, not normalised;
    # the OpenAI route refuses it, as llama-server.
    with Server("stories260K.gguf", "--embeddings", "-np", "1") as s:
        expect_error(s, "/v1/embeddings", {"input": "hi"}, 400, "Pooling type 'none' is not OAI compatible")
        ids = s.post("/tokenize", {"content": "Once upon", "add_special": True}).json()["tokens"]
        native = s.post("/embedding", {"content": "Once upon"}).json()
        assert len(native) == 1 and len(native[0]["embedding"]) == len(ids) == 3
        assert all(len(row) == 64 for row in native[0]["embedding"])


def test_mean_pooling_on_llama_matches_llama_embedding():
    g = golden("embedding.stories260K.mean.json")
    with Server("stories260K.gguf", "--embeddings", "--pooling", "mean", "-np", "1") as s:
        data = s.post("/v1/embeddings", {"input": g["prompts"]}).json()["data"]
        for i, d in enumerate(data):
            close_to(d["embedding"], g["embeddings"][i], GOLDEN_ABS)


def test_openai_node_client():
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "openai")):
        pytest.fail("the openai npm package is not installed: run scripts/setup.sh (npm ci in tests/server/node)")
    g = golden("embedding.tiny-qwen3-f32.last.json")
    with Server("tiny-qwen3-f32.gguf", "--embeddings", "--pooling", "last", "-np", "2") as s:
        r = subprocess.run(["node", os.path.join(NODE_DIR, "embeddings.mjs"), s.url("/v1"), *g["prompts"]],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout)
        for i, v in enumerate(out["embeddings"]):
            close_to(v, g["embeddings"][i], GOLDEN_ABS)
        assert out["usage"]["prompt_tokens"] == sum(len(t) for t in g["tokens"])


def test_rerank_matches_llama_server():
    g = golden("rerank.tiny-qwen3-reranker-f32.json")
    with Server("tiny-qwen3-reranker-f32.gguf", "--reranking", "-np", "2", "-c", "1024") as s:
        for case in g["cases"]:
            r = s.post("/v1/rerank", case["request"])
            assert r.status_code == 200, r.text
            got, want = r.json(), case["reply"]
            if isinstance(want, list):  # TEI's shape
                assert [list(e) for e in got] == [list(e) for e in want]
                assert [(e["index"], e["text"]) for e in got] == [(e["index"], e["text"]) for e in want]
                close_to([e["score"] for e in got], [e["score"] for e in want], 1e-6)
            else:
                assert list(got) == list(want) and got["model"] == want["model"]
                assert got["usage"] == want["usage"]
                assert [e["index"] for e in got["results"]] == [e["index"] for e in want["results"]]
                close_to([e["relevance_score"] for e in got["results"]],
                         [e["relevance_score"] for e in want["results"]], 1e-6)
        # Every route name llama-server has; a document's score does not depend on the others.
        body = g["cases"][0]["request"]
        full = s.post("/rerank", body).json()["results"]
        for path in ("/reranking", "/v1/reranking"):
            assert s.post(path, body).json()["results"] == full
        first = s.post("/v1/rerank", {**body, "documents": body["documents"][:1]}).json()["results"][0]
        assert first["relevance_score"] == next(e for e in full if e["index"] == 0)["relevance_score"]
        expect_error(s, "/v1/rerank", {"documents": ["a"]}, 400, '"query" must be provided')
        expect_error(s, "/v1/rerank", {"query": 1, "documents": ["a"]}, 400, '"query" must be a string')
        expect_error(s, "/v1/rerank", {"query": "q", "documents": []}, 400,
                     '"documents" must be a non-empty string array')
        expect_error(s, "/v1/rerank", {"query": "q", "documents": ["a"], "top_n": -1}, 400, "top_n")
        expect_error(s, "/v1/embeddings", {"input": "q"}, 400, "pooling 'rank'")


def test_rerank_refused_on_a_model_without_a_head():
    r = subprocess.run([SYNAPSE, "serve", "-m", os.path.join(DATA, "models", "stories260K.gguf"),
                        "--port", "0", "--reranking"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "rank pooling needs a classifier head" in r.stderr, r.stderr


def test_ollama_embed(last):
    model = requests.get(last.url("/api/tags"), timeout=30).json()["models"][0]["name"]
    assert "embedding" in last.post("/api/show", {"model": model}).json()["capabilities"]
    inputs = ["Hello world", "Once upon a time there was a cat"]
    v1 = [d["embedding"] for d in last.post("/v1/embeddings", {"input": inputs}).json()["data"]]
    r = last.post("/api/embed", {"model": model, "input": inputs})
    assert r.status_code == 200, r.text
    reply = r.json()
    assert list(reply) == ["model", "embeddings", "total_duration", "load_duration", "prompt_eval_count"]
    assert reply["model"] == model and reply["embeddings"] == v1
    assert reply["total_duration"] > 0 and reply["prompt_eval_count"] == 8 + 21
    one = last.post("/api/embed", {"model": model, "input": "Hello world"}).json()
    assert one["embeddings"] == v1[:1]
    # The legacy route: {"embedding": [...]}, not normalised (as Ollama's).
    legacy = last.post("/api/embeddings", {"model": model, "prompt": "Hello world"}).json()
    assert list(legacy) == ["embedding"]
    norm = sum(x * x for x in legacy["embedding"]) ** 0.5
    close_to([x / norm for x in legacy["embedding"]], v1[0], 1e-6)
    # truncate: true (the default) cuts an input to the context; false refuses it.
    long_text = "x " * 600
    assert last.post("/api/embed", {"model": model, "input": long_text}).status_code == 200
    r = last.post("/api/embed", {"model": model, "input": long_text, "truncate": False})
    assert r.status_code == 400 and "truncate" in r.json()["error"], r.text
    r = last.post("/api/embed", {"model": "other-model", "input": "a"})
    assert r.status_code == 404 and list(r.json()) == ["error"], r.text
    r = last.post("/api/embed", {"model": model})
    assert r.status_code == 400 and "input" in r.json()["error"], r.text
