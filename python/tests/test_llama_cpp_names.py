"""llama-cpp-python names beyond the completion methods: seeds (-1 random),
with/close, logits_all (scores, eval_logits), generate, sample, set_seed,
tokenizer(), from_pretrained (local Hugging Face cache only), errors."""
import numpy as np
import pytest

import synapse
from synapse import Llama, LogitsProcessorList, StoppingCriteriaList

PROMPT = "Once upon a time"


def _text(out):
    return out["choices"][0]["text"]


def test_seed_minus_one_is_random(stories_path):
    # seed=-1 (llama-cpp-python's documented "random") at construction: each call draws a seed.
    # 32 tokens: stories260K writes the same 12 tokens after PROMPT in ~40% of draws (four alike
    # in a few % of runs), while 60 draws of 32 tokens were 60 different texts.
    llm = Llama(stories_path, n_threads=1, seed=-1, verbose=False)
    texts = {_text(llm(PROMPT, max_tokens=32, temperature=1.0)) for _ in range(4)}
    assert len(texts) > 1
    # Per call: -1 is random, a fixed seed repeats.
    texts = {_text(llm(PROMPT, max_tokens=32, temperature=1.0, seed=-1)) for _ in range(4)}
    assert len(texts) > 1
    fixed = {_text(llm(PROMPT, max_tokens=32, temperature=1.0, seed=3)) for _ in range(2)}
    assert len(fixed) == 1
    # set_seed: the seed of calls that pass none.
    llm.set_seed(3)
    assert _text(llm(PROMPT, max_tokens=32, temperature=1.0)) == fixed.pop()
    for bad in (-2, 2**32, 1.5, True):
        with pytest.raises(ValueError, match="seed"):
            llm.set_seed(bad)
    with pytest.raises(ValueError, match="seed"):
        Llama(stories_path, seed=-7, verbose=False)


def test_reply_does_not_depend_on_earlier_calls(stories_path):
    """The prefix a reply reuses from the KV cache, and its repeat-penalty
    window, give the reply a fresh Llama gives (and input_ids is what the
    context holds)."""
    sampling = dict(max_tokens=12, seed=5, temperature=0.8, repeat_penalty=1.1)
    fresh = Llama(stories_path, n_threads=1, verbose=False)
    want = _text(fresh(PROMPT + " there was", **sampling))
    llm = Llama(stories_path, n_threads=1, verbose=False)
    first = llm(PROMPT, max_tokens=6, seed=1)
    ids = llm.tokenize(PROMPT.encode())
    held = list(llm.input_ids)
    assert held[:len(ids)] == ids and len(held) <= len(ids) + first["usage"]["completion_tokens"]
    llm.create_chat_completion([{"role": "user", "content": "Hi"}], max_tokens=4, seed=2)
    assert _text(llm(PROMPT, max_tokens=3, seed=1)) == _text(first)[:len(_text(llm(PROMPT, max_tokens=3, seed=1)))]
    assert _text(llm(PROMPT + " there was", **sampling)) == want
    stream = "".join(c["choices"][0]["text"] for c in llm(PROMPT + " there was", stream=True, **sampling))
    assert stream == want


def test_with_and_close(stories_path):
    with Llama(stories_path, n_threads=1, verbose=False) as llm:
        assert _text(llm(PROMPT, max_tokens=4, temperature=0))
    for use in (lambda: llm(PROMPT), lambda: llm.eval([1]), lambda: llm.n_ctx(), lambda: llm.save_state(),
                lambda: llm.create_chat_completion([{"role": "user", "content": "x"}]), lambda: llm.logits,
                lambda: next(llm.generate([1]))):
        with pytest.raises(synapse.InvalidArgumentError, match=r"is closed \(close\(\) or the end of its with block\)"):
            use()
    llm.close()  # twice: nothing
    with pytest.raises(synapse.InvalidArgumentError, match="is closed"):
        with llm:
            pass


def test_logits_all_scores_and_eval_logits(stories_path, golden):
    ids = golden["input_ids"]
    plain = Llama(stories_path, n_threads=1, verbose=False)
    rows = []
    for t in ids:  # one token at a time: each row as the engine computes it alone
        plain.eval([t])
        rows.append(np.array(plain.logits))
    assert len(plain.eval_logits) == 1 and plain.eval_logits[0] == rows[-1].tolist()
    with pytest.raises(ValueError, match="logits_all=True"):
        plain.scores
    llm = Llama(stories_path, n_threads=1, logits_all=True, n_batch=3, verbose=False)
    llm.eval(ids)
    assert llm.scores.shape == (llm.n_ctx(), llm.n_vocab()) and llm.scores.dtype == np.float32
    assert np.array_equal(llm.scores[:len(ids)], np.stack(rows))  # every row, bit for bit
    assert np.array_equal(llm.logits, rows[-1])
    ev = llm.eval_logits
    assert ev.maxlen == llm.n_ctx() and len(ev) == len(ids) and ev[2] == rows[2].tolist()
    # A completion's rows are not kept: NaN, not stale numbers.
    out = llm(ids, max_tokens=4, temperature=0)
    n = llm.n_tokens
    assert n > len(ids) and out["usage"]["completion_tokens"] == 4
    assert np.isnan(llm.scores[len(ids) - 1:n]).all()


