#!/usr/bin/python3
"""JSONSchemaBench against synapse serve and llama-server (issue 42).

The corpus is guidance-ai/jsonschemabench's data/<folder>/*.json: real JSON
Schemas in 10 folders. For each engine, one at a time:

  compile pass     POST /completion {"prompt", "n_predict": 1, "json_schema"}
                   per schema: 200 = compiled; any other status, a timeout or a
                   crash = not compiled (the message is kept).
  generation pass  K schemas per folder that every engine compiled (a fixed
                   seed): POST /v1/chat/completions asking for a document that
                   matches the schema (its text in the prompt), constrained by
                   response_format (synapse) or json_schema (llama-server),
                   temperature 0, seed 1. finish_reason "stop" -> json.loads and
                   jsonschema validation (the draft the schema declares, else
                   2020-12); "length" -> "cut", not validated.

Prints a markdown table per engine and folder and writes every per-schema
result to --json. Run with Debian's /usr/bin/python3 (python3-requests,
python3-jsonschema).

  /usr/bin/python3 bench/jsonschemabench.py --synapse build/bin/synapse \\
      --llama-server /work/ref/llama-build/bin/llama-server \\
      --model tests/data/models/stories260K.gguf --data /tmp/jsb/data \\
      --gen-per-folder 10 --json /tmp/jsb.json
"""

import argparse
import collections
import datetime
import json
import os
import random
import shlex
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import jsonschema
import requests

ENGINES = ("synapse", "llama-server")


# --- corpus -------------------------------------------------------------------

def load_corpus(data_dir, per_folder, seed):
    """Returns {folder: [relative path, ...]} (sorted; a seeded sample of
    per_folder when per_folder > 0)."""
    corpus = {}
    for folder in sorted(os.listdir(data_dir)):
        d = os.path.join(data_dir, folder)
        if not os.path.isdir(d):
            continue
        files = sorted(f for f in os.listdir(d) if f.endswith(".json"))
        if per_folder > 0 and len(files) > per_folder:
            files = sorted(random.Random(f"{seed}:{folder}").sample(files, per_folder))
        corpus[folder] = [f"{folder}/{f}" for f in files]
    return corpus


def read_schema(data_dir, rel):
    with open(os.path.join(data_dir, rel), "rb") as f:
        raw = f.read()
    return json.loads(raw), raw.decode("utf-8", "replace")


# JSON Schema's keywords, every draft from 4 to 2020-12 (core, applicator,
# validation, meta-data, format, content); anything else in a schema is an
# extension, an annotation of its own or a typo, which validators ignore.
VOCABULARY = frozenset("""
    $schema $id id $ref $defs definitions $anchor $dynamicRef $dynamicAnchor $recursiveRef $recursiveAnchor
    $vocabulary $comment allOf anyOf oneOf not if then else dependentSchemas dependencies prefixItems items
    additionalItems contains properties patternProperties additionalProperties propertyNames unevaluatedItems
    unevaluatedProperties type enum const multipleOf maximum exclusiveMaximum minimum exclusiveMinimum maxLength
    minLength pattern maxItems minItems uniqueItems maxContains minContains maxProperties minProperties required
    dependentRequired title description default deprecated readOnly writeOnly examples format contentEncoding
    contentMediaType contentSchema""".split())
_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas")
_SCHEMA_ONE = ("additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
               "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")


