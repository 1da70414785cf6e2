"""create_completion / __call__ / streaming against the command line and llama.cpp's golden text."""
import subprocess
from pathlib import Path

import pytest

from synapse import Llama

PROMPT = "Once upon a time"


def test_greedy_equals_golden_and_cli(llm, golden, stories_path, synapse_bin):
    out = llm(PROMPT, max_tokens=64, temperature=0)
    text = out["choices"][0]["text"]
    # llama.cpp's greedy continuation (tests/data/golden, 64 tokens, no EOS in it).
    assert llm.tokenize(PROMPT.encode()) == golden["input_ids"]
    assert text == golden["greedy_text"]
    assert out["usage"] == {"prompt_tokens": 5, "completion_tokens": 64, "total_tokens": 69}
    assert out["choices"][0]["finish_reason"] == "length"
    # The command line's greedy run (only the generated text goes to stdout).
    cli = subprocess.run([synapse_bin, "run", "-m", stories_path, "-p", PROMPT, "-n", "64", "--temp", "0"],
                         capture_output=True, check=True)
    assert text.encode() == cli.stdout.rstrip(b"\n") or text.encode() == cli.stdout


def test_completion_schema(llm):
    out = llm.create_completion(PROMPT, max_tokens=8, seed=1, logprobs=3)
    assert set(out) == {"id", "object", "created", "model", "choices", "usage"}
    assert out["object"] == "text_completion" and out["id"].startswith("cmpl-")
    assert isinstance(out["created"], int) and isinstance(out["model"], str)
    (choice,) = out["choices"]
    assert set(choice) == {"text", "index", "logprobs", "finish_reason"}
    assert choice["index"] == 0 and choice["finish_reason"] in ("stop", "length")
    lp = choice["logprobs"]
    assert set(lp) == {"tokens", "text_offset", "token_logprobs", "top_logprobs"}
    n = out["usage"]["completion_tokens"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == n
    assert "".join(lp["tokens"]).lstrip() == choice["text"].lstrip()
    assert all(v <= 0 for v in lp["token_logprobs"])
    assert all(1 <= len(t) <= 4 for t in lp["top_logprobs"])


def test_stream_concatenates_to_text(llm):
    kwargs = dict(max_tokens=48, temperature=0.8, seed=1234)
    whole = llm(PROMPT, **kwargs)
    chunks = list(llm(PROMPT, stream=True, **kwargs))
    assert len(chunks) > 1
    assert all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_stop_string_and_seed(llm):
    a = llm(PROMPT, max_tokens=64, temperature=0, stop=["Lily"])
    assert a["choices"][0]["text"] == ", there was a little girl named "
    assert a["choices"][0]["finish_reason"] == "stop"
    b1 = llm(PROMPT, max_tokens=32, seed=7)["choices"][0]["text"]
    b2 = llm(PROMPT, max_tokens=32, seed=7)["choices"][0]["text"]
    assert b1 == b2


def test_prompt_cache_gives_the_same_text(llm):
    # The second call reuses the first's KV prefix; the text must not change.
    first = llm(PROMPT + ", there", max_tokens=24, temperature=0)["choices"][0]["text"]
    llm.reset()
    llm(PROMPT, max_tokens=4, temperature=0)
    again = llm(PROMPT + ", there", max_tokens=24, temperature=0)["choices"][0]["text"]
    assert again == first


def test_hybrid_model_reuses_the_snapshot_of_the_last_prompt():
    # tiny-qwen35 (Qwen3.5's DeltaNet layers): their recurrent state cannot be cut back to any position, so
    # the context keeps a snapshot of it at the end of each prompt (Sequence.keep_common_prefix asks for
    # one); a prompt sharing the previous prompt goes back to it instead of position 0. Either way the
    # text is a fresh model's.
    from synapse import Llama
    path = str(Path(__file__).resolve().parents[2] / "tests" / "data" / "models" / "tiny-qwen35-q8_0.gguf")
    with Llama(path, n_ctx=256, n_threads=1, verbose=False) as fresh:
        want = fresh(PROMPT + ", there", max_tokens=12, temperature=0)["choices"][0]["text"]
    with Llama(path, n_ctx=256, n_threads=1, verbose=False) as llm:
        kept = []
        keep_prefix = llm._keep_prefix
        llm._keep_prefix = lambda ids: kept.append(keep_prefix(ids)) or kept[-1]
        first = llm.tokenize((PROMPT + " a").encode())
        second = llm.tokenize((PROMPT + ", there").encode())
        assert first[:-1] == second[:len(first) - 1] and first[-1] != second[len(first) - 1]
        llm(PROMPT + " a", max_tokens=4, temperature=0)  # shares PROMPT only
        assert llm(PROMPT + ", there", max_tokens=12, temperature=0)["choices"][0]["text"] == want
        assert llm(PROMPT + ", there", max_tokens=12, temperature=0)["choices"][0]["text"] == want
        # Nothing, then the snapshot at the end of the first prompt (all but its last token), then
        # the second prompt's own (the same prompt again: all but its last token).
        assert kept == [0, len(first) - 1, len(second) - 1]


def test_token_prompt_and_long_prompt_error(llm):
    ids = llm.tokenize(PROMPT.encode())
    assert llm(ids, max_tokens=8, temperature=0)["choices"][0]["text"] == \
        llm(PROMPT, max_tokens=8, temperature=0)["choices"][0]["text"]
    with pytest.raises(ValueError) as e:
        llm([1] + [403] * 600, max_tokens=4)
    assert "512" in str(e.value)
    # Still usable after the refusal.
    assert llm(PROMPT, max_tokens=4, temperature=0)["usage"]["completion_tokens"] == 4


def test_reports_bad_arguments(stories_path):
    with pytest.raises(ValueError):
        Llama(stories_path, n_ctx=-1, verbose=False)
    llm = Llama(stories_path, verbose=False)
    with pytest.raises(ValueError):
        llm(PROMPT, logit_bias={100000: 1.0})
    with pytest.raises(ValueError):
        llm(PROMPT, top_p=float("nan"))
    with pytest.raises(ValueError, match="mirostat_mode"):
        llm(PROMPT, mirostat_mode=2)
    with pytest.raises(ValueError, match="grammar"):
        llm.create_chat_completion([{"role": "user", "content": "hi"}], grammar="root ::= x")
    Llama(stories_path, n_gpu_layers=-1, verbose=False)  # nothing to offload: accepted


def test_a_second_request_cancels_an_open_stream(llm):
    first = llm(PROMPT, stream=True, max_tokens=32, temperature=0)
    next(first)
    assert llm(PROMPT, max_tokens=4, temperature=0)["usage"]["completion_tokens"] == 4
    with pytest.raises(ValueError, match="another call"):
        list(first)
