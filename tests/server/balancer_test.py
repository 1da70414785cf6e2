"""Two `synapse serve` replicas behind Debian's nginx (issue 49, deploy/README.md).

The balancer's configuration is the one deploy/nginx/ ships (synapse.conf
and snippets/synapse-proxy.conf), with its `server` lines pointed at two
replicas on loopback and its `listen` port at a free one; nginx runs in the
foreground from a temporary prefix (its pid file, logs and temp folders
there), as the user running the test or, under root, as `nobody`.

Which replica answered: each replica is started with its own --alias, which
synapse puts in every reply's `model` field; each replica's /metrics counts
the requests it accepted, and the counts must match. Shown: requests without
X-Session-Id alternate over the replicas (nginx's round robin, which its
consistent hash falls back to on an empty key); the requests of one session
all go to one replica, sessions land on both, and a seeded reply is the same
through the balancer as from either replica directly; a replica taken down
is skipped, its sessions answered by the other.
"""
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import requests

from test_serve import Server, canon, sse

DEPLOY_NGINX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "nginx")
NGINX = os.environ.get("NGINX_BINARY") or shutil.which("nginx") or "/usr/sbin/nginx"
ALIASES = ("replica-a", "replica-b")
BODY = {"prompt": "Once upon a time", "max_tokens": 4, "seed": 42, "temperature": 0.8}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def balancer_conf(replica_ports, port):
    """deploy/nginx/synapse.conf with its replicas and port replaced; fails if its shape changed."""
    with open(os.path.join(DEPLOY_NGINX, "synapse.conf")) as f:
        conf = f.read()
    servers = re.findall(r"^ *server synapse-\d+:8080 [^;\n]*;$", conf, flags=re.M)
    assert len(servers) == 2, servers
    for line, rport in zip(servers, replica_ports):
        conf = conf.replace(line, re.sub(r"synapse-\d+:8080", "127.0.0.1:%d" % rport, line))
    assert conf.count("listen 8080;") == 1
    return conf.replace("listen 8080;", "listen 127.0.0.1:%d;" % port)


