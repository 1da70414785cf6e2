"""Structured output: LlamaGrammar (GBNF, files, JSON Schema), grammar= on the
completion and chat methods, and create_chat_completion's response_format.

Every reply is checked against what its grammar or schema allows (a regular
expression, or json.loads plus the schema), and must end by itself
(finish_reason "stop"), not by max_tokens.
"""
import json
import re
from pathlib import Path

import pytest

import synapse
from synapse import LlamaGrammar

JSON_GBNF = Path(__file__).resolve().parents[2] / "tests" / "data" / "grammar" / "gbnf" / "json.gbnf"

MESSAGES = [{"role": "system", "content": "You tell stories."},
            {"role": "user", "content": "Tell me about Lily."}]

# A finite language: every reply is short, so it must end with "stop".
PET_GBNF = r'''
root ::= "The " pet " sat on the " place "."
pet ::= "cat" | "dog" | "big " pet
place ::= [a-z]{3,8}
'''
PET_RE = re.compile(r"The (big )*(cat|dog) sat on the [a-z]{3,8}\.")

# Every value bounded (an enum, an integer range, a short string, a bool), so
# every reply the schema allows ends within max_tokens.
PET_SCHEMA = {
    "type": "object",
    "properties": {
        "animal": {"enum": ["cat", "dog", "bird"]},
        "age": {"type": "integer", "minimum": 0, "maximum": 20},
        "name": {"type": "string", "maxLength": 12},
        "happy": {"type": "boolean"},
    },
    "required": ["animal", "age", "name", "happy"],
    "additionalProperties": False,
}


def check_pet(value):
    """PET_SCHEMA checked by hand, and by the jsonschema module where it is
    installed (Debian's python3-jsonschema): both must accept the value."""
    assert isinstance(value, dict) and set(value) == {"animal", "age", "name", "happy"}, value
    assert value["animal"] in ("cat", "dog", "bird")
    assert isinstance(value["age"], int) and not isinstance(value["age"], bool) and 0 <= value["age"] <= 20
    assert isinstance(value["name"], str) and len(value["name"]) <= 12
    assert isinstance(value["happy"], bool)
    try:
        import jsonschema
    except ImportError:
        return
    jsonschema.validate(value, PET_SCHEMA)


# --- LlamaGrammar ----------------------------------------------------------


def test_from_string_holds_the_text():
    g = LlamaGrammar.from_string(PET_GBNF)
    assert g.grammar == PET_GBNF and g._grammar == PET_GBNF
    assert LlamaGrammar.from_string(PET_GBNF, verbose=False).grammar == PET_GBNF
    assert isinstance(synapse.llama_grammar.LlamaGrammar.from_string('root ::= "a"'), LlamaGrammar)


@pytest.mark.parametrize("text, message", [
    ('root ::= "abc', "line 1, column 10: unterminated string literal"),
    ('root ::= "a"\nroot2 ::= ( "b"', "line 2, column 16: expecting ')'"),
    ("root ::= undefined-rule", "line 1, column 10: undefined rule 'undefined-rule'"),
    ('other ::= "a"', "line 1, column 14: the grammar has no rule 'root' to start from"),
    ("", "line 1, column 1: the grammar has no rule 'root' to start from"),
])
def test_from_string_errors(text, message):
    with pytest.raises(ValueError) as e:
        LlamaGrammar.from_string(text)
    assert isinstance(e.value, synapse.InvalidArgumentError)
    assert str(e.value) == "grammar: " + message


def test_from_string_type():
    with pytest.raises(TypeError):
        LlamaGrammar.from_string(b'root ::= "a"')


def test_from_file(tmp_path):
    path = tmp_path / "pet.gbnf"
    path.write_text(PET_GBNF)
    assert LlamaGrammar.from_file(path).grammar == PET_GBNF
    assert LlamaGrammar.from_file(str(path), verbose=False).grammar == PET_GBNF
    # llama.cpp's grammars/json.gbnf (tests/data/grammar/gbnf/PROVENANCE) compiles.
    assert LlamaGrammar.from_file(JSON_GBNF).grammar == JSON_GBNF.read_text()


