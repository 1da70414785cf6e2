"""Ollama's API through `synapse serve` (issue 49): /api/chat and /api/generate
translated onto the chat and completions routes (src/server/ollama.cpp), and
the routes that describe the model (/api/tags, /api/show, /api/ps,
/api/version, GET and HEAD /).

On stories260K at temperature 0 with a seed: a streamed reply's NDJSON lines
add up to the non-streamed reply, which says what /v1/chat/completions (or
/v1/completions, for a raw generate) says for the same request; the token
counts are the chat route's usage; format "json" gives JSON; bad bodies are
400s in Ollama's shape {"error": "..."}; another model's name is a 404.
Tools and thinking: tiny-qwen3 with Qwen3's template (the tool message
round trip; a random model rarely calls on its own, and Ollama has no
tool_choice, so the calls' translation is unit-tested in ollama_test.cpp).
The official Ollama JavaScript client runs against the server too
(tests/server/ollama-node).
"""
import json
import os
import re
import subprocess
import threading

import pytest
import requests

from test_serve import Server

OLLAMA_NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ollama-node")
SYSTEM = "You are a storyteller."
TURNS = [{"role": "user", "content": "Tell me about a cat named Tom."},
         {"role": "assistant", "content": "Tom was a big cat."},
         {"role": "user", "content": "What did Tom do next?"}]
OPTIONS = {"temperature": 0, "seed": 1234, "num_predict": 48}
CREATED_AT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")
STATS = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
         "eval_duration")


@pytest.fixture(scope="module")
def srv():
    with Server("stories260K.gguf", "-np", "4", "-t", "2", "-c", "1024") as s:
        yield s


