"""`synapse serve` stopped during traffic (issue 47 item 1): SIGTERM/SIGINT
ends every request in flight within --shutdown-timeout (streams with their
final chunk and [DONE]), answers what waits 503, closes the connections and
exits 0; a second signal exits at once (128 + the signal's number).

The real binary on loopback (tests/server/test_serve.py's Server). Registered
in CTest by the top CMakeLists.txt (serve.shutdown.*).
"""
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

import requests

from test_serve import SYNAPSE, Server

MODEL = "stories260K.gguf"
# Long replies: 16 slots of 4096 positions (-c is the pool they share) on one
# thread take many seconds to fill, so every stream is still generating when
# the signal comes.
ARGS = ("-np", "16", "-c", "65536", "-t", "1", "--metrics")


def body(i, chat):
    b = {"max_tokens": 4000, "ignore_eos": True, "seed": i, "stream": True}
    if chat:
        b["messages"] = [{"role": "user", "content": "Tell me a story %d" % i}]
    else:
        b["prompt"] = "Once upon a time %d" % i
    return b


class Stream:
    """One streamed request on its own thread: the events it got and when it ended."""

    def __init__(self, srv, i):
        self.chat = i % 2 == 1
        self.lines, self.ended, self.error = [], None, None
        self.first = threading.Event()
        path = "/v1/chat/completions" if self.chat else "/v1/completions"
        self.thread = threading.Thread(target=self.run, args=(srv, path, body(i, self.chat)), daemon=True)
        self.thread.start()

    def run(self, srv, path, b):
        try:
            with requests.post(srv.url(path), json=b, stream=True, timeout=60) as r:
                assert r.status_code == 200, r.text
                for line in r.iter_lines():
                    if not line:
                        continue
                    self.lines.append(line)
                    # A token's chunk (chat's first chunk is the role alone).
                    if len(self.lines) >= (2 if self.chat else 1):
                        self.first.set()
        except Exception as e:  # noqa: BLE001  (reported by the test)
            self.error = e
        self.ended = time.monotonic()
        self.first.set()


def start_streams(srv, n):
    streams = [Stream(srv, i) for i in range(n)]
    for st in streams:
        assert st.first.wait(60), "a stream got no token"
    for st in streams:
        assert st.error is None and st.ended is None, (st.error, st.lines[-1:])
    return streams


def test_sigterm_ends_every_stream_within_the_shutdown_timeout():
    s = Server(MODEL, *ARGS, "--shutdown-timeout", "1")
    streams = start_streams(s, 15)
    # A request not streamed takes the 16th slot; one more waits for a slot.
    got = {}

    def post(key, b):
        got[key] = s.post("/v1/completions", b)
    running = threading.Thread(target=post, args=("running", dict(body(99, False), stream=False)))
    running.start()
    deadline = time.time() + 30
    while requests.get(s.url("/metrics"), timeout=10).text.find("llamacpp:requests_processing 16") < 0:
        assert time.time() < deadline
        time.sleep(0.01)
    waiting = threading.Thread(target=post, args=("queued", {"prompt": "A", "max_tokens": 8}))
    waiting.start()
    # A stream waiting for a slot too: as llama-server, its status waits for
    # its first result, so the shutdown answers it 503 before any header.
    queued_stream = threading.Thread(target=lambda: got.update(queued_stream=s.post(
        "/v1/chat/completions", {"messages": [{"role": "user", "content": "A"}], "max_tokens": 8, "stream": True})))
    queued_stream.start()
    while requests.get(s.url("/metrics"), timeout=10).text.find("llamacpp:requests_deferred 2") < 0:
        assert time.time() < deadline
        time.sleep(0.01)
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=30) == 0, "".join(s.log)
    exited = time.monotonic() - t0
    for t in [running, waiting, queued_stream] + [st.thread for st in streams]:
        t.join(timeout=30)
    assert exited < 1 + 1.5, exited  # the shutdown timeout, then the replies written
    # Not streamed: its reply with what it had; the one waiting: 503 at once.
    r = got["running"].json()
    assert r["choices"][0]["finish_reason"] == "length" and 0 < r["usage"]["completion_tokens"] < 4000, r
    r = got["queued"]
    assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
    assert "shutting down" in r.json()["error"]["message"]
    r = got["queued_stream"]
    assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
    assert r.headers["Content-Type"].startswith("application/json"), r.headers
    err = r.json()["error"]
    assert err["type"] == "unavailable_error" and err["code"] == 503 and "shutting down" in err["message"], err
    for st in streams:
        assert st.error is None, st.error
        assert st.ended - t0 < 1 + 1.0, st.ended - t0
        assert st.lines[-1] == b"data: [DONE]", st.lines[-3:]
        last = json.loads(st.lines[-2][len(b"data: "):])
        assert last["choices"][0]["finish_reason"] == "length", last
        # Cut by the shutdown, not by max_tokens.
        assert len(st.lines) - 2 < 4000
    s.drain.join(timeout=10)
    assert any("SIGTERM, stopping" in line for line in s.log), s.log
    # The port is free again: a new server binds it at once.
    port = int(s.base.rsplit(":", 1)[1])
    again = Server(MODEL, "-c", "128", port=port)
    again.close()


