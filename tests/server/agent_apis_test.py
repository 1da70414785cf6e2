"""The two other APIs agents speak, through `synapse serve` (issue 43):
Anthropic's Messages (/v1/messages, /v1/messages/count_tokens) and OpenAI's
Responses (/v1/responses, /v1/responses/input_tokens), both translated onto
the chat route (src/server/anthropic.cpp, responses.cpp).

On stories260K at temperature 0: a streamed reply's events are well formed
(named, numbered, blocks opened and closed in order) and add up to the
non-streamed reply, which says what /v1/chat/completions says for the same
conversation; the token counts are the chat route's prompt_tokens; bad bodies
are 400s in each API's own error shape; Anthropic's x-api-key authenticates.

Tool calls end to end (tool_use -> tool_result, function_call ->
function_call_output, streamed and not, a named tool): tiny-qwen3 with
Qwen3's template (the tools_srv fixture).
"""
import json
import os
import subprocess

import pytest
import requests

from test_serve import NODE_DIR, Server

SYSTEM = "You are a storyteller."
TURNS = [{"role": "user", "content": "Tell me about a cat named Tom."},
         {"role": "assistant", "content": "Tom was a big cat."},
         {"role": "user", "content": "What did Tom do next?"}]


@pytest.fixture(scope="module")
def srv():
    with Server("stories260K.gguf", "-np", "4", "-t", "2", "-c", "1024") as s:
        yield s


def named_events(resp):
    """The (event, data) pairs of a named-event stream; each data.type is its event's name."""
    assert resp.status_code == 200, resp.text
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    out, name = [], None
    for line in resp.iter_lines():
        if not line:
            continue
        if line.startswith(b"event: "):
            assert name is None, "two event lines without data"
            name = line[len(b"event: "):].decode()
            continue
        assert line.startswith(b"data: ") and name is not None, line
        data = json.loads(line[len(b"data: "):])
        assert data["type"] == name, (name, data)
        out.append((name, data))
        name = None
    assert name is None
    return out


