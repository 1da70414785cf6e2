#!/usr/bin/env python3
"""Checks the Dockerfile where no container runtime is (deploy/README.md).

Each stage runs in a Debian 12 chroot made by debootstrap (minbase, as
debian:bookworm-slim is): its RUN lines with /bin/sh -c, `COPY . .` from the
context .dockerignore lets in, `COPY --from=build`, WORKDIR, ARG and USER as
Docker reads them. Then the image's ENTRYPOINT runs as its USER in a network
namespace of its own, with models/ mounted read-only at /models, and the
HEALTHCHECK command must fail before it starts, pass once it serves (with a
completion and /metrics answered) and fail after it stops. An instruction this
script does not know stops it, so that a changed Dockerfile is not checked
half.

Needs root, debootstrap, unshare and network access to deb.debian.org; not
part of CI. Usage: scripts/dockerfile_chroot.py [--work DIR] [--model FILE]
(DIR keeps the chroots: 1.5 GB; the build takes as long as scripts/build.sh).
"""
import argparse
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def instructions(path):
    """The Dockerfile's stages: [(name, [(INSTRUCTION, argument)])], continuation lines joined."""
    text = open(path).read().replace("\\\n", " ")
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        op, _, arg = line.partition(" ")
        if op == "FROM":
            m = re.fullmatch(r"debian:bookworm-slim(?: AS (\w+))?", arg)
            if not m:
                sys.exit("dockerfile_chroot: only FROM debian:bookworm-slim is emulated, not " + arg)
            stages.append((m.group(1), []))
        else:
            stages[-1][1].append((op, arg.strip()))
    return stages