def test_from_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        LlamaGrammar.from_file(tmp_path / "missing.gbnf")
    (tmp_path / "empty.gbnf").write_text("\n")
    with pytest.raises(ValueError, match="empty.gbnf"):
        LlamaGrammar.from_file(tmp_path / "empty.gbnf")
    (tmp_path / "bad.gbnf").write_text('root ::= "a"\n\nx ::= [a-\n')
    with pytest.raises(ValueError, match=r"^grammar: line 3, column 7: unterminated character class$"):
        LlamaGrammar.from_file(tmp_path / "bad.gbnf")


# (needs json_schema_to_gbnf: src/grammar/json_schema.cpp)
def test_from_json_schema():
    g = LlamaGrammar.from_json_schema(json.dumps(PET_SCHEMA))
    assert "root" in g.grammar
    assert LlamaGrammar.from_json_schema(PET_SCHEMA, verbose=False).grammar == g.grammar
    assert synapse._synapse.json_schema_to_gbnf(json.dumps(PET_SCHEMA)) == g.grammar


# (needs json_schema_to_gbnf)
def test_from_json_schema_errors():
    with pytest.raises(ValueError, match="multipleOf") as e:
        LlamaGrammar.from_json_schema(json.dumps({"type": "integer", "multipleOf": 997}))
    assert isinstance(e.value, synapse.InvalidArgumentError)
    with pytest.raises(ValueError):
        LlamaGrammar.from_json_schema("{not json")


# --- grammar= ----------------------------------------------------------------


@pytest.mark.parametrize("temperature, seed", [(0, 1), (0.8, 7), (1.5, 11)])
def test_completion_grammar(llm, temperature, seed):
    g = LlamaGrammar.from_string(PET_GBNF)
    out = llm("Once upon a time", grammar=g, max_tokens=96, temperature=temperature, seed=seed)
    choice = out["choices"][0]
    assert PET_RE.fullmatch(choice["text"]), choice["text"]
    assert choice["finish_reason"] == "stop"
    # The same reply through __call__'s other spellings: GBNF text, and create_completion.
    again = llm.create_completion("Once upon a time", grammar=PET_GBNF, max_tokens=96,
                                  temperature=temperature, seed=seed)
    assert again["choices"][0]["text"] == choice["text"]


def test_completion_without_grammar_is_unconstrained(llm):
    # The model left alone does not write PET_GBNF's sentence: the grammar is what made it.
    out = llm("Once upon a time", max_tokens=32, temperature=0)
    assert not PET_RE.fullmatch(out["choices"][0]["text"])


def test_completion_grammar_stream(llm):
    g = LlamaGrammar.from_string(PET_GBNF)
    whole = llm("Once upon a time", grammar=g, max_tokens=96, temperature=0.8, seed=5)
    chunks = list(llm("Once upon a time", grammar=g, max_tokens=96, temperature=0.8, seed=5, stream=True))
    text = "".join(c["choices"][0]["text"] for c in chunks)
    assert text == whole["choices"][0]["text"] and PET_RE.fullmatch(text)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_completions_batch_grammar(llm):
    g = LlamaGrammar.from_string(PET_GBNF)
    prompts = ["Once upon a time", "Lily went to the park", "The sun"]
    kwargs = dict(grammar=g, max_tokens=96, temperature=0.8, seed=3)
    batch = llm.create_completions(prompts, **kwargs)
    for prompt, out in zip(prompts, batch):
        text = out["choices"][0]["text"]
        assert PET_RE.fullmatch(text), text
        assert out["choices"][0]["finish_reason"] == "stop"
        assert text == llm(prompt, **kwargs)["choices"][0]["text"]


# (needs json_schema_to_gbnf)
@pytest.mark.parametrize("temperature, seed", [(0, 1), (0.8, 6)])
def test_completion_json_schema_grammar(llm, temperature, seed):
    g = LlamaGrammar.from_json_schema(json.dumps(PET_SCHEMA))
    out = llm("Once upon a time", grammar=g, max_tokens=400, temperature=temperature, seed=seed)
    assert out["choices"][0]["finish_reason"] == "stop"
    check_pet(json.loads(out["choices"][0]["text"]))


