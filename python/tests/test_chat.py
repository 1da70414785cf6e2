"""create_chat_completion's OpenAI shape, streaming, and Jinja templates."""
import pytest

import synapse
from synapse import Jinja2ChatFormatter, Llama

MESSAGES = [{"role": "system", "content": "You tell stories."},
            {"role": "user", "content": "Tell me about Lily."}]

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")


def test_chat_completion_schema(llm):
    out = llm.create_chat_completion(MESSAGES, max_tokens=16, seed=3)
    assert set(out) == {"id", "object", "created", "model", "choices", "usage"}
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-")
    assert isinstance(out["created"], int) and isinstance(out["model"], str)
    (choice,) = out["choices"]
    assert set(choice) == {"index", "message", "logprobs", "finish_reason"}
    assert choice["index"] == 0 and choice["logprobs"] is None
    assert choice["finish_reason"] in ("stop", "length")
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    usage = out["usage"]
    assert set(usage) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert all(isinstance(v, int) for v in usage.values())
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert 0 < usage["completion_tokens"] <= 16
    # stories260K has no tokenizer.chat_template: the library formats chatml.
    expected = synapse._synapse.tokenize_chat(llm._model, None, [(m["role"], m["content"]) for m in MESSAGES])
    assert usage["prompt_tokens"] == len(expected)


def test_chat_stream_concatenates(llm):
    kwargs = dict(max_tokens=24, temperature=0.9, seed=99)
    whole = llm.create_chat_completion(MESSAGES, **kwargs)
    chunks = list(llm.create_chat_completion(MESSAGES, stream=True, **kwargs))
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert chunks[-1]["choices"][0]["delta"] == {}
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]


def test_chat_logprobs(llm):
    out = llm.create_chat_completion(MESSAGES, max_tokens=4, logprobs=True, top_logprobs=2, temperature=0)
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == out["usage"]["completion_tokens"]
    for entry in content:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert len(entry["top_logprobs"]) == 2
        # Greedy: the chosen token is the most likely one.
        assert entry["logprob"] == pytest.approx(entry["top_logprobs"][0]["logprob"])


def test_jinja_matches_builtin_templates(llm):
    pairs = [(m["role"], m["content"]) for m in MESSAGES]
    chatml = Jinja2ChatFormatter(CHATML, eos_token="</s>", bos_token="<s>")
    assert chatml.render(MESSAGES) == synapse._synapse.format_chat(llm._model, "chatml", pairs)
    llama3 = Jinja2ChatFormatter(LLAMA3, eos_token="<|eot_id|>", bos_token="<|begin_of_text|>")
    assert llama3.render(MESSAGES) == "<|begin_of_text|>" + synapse._synapse.format_chat(llm._model, "llama3", pairs)
    assert llama3.render(MESSAGES, add_generation_prompt=False) == \
        "<|begin_of_text|>" + synapse._synapse.format_chat(llm._model, "llama3", pairs, False)


def test_jinja_raise_exception_is_a_value_error():
    tmpl = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('first message must be user') }}{% endif %}"
    fmt = Jinja2ChatFormatter(tmpl, eos_token="", bos_token="")
    with pytest.raises(ValueError, match="first message must be user") as e:
        fmt.render([{"role": "assistant", "content": "hi"}])
    assert isinstance(e.value, synapse.Error)
    with pytest.raises(ValueError):
        Jinja2ChatFormatter("{% for %}", eos_token="", bos_token="")


def test_jinja_needs_a_template(stories_path):
    with pytest.raises(ValueError, match="tokenizer.chat_template"):
        Llama(stories_path, chat_format="jinja", verbose=False)
    with pytest.raises(ValueError, match="chat_format"):
        Llama(stories_path, chat_format="no-such-format", verbose=False)


def test_jinja_renders_the_files_own_template(stories_path, tmp_path):
    from gguf_edit import with_string_key
    path = tmp_path / "stories-chatml.gguf"
    with_string_key(stories_path, str(path), "tokenizer.chat_template", CHATML)
    jinja = Llama(str(path), chat_format="jinja", verbose=False)
    builtin = Llama(stories_path, chat_format="chatml", verbose=False)
    # Same model weights, same prompt text: Jinja's rendering of the file's
    # template gives the prompt the library's own chatml formatter gives.
    kwargs = dict(max_tokens=12, temperature=0)
    a = jinja.create_chat_completion(MESSAGES, **kwargs)
    b = builtin.create_chat_completion(MESSAGES, **kwargs)
    assert a["usage"] == b["usage"]
    assert a["choices"][0]["message"] == b["choices"][0]["message"]
    assert jinja.metadata["tokenizer.chat_template"] == CHATML
