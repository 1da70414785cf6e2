"""Tokenizer, metadata, eval/logits (a view of the engine's buffer) and errors."""
import subprocess

import numpy as np
import pytest

import synapse
from synapse import Llama


def test_model_facts(llm):
    assert llm.n_ctx() == 512 and llm.n_vocab() == 512
    assert llm.token_bos() == 1 and llm.token_eos() == 2
    md = llm.metadata
    assert md["general.architecture"] == "llama"
    assert md["llama.embedding_length"] == "64"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in md.items())
    assert "tokenizer.ggml.tokens" not in md  # arrays are left out, as in llama.cpp


def test_tokenize_roundtrip(llm, golden):
    ids = llm.tokenize(b"Once upon a time")
    assert ids == golden["input_ids"]
    assert llm.tokenize(b"Once upon a time", add_bos=False) == golden["input_ids"][1:]
    assert llm.detokenize(ids[1:]) == b" Once upon a time" or llm.detokenize(ids[1:]) == b"Once upon a time"
    assert llm.tokenize(b"<s>", add_bos=False, special=True) == [1]
    with pytest.raises(TypeError):
        llm.tokenize("text")
    with pytest.raises(ValueError):
        llm.detokenize([100000])


def test_logits_view_equals_cli(stories_path, synapse_bin, tmp_path, golden):
    llm = Llama(stories_path, n_threads=2, verbose=False)  # the CLI's default thread count here; any gives the same bits
    ids = golden["input_ids"]
    out = tmp_path / "logits.f32"
    subprocess.run([synapse_bin, "logits", "-m", stories_path, "--ids", ",".join(map(str, ids)), "-o", str(out)],
                   check=True, capture_output=True)
    cli = np.fromfile(out, dtype="<f4").reshape(len(ids), llm.n_vocab())
    llm.eval(ids[:1])
    view = llm.logits
    assert view.shape == (llm.n_vocab(),) and view.dtype == np.float32
    assert not view.flags.owndata and not view.flags.writeable
    assert np.array_equal(view, cli[0])
    for i in range(1, len(ids)):
        llm.eval(ids[i:i + 1])
        # The same memory, overwritten in place by the engine: no copy anywhere.
        assert np.shares_memory(view, llm.logits)
        assert np.array_equal(view, cli[i])
    assert llm.n_tokens == len(ids) and list(llm.input_ids) == ids
    # The whole prompt at once gives the same last row (prefill == decode).
    llm.reset()
    llm.eval(ids)
    assert np.array_equal(llm.logits, cli[-1])


def test_eval_overflow_is_refused(llm):
    with pytest.raises(ValueError, match="n_ctx"):
        llm.eval([1] * 513)
    assert llm.n_tokens == 0
    llm.eval([1, 403])
    assert llm.n_tokens == 2


def test_errors_are_python_exceptions(tmp_path):
    missing = str(tmp_path / "nope.gguf")
    with pytest.raises(FileNotFoundError) as e:
        Llama(missing, verbose=False)
    assert isinstance(e.value, synapse.Error) and missing in str(e.value)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 12)
    with pytest.raises(ValueError) as e:
        Llama(str(bad), verbose=False)
    assert isinstance(e.value, synapse.Error) and str(bad) in str(e.value)


def test_logits_need_an_eval(llm):
    with pytest.raises(ValueError, match="logits"):
        llm.logits
    llm.eval([1])
    row = llm.logits.copy()
    llm("Once upon a time", max_tokens=2)
    with pytest.raises(ValueError, match="logits"):
        llm.logits  # the completion's decodes overwrote the buffer
    llm.reset()
    llm.eval([1])
    assert np.array_equal(llm.logits, row)


def test_one_call_at_a_time(llm):
    import threading
    stream = llm("Once upon a time", stream=True, max_tokens=2000, temperature=0,
                 logit_bias={llm.token_eos(): float("-inf")})
    next(stream)
    # Another thread reaching the context while the reply runs gets an error, not a data race.
    errors = []
    t = threading.Thread(target=lambda: errors.append(pytest.raises(ValueError, llm._ctx.decode, llm._seq, [1])))
    t.start()
    t.join()
    assert "in use" in str(errors[0].value)
    del stream  # abandoned: the next call joins its worker
    llm.eval([1])
    assert llm.n_tokens >= 1