def test_generate_and_sample(stories_path, golden):
    llm = Llama(stories_path, n_threads=1, verbose=False)
    ids = golden["input_ids"]
    # Greedy generate == greedy completion (temp 0, no penalties).
    want = llm(ids, max_tokens=8, temperature=0)["choices"][0]
    got = []
    for tok in llm.generate(ids, temp=0):
        if tok == llm.token_eos() or len(got) == 8:
            break
        got.append(tok)
    assert llm.detokenize(got).decode() == want["text"]
    # sample() draws from the last logits; temp 0 is their argmax.
    llm.reset()
    llm.eval(ids)
    assert llm.sample(temp=0) == int(np.argmax(llm.logits)) == got[0]
    # A logits processor rewrites the row first; stopping criteria end the generator.
    ban = LogitsProcessorList([lambda input_ids, scores: np.where(np.arange(scores.size) == got[0], -np.inf, scores)])
    assert llm.sample(temp=0, logits_processor=ban) != got[0]
    # They see the evaluated tokens (the prompt, then each yielded token once it has run).
    stop_after = StoppingCriteriaList([lambda input_ids, logits: len(input_ids) >= len(ids) + 3])
    assert list(llm.generate(ids, temp=0, stopping_criteria=stop_after)) == got[:3]
    # A seeded sampled generation repeats.
    llm.set_seed(9)
    a = [t for t, _ in zip(llm.generate(ids, temp=0.9), range(6))]
    b = [t for t, _ in zip(llm.generate(ids, temp=0.9), range(6))]
    assert a == b
    with pytest.raises(ValueError, match="mirostat"):
        llm.sample(mirostat_mode=2)
    with pytest.raises(ValueError, match="grammar"):
        next(llm.generate(ids, grammar=synapse.LlamaGrammar.from_string('root ::= "a"')))


def test_tokenizer(llm):
    tok = llm.tokenizer()
    assert tok.encode("Once upon") == llm.tokenize(b"Once upon", special=True)
    assert tok.tokenize(b"<s>x", add_bos=False) == llm.tokenize(b"<s>x", add_bos=False, special=True)
    assert tok.decode(tok.encode("Once upon", add_bos=False)).strip() == "Once upon"
    assert tok.detokenize(tok.encode("a time", add_bos=False)).strip() == b"a time"


def test_from_pretrained_uses_only_the_local_cache(stories_path, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(synapse.ModelNotFoundError, match="does not download") as e:
        Llama.from_pretrained("ggml-org/models", "stories260K.gguf", verbose=False)
    assert isinstance(e.value, ValueError) and isinstance(e.value, FileNotFoundError)
    # huggingface_hub's layout: refs/main names the snapshot.
    repo = tmp_path / "hub" / "models--ggml-org--models"
    snap = repo / "snapshots" / "0123abcd"
    (snap / "tinyllamas").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    (snap / "tinyllamas" / "stories260K.gguf").symlink_to(stories_path)
    llm = Llama.from_pretrained("ggml-org/models", "*stories260K.gguf", n_threads=1, verbose=False)
    assert llm.model_path == str(snap / "tinyllamas" / "stories260K.gguf")
    assert _text(llm(PROMPT, max_tokens=4, temperature=0))
    with pytest.raises(synapse.ModelNotFoundError, match=r"no file matching '\*q8.gguf'"):
        Llama.from_pretrained("ggml-org/models", "*q8.gguf", verbose=False)


def test_errors_as_llama_cpp_python(stories_path, tmp_path):
    # llama-cpp-python raises ValueError for a missing model; ours is also a FileNotFoundError.
    with pytest.raises(ValueError, match="cannot open"):
        Llama(str(tmp_path / "missing.gguf"), verbose=False)
    with pytest.raises(synapse.Error):
        Llama(str(tmp_path / "missing.gguf"), verbose=False)
    # The arguments LangChain passes with their "as the file says" values are accepted; others refused.
    Llama(stories_path, n_parts=-1, f16_kv=True, rope_freq_base=0.0, rope_freq_scale=0.0, n_threads=1,
          verbose=False)
    Llama(stories_path, rope_freq_base=10000.0, rope_freq_scale=1.0, n_threads=1, verbose=False)
    for name, value in (("n_parts", 2), ("f16_kv", False), ("rope_freq_base", 5e5), ("rope_freq_scale", 0.5)):
        with pytest.raises(ValueError, match=f"{name}={value!r} is not supported"):
            Llama(stories_path, verbose=False, **{name: value})
    llm = Llama(stories_path, n_ctx=16, n_threads=1, verbose=False)
    with pytest.raises(ValueError):  # llama-cpp-python: "Requested tokens exceed context window"
        llm("word " * 40, max_tokens=4)