def model_of(srv):
    r = requests.get(srv.url("/api/tags"), timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["models"][0]["name"]


def ndjson(resp):
    """The objects of an NDJSON stream; all but the last say done: false."""
    assert resp.status_code == 200, resp.text
    assert resp.headers["Content-Type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in resp.iter_lines() if line]
    assert lines and lines[-1]["done"] is True, lines[-1:]
    assert all(line["done"] is False for line in lines[:-1])
    for line in lines:
        assert CREATED_AT.match(line["created_at"]), line
    return lines


def check_stats(reply):
    assert reply["done"] is True and reply["done_reason"] in ("stop", "length"), reply
    for key in STATS:
        assert isinstance(reply[key], int) and reply[key] >= 0, (key, reply)
    assert reply["total_duration"] >= reply["prompt_eval_duration"] + reply["eval_duration"] > 0, reply


def test_chat_stream_adds_up_to_the_reply(srv):
    model = model_of(srv)
    body = {"model": model, "messages": [{"role": "system", "content": SYSTEM}] + TURNS, "options": OPTIONS,
            "stream": False}
    r = srv.post("/api/chat", body)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    reply = r.json()
    assert reply["model"] == model and CREATED_AT.match(reply["created_at"])
    assert reply["message"]["role"] == "assistant" and "tool_calls" not in reply["message"]
    check_stats(reply)

    # The chat route says the same for the same conversation.
    chat = srv.post("/v1/chat/completions", {"messages": body["messages"], "temperature": 0, "seed": 1234,
                                             "max_tokens": 48}).json()
    assert reply["message"]["content"] == chat["choices"][0]["message"]["content"]
    assert reply["done_reason"] == chat["choices"][0]["finish_reason"]
    assert reply["prompt_eval_count"] == chat["usage"]["prompt_tokens"]
    assert reply["eval_count"] == chat["usage"]["completion_tokens"]

    # Streamed (Ollama's default: no "stream" field): the lines add up.
    del body["stream"]
    lines = ndjson(srv.post("/api/chat", body, stream=True))
    assert len(lines) > 2
    assert "".join(line["message"]["content"] for line in lines) == reply["message"]["content"]
    last = lines[-1]
    assert last["message"] == {"role": "assistant", "content": ""}
    check_stats(last)
    for key in ("done_reason", "prompt_eval_count", "eval_count"):
        assert last[key] == reply[key], key

    # Log-probabilities: one entry per token, the same streamed or not.
    lp = dict(body, logprobs=True, top_logprobs=2, stream=False)
    whole = srv.post("/api/chat", lp).json()
    assert len(whole["logprobs"]) == whole["eval_count"]
    assert "".join(e["token"] for e in whole["logprobs"]) == whole["message"]["content"]
    assert all(len(e["top_logprobs"]) == 2 and e["bytes"] == list(e["token"].encode()) for e in whole["logprobs"])
    lines = ndjson(srv.post("/api/chat", dict(lp, stream=True), stream=True))
    assert [e for line in lines for e in line.get("logprobs", [])] == whole["logprobs"]

    # The same seeded request beside three others gives the same text.
    sampled = dict(body, options={"temperature": 0.9, "seed": 77, "num_predict": 40}, stream=False)
    alone = srv.post("/api/chat", sampled).json()["message"]["content"]
    got = [None] * 4

    def run(i):
        got[i] = srv.post("/api/chat", sampled).json()["message"]["content"]
    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [alone] * 4


def test_generate_matches_the_completion_routes(srv):
    model = model_of(srv)
    # raw: the prompt as is, on the completions route.
    raw = {"model": model, "prompt": "Once upon a time, there was a", "raw": True, "options": OPTIONS,
           "stream": False}
    r = srv.post("/api/generate", raw)
    assert r.status_code == 200, r.text
    reply = r.json()
    check_stats(reply)
    assert reply["model"] == model and "context" not in reply
    completion = srv.post("/v1/completions", {"prompt": raw["prompt"], "temperature": 0, "seed": 1234,
                                              "max_tokens": 48}).json()
    assert reply["response"] == completion["choices"][0]["text"]
    assert reply["done_reason"] == completion["choices"][0]["finish_reason"]
    assert reply["prompt_eval_count"] == completion["usage"]["prompt_tokens"]
    assert reply["eval_count"] == completion["usage"]["completion_tokens"]
    lines = ndjson(srv.post("/api/generate", dict(raw, stream=True), stream=True))
    assert "".join(line["response"] for line in lines) == reply["response"]
    assert lines[-1]["response"] == "" and lines[-1]["eval_count"] == reply["eval_count"]

    # Templated: system and prompt as a conversation, on the chat route.
    templated = {"model": model, "prompt": TURNS[0]["content"], "system": SYSTEM, "options": OPTIONS,
                 "stream": False}
    reply = srv.post("/api/generate", templated).json()
    chat = srv.post("/v1/chat/completions", {"messages": [{"role": "system", "content": SYSTEM}, TURNS[0]],
                                             "temperature": 0, "seed": 1234, "max_tokens": 48}).json()
    assert reply["response"] == chat["choices"][0]["message"]["content"]
    assert reply["prompt_eval_count"] == chat["usage"]["prompt_tokens"]
    lines = ndjson(srv.post("/api/generate", dict(templated, stream=True), stream=True))
    assert "".join(line["response"] for line in lines) == reply["response"]

    # num_predict cuts the reply: done_reason "length".
    short = srv.post("/api/generate", dict(raw, options={"temperature": 0, "num_predict": 3})).json()
    assert short["done_reason"] == "length" and short["eval_count"] == 3


def test_listing_routes(srv):
    r = requests.get(srv.url("/"), timeout=30)
    assert r.status_code == 200 and r.text == "Ollama is running"
    assert requests.head(srv.url("/"), timeout=30).status_code == 200
    assert requests.head(srv.url("/api/version"), timeout=30).status_code == 200
    version = requests.get(srv.url("/api/version"), timeout=30).json()["version"]
    assert tuple(int(x) for x in version.split(".")) >= (0, 6, 4)  # what VS Code Copilot asks for

    tags = requests.get(srv.url("/api/tags"), timeout=30).json()
    [m] = tags["models"]
    assert m["name"] == m["model"] == "stories260K:latest"
    assert re.match(r"^[0-9a-f]{64}$", m["digest"]) and CREATED_AT.match(m["modified_at"])
    assert m["size"] == os.path.getsize(os.path.join(os.environ["SYNAPSE_TEST_DATA"], "models", "stories260K.gguf"))
    assert m["details"]["format"] == "gguf" and m["details"]["family"] == "llama"
    assert m["details"]["families"] == ["llama"] and m["details"]["quantization_level"] == "F32"
    assert re.match(r"^\d+(\.\d+)?[KMB]?$", m["details"]["parameter_size"]), m["details"]

    show = srv.post("/api/show", {"model": "stories260K"})
    assert show.status_code == 200, show.text
    show = show.json()
    assert show["details"] == m["details"]
    assert show["capabilities"] == ["completion"]  # no Jinja template in the file: no tools
    info = show["model_info"]
    assert info["general.architecture"] == "llama" and info["llama.context_length"] > 0
    assert info["general.parameter_count"] > 0
    assert info["tokenizer.ggml.tokens"] == [] and "general.name" not in info
    assert "num_ctx" in show["parameters"] and show["modelfile"].startswith("# Modelfile")
    verbose = srv.post("/api/show", {"name": m["name"], "verbose": True}).json()  # older clients send "name"
    assert len(verbose["model_info"]["tokenizer.ggml.tokens"]) == 512

    ps = requests.get(srv.url("/api/ps"), timeout=30).json()
    [p] = ps["models"]
    assert p["name"] == m["name"] and p["digest"] == m["digest"] and p["details"] == m["details"]
    assert p["size"] > m["size"] and p["size_vram"] == 0 and p["context_length"] == 1024
    assert p["expires_at"] > "2100"

    # The model's names: listed, bare, file name, any case; another is a 404.
    for name in ("stories260K:latest", "stories260K", "stories260k", "stories260K.gguf"):
        r = srv.post("/api/generate", {"model": name, "prompt": "a", "raw": True, "stream": False,
                                       "options": {"num_predict": 1}})
        assert r.status_code == 200 and r.json()["model"] == name, (name, r.text)
    r = srv.post("/api/chat", {"model": "llama3.2", "messages": TURNS})
    assert r.status_code == 404 and r.json() == {"error": "model 'llama3.2' not found"}, r.text
    r = srv.post("/api/show", {"model": "llama3.2"})
    assert r.status_code == 404 and r.json() == {"error": "model 'llama3.2' not found"}, r.text

    # Load and unload requests: nothing to generate, one object.
    r = srv.post("/api/generate", {"model": m["name"]})
    assert r.status_code == 200 and r.json()["done_reason"] == "load" and r.json()["response"] == "", r.text
    r = srv.post("/api/chat", {"model": m["name"], "messages": [], "keep_alive": 0})
    assert r.json()["done_reason"] == "unload" and r.json()["message"]["content"] == "", r.text


def test_format_json_and_schema(srv):
    model = model_of(srv)
    r = srv.post("/api/generate", {"model": model, "prompt": "A person:", "raw": True, "format": "json",
                                   "stream": False, "options": {"temperature": 0, "num_predict": 120}})
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["done_reason"] == "stop", reply
    assert isinstance(json.loads(reply["response"]), dict)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 99}},
              "required": ["name", "age"], "additionalProperties": False}
    lines = ndjson(srv.post("/api/chat", {"model": model, "messages": TURNS[:1], "format": schema,
                                          "options": {"temperature": 0, "num_predict": 120}}, stream=True))
    value = json.loads("".join(line["message"]["content"] for line in lines))
    assert list(value) == ["name", "age"] and isinstance(value["age"], int)


