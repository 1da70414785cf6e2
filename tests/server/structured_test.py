"""Structured output through `synapse serve` (issue 42): `grammar`,
`json_schema` and `response_format` on every route, on the real binary.

stories260K is a model of children's stories that has never seen JSON: the
hardest case for "never fails open", since left alone it writes prose. Every
reply that ends by itself must parse and validate (python3-jsonschema from
Debian); a constrained reply is byte-identical alone and beside 15 other
requests; bad grammars and schemas are 400s naming the field.
"""
import json
import re
import threading

import jsonschema
import pytest

from test_serve import Server

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3},
        "kind": {"const": "person"},
    },
    "required": ["name", "age", "pets", "kind"],
    "additionalProperties": False,
}
GBNF = 'root ::= "The " animal " saw " [0-9]{1,3} " " animal "s."\nanimal ::= "cat" | "dog" | "bird"\n'
SENTENCE = re.compile(r"The (cat|dog|bird) saw [0-9]{1,3} (cat|dog|bird)s\.")


@pytest.fixture(scope="module")
def srv():
    with Server("stories260K.gguf", "-np", "16", "-t", "2", "-c", "4096") as s:
        yield s


def chat_body(seed, **kw):
    return dict({"messages": [{"role": "user", "content": "Tell me about a person."}], "max_tokens": 300,
                 "seed": seed, "temperature": 0.8}, **kw)


def test_response_format_json_schema_validates(srv):
    for seed in range(6):
        r = srv.post("/v1/chat/completions",
                     chat_body(seed, response_format={"type": "json_schema",
                                                      "json_schema": {"name": "person", "strict": True,
                                                                      "schema": PERSON}}))
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        jsonschema.validate(json.loads(choice["message"]["content"]), PERSON)
        # Properties in the order the schema declares them (llama-server's too), not sorted.
        assert list(json.loads(choice["message"]["content"])) == ["name", "age", "pets", "kind"], choice


def test_json_object_and_native_json_schema(srv):
    # {"type": "json_object"} without a schema: any JSON object (llama-server's rule).
    r = srv.post("/v1/chat/completions", chat_body(1, response_format={"type": "json_object"}, max_tokens=400))
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    if choice["finish_reason"] == "stop":
        assert isinstance(json.loads(choice["message"]["content"]), dict)
    else:  # cut by max_tokens: a prefix of an object
        assert choice["message"]["content"].lstrip().startswith("{"), choice
    # json_object with a schema, and /completion's json_schema field.
    r = srv.post("/v1/chat/completions",
                 chat_body(2, response_format={"type": "json_object", "schema": PERSON}))
    jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), PERSON)
    r = srv.post("/completion", {"prompt": "Once upon a time", "n_predict": 300, "seed": 3, "json_schema": PERSON})
    assert r.status_code == 200, r.text
    assert r.json()["stop_type"] == "eos", r.json()
    jsonschema.validate(json.loads(r.json()["content"]), PERSON)


def test_gbnf_grammar_on_every_route(srv):
    for seed in range(4):
        a = srv.post("/completion", {"prompt": "Once upon a time", "n_predict": 64, "seed": seed,
                                     "temperature": 1.0, "grammar": GBNF}).json()
        assert SENTENCE.fullmatch(a["content"]), a["content"]
        b = srv.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 64, "seed": seed,
                                         "grammar": GBNF}).json()
        assert SENTENCE.fullmatch(b["choices"][0]["text"]), b
        assert b["choices"][0]["finish_reason"] == "stop"
        c = srv.post("/v1/chat/completions", chat_body(seed, grammar=GBNF)).json()
        assert SENTENCE.fullmatch(c["choices"][0]["message"]["content"]), c
    # Token references take whole tokens: <s> (BOS, rendered as ""), any token
    # but "." (426) four times, then ".". The reply is llama-server v0.5.0's
    # (same body; its "tokens" end with the EOS id, 2).
    t = srv.post("/completion", {"prompt": "Once upon a time", "n_predict": 16, "temperature": 0,
                                 "return_tokens": True, "grammar": "root ::= <s> (!<[426]>){4} <[426]>\n"}).json()
    assert t["content"] == " Once upon a time." and t["tokens"] == [1, 403, 407, 261, 378, 426], t


def test_constrained_reply_is_the_same_under_load(srv):
    body = chat_body(11, response_format={"type": "json_schema", "json_schema": {"schema": PERSON}}, logprobs=True)
    alone = srv.post("/v1/chat/completions", body).json()
    results = [None] * 16

    def send(i):
        other = chat_body(100 + i, response_format={"type": "json_schema", "json_schema": {"schema": PERSON}})
        if i % 3 == 0:
            other = chat_body(100 + i)  # unconstrained neighbours too
        results[i] = srv.post("/v1/chat/completions", body if i == 0 else other).json()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    mine = results[0]["choices"][0]
    assert mine["message"]["content"] == alone["choices"][0]["message"]["content"]
    assert json.dumps(mine["logprobs"], sort_keys=True) == json.dumps(alone["choices"][0]["logprobs"], sort_keys=True)


