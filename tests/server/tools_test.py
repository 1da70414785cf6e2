"""Tool calls and reasoning through `synapse serve` with the model's own Jinja
chat template (issue 43), on the real binary.

tiny-qwen3 is a 512-token random model: it never writes a call on its own,
so the calls here are the ones `tool_choice` "required" or a named function
force with the tool-call grammar, in Qwen3's syntax (<tool_call>{...}
</tool_call>, the hermes family), parsed back into `tool_calls`. Their
arguments must validate against the tool's schema (python3-jsonschema);
streamed deltas must assemble to the non-streamed reply; the prompt
/apply-template shows must be Python Jinja2's rendering of the same template
(transformers' settings, tests/template/render_expected.py); bad tools and
histories are 400s naming the field; the reply is the same bytes alone and
among 15 other requests. Registered in CTest as serve.tools.<case>.
"""
import copy
import json
import os
import subprocess
import sys
import threading

import jsonschema
import pytest
import requests

from test_serve import DATA, SYNAPSE, Server, model_path, sse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "template"))
import render_expected  # noqa: E402  (Jinja2 as transformers sets it up)

TEMPLATES = os.path.join(DATA, "templates", "llama.cpp")
QWEN3 = os.path.join(TEMPLATES, "Qwen-Qwen3-0.6B.jinja")
LLAMA31 = os.path.join(TEMPLATES, "meta-llama-Llama-3.1-8B-Instruct.jinja")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "maxLength": 12},
                                  "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone.",
    "parameters": {"type": "object",
                   "properties": {"zone": {"type": "string", "maxLength": 8},
                                  "offset": {"type": "integer", "minimum": -12, "maximum": 14}},
                   "required": ["zone", "offset"], "additionalProperties": False}}}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
USER = {"role": "user", "content": "What is the weather in Paris, and the time there?"}


@pytest.fixture(scope="module")
def srv():
    with Server("tiny-qwen3-q4_k_m.gguf", "--chat-template-file", QWEN3, "-np", "16", "-t", "2", "-c", "2048") as s:
        yield s


def chat(**kw):
    body = {"messages": [USER], "tools": TOOLS, "max_tokens": 300}
    body.update(kw)
    return body


def check_calls(message, names=None):
    """The message's tool calls are well formed and their arguments validate."""
    assert message["role"] == "assistant"
    assert message["content"] is None, message
    calls = message["tool_calls"]
    assert len(calls) >= 1, message
    ids = set()
    for c in calls:
        assert c["type"] == "function"
        assert c["id"].startswith("call_") and len(c["id"]) == 29, c
        ids.add(c["id"])
        name = c["function"]["name"]
        assert name in (names or SCHEMAS), c
        args = json.loads(c["function"]["arguments"])
        jsonschema.validate(args, SCHEMAS[name])
    assert len(ids) == len(calls), "call ids repeat: %r" % calls
    return calls


def test_required_and_named_calls_validate(srv):
    for seed in range(4):
        for choice, names in (("required", None),
                              ({"type": "function", "function": {"name": "get_time"}}, ["get_time"])):
            for parallel in (True, False):
                r = srv.post("/v1/chat/completions", chat(tool_choice=choice, parallel_tool_calls=parallel,
                                                          seed=seed, temperature=0.9))
                assert r.status_code == 200, r.text
                c = r.json()["choices"][0]
                assert c["finish_reason"] == "tool_calls", c
                calls = check_calls(c["message"], names)
                if not parallel:
                    assert len(calls) == 1, calls