def chat_text(srv, messages, max_tokens):
    r = srv.post("/v1/chat/completions", {"messages": messages, "max_tokens": max_tokens, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()


# --- Anthropic ---------------------------------------------------------------

def anthropic_stream_message(events):
    """The message Anthropic's SDK builds from the events, checking their order as it goes."""
    assert events[0][0] == "message_start" and events[-1][0] == "message_stop"
    assert events[-2][0] == "message_delta"
    msg, open_block = events[0][1]["message"], None
    assert msg["content"] == [] and msg["stop_reason"] is None
    for name, d in events[1:-2]:
        if name == "content_block_start":
            assert open_block is None, "a block started before the last one stopped"
            assert d["index"] == len(msg["content"])
            open_block = d["index"]
            msg["content"].append(d["content_block"])
        elif name == "content_block_delta":
            assert d["index"] == open_block
            block, delta = msg["content"][d["index"]], d["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            else:
                assert delta["type"] == "input_json_delta"
                block["partial"] = block.get("partial", "") + delta["partial_json"]
        else:
            assert name == "content_block_stop" and d["index"] == open_block, (name, d)
            block = msg["content"][open_block]
            if "partial" in block:
                block["input"] = json.loads(block.pop("partial"))
            open_block = None
    assert open_block is None
    msg["stop_reason"] = events[-2][1]["delta"]["stop_reason"]
    msg["stop_sequence"] = events[-2][1]["delta"]["stop_sequence"]
    msg["usage"] = events[-2][1]["usage"]
    return msg


def test_messages_stream_adds_up_to_the_reply(srv):
    body = {"model": "stories", "max_tokens": 48, "temperature": 0,
            "system": [{"type": "text", "text": "You are a "}, {"type": "text", "text": "storyteller."}],
            "messages": [TURNS[0], TURNS[1],
                         {"role": "user", "content": [{"type": "text", "text": TURNS[2]["content"]}]}]}
    r = srv.post("/v1/messages", body, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["type"] == "message" and reply["role"] == "assistant"
    assert reply["id"].startswith("msg_")
    assert reply["stop_reason"] in ("end_turn", "max_tokens")
    assert [b["type"] for b in reply["content"]] == ["text"]
    text = reply["content"][0]["text"]

    # The chat route says the same for the same conversation.
    chat = chat_text(srv, [{"role": "system", "content": SYSTEM}] + TURNS, 48)
    assert text == chat["choices"][0]["message"]["content"]
    assert reply["usage"]["output_tokens"] == chat["usage"]["completion_tokens"]
    assert reply["stop_reason"] == {"stop": "end_turn", "length": "max_tokens"}[chat["choices"][0]["finish_reason"]]

    events = named_events(srv.post("/v1/messages", dict(body, stream=True), stream=True))
    streamed = anthropic_stream_message(events)
    assert streamed["content"] == reply["content"]
    assert streamed["stop_reason"] == reply["stop_reason"]
    assert streamed["usage"]["output_tokens"] == reply["usage"]["output_tokens"]
    # Anthropic counts cache reads apart: the prompt is the same either way.
    u, v = streamed["usage"], reply["usage"]
    assert u["input_tokens"] + u["cache_read_input_tokens"] == v["input_tokens"] + v["cache_read_input_tokens"]
    assert v["input_tokens"] + v["cache_read_input_tokens"] == chat["usage"]["prompt_tokens"]


def test_messages_stop_sequence(srv):
    base = {"max_tokens": 64, "temperature": 0, "messages": [TURNS[0]]}
    text = srv.post("/v1/messages", base).json()["content"][0]["text"]
    words = text.split()
    assert len(words) > 3, text
    stop = words[2]
    r = srv.post("/v1/messages", dict(base, stop_sequences=[stop])).json()
    assert r["stop_reason"] == "stop_sequence" and r["stop_sequence"] == stop, r
    assert r["content"][0]["text"] == text[:text.index(stop)]
    events = named_events(srv.post("/v1/messages", dict(base, stop_sequences=[stop], stream=True), stream=True))
    assert anthropic_stream_message(events)["stop_sequence"] == stop


def test_count_tokens_is_the_chat_prompt(srv):
    body = {"model": "stories", "system": SYSTEM, "messages": TURNS}
    r = srv.post("/v1/messages/count_tokens", body)
    assert r.status_code == 200, r.text
    assert list(r.json()) == ["input_tokens"]
    chat = chat_text(srv, [{"role": "system", "content": SYSTEM}] + TURNS, 1)
    assert r.json()["input_tokens"] == chat["usage"]["prompt_tokens"]
    # No max_tokens needed; the same body for /v1/messages uses that many.
    m = srv.post("/v1/messages", dict(body, max_tokens=1)).json()
    assert m["usage"]["input_tokens"] + m["usage"]["cache_read_input_tokens"] == r.json()["input_tokens"]
    # A count is not bounded by the context (-c 1024): it says how much to cut.
    long = {"messages": [{"role": "user", "content": "cat " * 1500}]}
    assert srv.post("/v1/messages/count_tokens", long).json()["input_tokens"] > 1024


def expect_anthropic_400(srv, path, body, needle):
    r = srv.post(path, body)
    assert r.status_code == 400, (body, r.text)
    err = r.json()
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error", err
    assert needle in err["error"]["message"], err


def test_anthropic_bad_bodies_are_400s_in_anthropics_shape(srv):
    m = "/v1/messages"
    user = [{"role": "user", "content": "hi"}]
    expect_anthropic_400(srv, m, {"messages": user}, "max_tokens: is required")
    expect_anthropic_400(srv, m, {"max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]},
        "messages[0].content[0].type: 'image' blocks are not supported")
    expect_anthropic_400(srv, m, {"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "foo"}]}]},
                         "messages[0].content[0].type: unknown block type 'foo'")
    # The chat route's checks, naming the fields as Anthropic's API spells them.
    expect_anthropic_400(srv, m, {"max_tokens": 0, "messages": user}, "'max_tokens' must be in [1, ")
    expect_anthropic_400(srv, m, {"max_tokens": 5, "messages": user, "stop_sequences": ["x"] * 17},
                         "'stop_sequences' must have at most 16 entries")
    expect_anthropic_400(srv, "/v1/messages/count_tokens", {"messages": "hi"}, "messages: must be an array")
    r = requests.post(srv.url(m), data=b"{not json", timeout=30)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", r.text
    r = srv.post("/v1/messages/nowhere", {})
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error", r.text
    r = srv.post(m, {"max_tokens": 5, "messages": [{"role": "user", "content": "a" * (9 << 20)}]})
    assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large", r.text
    # Still serving.
    assert srv.post(m, {"max_tokens": 2, "messages": user}).status_code == 200


def test_anthropic_x_api_key():
    key = "sk-ant-test-key"
    with Server("stories260K.gguf", "--api-key", key, "-np", "1") as s:
        body = {"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
        r = s.post("/v1/messages", body)
        assert r.status_code == 401, r.text
        assert r.json() == {"type": "error", "error": {"type": "authentication_error", "message": "Invalid API Key"}}
        assert s.post("/v1/messages", body, headers={"x-api-key": key}).status_code == 200
        assert s.post("/v1/messages/count_tokens", body, headers={"x-api-key": key}).status_code == 200
        assert s.post("/v1/responses", {"input": "hi", "max_output_tokens": 2},
                      headers={"Authorization": "Bearer " + key}).status_code == 200


# --- Responses ---------------------------------------------------------------

def test_responses_stream_adds_up_to_the_reply(srv):
    body = {"model": "stories", "instructions": SYSTEM, "max_output_tokens": 48, "temperature": 0,
            "input": [TURNS[0],
                      {"type": "message", "role": "assistant",
                       "content": [{"type": "output_text", "text": TURNS[1]["content"]}]},
                      {"role": "user", "content": [{"type": "input_text", "text": TURNS[2]["content"]}]}],
            "store": False}
    r = srv.post("/v1/responses", body)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["object"] == "response" and reply["id"].startswith("resp_")
    assert reply["status"] in ("completed", "incomplete")
    assert reply["instructions"] == SYSTEM and reply["max_output_tokens"] == 48
    [item] = reply["output"]
    assert item["type"] == "message" and item["role"] == "assistant"
    text = item["content"][0]["text"]

    chat = chat_text(srv, [{"role": "system", "content": SYSTEM}] + TURNS, 48)
    assert text == chat["choices"][0]["message"]["content"]
    assert reply["usage"]["input_tokens"] == chat["usage"]["prompt_tokens"]
    assert reply["usage"]["output_tokens"] == chat["usage"]["completion_tokens"]
    assert reply["status"] == {"stop": "completed", "length": "incomplete"}[chat["choices"][0]["finish_reason"]]

    events = named_events(srv.post("/v1/responses", dict(body, stream=True), stream=True))
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    names = [n for n, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == ("response.completed" if reply["status"] == "completed" else "response.incomplete")
    deltas = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    assert deltas == text
    done = [d["text"] for n, d in events if n == "response.output_text.done"]
    assert done == [text]
    final = events[-1][1]["response"]
    for key in ("id", "created_at"):  # this stream's own
        final.pop(key), reply.pop(key)
    final["usage"]["input_tokens_details"] = reply["usage"]["input_tokens_details"]  # the cache differs
    for item in final["output"]:
        item.pop("id")
    for item in reply["output"]:
        item.pop("id")
    assert final == reply


def test_responses_input_tokens_is_the_chat_prompt(srv):
    body = {"instructions": SYSTEM, "input": TURNS}
    r = srv.post("/v1/responses/input_tokens", body)
    assert r.status_code == 200, r.text
    chat = chat_text(srv, [{"role": "system", "content": SYSTEM}] + TURNS, 1)
    assert r.json() == {"object": "response.input_tokens", "input_tokens": chat["usage"]["prompt_tokens"]}


def expect_openai_400(srv, body, param, needle):
    r = srv.post("/v1/responses", body)
    assert r.status_code == 400, (body, r.text)
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param, err
    assert needle in err["message"], err


def test_responses_bad_bodies_are_400s_in_openais_shape(srv):
    expect_openai_400(srv, {"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id", "stateless")
    expect_openai_400(srv, {"model": "m"}, "input", "input: is required")
    expect_openai_400(srv, {"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type",
                      "'web_search' tools are not supported")
    expect_openai_400(srv, {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
                      "input[0].content[0].type", "no vision")
    # The chat route's checks, naming the fields as the Responses API spells them.
    expect_openai_400(srv, {"input": "hi", "max_output_tokens": 0}, "max_output_tokens",
                      "'max_output_tokens' must be in [1, ")
    expect_openai_400(srv, {"input": "hi", "text": {"format": {"type": "json_schema", "name": "x",
                                                               "schema": {"type": "object", "not": {}}}}},
                      "text.format.schema", "'text.format.schema': ")
    assert srv.post("/v1/responses", {"input": "hi", "max_output_tokens": 2}).status_code == 200


def test_responses_json_schema_format(srv):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 99}},
              "required": ["name", "age"], "additionalProperties": False}
    r = srv.post("/v1/responses", {"input": "Tell me about a person.", "max_output_tokens": 100, "temperature": 0,
                                   "text": {"format": {"type": "json_schema", "name": "person", "schema": schema,
                                                       "strict": True}}})
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["status"] == "completed", reply
    value = json.loads(reply["output"][0]["content"][0]["text"])
    assert list(value) == ["name", "age"] and isinstance(value["age"], int)
    assert reply["text"]["format"]["name"] == "person"


def test_openai_node_client_responses():
    """The official OpenAI Node client (tests/server/node): responses.create, and
    responses.stream, whose accumulator checks every event's indices."""
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "openai")):
        pytest.fail("the openai npm package is not installed: run scripts/setup.sh (npm ci in tests/server/node)")
    with Server("stories260K.gguf", "-np", "2") as s:
        r = subprocess.run(["node", os.path.join(NODE_DIR, "responses.mjs"), s.url("/v1")],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "openai responses: ok" in r.stdout


QWEN3 = os.path.join(os.environ["SYNAPSE_TEST_DATA"], "templates", "llama.cpp", "Qwen-Qwen3-0.6B.jinja")
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}


@pytest.fixture(scope="module")
def tools_srv():
    with Server("tiny-qwen3-q4_k_m.gguf", "--chat-template-file", QWEN3, "-np", "4", "-t", "2", "-c", "2048") as s:
        yield s


def test_messages_tool_use_and_result(tools_srv):
    srv = tools_srv
    body = {"max_tokens": 200, "temperature": 0, "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [{"name": "get_weather", "description": "Weather now", "input_schema": WEATHER}],
            "tool_choice": {"type": "any"}}
    r = srv.post("/v1/messages", body)
    assert r.status_code == 200, r.text
    m = r.json()
    assert m["stop_reason"] == "tool_use", m
    uses = [b for b in m["content"] if b["type"] == "tool_use"]
    assert uses and uses[0]["name"] == "get_weather" and set(uses[0]["input"]) == {"city", "unit"}
    assert uses[0]["input"]["unit"] in ("celsius", "fahrenheit") and len(uses[0]["input"]["city"]) <= 12
    streamed = anthropic_stream_message(named_events(srv.post("/v1/messages", dict(body, stream=True), stream=True)))
    assert [b for b in streamed["content"] if b["type"] == "tool_use"] == uses
    # The loop: the call and its result go back; the next turn is answered.
    body2 = dict(body, tool_choice={"type": "auto"}, max_tokens=30, messages=body["messages"] + [
        {"role": "assistant", "content": m["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"], "content": "18 C"}]}])
    r2 = srv.post("/v1/messages", body2)
    assert r2.status_code == 200, r2.text
    assert r2.json()["type"] == "message"
    # count_tokens of that conversation is the chat route's prompt size.
    c = srv.post("/v1/messages/count_tokens", body2)
    assert c.status_code == 200, c.text
    assert c.json()["input_tokens"] == r2.json()["usage"]["input_tokens"] + \
        r2.json()["usage"].get("cache_read_input_tokens", 0)
    # A named tool.
    r3 = srv.post("/v1/messages", dict(body, tool_choice={"type": "tool", "name": "get_weather"}))
    assert r3.json()["stop_reason"] == "tool_use", r3.text


def test_responses_function_call_and_output(tools_srv):
    srv = tools_srv
    body = {"max_output_tokens": 200, "temperature": 0, "input": "Weather in Paris?", "tool_choice": "required",
            "tools": [{"type": "function", "name": "get_weather", "parameters": WEATHER, "strict": True}]}
    r = srv.post("/v1/responses", body)
    assert r.status_code == 200, r.text
    resp = r.json()
    calls = [o for o in resp["output"] if o["type"] == "function_call"]
    assert calls and calls[0]["name"] == "get_weather"
    assert set(json.loads(calls[0]["arguments"])) == {"city", "unit"}
    events = named_events(srv.post("/v1/responses", dict(body, stream=True), stream=True))
    final = events[-1][1]["response"]
    assert [(o["call_id"], o["arguments"]) for o in final["output"] if o["type"] == "function_call"] == \
        [(c["call_id"], c["arguments"]) for c in calls]
    args = "".join(d["delta"] for n, d in events if n == "response.function_call_arguments.delta")
    assert args == "".join(c["arguments"] for c in calls)
    body2 = dict(body, tool_choice="auto", max_output_tokens=30,
                 input=[{"role": "user", "content": "Weather in Paris?"}] + resp["output"] +
                 [{"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "18 C"}])
    r2 = srv.post("/v1/responses", body2)
    assert r2.status_code == 200, r2.text
    assert r2.json()["object"] == "response"
