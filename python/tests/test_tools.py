"""The model's own chat template through the library's Jinja engine
(chat_format=None), tool calls (tools, tool_choice, parallel_tool_calls) and
reasoning_content, on tiny-qwen3 with Qwen3's template put into the file
(tests/data/templates/llama.cpp/Qwen-Qwen3-0.6B.jinja; Hermes-style
<tool_call> syntax)."""
import json

import pytest

import synapse
from synapse import Jinja2ChatFormatter, Llama

from conftest import DATA

QWEN3 = DATA / "models" / "tiny-qwen3-q4_k_m.gguf"
QWEN3_TEMPLATE = (DATA / "templates" / "llama.cpp" / "Qwen-Qwen3-0.6B.jinja").read_text()

WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo", "Tokyo"]},
                          "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"], "additionalProperties": False}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET", "JST"]}},
        "required": ["zone"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a zone",
                                           "parameters": TIME}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "system", "content": "You are a helpful assistant."},
       {"role": "user", "content": "What is the weather in Oslo?"}]


def validate(instance, schema):
    """jsonschema's validate where Debian's python3-jsonschema is installed;
    else the subset the schemas above use, checked by hand."""
    try:
        import jsonschema
    except ImportError:
        assert isinstance(instance, dict)
        assert set(schema["required"]) <= set(instance) <= set(schema["properties"])
        for key, value in instance.items():
            prop = schema["properties"][key]
            if "enum" in prop:
                assert value in prop["enum"]
            if prop["type"] == "integer":
                assert isinstance(value, int) and prop["minimum"] <= value <= prop["maximum"]
        return
    jsonschema.validate(instance, schema)


def assert_valid_calls(message, names=("get_weather", "get_time")):
    assert message["role"] == "assistant"
    assert message["tool_calls"], message
    for call in message["tool_calls"]:
        assert set(call) == {"id", "type", "function"}
        assert call["type"] == "function" and call["id"].startswith("call_")
        assert call["function"]["name"] in names
        assert isinstance(call["function"]["arguments"], str)
        validate(json.loads(call["function"]["arguments"]), SCHEMAS[call["function"]["name"]])


def assemble(chunks):
    """A streamed reply put together as the OpenAI clients do: the message and
    the finish_reason."""
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    content, reasoning, calls = "", "", []
    for c in chunks[1:-1]:
        (choice,) = c["choices"]
        assert choice["finish_reason"] is None
        delta = choice["delta"]
        content += delta.get("content", "")
        reasoning += delta.get("reasoning_content", "")
        for tc in delta.get("tool_calls", []):
            if "id" in tc:  # a call starts: its id and name come first, arguments after
                assert tc["index"] == len(calls)
                calls.append({"id": tc["id"], "type": tc["type"],
                              "function": {"name": tc["function"]["name"], "arguments": ""}})
            calls[tc["index"]]["function"]["arguments"] += tc["function"]["arguments"]
    assert chunks[-1]["choices"][0]["delta"] == {}
    message = {"role": "assistant", "content": content or (None if calls else "")}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    return message, chunks[-1]["choices"][0]["finish_reason"]


@pytest.fixture(scope="module")
def qwen3_path(tmp_path_factory):
    from gguf_edit import with_string_key
    path = tmp_path_factory.mktemp("qwen3") / "tiny-qwen3-chat.gguf"
    with_string_key(str(QWEN3), str(path), "tokenizer.chat_template", QWEN3_TEMPLATE)
    return str(path)


@pytest.fixture(scope="module")
def qwen3(qwen3_path):
    model = Llama(qwen3_path, n_ctx=1024, n_threads=1, verbose=False)
    yield model
    model.close()


@pytest.fixture(scope="module")
def qwen3_jinja2(qwen3_path):
    model = Llama(qwen3_path, n_ctx=1024, n_threads=1, chat_format="jinja", verbose=False)
    yield model
    model.close()


# A conversation with every kind of message the template writes.
HISTORY = ASK + [
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 4}"},
    {"role": "assistant", "content": "It is 4 degrees."},
    {"role": "user", "content": "And the time there?"},
]


