"""Grammars that constrain a reply, as llama-cpp-python's `LlamaGrammar`.

    from synapse import Llama, LlamaGrammar
    yes_no = LlamaGrammar.from_string('root ::= "yes" | "no"')
    llm("Is the sky blue? ", grammar=yes_no)

A LlamaGrammar is GBNF text (llama.cpp's grammar format) that the library's
parser has accepted; the generation loop compiles it again for each reply
(cached: the same text is compiled once per process) and lets only the tokens
that keep the reply inside the grammar be drawn. from_json_schema converts a
JSON Schema with the library's converter (llama.cpp's json-schema-to-grammar
rules). The module keeps llama-cpp-python's name, so
`from llama_cpp.llama_grammar import LlamaGrammar` ports by changing the
package name.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Union

from . import _synapse
from ._synapse import InvalidArgumentError

__all__ = ["LlamaGrammar", "LLAMA_GRAMMAR_DEFAULT_ROOT"]

# The rule a reply must match (llama.cpp's default root).
LLAMA_GRAMMAR_DEFAULT_ROOT = "root"


class LlamaGrammar:
    """A GBNF grammar, checked when made: pass it as `grammar=` to Llama's
    completion and chat-completion methods.

    Make one with from_string, from_file or from_json_schema (llama-cpp-python's
    constructors and signatures). A grammar the parser refuses is an
    InvalidArgumentError (a ValueError) whose message names the line and
    column; a schema the converter cannot enforce is one naming the keyword
    and its JSON pointer. `verbose` is accepted for llama-cpp-python's
    signatures and prints nothing (as llama-cpp-python 0.3). Immutable; one
    grammar may serve any number of calls and Llama objects.
    """

    def __init__(self, *, _grammar: str):
        if not isinstance(_grammar, str):
            raise TypeError(f"grammar: expected GBNF text (str), got {type(_grammar).__name__}")
        _synapse.compile_grammar(_grammar)
        self._grammar = _grammar
        self._root = LLAMA_GRAMMAR_DEFAULT_ROOT

    @property
    def grammar(self) -> str:
        """The GBNF text."""
        return self._grammar

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> "LlamaGrammar":
        """The grammar whose GBNF text is `grammar`."""
        return cls(_grammar=grammar)

    @classmethod
    def from_file(cls, file: Union[str, "os.PathLike[str]"], verbose: bool = True) -> "LlamaGrammar":
        """The grammar in the GBNF file `file` (UTF-8). A missing file is a
        FileNotFoundError; an empty one an InvalidArgumentError naming it."""
        path = Path(file)
        text = path.read_text(encoding="utf-8")
        if not text.strip():
            raise InvalidArgumentError(f"{path}: empty grammar file")
        return cls.from_string(text, verbose=verbose)

    @classmethod
    def from_json_schema(cls, json_schema: Union[str, Dict[str, Any], bool], verbose: bool = True) -> "LlamaGrammar":
        """The grammar of the JSON values `json_schema` accepts: the schema as
        JSON text (llama-cpp-python's form) or as a dict. See
        synapse/grammar.hpp's json_schema_to_gbnf for the keywords enforced;
        any other keyword that constrains values is an InvalidArgumentError
        naming it (annotations such as title and description are ignored)."""
        if not isinstance(json_schema, str):
            json_schema = json.dumps(json_schema)
        return cls.from_string(_synapse.json_schema_to_gbnf(json_schema), verbose=verbose)