def strip_unknown_keywords(schema):
    """The schema without keywords outside VOCABULARY, walking only schema
    positions (a property named "self" stays). For --ignore-unknown-keywords:
    what a converter that ignores them, as validators do, would be given."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for k, v in schema.items():
        if k not in VOCABULARY:
            continue
        if k in _SCHEMA_MAPS and isinstance(v, dict):
            v = {name: strip_unknown_keywords(sub) for name, sub in v.items()}
        elif k in _SCHEMA_ONE:
            v = strip_unknown_keywords(v)
        elif k in _SCHEMA_LISTS and isinstance(v, list):
            v = [strip_unknown_keywords(sub) for sub in v]
        elif k == "items":
            v = [strip_unknown_keywords(sub) for sub in v] if isinstance(v, list) else strip_unknown_keywords(v)
        elif k == "dependencies" and isinstance(v, dict):
            v = {name: strip_unknown_keywords(sub) for name, sub in v.items()}
        out[k] = v
    return out


# --- servers ------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One engine's server process, started under nice, its stderr kept in a
    log file. start() returns once /health answers 200."""

    def __init__(self, engine, binary, model, nice, log_dir, extra_args=(), startup_timeout=300):
        self.engine, self.binary, self.model, self.nice = engine, binary, model, nice
        self.extra_args = list(extra_args)
        self.log_path = os.path.join(log_dir, f"{engine}.log")
        self.startup_timeout = startup_timeout
        self.proc = None
        self.url = None
        self.starts = 0

    def start(self):
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n=== start {self.starts} {datetime.datetime.now().isoformat()}\n".encode())
        log.flush()
        prefix = ["nice", "-n", str(self.nice)] if self.nice else []
        if self.engine == "synapse":
            cmd = [self.binary, "serve", "-m", self.model, "--port", "0", "-np", "2", "-c", "4096"]
        else:
            port = free_port()
            cmd = [self.binary, "-m", self.model, "--port", str(port), "-np", "2", "-c", "8192"]
            self.url = f"http://127.0.0.1:{port}"
        cmd += self.extra_args
        self.cmd = cmd
        self.proc = subprocess.Popen(prefix + cmd, stdout=log, stderr=subprocess.PIPE,
                                     start_new_session=True)
        first = threading.Event()
        holder = {}

        def drain():
            for i, line in enumerate(iter(self.proc.stderr.readline, b"")):
                if i == 0:
                    holder["line"] = line.decode("utf-8", "replace")
                    first.set()
                log.write(line)
                log.flush()
            first.set()
            log.close()

        threading.Thread(target=drain, daemon=True).start()
        if self.engine == "synapse":
            if not first.wait(self.startup_timeout):
                raise RuntimeError("synapse printed nothing on stderr")
            m = re.search(r"listening on (http://[^\s:]+:\d+)", holder.get("line", ""))
            if not m:
                raise RuntimeError(f"synapse's first stderr line is not 'listening on': {holder.get('line')!r}")
            self.url = m.group(1)
        deadline = time.time() + self.startup_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.engine} exited with {self.proc.returncode} while starting; see {self.log_path}")
            try:
                if requests.get(self.url + "/health", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.engine} did not become healthy in {self.startup_timeout} s")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def peak_rss_kib(self):
        """VmHWM of the server (the child of nice, which execs it: same pid)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            return None

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def log_tail(self, n=5):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""


def error_message(r):
    try:
        j = r.json()
    except ValueError:
        return r.text[:2000]
    if isinstance(j, dict) and isinstance(j.get("error"), dict):
        return str(j["error"].get("message", j["error"]))[:2000]
    if isinstance(j, dict) and "error" in j:
        return str(j["error"])[:2000]
    return json.dumps(j)[:2000]


def post(server, path, body, timeout):
    """POSTs body; returns (record, response or None). A timeout or a dead
    server restarts it, so that one stuck request costs one schema, not the
    run."""
    t0 = time.time()
    try:
        r = requests.post(server.url + path, data=json.dumps(body), timeout=timeout,
                          headers={"Content-Type": "application/json"})
    except requests.Timeout:
        rec = {"status": "timeout", "error": f"no answer in {timeout} s", "seconds": round(time.time() - t0, 3)}
        server.stop()
        server.start()
        return rec, None
    except requests.ConnectionError as e:
        time.sleep(0.5)
        rec = {"status": "crash" if not server.alive() else "connection_error",
               "error": f"{type(e).__name__}: {e}"[:500], "seconds": round(time.time() - t0, 3)}
        if not server.alive():
            rec["exit_code"] = server.proc.returncode if server.proc else None
            rec["log_tail"] = server.log_tail()
        server.stop()
        server.start()
        return rec, None
    rec = {"http": r.status_code, "seconds": round(time.time() - t0, 3)}
    return rec, r


# --- validation ---------------------------------------------------------------

class DuplicateKey(Exception):
    pass


def no_duplicate_keys(pairs):
    """json.loads keeps the last of repeated names; a schema sees one value
    where the reply had two, so a repeated name is counted as invalid."""
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise DuplicateKey(f"duplicate key {k!r} in an object")
        seen[k] = v
    return seen


def _refuse_remote(uri):
    raise jsonschema.RefResolutionError(f"remote $ref not fetched: {uri}")


def validate(schema, doc):
    """Returns (verdict, detail, with_formats): verdict "valid", "invalid" or
    "validator_error"; with_formats the verdict when the formats that
    jsonschema can check are asserted too."""
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    except Exception as e:  # noqa: BLE001 - a schema the validator cannot read is reported, not fatal
        return "validator_error", f"{type(e).__name__}: {e}"[:500], None
    handlers = {s: _refuse_remote for s in ("http", "https", "ftp", "file")}
    out = []
    for fc in (None, cls.FORMAT_CHECKER):
        try:
            resolver = (jsonschema.RefResolver.from_schema(schema, id_of=cls.ID_OF, handlers=handlers)
                        if isinstance(schema, dict) else None)
            v = cls(schema, resolver=resolver, format_checker=fc) if resolver else cls(schema, format_checker=fc)
            err = jsonschema.exceptions.best_match(v.iter_errors(doc))
            if err is None:
                out.append(("valid", ""))
            else:
                path = "/".join(str(p) for p in err.absolute_path)
                out.append(("invalid", f"at /{path}: {err.message}"[:500]))
        except RecursionError:
            out.append(("validator_error", "RecursionError"))
        except Exception as e:  # noqa: BLE001
            out.append(("validator_error", f"{type(e).__name__}: {e}"[:500]))
    return out[0][0], out[0][1], out[1][0]


# --- passes -------------------------------------------------------------------

COMPILE_PROMPT = "Write a JSON document:\n"


def compile_pass(server, data_dir, corpus, timeout, progress, strip=False):
    results = {}
    n_total = sum(len(v) for v in corpus.values())
    i = 0
    for folder, files in corpus.items():
        for rel in files:
            i += 1
            try:
                schema, _ = read_schema(data_dir, rel)
            except (OSError, ValueError) as e:
                results[rel] = {"status": "unreadable", "compiled": False, "error": f"schema file: {e}"[:500]}
                continue
            if strip:
                schema = strip_unknown_keywords(schema)
            body = {"prompt": COMPILE_PROMPT, "n_predict": 1, "temperature": 0, "json_schema": schema}
            rec, r = post(server, "/completion", body, timeout)
            if r is not None:
                rec["status"] = "compiled" if r.status_code == 200 else "refused"
                if r.status_code != 200:
                    rec["error"] = error_message(r)
            rec["compiled"] = rec["status"] == "compiled"
            results[rel] = rec
            if progress and (i % 200 == 0 or i == n_total):
                ok = sum(1 for v in results.values() if v["compiled"])
                print(f"  [{server.engine}] compile {i}/{n_total}: {ok} compiled", file=sys.stderr, flush=True)
    return results


def gen_sample(corpus, compiled_by, k, seed):
    """K schemas per folder compiled by every engine in compiled_by: the
    folder's files in a seeded order, the first K that qualify."""
    sample = {}
    for folder, files in corpus.items():
        order = sorted(files)
        random.Random(f"{seed}:gen:{folder}").shuffle(order)
        picked = [rel for rel in order if all(c.get(rel, {}).get("compiled") for c in compiled_by)]
        sample[folder] = picked[:k]
    return sample