def test_chat_grammar(llm):
    g = LlamaGrammar.from_string(PET_GBNF)
    out = llm.create_chat_completion(MESSAGES, grammar=g, max_tokens=96, temperature=0)
    choice = out["choices"][0]
    assert PET_RE.fullmatch(choice["message"]["content"]), choice["message"]["content"]
    assert choice["finish_reason"] == "stop"
    chunks = list(llm.create_chat_completion(MESSAGES, grammar=PET_GBNF, max_tokens=96, temperature=0, stream=True))
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == choice["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_completion_token_references(llm):
    # llama.cpp's token terminals: <s> (stories260K's BOS, a control token
    # rendered as ""), any token but 426 (".") four times, then 426. The
    # reply is llama-server v0.5.0's (tests/runtime/grammar_generation_test.cpp).
    g = LlamaGrammar.from_string("root ::= <s> (!<[426]>){4} <[426]>")
    out = llm("Once upon a time", grammar=g, max_tokens=16, temperature=0)
    assert out["choices"][0]["text"] == " Once upon a time."
    assert out["choices"][0]["finish_reason"] == "stop"
    # A text that is not one token is refused when the reply starts.
    with pytest.raises(ValueError, match=r"^grammar: invalid token '<foo>': the model's tokenizer makes 5 tokens"):
        llm("Once upon a time", grammar=LlamaGrammar.from_string("root ::= <foo>"), max_tokens=4)


def test_grammar_argument_errors(llm):
    with pytest.raises(ValueError, match=r"^grammar: line 1, column 10: unterminated string literal$"):
        llm("Once upon a time", grammar='root ::= "abc', max_tokens=4)
    with pytest.raises(TypeError):
        llm("Once upon a time", grammar=42, max_tokens=4)
    with pytest.raises(ValueError, match=r"^grammar: line 1, column 11: expecting '\)'$"):
        llm.create_chat_completion(MESSAGES, grammar="root ::= (", max_tokens=4)
    with pytest.raises(ValueError, match=r"^grammar: line 1, column 10: unterminated character class$"):
        llm.create_completions(["a", "b"], grammar="root ::= [", max_tokens=4)
    # An empty grammar is none, as SamplerParams.grammar "" is.
    free = llm("Once upon a time", max_tokens=8, temperature=0)["choices"][0]["text"]
    assert llm("Once upon a time", grammar="", max_tokens=8, temperature=0)["choices"][0]["text"] == free


# --- response_format -----------------------------------------------------------


# (needs json_schema_to_gbnf)
@pytest.mark.parametrize("temperature, seed", [(0, 1), (0.8, 2), (1.2, 9)])
def test_response_format_json_object_schema(llm, temperature, seed):
    out = llm.create_chat_completion(MESSAGES, response_format={"type": "json_object", "schema": PET_SCHEMA},
                                     max_tokens=400, temperature=temperature, seed=seed)
    choice = out["choices"][0]
    assert choice["finish_reason"] == "stop"
    check_pet(json.loads(choice["message"]["content"]))


# (needs json_schema_to_gbnf)
def test_response_format_json_schema(llm):
    rf = {"type": "json_schema", "json_schema": {"name": "pet", "schema": PET_SCHEMA, "strict": True}}
    out = llm.create_chat_completion(MESSAGES, response_format=rf, max_tokens=400, temperature=0.8, seed=4)
    assert out["choices"][0]["finish_reason"] == "stop"
    check_pet(json.loads(out["choices"][0]["message"]["content"]))
    # The same schema through json_object and through a LlamaGrammar: the same reply.
    same = llm.create_chat_completion(MESSAGES, response_format={"type": "json_object", "schema": PET_SCHEMA},
                                      max_tokens=400, temperature=0.8, seed=4)
    assert same["choices"][0]["message"]["content"] == out["choices"][0]["message"]["content"]
    g = LlamaGrammar.from_json_schema(json.dumps(PET_SCHEMA))
    via_grammar = llm.create_chat_completion(MESSAGES, grammar=g, max_tokens=400, temperature=0.8, seed=4)
    assert via_grammar["choices"][0]["message"]["content"] == out["choices"][0]["message"]["content"]
    streamed = llm.create_chat_completion(MESSAGES, response_format=rf, max_tokens=400, temperature=0.8, seed=4,
                                          stream=True)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in streamed) == \
        out["choices"][0]["message"]["content"]