def assemble(events):
    """A streamed chat reply put together as the OpenAI clients do: the
    message, the finish_reason, and the chunks' deltas in order."""
    assert events[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    msg = {"role": "assistant", "content": None}
    content, reasoning, calls, finish = "", "", [], None
    for e in events[1:-1]:
        for c in e["choices"]:
            d = c["delta"]
            content += d.get("content", "")
            reasoning += d.get("reasoning_content", "")
            for tc in d.get("tool_calls", []):
                if "id" in tc:  # a call's first chunk: id, type and name, no arguments yet
                    assert tc["index"] == len(calls) and tc["type"] == "function", tc
                    assert tc["function"]["arguments"] == "", tc
                    calls.append({"id": tc["id"], "type": "function",
                                  "function": {"name": tc["function"]["name"], "arguments": ""}})
                else:
                    assert set(tc) == {"index", "function"}, tc
                    calls[tc["index"]]["function"]["arguments"] += tc["function"]["arguments"]
            if c["finish_reason"]:
                finish = c["finish_reason"]
    if content:
        msg["content"] = content
    elif not calls:
        msg["content"] = ""
    if reasoning:
        msg["reasoning_content"] = reasoning
    if calls:
        msg["tool_calls"] = calls
    return msg, finish


def test_streamed_calls_assemble_to_the_reply(srv):
    for body in (chat(tool_choice="required", temperature=0, seed=5),
                 chat(tool_choice={"type": "function", "function": {"name": "get_weather"}}, seed=6,
                      temperature=0.7, parallel_tool_calls=False)):
        whole = srv.post("/v1/chat/completions", body).json()["choices"][0]
        check_calls(whole["message"])
        msg, finish = assemble(sse(srv.post("/v1/chat/completions", dict(body, stream=True), stream=True)))
        assert msg == whole["message"]
        assert finish == whole["finish_reason"] == "tool_calls"


def test_tool_loop(srv):
    # Call -> the tool's result -> the next request, answered; then again with a new call.
    first = srv.post("/v1/chat/completions", chat(tool_choice="required", seed=3)).json()["choices"][0]["message"]
    calls = check_calls(first)
    messages = [USER, first] + [{"role": "tool", "tool_call_id": c["id"], "content": json.dumps({"ok": True})}
                                for c in calls]
    answer = srv.post("/v1/chat/completions", {"messages": messages, "tools": TOOLS, "max_tokens": 24, "seed": 4,
                                               "tool_choice": "none"})
    assert answer.status_code == 200, answer.text
    a = answer.json()["choices"][0]
    assert a["finish_reason"] in ("stop", "length") and isinstance(a["message"]["content"], str)
    assert "tool_calls" not in a["message"]
    # The loop goes on: auto (the model may or may not call), then a forced call.
    again = srv.post("/v1/chat/completions", {"messages": messages, "tools": TOOLS, "max_tokens": 24, "seed": 5})
    assert again.status_code == 200, again.text
    forced = srv.post("/v1/chat/completions", {"messages": messages, "tools": TOOLS, "max_tokens": 300, "seed": 5,
                                               "tool_choice": "required"}).json()["choices"][0]
    assert forced["finish_reason"] == "tool_calls"
    check_calls(forced["message"])


def jinja2_prompt(srv, messages, tools=None, **kwargs):
    """Python Jinja2's rendering of the served template with llama-server's context."""
    props = requests.get(srv.url("/props"), timeout=10).json()
    env = render_expected.environment(None)
    context = {"messages": messages, "bos_token": props["bos_token"], "eos_token": props["eos_token"],
               "add_generation_prompt": True, "enable_thinking": True}
    if tools:
        context["tools"] = tools
    context.update(kwargs)
    out, err = render_expected.render(env, open(QWEN3, encoding="utf-8").read(), context)
    assert err is None, err
    return out


def test_apply_template_is_jinja2s_rendering(srv):
    history = [{"role": "system", "content": "You are terse."}, USER,
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "call_a", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
                   {"id": "call_b", "type": "function",
                    "function": {"name": "get_time", "arguments": "{\"zone\": \"CET\", \"offset\": 1}"}}]},
               {"role": "tool", "tool_call_id": "call_a", "content": "{\"sky\": \"clear\"}"},
               {"role": "tool", "tool_call_id": "call_b", "content": "12:00"},
               {"role": "user", "content": [{"type": "text", "text": "Thanks. Öffnungszeiten?"}]}]
    # The template reads content as a string: text parts are joined, and the
    # null content beside calls is "" (llama-server's adaptations of messages).
    rendered = copy.deepcopy(history)
    rendered[2]["content"] = ""
    rendered[5]["content"] = "Thanks. Öffnungszeiten?"
    for body, kwargs in (({"messages": history, "tools": TOOLS}, {}),
                         ({"messages": history, "tools": TOOLS, "tool_choice": "required",
                           "chat_template_kwargs": {"enable_thinking": False}}, {"enable_thinking": False}),
                         ({"messages": history[:2]}, {})):
        r = srv.post("/apply-template", body)
        assert r.status_code == 200, r.text
        expected = jinja2_prompt(srv, rendered[:len(body["messages"])], body.get("tools"), **kwargs)
        assert r.json()["prompt"] == expected
    assert r.json()["prompt"].endswith("<|im_start|>assistant\n")
    # Keys reach the template in the client's order (tojson prints them so).
    assert '"properties": {"city": {"type": "string", "maxLength": 12}, "unit":' in \
        srv.post("/apply-template", {"messages": [USER], "tools": TOOLS}).json()["prompt"]


def test_props_report_the_template(srv):
    props = requests.get(srv.url("/props"), timeout=10).json()
    assert props["chat_template"] == open(QWEN3, encoding="utf-8").read()
    caps = props["chat_template_caps"]
    assert caps["supports_tools"] and caps["supports_tool_calls"] and caps["supports_system_role"]
    assert caps["supports_parallel_tool_calls"] and not caps["supports_object_arguments"]