def expect_400(srv, path, body, needle):
    r = srv.post(path, body)
    assert r.status_code == 400, (body, r.text)
    err = r.json()
    assert list(err) == ["error"] and needle in err["error"], err


def test_bad_bodies_are_400s_in_ollamas_shape(srv):
    model = model_of(srv)
    user = [{"role": "user", "content": "hi"}]
    expect_400(srv, "/api/chat", {"messages": user}, "model is required")
    expect_400(srv, "/api/chat", {"model": model, "messages": "hi"}, "messages: must be an array")
    expect_400(srv, "/api/chat", {"model": model, "messages": [{"role": "user", "content": "x", "images": ["AA=="]}]},
               "messages[0].images: images are not supported")
    expect_400(srv, "/api/chat", {"model": model, "messages": user, "format": "yaml"}, "format: must be")
    expect_400(srv, "/api/chat", {"model": model, "messages": user, "options": {"mirostat": 1}}, "options.mirostat")
    # The chat route's checks, naming the fields as Ollama spells them.
    expect_400(srv, "/api/chat", {"model": model, "messages": user, "options": {"temperature": -1}},
               "'options.temperature' must be >= 0")
    expect_400(srv, "/api/chat", {"model": model, "messages": user, "options": {"top_k": -1}}, "'options.top_k' must be")
    expect_400(srv, "/api/chat", {"model": model, "messages": user, "options": {"stop": ["x"] * 17}},
               "'options.stop' must have at most 16 entries")
    expect_400(srv, "/api/chat", {"model": model, "messages": user, "tools": [{"type": "function", "function": {
        "name": "f"}}]}, "tools require the model's Jinja chat template")
    expect_400(srv, "/api/chat", {"model": model, "messages": [{"role": "user", "content": "cat " * 1500}]},
               "more than the context size n_ctx = 1024")
    expect_400(srv, "/api/generate", {"model": model, "prompt": "x", "context": [1, 2]}, "context: is not supported")
    expect_400(srv, "/api/generate", {"model": model, "prompt": "x", "suffix": "y"}, "suffix: is not supported")
    expect_400(srv, "/api/generate", {"model": model, "prompt": "x", "raw": True, "system": "s"}, "raw mode")
    r = requests.post(srv.url("/api/chat"), data=b"{not json", timeout=30)
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"], r.text
    r = srv.post("/api/chat", {"model": model, "messages": [{"role": "user", "content": "a" * (9 << 20)}]})
    assert r.status_code == 413 and list(r.json()) == ["error"], r.text
    r = srv.post("/api/pull", {"model": "llama3.2"})
    assert r.status_code == 404 and list(r.json()) == ["error"], r.text
    for path in ("/api/embed", "/api/embeddings"):
        r = srv.post(path, {"model": model, "input": "hi"})
        assert r.status_code == 501 and "embeddings" in r.json()["error"], r.text
    # Still serving.
    assert srv.post("/api/chat", {"model": model, "messages": user, "stream": False,
                                  "options": {"num_predict": 2}}).status_code == 200


