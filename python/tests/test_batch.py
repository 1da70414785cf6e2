"""create_completions: one batch of sequences, each equal to its run alone, faster than a loop."""
import time

PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went", "One day, a bird",
           "Sam had a red ball", "In the park", "The sun was hot", "Mom said"]


def _strip(out):
    return out["choices"], out["usage"]


def test_batch_equals_alone_and_is_faster(llm):
    for kwargs in (dict(max_tokens=96, temperature=0), dict(max_tokens=96, temperature=0.8, seed=5, logprobs=2)):
        llm.create_completions(PROMPTS[:2], max_tokens=4)  # warm-up (threads, pages)
        t0 = time.perf_counter()
        alone = [llm(p, **kwargs) for p in PROMPTS]
        t1 = time.perf_counter()
        batch = llm.create_completions(PROMPTS, **kwargs)
        t2 = time.perf_counter()
        assert len(batch) == len(PROMPTS)
        for a, b in zip(alone, batch):
            # Byte for byte: text, tokens' logprobs, finish_reason, usage.
            assert _strip(a) == _strip(b)
            assert b["object"] == "text_completion"
        loop, together = t1 - t0, t2 - t1
        print(f"\n8 prompts x {kwargs}: loop {loop * 1e3:.1f} ms, batch {together * 1e3:.1f} ms, "
              f"speed-up {loop / together:.2f}x")
        assert together < loop


def test_batch_of_token_prompts_and_errors(llm):
    ids = llm.tokenize(b"Once upon a time")
    a, b = llm.create_completions([ids, "Once upon a time"], max_tokens=8, temperature=0)
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    assert llm.create_completions([]) == []
    import pytest
    with pytest.raises(ValueError):
        llm.create_completions(["x"], stream=True)