def expect_400(srv, path, body, param, needle):
    r = srv.post(path, body)
    assert r.status_code == 400, (body, r.text)
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param, err
    assert needle in err["message"], err


def test_bad_grammars_and_schemas_are_400s(srv):
    c = "/v1/chat/completions"
    expect_400(srv, "/completion", {"prompt": "x", "grammar": "root ::= foo\n"}, "grammar",
               "line 1, column 10: undefined rule 'foo'")
    expect_400(srv, "/completion", {"prompt": "x", "grammar": 5}, "grammar", "must be a string")
    deep = "root ::= " + "(" * 60000 + '"a"' + ")" * 60000 + "\n"
    expect_400(srv, "/completion", {"prompt": "x", "grammar": deep}, "grammar", "nested more than")
    expect_400(srv, "/completion", {"prompt": "x", "grammar": GBNF, "json_schema": PERSON}, "json_schema",
               "send one of them")
    expect_400(srv, c, chat_body(1, response_format={"type": "xml"}), "response_format.type", "json_schema")
    expect_400(srv, c, chat_body(1, response_format={"type": "json_schema"}), "response_format.json_schema",
               "must be an object")
    expect_400(srv, c, chat_body(1, response_format={"type": "json_schema", "json_schema": {
        "schema": {"type": "object", "not": {"minProperties": 1}}}}),
               "response_format.json_schema.schema", "not")
    expect_400(srv, c, chat_body(1, response_format={"type": "json_schema", "json_schema": {
        "schema": {"$ref": "#/$defs/missing"}}}), "response_format.json_schema.schema", "missing")
    expect_400(srv, "/completion", {"prompt": "x", "json_schema": {"type": "integer", "multipleOf": 997}},
               "json_schema", "multipleOf")
    expect_400(srv, "/completion", {"prompt": "x", "grammar": "root ::= <foo>\n"}, "grammar",
               "invalid token '<foo>': the model's tokenizer makes 5 tokens of it, not one")
    expect_400(srv, "/completion", {"prompt": "x", "grammar": "root ::= <[99999]>\n"}, "grammar",
               "the token reference <[99999]> is outside the vocabulary of 512 tokens")
    expect_400(srv, "/completion", {"prompt": "x", "json_schema": {"oneOf": [{"type": "integer"},
                                                                             {"type": "number"}]}},
               "json_schema", "alternatives 0 and 1 are not provably exclusive")
    # Still serving, constrained as before.
    a = srv.post("/completion", {"prompt": "Once upon a time", "n_predict": 64, "seed": 0, "grammar": GBNF}).json()
    assert SENTENCE.fullmatch(a["content"]), a


def test_ambiguous_grammar_ends_the_reply_with_an_error(srv):
    # Repetitions nested through rules (the language is "x"+, with 2^k parses
    # of k bytes): the matcher refuses past GrammarLimits::max_matcher_work
    # instead of hanging, and the reply ends with that error: the request's
    # own fault, so a 400 as when the grammar is refused up front.
    gbnf = "root ::= x30\nx1 ::= \"x\"+\n" + "".join(f"x{i} ::= x{i - 1}+\n" for i in range(2, 31))
    r = srv.post("/completion", {"prompt": "Once upon a time", "n_predict": 32, "seed": 0, "grammar": gbnf})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error", r.text
    assert "generation failed: grammar: more than 1048576 parser steps for one token (max_matcher_work)" in \
        r.json()["error"]["message"], r.text
    a = srv.post("/completion", {"prompt": "Once upon a time", "n_predict": 64, "seed": 0, "grammar": GBNF}).json()
    assert SENTENCE.fullmatch(a["content"]), a


def test_ambiguous_grammar_in_a_stream_ends_with_a_400_error_event(srv):
    # The status line (200) is sent before the matcher gives up: the error is
    # the stream's last event, with the body and type of the non-streamed 400.
    gbnf = "root ::= x30\nx1 ::= \"x\"+\n" + "".join(f"x{i} ::= x{i - 1}+\n" for i in range(2, 31))
    r = srv.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 32, "seed": 0, "grammar": gbnf,
                                     "stream": True}, stream=True)
    assert r.status_code == 200, r.text
    events = [json.loads(line[len(b"data: "):]) for line in r.iter_lines()
              if line.startswith(b"data: ") and line != b"data: [DONE]"]
    errors = [e["error"] for e in events if "error" in e]
    assert len(errors) == 1, events
    assert errors[0]["code"] == 400 and errors[0]["type"] == "invalid_request_error", errors
    assert errors[0]["message"].startswith("generation failed: grammar: more than 1048576 parser steps"), errors
