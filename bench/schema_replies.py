#!/usr/bin/python3
"""Constrained replies of `synapse run` validated, schema by schema (issue 42).

Reads JSON Schema file paths (one per line) on standard input; for each one
that python3-jsonschema takes as a schema, runs

  SYNAPSE run -m MODEL -p x -n 400 -s SEED --json-schema-file FILE

for SEED = 1..SEEDS (a random tiny model such as stories260K is the hardest
case for "never fails open"). A non-zero exit is "not compiled" (the next
schema); a reply that ended by end-of-generation ("stop: eog" on stderr) and
parses as JSON is "complete" and is validated (`validator_for` the draft it
declares, with FORMAT_CHECKER). Prints INVALID lines and one summary dict.
Run with Debian's /usr/bin/python3 (python3-jsonschema):

  ls /tmp/jsb/data/*/*.json | /usr/bin/python3 bench/schema_replies.py \\
      build/synapse tests/data/models/stories260K.gguf 2
"""
import json
import subprocess
import sys

from jsonschema.validators import validator_for


def main():
    syn, model, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    stats = {"files": 0, "compiled": 0, "outputs": 0, "complete": 0, "valid": 0}
    for path in sys.stdin.read().split():
        stats["files"] += 1
        try:
            with open(path) as f:
                schema = json.load(f)
            cls = validator_for(schema)
            cls.check_schema(schema)
            validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        except Exception:  # not JSON, or not a schema: not counted as compiled
            continue
        compiled = False
        for seed in range(1, seeds + 1):
            r = subprocess.run([syn, "run", "-m", model, "-p", "x", "-n", "400", "-s", str(seed),
                                "--json-schema-file", path], capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                break
            compiled = True
            stats["outputs"] += 1
            if "stop: eog" not in r.stderr:
                continue
            try:
                inst = json.loads(r.stdout)
            except ValueError:
                continue
            stats["complete"] += 1
            errors = list(validator.iter_errors(inst))
            if errors:
                print("INVALID", path, seed, errors[0].message[:200], r.stdout[:300], flush=True)
            else:
                stats["valid"] += 1
        stats["compiled"] += compiled
    print(stats, flush=True)


if __name__ == "__main__":
    main()