class Nginx:
    """nginx in the foreground (`daemon off`) with everything it writes in a temporary folder."""

    def __init__(self, replica_ports):
        assert os.access(NGINX, os.X_OK), "no nginx at %s (scripts/setup.sh installs Debian's)" % NGINX
        self.dir = d = tempfile.mkdtemp(prefix="synapse-nginx-")
        os.mkdir(os.path.join(d, "snippets"))
        shutil.copy(os.path.join(DEPLOY_NGINX, "synapse-proxy.conf"), os.path.join(d, "snippets"))
        temp_paths = "".join("    %s_temp_path %s/%s;\n" % (k, d, k)
                             for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write("daemon off;\nworker_processes 1;\npid %s/nginx.pid;\nerror_log %s/error.log notice;\n"
                    "events { worker_connections 256; }\n"
                    "http {\n    access_log %s/access.log;\n%s    include synapse.conf;\n}\n"
                    % (d, d, d, temp_paths))
        # The free port may be taken before nginx binds it: then another one.
        for attempt in range(3):
            self.port = free_port()
            with open(os.path.join(d, "synapse.conf"), "w") as f:
                f.write(balancer_conf(replica_ports, self.port))
            if self.start():
                return
            assert "Address already in use" in self.error_log(), "nginx did not start:\n" + self.error_log()
        raise AssertionError("nginx found no free port:\n" + self.error_log())

    def start(self):
        """Runs nginx; True once it answers /health, False if it exits."""
        d = self.dir
        # Unprivileged: under root, nginx runs as nobody, which then owns the folder.
        creds = {}
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            for root, dirs, files in os.walk(d):
                for name in [root] + [os.path.join(root, n) for n in files]:
                    os.chown(name, nobody.pw_uid, nobody.pw_gid)
            creds = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        self.proc = subprocess.Popen([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf"),
                                      "-e", os.path.join(d, "error.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **creds)
        with open("/proc/%d/status" % self.proc.pid) as f:
            uid = re.search(r"^Uid:\s+(\d+)", f.read(), flags=re.M).group(1)
        assert uid != "0", "nginx runs as root"
        self.base = "http://127.0.0.1:%d" % self.port
        deadline = time.time() + 20
        while self.proc.poll() is None:
            assert time.time() < deadline, "nginx did not answer:\n" + self.error_log()
            try:
                if requests.get(self.base + "/health", timeout=2).status_code == 200:
                    return True
            except requests.RequestException:  # not listening yet, or someone else is
                pass
            time.sleep(0.05)
        return False

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()
        except OSError as e:
            return str(e)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: finish what is in flight
            self.proc.wait(timeout=20)
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    def __init__(self):
        self.replicas = []
        self.nginx = None
        try:
            for alias in ALIASES:
                self.replicas.append(Server("stories260K.gguf", "--alias", alias, "-np", "2", "-t", "1",
                                            "-c", "256", "--metrics"))
            self.nginx = Nginx([int(r.base.rsplit(":", 1)[1]) for r in self.replicas])
        except BaseException:
            self.close()
            raise

    def ask(self, session=None, body=BODY):
        """Posts /v1/completions through the balancer; returns (replica alias, reply)."""
        headers = {"X-Session-Id": session} if session is not None else {}
        r = requests.post(self.nginx.base + "/v1/completions", json=body, headers=headers, timeout=60)
        assert r.status_code == 200, (r.status_code, r.text, self.nginx.error_log())
        reply = r.json()
        assert reply["model"] in ALIASES, reply
        return reply["model"], reply

    def close(self):
        if self.nginx:
            self.nginx.close()
        for r in self.replicas:
            r.__exit__()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def requests_total(replica):
    """synapse:requests_total from a replica's /metrics, as Prometheus scrapes it."""
    text = requests.get(replica.url("/metrics"), timeout=10).text
    m = re.search(r"^synapse:requests_total (\S+)$", text, flags=re.M)
    assert m, text
    return int(float(m.group(1)))


def test_requests_without_a_session_spread():
    with Cluster() as c:
        before = [requests_total(r) for r in c.replicas]
        answered = [c.ask()[0] for _ in range(8)]
        # Round robin: the replicas take turns.
        assert sorted(answered[:2]) == list(ALIASES), answered
        assert all(answered[i] != answered[i + 1] for i in range(7)), answered
        # Each replica's own count says the same.
        after = [requests_total(r) for r in c.replicas]
        assert [a - b for a, b in zip(after, before)] == [answered.count(a) for a in ALIASES] == [4, 4]


def test_a_session_sticks_to_one_replica():
    with Cluster() as c:
        home = {}
        for rnd in range(3):
            # 21 sessions: odd, so that round robin would not give a session the
            # same replica again; many, as the ring's points come from the
            # replicas' ports, which change from run to run: all 21 sessions on
            # one replica is a chance of about 1 in a million (1 in 45,000 if
            # the ring split 60:40).
            for i in range(21):
                session = "conversation-%d" % i
                alias, _ = c.ask(session)
                assert home.setdefault(session, alias) == alias, (session, rnd, home[session], alias)
        # Sessions land on both replicas.
        assert set(home.values()) == set(ALIASES), home

        # A seeded reply is the same bytes through the balancer as from either
        # replica directly, streamed through it too.
        def text(reply):
            return canon([reply["choices"][0]["text"], reply["choices"][0]["finish_reason"]])
        body = dict(BODY, max_tokens=24)
        via = text(c.ask("conversation-0", body)[1])
        for r in c.replicas:
            assert text(r.post("/v1/completions", body).json()) == via
        events = sse(requests.post(c.nginx.base + "/v1/completions", json=dict(body, stream=True),
                                   headers={"X-Session-Id": "conversation-0"}, stream=True, timeout=60))
        assert events[-1] == "[DONE]" and len(events) > 3
        streamed = "".join(e["choices"][0]["text"] for e in events[:-1] if e["choices"])
        assert streamed == c.ask("conversation-0", body)[1]["choices"][0]["text"]
        assert {e["model"] for e in events[:-1]} == {home["conversation-0"]}


def test_a_replica_taken_down_is_skipped():
    with Cluster() as c:
        sessions = {}  # a session of each replica
        for i in range(40):
            sessions.setdefault(c.ask("conversation-%d" % i)[0], "conversation-%d" % i)
            if len(sessions) == 2:
                break
        assert set(sessions) == set(ALIASES), sessions
        c.replicas[1].close()  # replica-b stops (SIGTERM); nginx is not told
        # replica-b's session and sessionless requests are answered by replica-a.
        for _ in range(3):
            assert c.ask(sessions["replica-b"])[0] == "replica-a"
            assert c.ask(sessions["replica-a"])[0] == "replica-a"
            assert c.ask()[0] == "replica-a"
