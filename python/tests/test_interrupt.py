"""KeyboardInterrupt from a signal timer stops a long generation promptly."""
import signal
import threading
import time

import pytest

from synapse import Llama


def test_keyboard_interrupt_stops_generation_quickly(stories_path):
    llm = Llama(stories_path, n_ctx=10240, verbose=False)
    # 10,000 tokens; EOS forbidden so the reply cannot end by itself.
    kwargs = dict(max_tokens=10000, temperature=0, logit_bias={llm.token_eos(): float("-inf")})
    fired = {}

    def on_alarm(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        delay = 0.5
        start = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, delay)
        with pytest.raises(KeyboardInterrupt):
            llm(" ".join(["Once upon a time"] * 4), **kwargs)
        fired["latency"] = time.monotonic() - (start + delay)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    print(f"\nKeyboardInterrupt {fired['latency'] * 1e3:.1f} ms after the signal")
    assert 0 <= fired["latency"] < 0.1
    # Usable afterwards, with the same greedy text as a fresh object.
    again = llm("Once upon a time", max_tokens=16, temperature=0)["choices"][0]["text"]
    fresh = Llama(stories_path, verbose=False)("Once upon a time", max_tokens=16, temperature=0)
    assert again == fresh["choices"][0]["text"]


def test_keyboard_interrupt_in_a_stream(stories_path):
    llm = Llama(stories_path, n_ctx=10240, verbose=False)
    stream = llm("Once upon a time", stream=True, max_tokens=10000, temperature=0,
                 logit_bias={llm.token_eos(): float("-inf")})
    timer = threading.Timer(0.3, lambda: signal.raise_signal(signal.SIGINT))
    n = 0
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        for _ in stream:
            n += 1
            time.sleep(0.001)
    assert time.monotonic() - t0 < 0.3 + 0.1
    assert 0 < n < 10000
    assert llm("Once upon a time", max_tokens=4, temperature=0)["usage"]["completion_tokens"] == 4