def gen_prompt(schema_text, max_chars):
    text = schema_text.strip()
    if len(text) > max_chars:
        text = text[:max_chars] + "\n... (schema truncated)"
    return ("Write a JSON document that matches the following JSON Schema. "
            "Reply with the JSON document only.\n\n" + text)


def generation_pass(server, data_dir, sample, args, progress):
    results = {}
    n_total = sum(len(v) for v in sample.values())
    i = 0
    for folder, files in sample.items():
        for rel in files:
            i += 1
            schema, text = read_schema(data_dir, rel)
            body = {
                "messages": [{"role": "user", "content": gen_prompt(text, args.prompt_schema_chars)}],
                "temperature": 0,
                "seed": 1,
                "max_tokens": args.max_tokens,
            }
            if server.engine == "synapse":
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": "schema", "schema": schema}}
            else:
                body["json_schema"] = schema
            rec, r = post(server, "/v1/chat/completions", body, args.gen_timeout)
            if r is not None:
                if r.status_code != 200:
                    rec["status"] = "error"
                    rec["error"] = error_message(r)
                else:
                    j = r.json()
                    choice = j["choices"][0]
                    content = choice["message"].get("content") or ""
                    rec["finish_reason"] = choice.get("finish_reason")
                    rec["completion_tokens"] = j.get("usage", {}).get("completion_tokens")
                    rec["output"] = content
                    if rec["finish_reason"] == "length":
                        rec["status"] = "cut"
                    elif rec["finish_reason"] != "stop":
                        rec["status"] = "error"
                        rec["error"] = f"finish_reason {rec['finish_reason']!r}"
                    else:
                        try:
                            doc = json.loads(content, object_pairs_hook=no_duplicate_keys)
                        except DuplicateKey as e:
                            rec["status"] = "invalid"
                            rec["error"] = str(e)[:500]
                        except ValueError as e:
                            rec["status"] = "not_json"
                            rec["error"] = str(e)[:500]
                        else:
                            verdict, detail, with_formats = validate(schema, doc)
                            rec["status"] = verdict
                            rec["valid_with_formats"] = with_formats == "valid"
                            if detail:
                                rec["error"] = detail
            results[rel] = rec
            if progress:
                print(f"  [{server.engine}] generate {i}/{n_total} {rel}: {rec['status']}"
                      f" ({rec.get('completion_tokens')} tokens, {rec['seconds']} s)", file=sys.stderr, flush=True)
    return results