def context_files():
    """The files of the build context: the tree git sees, less what .dockerignore leaves out."""
    pats = [l.strip() for l in open(os.path.join(REPO, ".dockerignore")) if l.strip() and not l.startswith("#")]
    files = subprocess.run(["git", "-C", REPO, "ls-files", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True, text=True).stdout.split()

    def included(path):
        keep, parts = True, path.split("/")
        for p in pats:  # the last pattern that matches the path or a folder of it decides
            neg = p.startswith("!")
            if any(fnmatch.fnmatchcase("/".join(parts[:i]), p.lstrip("!")) for i in range(1, len(parts) + 1)):
                keep = neg
        return keep
    return [f for f in files if included(f) and os.path.isfile(os.path.join(REPO, f))]


def sh(root, cmd, env, user=None, **kw):
    prefix = ["chroot"] + (["--userspec=%s" % user] if user else []) + [root, "/usr/bin/env", "-i"]
    return subprocess.run(prefix + ["%s=%s" % kv for kv in env.items()] + ["/bin/sh", "-c", cmd], **kw)


def run_stage(root, ops, roots, build_args):
    """Runs a stage's instructions in the chroot `root`; returns its image settings."""
    # Docker's defaults: PATH, HOME for root.
    image = {"workdir": "/", "env": {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                     "HOME": "/root"}}
    for op, arg in ops:
        if op == "WORKDIR":
            image["workdir"] = arg
            os.makedirs(root + arg, exist_ok=True)
        elif op == "ARG":
            name, _, default = arg.partition("=")
            image["env"][name] = build_args.get(name, default)
        elif op == "RUN":
            print("RUN", arg, flush=True)
            sh(root, "cd %s && %s" % (shlex.quote(image["workdir"]), arg), image["env"], check=True)
        elif op == "COPY" and arg == ". .":
            files = context_files()
            for f in files:
                dst = os.path.join(root + image["workdir"], f)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy(os.path.join(REPO, f), dst)
            print("COPY . . (%d files of the context)" % len(files), flush=True)
        elif op == "COPY" and arg.startswith("--from="):
            stage, src, dst = re.fullmatch(r"--from=(\w+) (\S+) (\S+)", arg).groups()
            shutil.copy2(roots[stage] + src, root + dst)
            print("COPY", arg, flush=True)
        elif op in ("USER", "EXPOSE", "ENTRYPOINT", "CMD", "HEALTHCHECK"):
            image[op] = arg
        else:
            sys.exit("dockerfile_chroot: %s is not emulated" % op)
    return image


def check_image(root, image, model):
    """The ENTRYPOINT as USER with models mounted read-only, the HEALTHCHECK around it."""
    entry = json.loads(image["ENTRYPOINT"])
    health = json.loads(re.search(r"CMD (\[.*\])$", image["HEALTHCHECK"]).group(1))
    assert health[:2] == ["bash", "-c"], health
    user = image["USER"]
    models = os.path.dirname(os.path.abspath(model))
    script = r"""
set -u
ip link set lo up
hc() { chroot --userspec=%(user)s %(root)s /usr/bin/env -i PATH=/usr/bin:/bin bash -c %(hc)s 2>/dev/null; }
hc && { echo "healthcheck passes before the server runs"; exit 1; }
chroot --userspec=%(user)s %(root)s /usr/bin/env -i %(entry)s -m /models/%(model)s --alias chroot --metrics -t 1 &
pid=$!
for i in $(seq 300); do hc && break; sleep 0.2; done
hc || { echo "healthcheck fails while serving"; kill $pid; exit 1; }
[ "$(stat -c %%u /proc/$pid)" = "${USER_ID}" ] || { echo "not running as ${USER_ID}"; kill $pid; exit 1; }
chroot --userspec=%(user)s %(root)s /usr/bin/env -i PATH=/usr/bin:/bin sh -c 'touch /models/x' 2>/dev/null \
  && { echo "/models is writable"; exit 1; }
python3 - <<'PY' || { kill $pid; exit 1; }
import json, urllib.request
body = json.dumps({"prompt": "Once upon a time", "max_tokens": 8, "seed": 1}).encode()
r = json.loads(urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8080/v1/completions", data=body,
                                                              headers={"Content-Type": "application/json"})).read())
assert r["model"] == "chroot" and r["usage"]["completion_tokens"] > 0, r
m = urllib.request.urlopen("http://127.0.0.1:8080/metrics").read().decode()
assert "synapse:requests_total 1" in m, m
print("serving: a completion and /metrics answered; /props build_info",
      json.loads(urllib.request.urlopen("http://127.0.0.1:8080/props").read())["build_info"])
PY
kill $pid && wait $pid || { echo "the server did not stop cleanly"; exit 1; }
hc && { echo "healthcheck passes after the server stopped"; exit 1; }
echo "healthcheck: fails before, passes while serving, fails after; runs as ${USER_ID}, /models read-only"
""" % {"user": user, "root": root, "hc": shlex.quote(health[2]), "entry": " ".join(map(shlex.quote, entry)),
       "model": shlex.quote(os.path.basename(model))}
    subprocess.run(["mount", "--bind", models, root + "/models"], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", root + "/models"], check=True)
    try:
        env = dict(os.environ, USER_ID=user.split(":")[0])
        return subprocess.run(["unshare", "-n", "bash", "-c", script], env=env).returncode
    finally:
        subprocess.run(["umount", root + "/models"], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", help="folder for the chroots (default: a new temporary one)")
    ap.add_argument("--model", default=os.path.join(REPO, "models", "stories260K.gguf"))
    a = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        sys.exit("dockerfile_chroot: needs root and debootstrap (apt-get install debootstrap)")
    work = a.work or tempfile.mkdtemp(prefix="synapse-dockerfile-")
    base = os.path.join(work, "base")
    if not os.path.exists(os.path.join(base, "etc", "debian_version")):
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", base, "http://deb.debian.org/debian"],
                       check=True, stdout=subprocess.DEVNULL)
    shutil.copy("/etc/resolv.conf", os.path.join(base, "etc", "resolv.conf"))
    commit = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    stages = instructions(os.path.join(REPO, "Dockerfile"))
    roots, mounted = {}, []
    try:
        for i, (name, ops) in enumerate(stages):
            root = os.path.join(work, "stage%d" % i)
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run(["cp", "-a", base, root], check=True)
            subprocess.run(["mount", "-t", "proc", "proc", root + "/proc"], check=True)
            mounted.append(root + "/proc")
            print("== stage %d%s" % (i, " (%s)" % name if name else ""), flush=True)
            image = run_stage(root, ops, roots, {"SYNAPSE_GIT_COMMIT": commit})
            roots[name] = root
        os.makedirs(root + "/models", exist_ok=True)
        rc = check_image(root, image, a.model)  # the last stage is the image
    finally:
        for m in mounted:
            subprocess.run(["umount", m], check=True)
    print("chroots in", work)
    sys.exit(rc)


if __name__ == "__main__":
    main()