def expect_400(srv, body, param, needle, path="/v1/chat/completions"):
    r = srv.post(path, body)
    assert r.status_code == 400, (body, r.text)
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param, err
    assert needle in err["message"], err


def test_bad_tools_and_histories_are_400s(srv):
    bad_name = {"type": "function", "function": {"name": "get weather"}}
    expect_400(srv, chat(tools=[WEATHER, bad_name]), "tools[1].function.name", "get weather")
    expect_400(srv, chat(tools=[{"type": "function"}]), "tools[0].function", "missing")
    expect_400(srv, chat(tools=[WEATHER, WEATHER]), "tools[1].function.name", "names two tools")
    expect_400(srv, chat(tool_choice="always"), "tool_choice", "always")
    expect_400(srv, chat(tool_choice={"type": "function", "function": {"name": "get_date"}}), "tool_choice",
               "get_date")
    expect_400(srv, chat(parallel_tool_calls="no"), "parallel_tool_calls", "boolean")
    expect_400(srv, chat(chat_template_kwargs=["enable_thinking"]), "chat_template_kwargs", "object")
    expect_400(srv, chat(reasoning_format="hidden"), "reasoning_format", "hidden")
    expect_400(srv, chat(tool_choice="required", response_format={"type": "json_object"}), "tool_choice",
               "response_format")
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": "}}
    expect_400(srv, chat(messages=[USER, {"role": "assistant", "content": None, "tool_calls": [call]}, USER]),
               "messages[1].tool_calls[0].function.arguments", "not valid JSON")
    expect_400(srv, chat(messages=[USER, {"role": "assistant", "content": None,
                                          "tool_calls": [dict(call, id=None)]}, USER]),
               "messages[1].tool_calls[0].id", "non-empty string")
    expect_400(srv, chat(messages=[USER, {"role": "tool", "content": "sunny"}]), "messages[1].tool_call_id",
               "missing")
    expect_400(srv, chat(messages=[USER, {"role": "tool", "tool_call_id": "call_1", "content": 5}]),
               "messages[1].content", "string")
    expect_400(srv, chat(messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}]),
               "messages[0].content[0].type", "image_url")
    expect_400(srv, chat(messages=[{"role": "function", "content": "x"}]), "messages[0].role", "function")
    expect_400(srv, {"messages": [USER], "tools": [bad_name]}, "tools[0].function.name", "get weather",
               path="/apply-template")
    # A schema the call grammar cannot take: fine while no call is forced,
    # the tool's 400 when one is; never a 500, and later requests are served.
    odd = {"type": "function", "function": {"name": "odd", "parameters": {
        "type": "object", "properties": {"x": {"not": {"format": "date"}}}}}}
    r = srv.post("/v1/chat/completions", chat(tools=[WEATHER, odd], max_tokens=8, seed=1))
    assert r.status_code == 200, r.text
    expect_400(srv, chat(tools=[WEATHER, odd], tool_choice="required"), "tools[1]", "not")
    r = srv.post("/v1/chat/completions", chat(tool_choice="required", seed=2))
    assert r.status_code == 200, r.text
    check_calls(r.json()["choices"][0]["message"])