# (needs json_schema_to_gbnf)
@pytest.mark.parametrize("rf", [{"type": "json_object"}, {"type": "json_object", "schema": {}},
                                {"type": "json_schema", "json_schema": {"name": "any"}}])
def test_response_format_any_object(llm, rf):
    # No schema (or an empty one) is {"type": "object"}, as llama-server has it.
    # Left alone, stories260K writes an object whose first string never ends;
    # "}" and EOS pushed up make it close the object where the grammar lets it
    # (without the grammar the bias alone would write "}}}...").
    close, eos = llm.tokenize(b"}", add_bos=False)[-1], llm.token_eos()
    kwargs = dict(max_tokens=64, temperature=0, logit_bias={close: 100.0, eos: 100.0})
    out = llm.create_chat_completion(MESSAGES, response_format=rf, **kwargs)
    assert out["choices"][0]["finish_reason"] == "stop"
    assert isinstance(json.loads(out["choices"][0]["message"]["content"]), dict)
    same = llm.create_chat_completion(MESSAGES, grammar=synapse._synapse.json_schema_to_gbnf('{"type":"object"}'),
                                      **kwargs)
    assert same["choices"][0]["message"]["content"] == out["choices"][0]["message"]["content"]
    free = llm.create_chat_completion(MESSAGES, **kwargs)
    assert free["choices"][0]["message"]["content"].startswith("}")


def test_response_format_text_is_unconstrained(llm):
    free = llm.create_chat_completion(MESSAGES, max_tokens=16, temperature=0)
    for rf in ({"type": "text"}, {}, None):
        out = llm.create_chat_completion(MESSAGES, response_format=rf, max_tokens=16, temperature=0)
        assert out["choices"][0]["message"]["content"] == free["choices"][0]["message"]["content"]


@pytest.mark.parametrize("rf, match", [
    ({"type": "xml"}, r"response_format\.type"),
    ({"type": "json"}, r"response_format\.type"),
    ("json_object", r"response_format"),
    ({"type": "json_schema"}, r"response_format\.json_schema"),
    ({"type": "json_schema", "json_schema": "{}"}, r"response_format\.json_schema"),
    ({"type": "json_schema", "json_schema": {"schema": PET_SCHEMA, "strict": "yes"}}, r"strict"),
    ({"type": "json_object", "schema": "object"}, r"response_format\.schema"),
    ({"type": "json_object", "schema": [1]}, r"response_format\.schema"),
])
def test_response_format_errors(llm, rf, match):
    with pytest.raises(ValueError, match=match) as e:
        llm.create_chat_completion(MESSAGES, response_format=rf, max_tokens=4)
    assert isinstance(e.value, synapse.InvalidArgumentError)


def test_response_format_and_grammar(llm):
    for rf in ({"type": "json_object"}, {"type": "json_schema", "json_schema": {"schema": PET_SCHEMA}}):
        with pytest.raises(ValueError, match=r"grammar and response_format\.(json_schema\.)?schema both constrain"):
            llm.create_chat_completion(MESSAGES, response_format=rf, grammar=LlamaGrammar.from_string(PET_GBNF),
                                       max_tokens=4)
    # A text response_format constrains nothing: the grammar alone applies.
    out = llm.create_chat_completion(MESSAGES, response_format={"type": "text"}, grammar=PET_GBNF,
                                     max_tokens=96, temperature=0)
    assert PET_RE.fullmatch(out["choices"][0]["message"]["content"])


# (needs json_schema_to_gbnf)
def test_response_format_unsupported_schema(llm):
    rf = {"type": "json_object", "schema": {"type": "object", "properties": {"n": {"type": "integer",
                                                                                   "multipleOf": 997}}}}
    with pytest.raises(ValueError, match=r"response_format\.schema: .*multipleOf") as e:
        llm.create_chat_completion(MESSAGES, response_format=rf, max_tokens=4)
    assert isinstance(e.value, synapse.InvalidArgumentError)