# --- report -------------------------------------------------------------------

def pct(a, b):
    return f"{100.0 * a / b:.1f}" if b else "-"


def folder_rows(corpus, res):
    comp = res.get("compile", {})
    gen = res.get("generate", {})
    rows = []
    tot = collections.Counter()
    for folder, files in corpus.items():
        c = collections.Counter()
        for rel in files:
            if rel in comp:
                c["schemas"] += 1
                c["compiled"] += comp[rel]["compiled"]
                c["timeout_crash"] += comp[rel]["status"] in ("timeout", "crash", "connection_error")
            if rel in gen:
                g = gen[rel]
                c["generated"] += 1
                c["completed"] += g["status"] in ("valid", "invalid", "not_json", "validator_error")
                c["valid"] += g["status"] == "valid"
                c["valid_fmt"] += bool(g.get("valid_with_formats"))
                c["cut"] += g["status"] == "cut"
                c["gen_error"] += g["status"] in ("error", "timeout", "crash", "connection_error")
                c["validator_error"] += g["status"] == "validator_error"
        rows.append((folder, c))
        tot.update(c)
    rows.append(("**total**", tot))
    return rows


def markdown_table(engine, corpus, res):
    lines = [f"### {engine}", "",
             "| folder | schemas | compiled % | timeout/crash | generated | completed (stop) | valid among completed % "
             "| valid incl. formats % | cut | errors |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for folder, c in folder_rows(corpus, res):
        lines.append(f"| {folder} | {c['schemas']} | {pct(c['compiled'], c['schemas'])} | {c['timeout_crash']} "
                     f"| {c['generated']} | {c['completed']} | {pct(c['valid'], c['completed'])} "
                     f"| {pct(c['valid_fmt'], c['completed'])} | {c['cut']} | {c['gen_error'] + c['validator_error']} |")
    return "\n".join(lines)


def normalize_error(msg):
    """Groups refusal messages: JSON pointers, long quoted values, numbers and
    URLs elided; keyword names kept."""
    m = " ".join(l.strip() for l in msg.strip().splitlines()) or "(empty)"
    m = re.sub(r",? got .*$", ", got …", m)
    m = re.sub(r"#/\S*", "#/…", m)
    m = re.sub(r" at (/\S*|the root)", " at …", m)
    m = re.sub(r'"[^"\s]{40,}"', '"…"', m)
    m = re.sub(r"'[^'\s]{40,}'", "'…'", m)
    m = re.sub(r"\b\d+\b", "N", m)
    m = re.sub(r"(https?://)\S+", r"\1…", m)
    return m[:240]


def refusal_reasons(res, top):
    c = collections.Counter()
    for rec in res.get("compile", {}).values():
        if not rec["compiled"]:
            c[f"[{rec['status']}] " + normalize_error(rec.get("error", ""))] += 1
    return c.most_common(top)


def keyword_groups(res):
    """Refusals that name a keyword (synapse's 'keyword "X"' messages), split
    into JSON Schema's own keywords and the rest (extensions, annotations,
    typos: keywords a validator ignores). Returns (counter by group, counter
    of the other keywords)."""
    groups, others = collections.Counter(), collections.Counter()
    for rec in res.get("compile", {}).values():
        if rec["compiled"]:
            continue
        m = re.search(r'keyword "([^"]*)"', rec.get("error", ""))
        if not m:
            groups["no keyword named (grammar, limits, $ref, crash, ...)"] += 1
        elif m.group(1) in VOCABULARY:
            kind = "not implemented" if "unsupported keyword" in rec["error"] else "refused with these values or siblings"
            groups[f"JSON Schema keyword, {kind}: {m.group(1)}"] += 1
        else:
            groups["not a JSON Schema keyword (extension, annotation, typo)"] += 1
            others[m.group(1)] += 1
    return groups, others


def report(corpus, results, top):
    out = []
    for engine, res in results.items():
        out.append(markdown_table(engine, corpus, res))
        out.append("")
    for engine, res in results.items():
        reasons = refusal_reasons(res, top)
        if reasons:
            out += [f"#### {engine}: why schemas were not compiled (top {top})", "", "| count | message |",
                    "| ---: | --- |"]
            out += [f"| {n} | `{m.replace('|', '/')}` |" for m, n in reasons]
            out.append("")
    for engine, res in results.items():
        groups, others = keyword_groups(res)
        if sum(groups.values()) and any(k.startswith(("JSON", "not a")) for k in groups):
            out += [f"#### {engine}: refusals by the keyword they name (the first one met in each schema)", "",
                    "| count | keyword |", "| ---: | --- |"]
            out += [f"| {n} | {k} |" for k, n in groups.most_common()]
            out += ["", "Keywords outside JSON Schema's vocabulary, most refused first: "
                    + ", ".join(f"`{k}` {n}" for k, n in others.most_common(top)), ""]
    if "synapse" in results and "llama-server" in results:
        sc, lc = results["synapse"].get("compile", {}), results["llama-server"].get("compile", {})
        gap = sorted(rel for rel in lc if lc[rel]["compiled"] and rel in sc and not sc[rel]["compiled"])
        out.append(f"#### compiled by llama-server, not by synapse: {len(gap)}")
        out += [f"- {rel}: {sc[rel].get('error', sc[rel]['status'])[:300]}" for rel in gap]
        out.append("")
        extra = sorted(rel for rel in sc if sc[rel]["compiled"] and rel in lc and not lc[rel]["compiled"])
        out.append(f"#### compiled by synapse, not by llama-server: {len(extra)}")
        out.append("")
    for engine, res in results.items():
        bad = sorted((rel, g) for rel, g in res.get("generate", {}).items()
                     if g["status"] in ("invalid", "not_json", "validator_error", "error", "timeout", "crash"))
        out.append(f"#### {engine}: completed outputs that do not validate, and errors: {len(bad)}")
        out += [f"- {rel}: {g['status']}: {g.get('error', '')[:300]} — output {g.get('output', '')[:200]!r}"
                for rel, g in bad]
        out.append("")
    return "\n".join(out)


# --- main ---------------------------------------------------------------------

def version_of(engine, binary):
    try:
        p = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
        text = (p.stdout + p.stderr).strip().splitlines()
        keep = [l for l in text if "version" in l.lower()] or text[:1]
        return " ".join(keep)[:200]
    except Exception as e:  # noqa: BLE001
        return f"unknown ({e})"


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--synapse", default="build/bin/synapse", help="synapse binary")
    ap.add_argument("--llama-server", default="/work/ref/llama-build/bin/llama-server", help="llama-server binary")
    ap.add_argument("--model", help="GGUF model")
    ap.add_argument("--data", help="jsonschemabench's data/ directory (one folder per set)")
    ap.add_argument("--synapse-args", default="", help="more arguments for synapse serve")
    ap.add_argument("--llama-server-args", default="",
                    help="more arguments for llama-server (e.g. --no-jinja: see docs/STRUCTURED_OUTPUT.md)")
    ap.add_argument("--engines", default="synapse,llama-server", help="comma-separated: synapse,llama-server")
    ap.add_argument("--gen-engines", help="engines of the generation pass (default: --engines); "
                    "the sample is drawn from what every engine in the results compiled, loaded ones included")
    ap.add_argument("--gen-sample-from", help="engines whose compiled schemas the generation sample is drawn "
                    "from (default: every engine in the results)")
    ap.add_argument("--per-folder", type=int, default=0, help="schemas per folder in the compile pass (0: all)")
    ap.add_argument("--folders", default="", help="comma-separated folders (default: all)")
    ap.add_argument("--gen-per-folder", type=int, default=10, help="schemas per folder in the generation pass (0: none)")
    ap.add_argument("--max-tokens", type=int, default=512, help="max_tokens per generation")
    ap.add_argument("--prompt-schema-chars", type=int, default=1200,
                    help="the schema text in the generation prompt is cut to this many characters "
                    "(stories260K: ~1 token a character; llama-server caps its slots at the 2048 it was trained on)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per compile request")
    ap.add_argument("--gen-timeout", type=float, default=300, help="seconds per generation request")
    ap.add_argument("--seed", type=int, default=42, help="seed of the samples")
    ap.add_argument("--ignore-unknown-keywords", action="store_true",
                    help="compile pass only: send each schema without keywords outside JSON Schema's vocabulary "
                    "(an estimate of what ignoring them would compile; not the benchmark)")
    ap.add_argument("--nice", type=int, default=10, help="nice level of the servers (0: none)")
    ap.add_argument("--load", help="a previous --json: its compile results stand for engines not run now")
    ap.add_argument("--json", help="write every per-schema result here")
    ap.add_argument("--report-from", help="print the report of a previous --json and exit")
    ap.add_argument("--top-reasons", type=int, default=15)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C, so that the server of the moment is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    if args.report_from:
        with open(args.report_from) as f:
            prev = json.load(f)
        corpus = collections.defaultdict(set)
        for res in prev["results"].values():
            for part in ("compile", "generate"):
                for rel in res.get(part, {}):
                    corpus[rel.split("/")[0]].add(rel)
        print(report({k: sorted(corpus[k]) for k in sorted(corpus)}, prev["results"], args.top_reasons))
        return
    if not args.model or not args.data:
        ap.error("--model and --data are required (unless --report-from)")
    engines = [e for e in args.engines.split(",") if e]
    gen_engines = [e for e in args.gen_engines.split(",") if e] if args.gen_engines is not None else engines
    for e in set(engines) | set(gen_engines):
        if e not in ENGINES:
            ap.error(f"--engines: unknown engine {e!r} (known: {', '.join(ENGINES)})")
    binaries = {"synapse": args.synapse, "llama-server": args.llama_server}
    extra = {"synapse": shlex.split(args.synapse_args), "llama-server": shlex.split(args.llama_server_args)}
    corpus = load_corpus(args.data, args.per_folder, args.seed)
    if args.folders:
        want = args.folders.split(",")
        corpus = {f: v for f, v in corpus.items() if f in want}
    progress = not args.quiet

    results = {}
    meta = {
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "args": vars(args),
        "cpu": cpu_model(),
        "nproc": os.cpu_count(),
        "versions": {},
        "commands": {},
    }
    if args.load:
        with open(args.load) as f:
            prev = json.load(f)
        for e, res in prev["results"].items():
            if e not in engines:
                results[e] = {k: v for k, v in res.items() if k != "generate"}
                meta["versions"][e] = prev["meta"]["versions"].get(e)
                meta["commands"][e] = prev["meta"]["commands"].get(e)
                meta.setdefault("loaded", {})[e] = args.load

    log_dir = tempfile.mkdtemp(prefix="jsb-")
    print(f"server logs in {log_dir}", file=sys.stderr)

    for e in engines:
        meta["versions"][e] = version_of(e, binaries[e])
        srv = Server(e, binaries[e], args.model, args.nice, log_dir, extra[e])
        srv.start()
        meta["commands"][e] = " ".join(srv.cmd)
        t0 = time.time()
        try:
            results[e] = {"compile": compile_pass(srv, args.data, corpus, args.timeout, progress,
                                                     args.ignore_unknown_keywords)}
        finally:
            results.setdefault(e, {})["compile_rss_kib"] = srv.peak_rss_kib()
            results[e]["compile_seconds"] = round(time.time() - t0, 1)
            results[e]["server_starts"] = srv.starts
            srv.stop()

    if args.gen_per_folder > 0:
        pool = args.gen_sample_from.split(",") if args.gen_sample_from else list(results)
        sample = gen_sample(corpus, [results[e]["compile"] for e in pool], args.gen_per_folder, args.seed)
        for e in gen_engines:
            if e not in meta["versions"]:
                meta["versions"][e] = version_of(e, binaries[e])
            srv = Server(e, binaries[e], args.model, args.nice, log_dir, extra[e])
            srv.start()
            meta["commands"].setdefault(e, " ".join(srv.cmd))
            results.setdefault(e, {"compile": {}})
            t0 = time.time()
            try:
                results[e]["generate"] = generation_pass(srv, args.data, sample, args, progress)
            finally:
                results[e]["generate_seconds"] = round(time.time() - t0, 1)
                srv.stop()

    meta["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    text = report(corpus, results, args.top_reasons)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results, "report": text}, f, indent=1)


if __name__ == "__main__":
    main()