def test_api_key():
    key = "sk-ollama-test"
    with Server("stories260K.gguf", "--api-key", key, "-np", "1") as s:
        body = {"model": "stories260K", "messages": [{"role": "user", "content": "hi"}], "stream": False,
                "options": {"num_predict": 2}}
        r = s.post("/api/chat", body)
        assert r.status_code == 401 and r.json() == {"error": "Invalid API Key"}, r.text
        assert s.post("/api/chat", body, headers={"Authorization": "Bearer " + key}).status_code == 200
        # The probes clients make before they know of a key.
        assert requests.get(s.url("/"), timeout=30).status_code == 200
        assert requests.get(s.url("/api/version"), timeout=30).status_code == 200
        assert requests.get(s.url("/api/tags"), timeout=30).status_code == 200


def test_ollama_node_client(srv):
    """The official Ollama JavaScript client (tests/server/ollama-node, npm ci by scripts/setup.sh)."""
    if not os.path.isdir(os.path.join(OLLAMA_NODE_DIR, "node_modules", "ollama")):
        pytest.fail("the ollama npm package is not installed: run scripts/setup.sh (npm ci in tests/server/ollama-node)")
    r = subprocess.run(["node", os.path.join(OLLAMA_NODE_DIR, "client.mjs"), srv.base],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ollama client: ok" in r.stdout


QWEN3 = os.path.join(os.environ["SYNAPSE_TEST_DATA"], "templates", "llama.cpp", "Qwen-Qwen3-0.6B.jinja")
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
                                           "parameters": WEATHER}}]