def test_second_signal_exits_at_once():
    s = Server(MODEL, *ARGS, "--shutdown-timeout", "60")
    streams = start_streams(s, 4)
    s.proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert s.proc.poll() is None  # the streams may run for up to a minute
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGINT)
    assert s.proc.wait(timeout=10) == 128 + signal.SIGINT, "".join(s.log)
    assert time.monotonic() - t0 < 1.0
    for st in streams:
        st.thread.join(timeout=30)
        assert st.lines[-1:] != [b"data: [DONE]"]  # cut off, not finished
    s.drain.join(timeout=10)
    assert any("SIGINT again, exiting now" in line for line in s.log), s.log


def test_idle_server_exits_0_at_once():
    for sig in (signal.SIGTERM, signal.SIGINT):
        s = Server(MODEL, "-c", "128", "--shutdown-timeout", "30")
        # A keep-alive connection left open does not hold the server.
        with requests.Session() as keep:
            assert keep.get(s.url("/health"), timeout=10).status_code == 200
            t0 = time.monotonic()
            s.proc.send_signal(sig)
            assert s.proc.wait(timeout=10) == 0, "".join(s.log)
            # Not held by the keep-alive connection (5 s idle limit) nor the
            # 30 s shutdown timeout; 3 s leaves room for a loaded machine and
            # the sanitizers' leak check at exit (1.1 s seen under ASan at load 12).
            assert time.monotonic() - t0 < 3.0


def test_signal_while_loading_exits_at_once():
    # A model that never finishes loading: a named pipe no one writes (open()
    # blocks, as on a stalled network file system). As llama-server, whose
    # handlers are installed once the model is loaded, the signal ends the
    # process at once by its default action: killed by SIGTERM / SIGINT
    # (llama-server v0.5.0 on such a pipe: returncode -15 / -2 within 2 ms).
    with tempfile.TemporaryDirectory() as d:
        fifo = os.path.join(d, "model.gguf")
        os.mkfifo(fifo)
        for sig in (signal.SIGTERM, signal.SIGINT):
            proc = subprocess.Popen([SYNAPSE, "serve", "-m", fifo, "--port", "0"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            try:
                line = proc.stderr.readline()
                m = re.search(r"listening on (http://[^ ]+) \(loading", line)
                assert m, line
                r = requests.get(m.group(1) + "/health", timeout=10)
                assert r.status_code == 503 and r.json()["error"]["message"] == "Loading model", r.text
                t0 = time.monotonic()
                proc.send_signal(sig)
                assert proc.wait(timeout=10) == -sig, proc.stderr.read()
                assert time.monotonic() - t0 < 1.0
                assert "while loading the model, exiting" in proc.stderr.read()
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