def test_reasoning_goes_to_reasoning_content(srv):
    # The conversation ends with an assistant prefill "<think>\n": the reply
    # starts inside the reasoning block.
    body = {"messages": [USER, {"role": "assistant", "content": "<think>\n"}], "max_tokens": 40, "seed": 9,
            "temperature": 1.0}
    close = requests.post(srv.url("/tokenize"), json={"content": "</think>"}, timeout=10).json()["tokens"]
    assert len(close) == 1  # one token, which the reply's text shows
    closed = 0
    # As the model writes it, and with </think> (the token) favoured so that it closes the block.
    for b in (body, dict(body, logit_bias={str(close[0]): 6})):
        raw = srv.post("/v1/chat/completions", dict(b, reasoning_format="none")).json()["choices"][0]["message"]
        assert "reasoning_content" not in raw and raw["content"], raw
        for fmt in ("auto", "deepseek"):
            parsed = srv.post("/v1/chat/completions", dict(b, reasoning_format=fmt)).json()["choices"][0]["message"]
            assert parsed["reasoning_content"], parsed
            text = raw["content"]
            if "</think>" in text:  # the model closed it: what follows is content
                think, after = text.split("</think>", 1)
                assert parsed["reasoning_content"] == think.strip() and parsed["content"] == after.lstrip(), parsed
                closed += 1
            else:
                assert parsed["reasoning_content"] == text.strip() and parsed["content"] == "", parsed
        # Streamed: delta.reasoning_content and delta.content assemble to the same message.
        whole = srv.post("/v1/chat/completions", b).json()["choices"][0]
        msg, finish = assemble(sse(srv.post("/v1/chat/completions", dict(b, stream=True), stream=True)))
        assert msg == whole["message"] and finish == whole["finish_reason"]
    assert closed == 2, "the biased reply never closed its reasoning"
    # Without a prefill, Qwen3's template with enable_thinking false writes an
    # empty <think></think> block into the prompt itself.
    r = srv.post("/apply-template", {"messages": [USER], "chat_template_kwargs": {"enable_thinking": False}})
    assert r.json()["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def strip(reply):
    """A reply without what may differ between two sends of one request."""
    reply = dict(reply)
    del reply["id"], reply["created"]
    reply["usage"] = dict(reply["usage"], prompt_tokens_details=None)  # cached or not
    # llama-server's timings: of those, only the count of tokens generated
    # does not depend on the clock or the cache.
    reply["timings"] = {"predicted_n": reply["timings"]["predicted_n"]}
    return json.dumps(reply, sort_keys=True, ensure_ascii=False)


def test_reply_is_the_same_alone_and_under_load(srv):
    mine = [chat(tool_choice="required", seed=21, temperature=0.8, logprobs=True, top_logprobs=2),
            {"messages": [USER, {"role": "assistant", "content": "<think>\n"}], "max_tokens": 30, "seed": 22,
             "temperature": 0.9, "logprobs": True}]
    alone = [strip(srv.post("/v1/chat/completions", b).json()) for b in mine]
    streamed_alone = assemble(sse(srv.post("/v1/chat/completions", dict(mine[0], stream=True), stream=True)))
    results = [None] * 16

    def send(i):
        if i < 2:
            body = mine[i]
        elif i % 3 == 0:
            body = {"messages": [{"role": "user", "content": "a story " * i}], "max_tokens": 20 + i, "seed": i}
        elif i % 3 == 1:
            body = chat(tool_choice="required", seed=100 + i, stream=i % 2 == 0)
        else:
            body = chat(seed=100 + i, max_tokens=30)
        if body.get("stream"):
            results[i] = assemble(sse(srv.post("/v1/chat/completions", body, stream=True)))
        else:
            r = srv.post("/v1/chat/completions", body)
            assert r.status_code == 200, r.text
            results[i] = strip(r.json())

    threads = [threading.Thread(target=send, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[:2] == alone
    again = assemble(sse(srv.post("/v1/chat/completions", dict(mine[0], stream=True), stream=True)))
    assert again == streamed_alone


def test_second_family_llama31():
    # Llama 3.1's template: a call is {"name": ..., "parameters": {...}} at the
    # start of the reply (the llama3_json family).
    with Server("tiny-llama3-q4_k_m.gguf", "--chat-template-file", LLAMA31, "-np", "2", "-t", "2",
                "-c", "2048") as s:
        for seed, choice in ((1, "required"), (2, {"type": "function", "function": {"name": "get_weather"}})):
            # One call: a random model rarely ends a run of them on its own.
            r = s.post("/v1/chat/completions", chat(tool_choice=choice, seed=seed, temperature=0.8,
                                                    parallel_tool_calls=False))
            assert r.status_code == 200, r.text
            c = r.json()["choices"][0]
            assert c["finish_reason"] == "tool_calls", c
            check_calls(c["message"], None if choice == "required" else ["get_weather"])
        p = s.post("/apply-template", {"messages": [USER], "tools": TOOLS}).json()["prompt"]
        assert p.startswith("<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n"), p
        assert not p.startswith("<|begin_of_text|>")  # BOS is the tokenizer's to add


def test_bad_template_flags_stop_the_server(tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}{{ m.content }")
    for args, needle in ((["--chat-template-file", str(bad)], "--chat-template-file"),
                         (["--chat-template-file", str(tmp_path / "none.jinja")], "cannot read"),
                         (["--chat-template-kwargs", "{\"enable_thinking\": "], "--chat-template-kwargs"),
                         (["--chat-template-kwargs", "[1]"], "JSON object"),
                         (["--reasoning-format", "loud"], "loud"),
                         (["--chat-template-file", QWEN3, "--no-jinja"], "--no-jinja")):
        p = subprocess.run([SYNAPSE, "serve", "-m", model_path("tiny-qwen3-q4_k_m.gguf"), "--port", "0", *args],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, args
        assert needle in p.stderr, (args, p.stderr)


def test_openai_node_client(srv):
    node_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")
    if not os.path.isdir(os.path.join(node_dir, "node_modules", "openai")):
        pytest.fail("the openai npm package is not installed: run scripts/setup.sh (npm ci in tests/server/node)")
    r = subprocess.run(["node", os.path.join(node_dir, "tools.mjs"), srv.url("/v1")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "openai client tools: ok" in r.stdout
