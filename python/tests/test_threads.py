"""One Llama shared by two threads: calls are serialised by its lock, never a
hang, an abort or a mixed-up reply; a stream interleaved with another call is
cancelled with a clear error."""
import threading

import pytest

import synapse
from synapse import Llama


def test_two_threads_100_times(stories_path):
    llm = Llama(stories_path, n_threads=1, verbose=False)
    prompts = ["Once upon a time", "The dog"]
    want = [llm(p, max_tokens=3, temperature=0)["choices"][0]["text"] for p in prompts]
    chat = [{"role": "user", "content": "Hi"}]
    want_chat = llm.create_chat_completion(chat, max_tokens=2, temperature=0)["choices"][0]["message"]["content"]
    for run in range(100):
        got, errors = [None, None], []
        barrier = threading.Barrier(2)

        def work(i):
            try:
                barrier.wait(timeout=10)
                if i == 0:
                    got[0] = llm(prompts[run % 2], max_tokens=3, temperature=0)["choices"][0]["text"]
                else:
                    got[1] = llm.create_chat_completion(chat, max_tokens=2, temperature=0)["choices"][0]["message"]
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads), f"run {run}: a call hung"
        assert not errors, f"run {run}: {errors!r}"
        assert got[0] == want[run % 2] and got[1]["content"] == want_chat, f"run {run}"


def test_stream_cancelled_by_another_thread(stories_path):
    llm = Llama(stories_path, n_threads=1, verbose=False)
    stream = llm("Once upon a time", max_tokens=64, temperature=0, stream=True)
    next(stream)
    other = threading.Thread(target=lambda: llm("The dog", max_tokens=2, temperature=0))
    other.start()
    other.join(timeout=30)
    assert not other.is_alive()
    with pytest.raises(synapse.InvalidArgumentError, match="cancelled by another call"):
        for _ in stream:
            pass
    assert llm("The dog", max_tokens=2, temperature=0)["choices"][0]["text"]  # still usable
