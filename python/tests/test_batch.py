"""create_completions: one batch of sequences, each equal to its run alone, faster than a loop."""
import subprocess
import time

import pytest

from synapse import Llama

PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went", "One day, a bird",
           "Sam had a red ball", "In the park", "The sun was hot", "Mom said"]


def _strip(out):
    return out["choices"], out["usage"]


def _check_equal(alone, batch):
    assert len(batch) == len(alone)
    for a, b in zip(alone, batch):
        # Byte for byte: text, logprobs, finish_reason, usage.
        assert _strip(a) == _strip(b)
        assert b["object"] == "text_completion" and b["id"] != a["id"]


@pytest.mark.parametrize("kwargs", [dict(max_tokens=96, temperature=0),
                                    dict(max_tokens=96, temperature=0.8, seed=5, logprobs=2),
                                    dict(max_tokens=64, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0,
                                         repeat_penalty=1.3, stop=[".", "!"], seed=11)])
def test_batch_equals_alone(llm, kwargs):
    alone = [llm(p, **kwargs) for p in PROMPTS]
    _check_equal(alone, llm.create_completions(PROMPTS, **kwargs))


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory, synapse_bin):
    # Random weights at SmolLM2-135M's shapes (synapse synth): decode streams
    # 80 MB of Q4_0 weights per step, the memory-bound case batching is for.
    # (stories260K's 1 MB stays in cache, so a batch saves nothing there.)
    path = tmp_path_factory.mktemp("synth") / "smollm2-135m-q4_0.gguf"
    subprocess.run([synapse_bin, "synth", "--preset", "smollm2-135m", "--type", "Q4_0", "-o", str(path)],
                   check=True, capture_output=True)
    return str(path)


def test_batch_is_faster_than_the_loop(smollm2):
    llm = Llama(smollm2, n_ctx=128, verbose=False)
    kwargs = dict(max_tokens=12, temperature=0.7, seed=3)
    llm(PROMPTS[0], max_tokens=2)  # warm-up: pages of the weights, threads
    loop, together = [], []
    for _ in range(2):  # alternated, best of 2: the machine is shared
        t0 = time.perf_counter()
        alone = [llm(p, **kwargs) for p in PROMPTS]
        t1 = time.perf_counter()
        batch = llm.create_completions(PROMPTS, **kwargs)
        t2 = time.perf_counter()
        _check_equal(alone, batch)
        loop.append(t1 - t0)
        together.append(t2 - t1)
    print(f"\n8 prompts x 12 tokens, smollm2-135m Q4_0 (random weights), {llm.n_threads} threads: "
          f"loop {min(loop):.2f} s, batch {min(together):.2f} s, speed-up {min(loop) / min(together):.2f}x")
    assert min(together) < min(loop)


def test_batch_of_token_prompts_and_errors(llm):
    ids = llm.tokenize(b"Once upon a time")
    a, b = llm.create_completions([ids, "Once upon a time"], max_tokens=8, temperature=0)
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    assert llm.create_completions([]) == []
    with pytest.raises(ValueError):
        llm.create_completions(["x"], stream=True)
    with pytest.raises(ValueError):
        llm.create_completions(["x" * 2000], max_tokens=4)
