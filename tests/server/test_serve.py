"""`synapse serve` as clients see it: the real binary on loopback.

The headline property (issue 26): a fixed, seeded request gets byte-identical
text, token ids and logprobs whatever else the server does: alone, beside 15
other requests, with -np 1 or 16, -t 1 or 2, a cold or warm prompt cache,
streamed or not. Plus the error shapes, authentication, limits and the
llama-server routes, and the official OpenAI Node client.

Python (requests + threads) rather than C++: starting processes, HTTP,
JSON and SSE parsing are a few lines each here, and the replies are
compared as the bytes of their JSON values (Python parses floats exactly,
so equal floats are equal bytes). Registered in CTest by the top
CMakeLists.txt (serve.*), with SYNAPSE_BINARY and SYNAPSE_TEST_DATA set.
"""
import json
import math
import os
import re
import signal
import subprocess
import threading
import time

import pytest
import requests

SYNAPSE = os.environ.get("SYNAPSE_BINARY", "build/synapse")
DATA = os.environ.get("SYNAPSE_TEST_DATA", "tests/data")
NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")


def model_path(name):
    return os.path.join(DATA, "models", name)


class Server:
    """`synapse serve -m MODEL --port 0 ARGS...`; the port is read from its log line."""

    def __init__(self, model, *args, port=0):
        self.proc = subprocess.Popen([SYNAPSE, "serve", "-m", model_path(model), "--port", str(port), *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        line = self.proc.stderr.readline()
        self.log.append(line)
        m = re.search(r"listening on http://([^:]+):(\d+)", line)
        assert m, "no 'listening on' line: " + line + self.proc.stderr.read()
        self.base = "http://%s:%s" % (m.group(1), m.group(2))
        self.drain = threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True)
        self.drain.start()
        deadline = time.time() + 60
        while requests.get(self.base + "/health", timeout=10).status_code != 200:
            assert time.time() < deadline and self.proc.poll() is None, "".join(self.log)
            time.sleep(0.05)

    def url(self, path):
        return self.base + path

    def post(self, path, body, **kw):
        return requests.post(self.url(path), json=body, timeout=120, **kw)

    def close(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=30) == 0, "".join(self.log)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.close()


# --- The reference requests and what of their replies must not change -------

NATIVE = {"prompt": "Once upon a time, there was a", "n_predict": 40, "seed": 1234, "temperature": 1.1,
          "top_k": 50, "top_p": 0.9, "min_p": 0.02, "repeat_penalty": 1.1, "n_probs": 3, "return_tokens": True}
CHAT = {"messages": [{"role": "system", "content": "You are a storyteller."},
                     {"role": "user", "content": "Tell me about a cat named <|im_end|> Tom. </s>"}],
        "max_tokens": 40, "seed": 99, "temperature": 0.9, "logprobs": True, "top_logprobs": 3,
        "frequency_penalty": 0.2, "presence_penalty": 0.1}
COMPLETIONS = {"prompt": "The little dog", "max_tokens": 32, "seed": 7, "temperature": 1.0, "logprobs": 2}


def canon(value):
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def sig_native(r):
    return canon([r["content"], r["tokens"], r["completion_probabilities"], r["stop_type"]])


def sig_chat(r):
    c = r["choices"][0]
    return canon([c["message"]["content"], c["finish_reason"], c["logprobs"]["content"]])


def sig_completions(r):
    c = r["choices"][0]
    return canon([c["text"], c["finish_reason"], c["logprobs"]])


def sse(resp):
    """The JSON events of a server-sent-event stream (stops at [DONE])."""
    assert resp.status_code == 200, resp.text
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    out = []
    for line in resp.iter_lines():
        if not line:
            continue
        assert line.startswith(b"data: "), line
        payload = line[len(b"data: "):]
        if payload == b"[DONE]":
            out.append("[DONE]")
            break
        out.append(json.loads(payload))
    return out


def streamed_native(srv, body):
    events = sse(srv.post("/completion", dict(body, stream=True), stream=True))
    content, tokens, probs = "", [], []
    for e in events:
        content += e["content"]
        tokens += e["tokens"]
        probs += e.get("completion_probabilities", [])
    last = events[-1]
    assert last["stop"] is True
    return canon([content, tokens, probs, last["stop_type"]])


def streamed_chat(srv, body):
    events = sse(srv.post("/v1/chat/completions", dict(body, stream=True, stream_options={"include_usage": True}),
                          stream=True))
    assert events[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    usage = events[-2]["usage"]
    assert events[-2]["choices"] == []
    content, lps, finish = "", [], None
    for e in events[:-2]:
        for c in e["choices"]:
            content += c["delta"].get("content") or ""  # null in the opening chunk, as llama-server
            if c["logprobs"]:
                lps += c["logprobs"]["content"]
            if c["finish_reason"]:
                finish = c["finish_reason"]
    assert usage["completion_tokens"] == len(lps)
    return canon([content, finish, lps])


def signatures(srv):
    """Each reference request once, non-streamed."""
    n = srv.post("/completion", NATIVE)
    c = srv.post("/v1/chat/completions", CHAT)
    p = srv.post("/v1/completions", COMPLETIONS)
    for r in (n, c, p):
        assert r.status_code == 200, r.text
    return {"native": sig_native(n.json()), "chat": sig_chat(c.json()), "completions": sig_completions(p.json())}


def background_load(srv, n, results):
    """n requests of different lengths and kinds, each in its own thread."""
    def one(i):
        words = "the cat sat on a mat and " * (1 + 7 * i % 13)
        if i % 3 == 0:
            r = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": words}],
                                                  "max_tokens": 20 + 13 * i, "seed": i, "stream": i % 2 == 0})
        else:
            r = srv.post("/completion", {"prompt": words, "n_predict": 30 + 9 * i, "seed": i,
                                         "temperature": 0.5 + 0.1 * (i % 5), "stream": i % 2 == 1})
        results.append(r.status_code if r.status_code == 200 else (r.status_code, r.text[:300]))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads


MODELS = ["stories260K.gguf", "stories260K-q8_0.gguf", "tiny-llama-q4_k_m.gguf", "tiny-qwen2-q4_k_m.gguf",
          "tiny-phi3-q4_k_m.gguf"]
# Under sanitizers (CMake sets SYNAPSE_TEST_SANITIZED) one of them: the
# server's code is the same for each, and the per-model paths run under the
# sanitizers in the C++ scheduler-invariance tests.
if os.environ.get("SYNAPSE_TEST_SANITIZED") == "1":
    MODELS = ["tiny-qwen2-q4_k_m.gguf"]


@pytest.mark.parametrize("model", MODELS)
def test_reply_depends_on_the_request_alone(model):
    # -np 1 -t 1: each request cold on a fresh server, then warm right after.
    base = {}
    for kind, path, body, sig, cached in (
            ("native", "/completion", NATIVE, sig_native, lambda r: r["tokens_cached"]),
            ("chat", "/v1/chat/completions", CHAT, sig_chat,
             lambda r: r["usage"]["prompt_tokens_details"]["cached_tokens"]),
            ("completions", "/v1/completions", COMPLETIONS, sig_completions,
             lambda r: r["usage"]["prompt_tokens_details"]["cached_tokens"])):
        with Server(model, "-np", "1", "-t", "1", "-c", "512") as a:
            cold = a.post(path, body).json()
            warm = a.post(path, body).json()
        assert cached(cold) == 0, kind
        assert cached(warm) > 0, kind
        base[kind] = sig(cold)
        assert sig(warm) == base[kind], kind
    assert len(json.loads(base["native"])[1]) > 0  # something was generated

    # -np 16 -t 2: alone, streamed, beside 15 others, warm.
    with Server(model, "-np", "16", "-t", "2", "-c", "512", "--metrics") as b:
        assert signatures(b) == base
        assert streamed_native(b, NATIVE) == base["native"]
        assert streamed_chat(b, CHAT) == base["chat"]
        for kind, path, body, sig in (("native", "/completion", NATIVE, sig_native),
                                      ("chat", "/v1/chat/completions", CHAT, sig_chat)):
            results = []
            before = background_load(b, 7, results)
            time.sleep(0.02)
            mine = b.post(path, body)
            after = background_load(b, 8, results)
            for t in before + after:
                t.join()
            assert mine.status_code == 200, mine.text
            assert sig(mine.json()) == base[kind], kind
            assert results == [200] * 15
        text = requests.get(b.url("/metrics"), timeout=10).text
        busy = float(re.search(r"^llamacpp:n_busy_slots_per_decode (\S+)$", text, re.M).group(1))
        assert busy > 1.0, "the load never ran beside another request:\n" + text

    # -np 16 -t 1 and -np 1 -t 2.
    for args in (("-np", "16", "-t", "1"), ("-np", "1", "-t", "2")):
        with Server(model, *args, "-c", "512") as s:
            assert signatures(s) == base, args


# --- Errors, authentication, limits ------------------------------------------

KEY = "sk-test-0123456789"


@pytest.fixture(scope="module")
def keyed():
    with Server("stories260K.gguf", "--api-key", KEY, "-c", "64", "--metrics", "-np", "2") as s:
        yield s


def auth(key=KEY):
    return {"Authorization": "Bearer " + key}