@pytest.mark.parametrize("messages,tools", [(ASK, None), (ASK, TOOLS), (HISTORY, TOOLS)])
def test_none_renders_what_jinja2_renders(qwen3, qwen3_jinja2, messages, tools):
    text = qwen3._template.apply(json.dumps(messages), True, json.dumps(tools) if tools else "")
    jinja2 = Jinja2ChatFormatter(QWEN3_TEMPLATE, eos_token="<|im_end|>", bos_token="<|endoftext|>")
    expected = jinja2.render(messages, add_generation_prompt=True, **({"tools": tools} if tools else {}))
    assert text == expected
    if tools:
        assert "<tools>\n" + json.dumps(tools[0], ensure_ascii=False) in text
    # The same prompt tokens, so the same greedy reply, either way.
    kwargs = dict(max_tokens=8, temperature=0, tools=tools)
    a = qwen3.create_chat_completion(messages, **kwargs)
    b = qwen3_jinja2.create_chat_completion(messages, **kwargs)
    assert a["usage"] == b["usage"]
    assert a["usage"]["prompt_tokens"] == len(qwen3.tokenize(expected.encode(), add_bos=True, special=True))
    assert a["choices"][0]["message"] == b["choices"][0]["message"]


def test_null_content_beside_tool_calls(qwen3):
    # OpenAI sends content null with tool_calls; Qwen3's template would add
    # None to a string (Jinja2 raises), the library's engine reads it as "".
    history = [dict(m) for m in HISTORY]
    history[2]["content"] = None
    out = qwen3.create_chat_completion(history, tools=TOOLS, max_tokens=4, temperature=0)
    same = qwen3.create_chat_completion(HISTORY, tools=TOOLS, max_tokens=4, temperature=0)
    assert out["usage"] == same["usage"]
    prompt = qwen3._template.apply(json.dumps(history), True, json.dumps(TOOLS))
    assert "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2}}\n</tool_call>" \
        in prompt
    assert "<tool_response>\n{\"temperature\": 4}\n</tool_response>" in prompt


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tool_choice_required_gives_valid_calls(qwen3, seed):
    out = qwen3.create_chat_completion(ASK, tools=TOOLS, tool_choice="required", temperature=0.8, seed=seed,
                                       max_tokens=256)
    (choice,) = out["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert_valid_calls(choice["message"])
    assert len(choice["message"]["tool_calls"]) == 1  # parallel_tool_calls defaults to False (llama-server's)
    assert choice["message"]["content"] is None


def test_named_tool_choice_calls_that_tool(qwen3):
    for seed in (1, 2):
        out = qwen3.create_chat_completion(ASK, tools=TOOLS, temperature=0.8, seed=seed, max_tokens=256,
                                           tool_choice={"type": "function", "function": {"name": "get_time"}})
        assert out["choices"][0]["finish_reason"] == "tool_calls"
        assert_valid_calls(out["choices"][0]["message"], names=("get_time",))


def test_parallel_calls(qwen3):
    out = qwen3.create_chat_completion(ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=True,
                                       temperature=0.8, seed=5, max_tokens=512)
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    assert_valid_calls(out["choices"][0]["message"])
    ids = [c["id"] for c in out["choices"][0]["message"]["tool_calls"]]
    assert len(set(ids)) == len(ids)


def test_python_jinja2_template_calls_too(qwen3, qwen3_jinja2):
    # chat_format="jinja" renders with Python's Jinja2 and parses with the
    # library: the same prompt and grammar give the same reply.
    kwargs = dict(tools=TOOLS, tool_choice="required", temperature=0.8, seed=7, max_tokens=256)
    a = qwen3_jinja2.create_chat_completion(ASK, **kwargs)
    assert_valid_calls(a["choices"][0]["message"])
    assert a["choices"][0]["message"] == qwen3.create_chat_completion(ASK, **kwargs)["choices"][0]["message"]


@pytest.mark.parametrize("kwargs", [
    dict(tools=TOOLS, tool_choice="required", temperature=0.8, seed=11),
    dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}}, temperature=0, seed=1),
    dict(tools=TOOLS, tool_choice="required", parallel_tool_calls=True, temperature=0.8, seed=5),
    dict(tools=TOOLS, temperature=0.8, seed=3),  # auto: whatever the model writes
    dict(grammar='root ::= "<think>" "plan" "</think>" "\\n\\nHi"', temperature=0),
])
def test_streamed_chunks_assemble_to_the_reply(qwen3, kwargs):
    whole = qwen3.create_chat_completion(ASK, max_tokens=256, **kwargs)
    chunks = list(qwen3.create_chat_completion(ASK, max_tokens=256, stream=True, **kwargs))
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    message, finish = assemble(chunks)
    assert message == whole["choices"][0]["message"]
    assert finish == whole["choices"][0]["finish_reason"]


