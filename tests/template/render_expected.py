#!/usr/bin/python3
"""Renders every chat template of tests/data/templates/llama.cpp/ with every
context of tests/data/templates/contexts.json in Python Jinja2, the reference
that synapse's engine (src/template/) must equal byte for byte
(tests/template/equivalence_test.cpp).

  /usr/bin/python3 tests/template/render_expected.py           rewrites tests/data/templates/expected/
  /usr/bin/python3 tests/template/render_expected.py --check   compares instead (ctest runs this:
                                                               the referee data is what Jinja2 says)

The environment is transformers' (src/transformers/utils/chat_template_utils.py,
_compile_jinja_template): trim_blocks, lstrip_blocks, the loopcontrols
extension, a {% generation %} tag that renders its body, tojson as json.dumps
with ensure_ascii=False (and its indent, separators, sort_keys), the globals
raise_exception and strftime_now; with llama.cpp's two differences: a
SandboxedEnvironment (lists may be appended to, popped from; transformers'
ImmutableSandboxedEnvironment forbids it) and tojson of a generator (map,
select, ...) giving a list. strftime_now reads a fixed clock (contexts.json's
"strftime_now").

Output, per template T and context C, in expected/T/:
  C.out   the rendering, as UTF-8 bytes;
  C.err   when Jinja2 raised: "raise_exception" (a message of the template's
          own raise_exception) or the exception's class name, a newline, and
          the message.
Debian's python3-jinja2 (3.1.2 when written) made the files in the repository.
"""
import datetime
import json
import os
import shutil
import sys
import types

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import SandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', 'data', 'templates')


class RaisedException(jinja2.exceptions.TemplateError):
    """What the template's raise_exception() raises (transformers raises
    TemplateError itself; the subclass only tells the two apart)."""


class GenerationTag(Extension):
    """transformers' AssistantTracker without the mask: renders the body."""
    tags = {'generation'}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(['name:endgeneration'], drop_needle=True)
        return nodes.CallBlock(self.call_method('_generation'), [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        return caller()


def plain(x):
    """Generators (map, select, items, ...) become lists, as llama.cpp's engine does."""
    if isinstance(x, (types.GeneratorType, map, filter, reversed)) or type(x).__name__.endswith('iterator'):
        return [plain(v) for v in x]
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


def environment(now):
    def raise_exception(message):
        raise RaisedException(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(plain(x), ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                               extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters['tojson'] = tojson
    env.globals['raise_exception'] = raise_exception
    env.globals['strftime_now'] = strftime_now
    return env


def render(env, source, context):
    """(output, None) or (None, error text); source is a template's text or
    the Template that env.from_string made of it."""
    try:
        t = env.from_string(source) if isinstance(source, str) else source
        return t.render(**json.loads(json.dumps(context))), None
    except RaisedException as e:
        return None, 'raise_exception\n' + str(e)
    except Exception as e:  # what Jinja2 (or Python under it) raised
        return None, type(e).__name__ + '\n' + str(e)


def expected():
    """{(template, context): (file name, bytes)} as Jinja2 renders them now."""
    spec = json.load(open(os.path.join(DATA, 'contexts.json'), encoding='utf-8'))
    env = environment(datetime.datetime.fromisoformat(spec['strftime_now']))
    tdir = os.path.join(DATA, 'llama.cpp')
    files = {}
    for name in sorted(os.listdir(tdir)):
        if not name.endswith('.jinja'):
            continue
        source = open(os.path.join(tdir, name), encoding='utf-8').read()
        try:
            source = env.from_string(source)  # every one compiles; else each render reports it
        except Exception:
            pass
        for c in spec['contexts']:
            out, err = render(env, source, c['context'])
            path = os.path.join(name[:-len('.jinja')], c['name'] + ('.out' if err is None else '.err'))
            files[path] = (out if err is None else err).encode('utf-8')
    return files


def main():
    files = expected()
    out_root = os.path.join(DATA, 'expected')
    if sys.argv[1:] == ['--check']:
        have = {os.path.relpath(os.path.join(d, f), out_root)
                for d, _, fs in os.walk(out_root) for f in fs}
        bad = sorted(p for p, b in files.items()
                     if p not in have or open(os.path.join(out_root, p), 'rb').read() != b)
        bad += sorted(have - set(files))
        for p in bad:
            print(f'differs from Jinja2 {jinja2.__version__}: expected/{p}', file=sys.stderr)
        print(f'{len(files) - len(bad)} of {len(files)} expected files are what Jinja2 gives', file=sys.stderr)
        sys.exit(1 if bad else 0)
    shutil.rmtree(out_root, ignore_errors=True)
    for p, b in files.items():
        os.makedirs(os.path.join(out_root, os.path.dirname(p)), exist_ok=True)
        open(os.path.join(out_root, p), 'wb').write(b)
    n_err = sum(1 for p in files if p.endswith('.err'))
    print(f'{len(files) - n_err} renderings, {n_err} errors, Jinja2 {jinja2.__version__}', file=sys.stderr)


if __name__ == '__main__':
    main()