def is_error(r, status):
    """The error object of a reply that must have HTTP `status` (OpenAI's shape, with a message). Its code is
    the status, or OpenAI's string for a prompt longer than -c (a 400)."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    err = r.json()["error"]
    codes = (status, "context_length_exceeded") if status == 400 else (status,)
    assert err["code"] in codes and err["message"], err
    return err


def expect_400(srv, path, body, param, needle, code=400):
    r = srv.post(path, body, headers=auth())
    assert r.status_code == 400, (body, r.text)
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["code"] == code
    assert err["param"] == param, err
    assert needle in err["message"], err


def test_authentication(keyed):
    assert keyed.post("/v1/completions", COMPLETIONS).status_code == 401
    r = keyed.post("/v1/completions", COMPLETIONS, headers=auth("sk-test-0123456788"))
    assert r.status_code == 401
    assert r.json()["error"]["type"] == "authentication_error"
    assert keyed.post("/v1/completions", COMPLETIONS, headers=auth()).status_code == 200
    assert keyed.post("/v1/completions", COMPLETIONS, headers={"x-api-key": KEY}).status_code == 200
    assert requests.get(keyed.url("/health"), timeout=10).status_code == 200
    assert requests.get(keyed.url("/v1/models"), timeout=10).json()["data"][0]["object"] == "model"
    assert requests.get(keyed.url("/props"), timeout=10).status_code == 401


def test_bad_requests_name_the_field(keyed):
    p = "/v1/completions"
    expect_400(keyed, p, dict(COMPLETIONS, temperature=-1), "temperature", "-1")
    expect_400(keyed, p, dict(COMPLETIONS, temperature="hot"), "temperature", '"hot"')
    expect_400(keyed, p, dict(COMPLETIONS, top_p=-1), "top_p", "[0, 1]")
    expect_400(keyed, p, dict(COMPLETIONS, top_p=1.5), "top_p", "1.5")
    expect_400(keyed, p, dict(COMPLETIONS, max_tokens=10**9), "max_tokens", "1000000000")
    expect_400(keyed, p, dict(COMPLETIONS, max_tokens="10"), "max_tokens", "integer")
    expect_400(keyed, p, dict(COMPLETIONS, prompt=[-1]), "prompt[0]", "-1")
    expect_400(keyed, p, dict(COMPLETIONS, prompt=[1, 512]), "prompt[1]", "512")
    # A prompt longer than -c (the pool every request may fill): OpenAI's code.
    expect_400(keyed, p, dict(COMPLETIONS, prompt="word " * 200), "prompt", "n_ctx = 64", "context_length_exceeded")
    expect_400(keyed, "/v1/chat/completions", {"messages": [{"role": "user", "content": "word " * 200}]}, "messages",
               "n_ctx = 64", "context_length_exceeded")
    expect_400(keyed, p, dict(COMPLETIONS, logit_bias={"512": 1}), "logit_bias.512", "token id")
    expect_400(keyed, p, dict(COMPLETIONS, stop=["x"] * 17), "stop", "at most 16")
    expect_400(keyed, p, dict(COMPLETIONS, seed=2**40), "seed", str(2**40))
    expect_400(keyed, p, dict(COMPLETIONS, n=1000), "n", "1000")
    expect_400(keyed, p, dict(COMPLETIONS, repeat_penalty=0), "repeat_penalty", "greater than 0")
    expect_400(keyed, "/completion", dict(NATIVE, n_probs=21), "n_probs", "21")
    # Context-shift settings name positions of the slot's 64 (none here: 400).
    expect_400(keyed, "/completion", dict(NATIVE, n_keep=-2), "n_keep", "[-1, 64]")
    expect_400(keyed, "/completion", dict(NATIVE, n_keep=65), "n_keep", "[-1, 64]")
    expect_400(keyed, "/v1/chat/completions", dict(CHAT, n_discard=-1), "n_discard", "[0, 64]")
    expect_400(keyed, "/completion", dict(NATIVE, n_discard="8"), "n_discard", "integer")
    assert keyed.post("/completion", dict(NATIVE, n_keep=-1, n_discard=8), headers=auth()).status_code == 200
    expect_400(keyed, "/v1/chat/completions", dict(CHAT, top_logprobs=21), "top_logprobs", "21")
    expect_400(keyed, "/v1/chat/completions", {"messages": []}, "messages", "non-empty")
    expect_400(keyed, "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]},
               "messages[0].role", "wizard")
    expect_400(keyed, "/v1/chat/completions", dict(CHAT, tools=[{"type": "function"}]), "tools", "Jinja chat template")
    # The prompt-too-long message names n_ctx and the prompt's token count.
    r = keyed.post(p, dict(COMPLETIONS, prompt="word " * 200), headers=auth()).json()["error"]["message"]
    assert re.search(r"is \d+ tokens, more than the context size n_ctx = 64", r), r
    # Bodies that are not requests at all.
    for body in (b"{", b"[1,2]", b"\xff\xfe", b"[" * 100000, b'{"prompt": ' + b"[" * 5000 + b"]" * 5000 + b"}"):
        r = requests.post(keyed.url(p), data=body, headers=dict(auth(), **{"Content-Type": "application/json"}),
                          timeout=60)
        assert r.status_code == 400, (body[:20], r.text)
        assert r.json()["error"]["type"] == "invalid_request_error"
    r = requests.post(keyed.url(p), data=b" " * (9 << 20), headers=auth(), timeout=60)
    assert r.status_code == 413
    r = requests.get(keyed.url("/no/such/route"), headers=auth(), timeout=10)
    assert r.status_code == 404 and r.json()["error"]["code"] == 404
    # Still serving, the same bytes as before.
    a = keyed.post("/v1/completions", COMPLETIONS, headers=auth()).json()
    b = keyed.post("/v1/completions", COMPLETIONS, headers=auth()).json()
    assert sig_completions(a) == sig_completions(b)


def test_llama_server_routes(keyed):
    h = auth()
    t = keyed.post("/tokenize", {"content": "Once upon a time", "with_pieces": True}, headers=h).json()["tokens"]
    ids = [x["id"] for x in t]
    assert "".join(x["piece"] for x in t).replace("\u2581", " ").strip() == "Once upon a time"
    plain = keyed.post("/tokenize", {"content": "Once upon a time"}, headers=h).json()["tokens"]
    assert plain == ids
    d = keyed.post("/detokenize", {"tokens": ids}, headers=h).json()["content"]
    assert d.strip() == "Once upon a time"
    tmpl = keyed.post("/apply-template", {"messages": [{"role": "user", "content": "hi"}]}, headers=h).json()
    assert tmpl["prompt"] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"  # chatml: no template in the file
    props = requests.get(keyed.url("/props"), headers=h, timeout=10).json()
    assert props["total_slots"] == 2 and props["default_generation_settings"]["n_ctx"] == 64
    r = keyed.post("/completion", {"prompt": "Once", "n_predict": 8, "seed": 3}, headers=h).json()
    assert r["stop"] is True and r["tokens_predicted"] <= 8 and r["stop_type"] in ("eos", "limit")
    m = requests.get(keyed.url("/metrics"), headers=h, timeout=10).text
    for name in ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:requests_processing",
                 "llamacpp:requests_deferred", "llamacpp:kv_cache_tokens", "llamacpp:prompt_tokens_seconds"):
        assert re.search("^" + name + r" \d", m, re.M), name
    assert float(re.search(r"^llamacpp:tokens_predicted_total (\S+)", m, re.M).group(1)) > 0


def test_llama_server_suite_shapes(keyed):
    """Shapes llama.cpp's own server tests (scripts/llama-server-tests.sh) read, with
    llama-server v0.5.0's values (tools/server/server-task.cpp, server-common.cpp)."""
    h = auth()
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "seed": 1}
    # system_fingerprint is llama-server's build_info, "b<build number>-<commit>".
    r = keyed.post("/v1/chat/completions", chat, headers=h).json()
    assert re.match(r"^b\d+-\S+$", r["system_fingerprint"]), r["system_fingerprint"]
    assert "__verbose" not in r
    # A stream opens with the role alone, content null.
    events = [json.loads(l[6:]) for l in keyed.post("/v1/chat/completions", dict(chat, stream=True), headers=h,
                                                    stream=True).iter_lines(decode_unicode=True)
              if l.startswith("data: {")]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert all("role" not in e["choices"][0]["delta"] for e in events[1:])
    # The prompt's token count without generating; the chat reply's prompt_tokens.
    n = keyed.post("/v1/chat/completions/input_tokens", chat, headers=h).json()
    assert n == {"input_tokens": r["usage"]["prompt_tokens"], "object": "response.input_tokens"}
    # "verbose": the native result beside the OpenAI one, its prompt as text.
    v = keyed.post("/v1/chat/completions", dict(chat, verbose=True), headers=h).json()
    assert v["__verbose"]["prompt"] == "<s> <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert v["__verbose"]["content"] == v["choices"][0]["message"]["content"]
    # Text parts of a message are joined by "\n" (llama.cpp's concat_content_parts).
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is"},
                                                       {"type": "text", "text": "the best book"}]}]}
    assert keyed.post("/apply-template", parts, headers=h).json()["prompt"] == \
        "<|im_start|>user\nWhat is\nthe best book<|im_end|>\n<|im_start|>assistant\n"
    # llama-server's two 400s on a conversation continued from its last message.
    two = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                        {"role": "assistant", "content": "c"}]}
    expect_400(keyed, "/v1/chat/completions", two, "messages", "Cannot have 2 or more assistant messages at the end")
    both = {"messages": [{"role": "user", "content": "a"}], "continue_final_message": True}
    expect_400(keyed, "/v1/chat/completions", both, "add_generation_prompt",
               "Cannot set both add_generation_prompt and continue_final_message to true.")
    expect_400(keyed, "/apply-template", both, "add_generation_prompt", "Cannot set both")
    ok = {"messages": two["messages"][:2], "continue_final_message": True, "add_generation_prompt": False}
    assert keyed.post("/apply-template", ok, headers=h).json()["prompt"] == \
        "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb"
    # response_fields: the paths asked, each a key; ignore_eos's end-of-generation
    # biases (token 2, </s>) at -inf, which JSON writes null.
    f = keyed.post("/completion", {"prompt": "Once", "n_predict": 3, "ignore_eos": True,
                                   "response_fields": ["generation_settings/n_predict", "prompt",
                                                       "generation_settings/logit_bias", "no/such"]}, headers=h).json()
    assert f == {"generation_settings/n_predict": 3, "prompt": "<s> Once",
                 "generation_settings/logit_bias": [{"bias": None, "token": 2}]}
    g = keyed.post("/completion", {"prompt": "Once", "n_predict": 3, "logit_bias": {"Once": -2}}, headers=h).json()
    assert g["generation_settings"]["logit_bias"] == [{"bias": -2.0, "token": 403}]
    assert g["generation_settings"]["max_tokens"] == 3 and g["truncated"] is False
    # llama.cpp's adaptive-p sampler is off here: reported as llama-server reports it off, refused when asked.
    assert g["generation_settings"]["adaptive_target"] == -1.0
    assert g["generation_settings"]["adaptive_decay"] == 0.8999999761581421  # float 0.9, as llama-server writes it
    expect_400(keyed, "/completion", {"prompt": "Once", "adaptive_target": 0.5}, "adaptive_target", "not supported")
    assert keyed.post("/completion", {"prompt": "Once", "n_predict": 1, "adaptive_target": -1},
                      headers=h).status_code == 200
    # A reply stopped by the full context (-c 64) is truncated.
    t = keyed.post("/completion", {"prompt": "Once", "n_predict": -1, "ignore_eos": True}, headers=h).json()
    assert t["truncated"] is True and t["stop_type"] == "limit"
    # --chat-template with a value that names no format: a Jinja template's text
    # (llama-server's JINJA_TEMPLATE); a llama.cpp format synapse lacks stays an error.
    with Server("stories260K.gguf", "--chat-template", "Say {{ messages[0]['content'] }}!") as s:
        assert s.post("/apply-template", {"messages": [{"role": "user", "content": "hi"}]}).json() == \
            {"prompt": "Say hi!"}
    # --alias and --tags as llama-server takes them: comma-separated sets, the first alias the name.
    models = requests.get(keyed.url("/v1/models"), timeout=10).json()["data"][0]
    assert models["aliases"] == [models["id"]] and models["tags"] == []
    with Server("stories260K.gguf", "--alias", "tinyllama-2, fim,code", "--tags", "chat,fim,small") as s:
        models = requests.get(s.url("/v1/models"), timeout=10).json()["data"][0]
        assert (models["id"], models["aliases"], models["tags"]) == \
            ("code", ["code", "fim", "tinyllama-2"], ["chat", "fim", "small"])
        assert s.post("/completion", {"prompt": "Once", "n_predict": 1}).json()["model"] == "code"
    r = subprocess.run([SYNAPSE, "serve", "-m", model_path("stories260K.gguf"), "--port", "0", "--chat-template",
                        "vicuna"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "unknown chat template 'vicuna'" in r.stderr, r.stderr
    # command-r, a built-in format by name (llama.cpp's test_apply_chat_template).
    with Server("stories260K.gguf", "--chat-template", "command-r") as s:
        assert s.post("/apply-template", {"messages": [{"role": "system", "content": "You are a test."},
                                                       {"role": "user", "content": "Hi there"}]}).json() == {
            "prompt": "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test.<|END_OF_TURN_TOKEN|>"
                      "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|>"
                      "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"}


# llama-server's metric types (tools/server/server-task.cpp, to_metrics).
LLAMA_COUNTERS = ["prompt_tokens_total", "prompt_tokens_cached_total", "prompt_seconds_total", "tokens_predicted_total",
                  "tokens_predicted_seconds_total", "n_decode_total", "n_tokens_max", "spec_decode_num_draft_tokens_total",
                  "spec_decode_num_accepted_tokens_total", "spec_decode_num_drafts_total"]
LLAMA_GAUGES = ["prompt_tokens_seconds", "predicted_tokens_seconds", "requests_processing", "requests_deferred",
                "n_busy_slots_per_decode"]


def test_slots_props_lora_and_metric_types(keyed):
    h = auth()
    slots = requests.get(keyed.url("/slots"), headers=h, timeout=10).json()
    assert [s["id"] for s in slots] == [0, 1]
    for s in slots:
        assert s["n_ctx"] == 64 and s["speculative"] is False and s["is_processing"] is False
    # While a stream runs: its request's counts (prompt: BOS + 4 tokens, none cached).
    body = {"prompt": "Once upon a time", "n_predict": 40, "seed": 5, "ignore_eos": True, "cache_prompt": False,
            "stream": True}
    # stories260K writes the 40 tokens in a few milliseconds, so on a fast machine the reply may be over before
    # GET /slots arrives (no slot busy): then the stream is read to its end and started again, at most 20 times.
    for attempt in range(20):
        r = keyed.post("/completion", body, headers=h, stream=True)
        lines = r.iter_lines()
        next(line for line in lines if line)  # generating
        busy = [s for s in requests.get(keyed.url("/slots"), headers=h, timeout=10).json() if s["is_processing"]]
        if busy:
            break
        list(lines)
        r.close()
    with r:
        assert len(busy) == 1, "the reply was over before GET /slots in 20 attempts"
        slot = busy[0]
        assert (slot["n_prompt_tokens"], slot["n_prompt_tokens_cache"], slot["n_prompt_tokens_processed"]) == (5, 0, 5)
        nt = slot["next_token"][0]
        assert nt["has_next_token"] is True and nt["n_decoded"] >= 1 and nt["n_remain"] == 40 - nt["n_decoded"]
        # llama-server's keys (its GET /slots on this model), less its "params".
        assert set(slot) == {"id", "n_ctx", "speculative", "is_processing", "id_task", "n_prompt_tokens",
                             "n_prompt_tokens_processed", "n_prompt_tokens_cache", "next_token"}
        assert set(nt) == {"has_next_token", "has_new_line", "n_remain", "n_decoded"}
        task = slot["id_task"]
        assert requests.get(keyed.url("/slots?fail_on_no_slot=1"), headers=h, timeout=10).status_code == 200
        list(lines)  # to the end
    # Once over, llama-server's idle values: the task's budget does not stay on the slot.
    slot = requests.get(keyed.url("/slots"), headers=h, timeout=10).json()[slot["id"]]
    assert slot["is_processing"] is False and slot["id_task"] == task
    assert slot["next_token"] == [{"has_next_token": False, "has_new_line": False, "n_remain": -1, "n_decoded": 0}]
    assert slot["n_prompt_tokens"] == 5 + 40 - 1  # the positions its cache holds: the last token was never fed
    props = requests.get(keyed.url("/props"), headers=h, timeout=10).json()
    assert props["modalities"] == {"vision": False, "video": False, "audio": False}
    assert (props["endpoint_slots"], props["endpoint_props"], props["endpoint_metrics"]) == (True, False, True)
    err = is_error(keyed.post("/props", {}, headers=h), 501)
    assert err["message"] == "This server does not support changing global properties. Start it with `--props`"
    assert props["bos_token"] == "<s>" and props["eos_token"] == "</s>" and props["is_sleeping"] is False
    assert props["model_ftype"] == "(guessed) all F32"  # llama-server v0.5.0 on this file
    assert requests.get(keyed.url("/lora-adapters"), headers=h, timeout=10).json() == []
    assert keyed.post("/lora-adapters", [], headers=h).json() == {"success": True}
    assert is_error(keyed.post("/lora-adapters", [{"id": 0, "scale": 1}], headers=h), 400)
    assert is_error(keyed.post("/lora-adapters", {"id": 0}, headers=h), 400)["message"] == "Request body must be an array"
    reply = requests.get(keyed.url("/metrics"), headers=h, timeout=10)
    assert abs(int(reply.headers["Process-Start-Time-Unix"]) - time.time()) < 3600
    m = reply.text
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", m, re.M))
    for name in LLAMA_COUNTERS:
        assert types["llamacpp:" + name] == "counter", name
    for name in LLAMA_GAUGES:
        assert types["llamacpp:" + name] == "gauge", name
    assert float(re.search(r"^llamacpp:n_tokens_max (\S+)$", m, re.M).group(1)) >= 45  # 5 + 40 above
    assert re.search(r"^llamacpp:spec_decode_num_drafts_total 0$", m, re.M)  # no speculative decoding
    # --no-slots: 501 naming the flag, as llama-server.
    with Server("stories260K.gguf", "--no-slots", "--props") as s:
        err = is_error(requests.get(s.url("/slots"), timeout=10), 501)
        assert err["message"] == "This server does not support slots endpoint. Start it with `--slots`"
        assert err["type"] == "not_supported_error"
        props = requests.get(s.url("/props"), timeout=10).json()
        assert (props["endpoint_slots"], props["endpoint_props"]) == (False, True)
        assert s.post("/props", {}).json() == {"success": True}
        err = is_error(requests.get(s.url("/metrics"), timeout=10), 501)
        assert err["message"] == "This server does not support metrics endpoint. Start it with `--metrics`"


def test_n_choices_and_token_prompts(keyed):
    h = auth()
    r = keyed.post("/v1/completions", {"prompt": ["Once", [1, 400, 401]], "n": 2, "max_tokens": 8, "seed": 1},
                   headers=h).json()
    assert [c["index"] for c in r["choices"]] == [0, 1, 2, 3]
    alone = keyed.post("/v1/completions", {"prompt": [1, 400, 401], "max_tokens": 8, "seed": 2}, headers=h).json()
    assert r["choices"][3]["text"] == alone["choices"][0]["text"]  # choice j draws with seed + j


def test_openai_node_client():
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "openai")):
        pytest.fail("the openai npm package is not installed: run scripts/setup.sh (npm ci in tests/server/node)")
    with Server("stories260K.gguf", "--api-key", KEY, "-np", "2") as s:
        r = subprocess.run(["node", os.path.join(NODE_DIR, "client.mjs"), s.url("/v1"), KEY],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "openai client: ok" in r.stdout


def test_disconnect_frees_the_slot():
    with Server("stories260K.gguf", "--metrics", "-np", "2") as s:
        def gauge(name):
            text = requests.get(s.url("/metrics"), timeout=10).text
            return float(re.search("^" + name + r" (\S+)$", text, re.M).group(1))
        r = s.post("/completion", {"prompt": "Once", "n_predict": -1, "ignore_eos": True, "stream": True}, stream=True)
        lines = r.iter_lines()
        for _ in range(5):
            next(line for line in lines if line)
        assert gauge("llamacpp:requests_processing") == 1
        r.close()
        deadline = time.time() + 10
        while gauge("llamacpp:requests_processing") != 0:
            assert time.time() < deadline, "the slot of a closed stream is still busy"
            time.sleep(0.05)
        assert gauge("llamacpp:kv_cache_tokens") == 0
        # The hung-up request's pages are back: only the prompt cache's are held.
        cached = gauge("synapse:kv_cells_cached")
        assert cached > 0
        assert gauge("synapse:kv_pages_used") == -(-cached // gauge("synapse:kv_page_size"))
        assert gauge("synapse:kv_pages_free") == gauge("synapse:kv_pages_total") - gauge("synapse:kv_pages_used")
        predicted = gauge("llamacpp:tokens_predicted_total")
        assert predicted < 200  # not run on to the context's 2048 tokens
        time.sleep(0.5)
        assert gauge("llamacpp:tokens_predicted_total") == predicted  # nothing generates for nobody
        # The server goes on answering.
        assert s.post("/completion", {"prompt": "Once", "n_predict": 4}).status_code == 200


def test_port_is_reusable_at_once_and_never_shared():
    # A restarted server binds its port again at once, although the
    # connections the last one closed are still in TIME_WAIT (SO_REUSEADDR);
    # and a second server on a port in use fails with a clear error instead
    # of sharing it (SO_REUSEPORT would let both listen, each getting some of
    # the connections).
    with Server("stories260K.gguf") as s:
        port = int(s.base.rsplit(":", 1)[1])
        for _ in range(3):  # fresh connections, closed by the server when it stops
            with requests.Session() as session:
                assert session.post(s.url("/completion"), json={"prompt": "Once", "n_predict": 2},
                                    timeout=60).status_code == 200
        held = requests.Session()
        assert held.get(s.url("/health"), timeout=10).status_code == 200  # kept alive across the stop
        second = subprocess.run([SYNAPSE, "serve", "-m", model_path("stories260K.gguf"), "--port", str(port)],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode != 0, "a second server shared port %d" % port
        assert "cannot listen on 127.0.0.1:%d" % port in second.stderr, second.stderr
    held.close()
    with Server("stories260K.gguf", port=port) as again:
        assert again.base.endswith(":%d" % port)
        assert again.post("/completion", {"prompt": "Once", "n_predict": 2}).status_code == 200


def test_kv_cache_types():
    # -ctk/-ctv: the startup line names the pool's types and their bytes a
    # token (llama-server's llama_kv_cache line names them too: "K (q8_0)");
    # a reply equals `synapse run` with the same types; a bad type is one
    # error line before the server starts.
    prompt = "Once upon a time"
    with Server("tiny-llama-f32.gguf", "-np", "2", "-c", "256", "-ctk", "q8_0", "-ctv", "q4_0") as s:
        r = s.post("/completion", {"prompt": prompt, "n_predict": 12, "temperature": 0})
        assert r.status_code == 200, r.text
        log = "".join(s.log)
    assert "sharing a KV pool of 256 tokens (K q8_0, V q4_0: 416 bytes a token)" in log, log
    run = subprocess.run([SYNAPSE, "run", "-m", model_path("tiny-llama-f32.gguf"), "-p", prompt, "-n", "12",
                          "--temp", "0", "-ctk", "q8_0", "-ctv", "q4_0"], capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr
    # `synapse run` ends its output with a newline, as llama-completion does.
    assert r.json()["content"] == run.stdout.decode("utf-8", "replace").removesuffix("\n")
    bad = subprocess.run([SYNAPSE, "serve", "-m", model_path("tiny-llama-f32.gguf"), "-ctv", "q4_1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0
    assert "-ctv (--cache-type-v): unsupported KV cache type 'q4_1'" in bad.stderr, bad.stderr


def loopback_pair():
    """Two loopback addresses of this host: 127.0.0.1 and ::1, or 127.0.0.2 where IPv6 is off."""
    import socket
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return "127.0.0.1", "::1"
    except OSError:
        return "127.0.0.1", "127.0.0.2"


def test_several_host_addresses():
    # --host A,B listens on each address (llama-server's comma-separated
    # list, spaces stripped, empty entries dropped), all on the one port; a
    # bad address stops the server with an error naming it.
    a, b = loopback_pair()
    with Server("stories260K.gguf", "--host", " %s, ,%s " % (a, b), "--api-key", "k") as s:
        urls = re.search(r"listening on (.*) \(loading", s.log[0]).group(1).split(", ")
        port = s.base.rsplit(":", 1)[1]
        assert urls == ["http://%s:%s" % (h if ":" not in h else "[%s]" % h, port) for h in (a, b)], s.log[0]
        for url in urls:
            assert requests.get(url + "/health", timeout=10).status_code == 200
            assert requests.post(url + "/v1/completions", json={}, timeout=10).status_code == 401
            events = sse(requests.post(url + "/v1/completions", json={"prompt": "Once upon a time", "max_tokens": 8,
                                                                      "stream": True, "seed": 3},
                                       headers={"Authorization": "Bearer k"}, stream=True, timeout=60))
            assert len(events) > 2 and events[-1] == "[DONE]"
            assert events[-2]["choices"][0]["finish_reason"] == "length"
    # 192.0.2.1 (TEST-NET-1) is no address of this host.
    for host, needle in (("127.0.0.1,192.0.2.1", "cannot listen on 192.0.2.1:"),
                         (" , ", "--host requires at least one address")):
        bad = subprocess.run([SYNAPSE, "serve", "-m", model_path("stories260K.gguf"), "--host", host, "--port", "0"],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0 and needle in bad.stderr, (host, bad.stderr)


TIMINGS = {"prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n", "predicted_ms",
           "predicted_per_token_ms", "predicted_per_second", "cache_n"}


def test_openai_timings():
    # llama-server's "timings" in OpenAI-shaped replies: on the whole reply,
    # on a stream's last chunk (the usage chunk when there is one), and with
    # timings_per_token on every chunk that carries a token (on /completion
    # too), never on the chat stream's opening chunk. Their counts agree with
    # usage; the wall-clock values are the one part of a reply that depends
    # on the load (test_reply_depends_on_the_request_alone compares the rest).
    chat = {"messages": [{"role": "user", "content": "test"}], "max_tokens": 10, "seed": 5, "ignore_eos": True}
    comp = {"prompt": "Once upon a time", "max_tokens": 10, "seed": 5, "ignore_eos": True}
    with Server("stories260K.gguf", "-np", "1") as s:
        for path, body in (("/v1/chat/completions", chat), ("/v1/completions", comp)):
            for _ in range(2):  # cold, then with the prompt cached
                r = s.post(path, body).json()
                t, u = r["timings"], r["usage"]
                assert set(t) == TIMINGS, t
                assert t["predicted_n"] == u["completion_tokens"] == 10, r
                assert t["cache_n"] == u["prompt_tokens_details"]["cached_tokens"]
                assert t["prompt_n"] + t["cache_n"] == u["prompt_tokens"], r
                assert t["predicted_ms"] > 0 and t["predicted_per_second"] > 0, t
            events = sse(s.post(path, dict(body, stream=True), stream=True))[:-1]
            assert ["timings" in e for e in events] == [False] * (len(events) - 1) + [True]
            assert events[-1]["choices"][0]["finish_reason"] == "length"
            assert events[-1]["timings"]["predicted_n"] == 10
            events = sse(s.post(path, dict(body, stream=True, timings_per_token=True,
                                           stream_options={"include_usage": True}), stream=True))[:-1]
            opening = 1 if path == "/v1/chat/completions" else 0
            assert all("timings" not in e for e in events[:opening])
            steps = [e["timings"]["predicted_n"] for e in events[opening:-2]]
            assert steps == list(range(1, 11)), events
            assert "timings" not in events[-2]  # the finish chunk: usage follows
            assert events[-1]["choices"] == [] and set(events[-1]["timings"]) == TIMINGS
            assert events[-1]["timings"]["predicted_n"] == events[-1]["usage"]["completion_tokens"] == 10
        events = sse(s.post("/completion", {"prompt": "Once", "n_predict": 4, "stream": True,
                                            "timings_per_token": True}, stream=True))
        assert [e["timings"]["predicted_n"] for e in events] == [1, 2, 3, 4, 4], events  # the last: the reply's
        assert events[-1]["stop"] is True


def test_post_sampling_probs():
    # llama-server's post_sampling_probs (populate_token_probs with post_sampling):
    # the probabilities of the draw, "prob" / "top_probs" for "logprob" /
    # "top_logprobs". With top_k 3 and no other stage (top_p 1, min_p 0, temp 1),
    # the draw is the three highest-logit tokens renormalized: each p is the raw
    # row's exp(logprob) over their sum, the same tokens in the same order.
    body = {"prompt": "Once upon a time", "n_predict": 6, "n_probs": 3, "seed": 9, "temperature": 1.0,
            "top_k": 3, "top_p": 1.0, "min_p": 0.0}
    with Server("stories260K.gguf", "-np", "1") as s:
        pre = s.post("/completion", body).json()
        post = s.post("/completion", dict(body, post_sampling_probs=True, backend_sampling=True)).json()
        assert post["content"] == pre["content"] and post["generation_settings"]["post_sampling_probs"] is True
        assert pre["generation_settings"]["post_sampling_probs"] is False
        assert len(post["completion_probabilities"]) == 6
        for a, b in zip(pre["completion_probabilities"], post["completion_probabilities"]):
            assert set(b) == {"id", "token", "bytes", "prob", "top_probs"}, b
            assert [t["id"] for t in b["top_probs"]] == [t["id"] for t in a["top_logprobs"]]
            mass = sum(math.exp(t["logprob"]) for t in a["top_logprobs"])
            for ta, tb in zip(a["top_logprobs"], b["top_probs"]):
                assert set(tb) == {"id", "token", "bytes", "prob"} and tb["token"] == ta["token"]
                assert tb["prob"] == pytest.approx(math.exp(ta["logprob"]) / mass, rel=1e-4)
            assert sum(t["prob"] for t in b["top_probs"]) == pytest.approx(1.0, abs=1e-5)
            assert b["prob"] == pytest.approx(math.exp(a["logprob"]) / mass, rel=1e-4)
        # Greedy: the draw has one candidate of probability 1; n_probs 10 gives that one only.
        g = s.post("/completion", dict(body, temperature=0, n_probs=10, post_sampling_probs=True)).json()
        for t in g["completion_probabilities"]:
            assert t["prob"] == 1.0 and [(c["id"], c["prob"]) for c in t["top_probs"]] == [(t["id"], 1.0)]
        expect_400(s, "/completion", dict(body, backend_sampling="yes"), "backend_sampling", "boolean")
        expect_400(s, "/completion", dict(body, post_sampling_probs=1), "post_sampling_probs", "boolean")


def test_return_progress():
    # llama-server's return_progress (send_partial_response with is_progress): a
    # stream reports its prompt's progress, once when it takes its slot (processed
    # == cache) and after each prefill step (-b 8 rows), the last with processed ==
    # total, before the first token; the chat route's reports are role chunks.
    prompt = "Once upon a time, there was a little girl who liked to play in the park with her dog"
    with Server("stories260K.gguf", "-np", "1", "-b", "8") as s:
        n = s.post("/completion", {"prompt": prompt, "n_predict": 1}).json()["tokens_evaluated"]
        assert n == 29, n  # four steps of 8 rows
        body = {"prompt": prompt, "n_predict": 3, "seed": 1, "stream": True, "return_progress": True,
                "timings_per_token": True}
        for cached in (False, True):
            events = sse(s.post("/completion", dict(body, cache_prompt=cached), stream=True))
            progress = [e for e in events if "prompt_progress" in e]
            assert events[:len(progress)] == progress  # before any token
            pp = [e["prompt_progress"] for e in progress]
            cache = n - 1 if cached else 0
            want = [cache] + ([8, 16, 24, n] if not cached else [n])
            assert [p["processed"] for p in pp] == want, pp
            assert all(p["total"] == n and p["cache"] == cache and p["time_ms"] >= 0 for p in pp), pp
            assert all(e["content"] == "" and e["tokens"] == [] and e["stop"] is False for e in progress)
            first = progress[0]["timings"]
            assert (first["prompt_n"], first["prompt_ms"], first["predicted_n"], first["predicted_ms"]) == (0, 0, 0, 0)
            assert [e["timings"]["prompt_n"] for e in progress] == [p - cache for p in want]
            assert "".join(e["content"] for e in events) == \
                s.post("/completion", dict(body, stream=False, return_progress=False)).json()["content"]
        # Not asked, or not streamed: no report.
        assert not any("prompt_progress" in e for e in sse(s.post("/completion", dict(body, return_progress=False),
                                                                    stream=True)))
        assert "prompt_progress" not in s.post("/completion", dict(body, stream=False)).json()
        chat = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 2, "stream": True,
                "return_progress": True}
        events = sse(s.post("/v1/chat/completions", chat, stream=True))[:-1]
        progress = [e for e in events if "prompt_progress" in e]
        assert len(progress) >= 2 and progress[-1]["prompt_progress"]["processed"] == \
            progress[-1]["prompt_progress"]["total"]
        assert all(e["choices"][0]["delta"] == {"role": "assistant", "content": None} for e in progress)
        assert all("timings" not in e for e in progress)