def test_reasoning_goes_to_reasoning_content(qwen3):
    out = qwen3.create_chat_completion(ASK, grammar='root ::= "<think>" "plan" "</think>" "\\n\\nHi"', temperature=0)
    message = out["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Hi", "reasoning_content": "plan"}
    # A prefill that opens <think> (the conversation ends with an assistant
    # message, continued): the reply starts inside the reasoning block.
    prefill = ASK + [{"role": "assistant", "content": "<think>\n"}]
    assert qwen3._template.apply(json.dumps(prefill), True).endswith("<|im_start|>assistant\n<think>\n")
    out = qwen3.create_chat_completion(prefill, grammar='root ::= "plan" "</think>" "Hi"', temperature=0)
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "Hi", "reasoning_content": "plan"}


def test_tool_loop_completes(qwen3):
    # The client's loop: a forced call, its result as a tool message, a final answer.
    first = qwen3.create_chat_completion(ASK, tools=TOOLS, tool_choice="required", temperature=0, max_tokens=256)
    call = first["choices"][0]["message"]
    assert_valid_calls(call)
    messages = ASK + [call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "sunny"}]
    prompt = qwen3._template.apply(json.dumps(messages), True, json.dumps(TOOLS))
    assert prompt.endswith("<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
                           "<|im_start|>assistant\n")
    assert call["tool_calls"][0]["function"]["arguments"] in prompt
    final = qwen3.create_chat_completion(messages, tools=TOOLS, tool_choice="none", temperature=0, max_tokens=8)
    assert final["choices"][0]["finish_reason"] in ("stop", "length")
    assert "tool_calls" not in final["choices"][0]["message"]
    assert isinstance(final["choices"][0]["message"]["content"], str)


@pytest.mark.parametrize("kwargs,field", [
    (dict(tools=[{"type": "function", "function": {"name": "bad name"}}]), r"tools\[0\]\.function\.name"),
    (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": 3}}]), r"tools\[0\]\.function\.parameters"),
    (dict(tools=[{"type": "code"}]), r"tools\[0\]\.type"),
    (dict(tools={"name": "f"}), r"tools"),
    (dict(tools=TOOLS, tool_choice="sometimes"), r"tool_choice"),
    (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}),
     r"tool_choice: function 'nope' is not among the tools"),
    (dict(tool_choice="required"), r"tool_choice: no tools"),
    (dict(tools=TOOLS, grammar="root ::= \"x\""), r"grammar"),
    (dict(functions=[{"name": "f"}]), r"functions"),
])
def test_bad_tools_raise_naming_the_field(qwen3, kwargs, field):
    with pytest.raises(ValueError, match=field) as e:
        qwen3.create_chat_completion(ASK, max_tokens=4, **kwargs)
    assert isinstance(e.value, synapse.Error)


@pytest.mark.parametrize("fmt", [None, "jinja"])
@pytest.mark.parametrize("history,field", [
    ([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{not json"}}]}],
     r"messages\[1\]\.tool_calls\[0\]\.function\.arguments"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "f"}}]}],
     r"messages\[1\]\.tool_calls\[0\]\.id"),
    ([{"role": "tool", "content": "4 degrees"}], r"messages\[1\]\.tool_call_id"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], r"messages\[1\]\.content\[0\]"),
])
def test_bad_history_raises_naming_the_message(qwen3, qwen3_jinja2, fmt, history, field):
    llm = qwen3 if fmt is None else qwen3_jinja2
    with pytest.raises(ValueError, match=field):
        llm.create_chat_completion(ASK[:1] + history + ASK[1:], tools=TOOLS, max_tokens=4)


def test_built_in_formats_take_no_tools(qwen3_path):
    llm = Llama(qwen3_path, n_threads=1, chat_format="chatml", verbose=False)
    with pytest.raises(ValueError, match="built-in format"):
        llm.create_chat_completion(ASK, tools=TOOLS, max_tokens=4)


def test_unparsable_template_falls_back_with_a_warning(stories_path, tmp_path):
    from gguf_edit import with_string_key
    path = tmp_path / "stories-broken.gguf"
    # It does not parse (no endfor); its text still names a family (chatml).
    with_string_key(stories_path, str(path), "tokenizer.chat_template", "{% for m in messages %}<|im_start|>")
    with pytest.warns(UserWarning, match="tokenizer.chat_template: template: line 1"):
        llm = Llama(str(path), n_threads=1, verbose=False)
    out = llm.create_chat_completion(ASK, max_tokens=4, temperature=0)
    builtin = Llama(stories_path, n_threads=1, chat_format="chatml", verbose=False)
    assert out["usage"] == builtin.create_chat_completion(ASK, max_tokens=4, temperature=0)["usage"]