@pytest.fixture(scope="module")
def tools_srv():
    with Server("tiny-qwen3-q4_k_m.gguf", "--chat-template-file", QWEN3, "-np", "4", "-t", "2", "-c", "2048") as s:
        yield s


def test_tool_round_trip_and_thinking(tools_srv):
    srv = tools_srv
    model = model_of(srv)
    show = srv.post("/api/show", {"model": model}).json()
    assert show["capabilities"] == ["completion", "tools", "thinking"]
    assert "<think>" in show["template"]

    # The loop as Ollama's clients send it: the call's arguments an object,
    # its result named by tool_name; the chat route gets the same conversation
    # (it prints object arguments as compact JSON, as Ollama's Go templates do).
    ollama_msgs = [{"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": "",
                    "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                   {"role": "tool", "content": "18 C", "tool_name": "get_weather"}]
    body = {"model": model, "messages": ollama_msgs, "tools": TOOLS, "think": False, "stream": False,
            "options": {"temperature": 0, "num_predict": 30}}
    r = srv.post("/api/chat", body)
    assert r.status_code == 200, r.text
    reply = r.json()
    openai_msgs = [ollama_msgs[0],
                   {"role": "assistant", "content": "", "tool_calls": [
                       {"id": "c00010000", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                   {"role": "tool", "tool_call_id": "c00010000", "content": "18 C"}]
    chat = srv.post("/v1/chat/completions", {"messages": openai_msgs, "tools": TOOLS, "temperature": 0,
                                             "max_tokens": 30,
                                             "chat_template_kwargs": {"enable_thinking": False}}).json()
    message = chat["choices"][0]["message"]
    assert reply["message"]["content"] == (message["content"] or "")
    assert reply["prompt_eval_count"] == chat["usage"]["prompt_tokens"]
    calls = [{"id": c["id"], "function": {"index": i, "name": c["function"]["name"],
                                          "arguments": json.loads(c["function"]["arguments"])}}
             for i, c in enumerate(message.get("tool_calls") or [])]
    assert reply["message"].get("tool_calls", []) == calls
    # Streamed: the lines add up, calls whole.
    lines = ndjson(srv.post("/api/chat", dict(body, stream=True), stream=True))
    assert "".join(line["message"]["content"] for line in lines) == reply["message"]["content"]
    assert [c for line in lines for c in line["message"].get("tool_calls", [])] == reply["message"].get("tool_calls", [])

    # Thinking: the conversation ends with an assistant prefill "<think>\n"
    # (continued, as Ollama continues a last assistant message), so the reply
    # starts inside the reasoning block, which goes to message.thinking as the
    # chat route's reasoning_content.
    prefilled = ollama_msgs[:1] + [{"role": "assistant", "content": "<think>\n"}]
    think = dict(body, messages=prefilled, think=True, options={"temperature": 0, "num_predict": 40})
    reply = srv.post("/api/chat", think).json()
    assert reply["message"].get("thinking"), reply
    chat = srv.post("/v1/chat/completions", {"messages": prefilled, "tools": TOOLS, "temperature": 0,
                                             "max_tokens": 40,
                                             "chat_template_kwargs": {"enable_thinking": True}}).json()
    message = chat["choices"][0]["message"]
    assert reply["message"]["thinking"] == message["reasoning_content"]
    assert reply["message"]["content"] == (message["content"] or "")
    lines = ndjson(srv.post("/api/chat", dict(think, stream=True), stream=True))
    assert "".join(line["message"].get("thinking", "") for line in lines) == reply["message"]["thinking"]
    assert "".join(line["message"]["content"] for line in lines) == reply["message"]["content"]
