#!/usr/bin/python3
"""Validates bench_schema_walks' texts with python3-jsonschema (issue 42).

Reads bench_schema_walks' JSON lines on standard input; each text of a
compiled schema is parsed (a repeated object key counts as invalid: a parser
keeps one of the two values) and validated against its schema
(`validator_for` the draft it declares, 2020-12 when none; formats not
asserted, as the validator's default). Prints one INVALID line per text that
fails, one UNCHECKED line per text the validator could not check (it raised:
a $ref relative to an $id URL it cannot fetch, ...), then one summary dict. Run with Debian's /usr/bin/python3:

  ls /tmp/jsb-own/data/*/*.json | build/bench/bench_schema_walks --walks 4 - \\
      | /usr/bin/python3 bench/validate_walks.py
"""
import json
import sys

from jsonschema.validators import validator_for


def no_repeats(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("repeated key")
    return dict(pairs)


def main():
    stats = {"schemas": 0, "compiled": 0, "texts": 0, "valid": 0, "invalid": 0, "unchecked": 0, "unfinished": 0,
             "schema_unreadable": 0}
    for line in sys.stdin:
        r = json.loads(line)
        stats["schemas"] += 1
        if not r["compiled"]:
            continue
        stats["compiled"] += 1
        stats["unfinished"] += r["unfinished"]
        try:
            with open(r["path"]) as f:
                schema = json.load(f)
            validator = validator_for(schema)(schema)
        except Exception:  # not JSON, or not a schema python-jsonschema takes
            stats["schema_unreadable"] += 1
            continue
        for text in r["texts"]:
            stats["texts"] += 1
            try:
                value = json.loads(text, object_pairs_hook=no_repeats)
            except Exception as e:  # not JSON, or a repeated key
                stats["invalid"] += 1
                print("INVALID", r["path"], json.dumps(text[:300]), repr(e)[:200])
                continue
            try:
                errors = list(validator.iter_errors(value))
                why = errors[0].message[:200] if errors else None
            except Exception as e:  # the validator failed (a $ref it cannot resolve, ...): not checked
                stats["unchecked"] += 1
                print("UNCHECKED", r["path"], repr(e)[:200])
                continue
            if why is None:
                stats["valid"] += 1
            else:
                stats["invalid"] += 1
                print("INVALID", r["path"], json.dumps(text[:300]), why)
    print(stats)


if __name__ == "__main__":
    main()
