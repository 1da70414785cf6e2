"""synapse: GGUF Llama-family models on the CPU, with llama-cpp-python's API.

    from synapse import Llama
    llm = Llama(model_path="models/stories260K.gguf")
    out = llm("Once upon a time", max_tokens=32, temperature=0)
    print(out["choices"][0]["text"])

Everything runs in the C++ library (synapse._synapse, pybind11 bindings over
include/synapse/): tokenizer, forward pass, sampler chain, stop strings and
the generation loop (synapse/generation.hpp) and its batched scheduler
(synapse/scheduler.hpp), grammars and the JSON Schema converter
(synapse/grammar.hpp), the model's Jinja chat template, tool calls and reasoning
(synapse/chat.hpp). This module only shapes arguments and results the way
llama-cpp-python does (OpenAI completion / chat-completion dictionaries,
tools and tool_calls, LlamaGrammar, response_format), and renders Jinja chat
templates with Python's Jinja2 when asked to (chat_format="jinja").

Errors: every failure of the library is a `synapse.Error`; each category is
also the built-in exception Python code expects (FileNotFoundError and, as
llama-cpp-python raises, ValueError for a missing model; ValueError for a bad
argument or a malformed file), with the library's message.

The GIL is released while the model runs. Ctrl-C (KeyboardInterrupt), or any
signal handler that raises, stops a generation within a few milliseconds and
leaves the Llama object usable. One Llama may be shared by threads: its calls
are serialised by a lock (see Llama).

Code written for llama-cpp-python can import these names from the optional
`llama_cpp` compatibility package (python/compat; README "Python").
"""
from __future__ import annotations

import functools
import json
import os
import random
import sys
import threading
import time
import uuid
import warnings
from collections import deque
from types import SimpleNamespace
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import _synapse
from ._synapse import (  # noqa: F401  (re-exported)
    Error,
    FileError,
    FormatError,
    InvalidArgumentError,
    ModelNotFoundError,
    OutOfRangeError,
    UnsupportedError,
)
from .chat import Jinja2ChatFormatter, check_messages, tool_choice_json
from .hf_cache import find_cached_file
from .llama_cache import BaseLlamaCache, LlamaCache, LlamaDiskCache, LlamaRAMCache, LlamaState, longest_token_prefix
from .llama_grammar import LlamaGrammar
from .llama_tokenizer import LlamaTokenizer

__all__ = [
    "Llama", "LlamaGrammar", "Jinja2ChatFormatter", "LLAMA_DEFAULT_SEED", "Error", "FileError", "ModelNotFoundError",
    "FormatError", "UnsupportedError", "InvalidArgumentError", "OutOfRangeError", "LlamaState", "BaseLlamaCache",
    "LlamaCache", "LlamaRAMCache", "LlamaDiskCache", "LlamaTokenizer", "LogitsProcessorList", "StoppingCriteriaList",
    "LLAMA_POOLING_TYPE_UNSPECIFIED",
    "LLAMA_POOLING_TYPE_NONE", "LLAMA_POOLING_TYPE_MEAN", "LLAMA_POOLING_TYPE_CLS", "LLAMA_POOLING_TYPE_LAST",
    "LLAMA_POOLING_TYPE_RANK",
]

# llama.cpp's LLAMA_DEFAULT_SEED: draw a seed from the system's entropy source.
LLAMA_DEFAULT_SEED = 0xFFFFFFFF

# llama.cpp's llama_pooling_type values (llama_cpp.LLAMA_POOLING_TYPE_*).
LLAMA_POOLING_TYPE_UNSPECIFIED = -1
LLAMA_POOLING_TYPE_NONE = 0
LLAMA_POOLING_TYPE_MEAN = 1
LLAMA_POOLING_TYPE_CLS = 2
LLAMA_POOLING_TYPE_LAST = 3
LLAMA_POOLING_TYPE_RANK = 4

# ggml's type ids, as llama-cpp-python exports them, for type_k / type_v
# (the KV cache types synapse takes).
GGML_TYPE_F16 = 1
GGML_TYPE_Q4_0 = 2
GGML_TYPE_Q5_0 = 6
GGML_TYPE_Q8_0 = 8
GGML_TYPE_IQ4_NL = 20
GGML_TYPE_BF16 = 30

# llama-cpp-python's chat_format names for the library's built-in templates.
_CHAT_FORMAT_ALIASES = {"llama-2": "llama2", "llama-3": "llama3"}


# llama-cpp-python arguments about GPUs and memory mapping: nothing to do on
# a CPU engine that always maps the file, so they are accepted and ignored.
_HARMLESS = {"n_gpu_layers", "main_gpu", "tensor_split", "offload_kqv", "use_mmap", "use_mlock", "numa",
             "n_threads_batch"}


_STREAM_CANCELLED = "stream: cancelled by another call on the same Llama (one request at a time)"


def _check_seed(seed: Any, field: str = "seed") -> int:
    """A seed as the sampler takes it: -1 (llama-cpp-python's "random", the
    uint32 0xFFFFFFFF that llama.cpp reads as LLAMA_DEFAULT_SEED) or [0, 2**32)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not -1 <= seed <= 0xFFFFFFFF:
        raise InvalidArgumentError(f"{field} = {seed!r}: must be -1 (random) or an integer in [0, 2**32)")
    return LLAMA_DEFAULT_SEED if seed == -1 else seed


def _legacy_context_args(model: "_synapse.Model", kwargs: Dict[str, Any]) -> None:
    """Removes from kwargs the llama-cpp-python arguments LangChain's LlamaCpp
    passes whose value means "as the file says" (n_parts=-1, f16_kv=True: the
    KV cache is F16; rope_freq_base/rope_freq_scale 0 or the file's own
    value); any other value is refused, naming it."""
    checks = {
        "n_parts": lambda v: v in (-1, None),
        "f16_kv": lambda v: v in (True, None),
        "rope_freq_base": lambda v: v in (0, 0.0, None) or
        float(v) == float(model.metadata.get(f"{model.architecture}.rope.freq_base", "10000")),
        "rope_freq_scale": lambda v: v in (0, 0.0, 1, 1.0, None),
    }
    for name, ok in checks.items():
        if name in kwargs:
            value = kwargs.pop(name)
            if not ok(value):
                raise InvalidArgumentError(f"Llama: {name}={value!r} is not supported by synapse "
                                           "(only the model file's own setting)")


def _locked(method: Callable) -> Callable:
    """Runs the method under the Llama's lock, after checking it is open."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._lock:
            self._check_open()
            return method(self, *args, **kwargs)
    return run


class _Closed:
    """Stands for the engine objects of a closed Llama: any use raises."""

    def __init__(self, model_path: str):
        self._message = (f"Llama({model_path!r}) is closed (close() or the end of its with block): "
                         "make a new Llama")

    def __getattr__(self, name: str):
        raise InvalidArgumentError(self._message)


class _KvSnapshot:
    """LlamaState.llama_state: a copy of a context's KV cache (a forked
    Sequence of the library) and the model it belongs to."""

    def __init__(self, model: "_synapse.Model", seq: "_synapse.Sequence"):
        self.model = model
        self.seq = seq


class LogitsProcessorList(list):
    """llama-cpp-python's list of logits processors: each f(input_ids, scores)
    returns the new scores (float32 [n_vocab]); applied in order."""

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        for processor in self:
            scores = processor(input_ids, scores)
        return scores


class StoppingCriteriaList(list):
    """llama-cpp-python's list of stopping criteria: each f(input_ids, logits)
    returns True to stop; the list stops when any does."""

    def __call__(self, input_ids: np.ndarray, logits: np.ndarray) -> bool:
        return any(criterion(input_ids, logits) for criterion in self)


def _bad(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message)


def _refuse_unsupported(where: str, kwargs: Dict[str, Any]) -> None:
    """llama-cpp-python arguments synapse has no feature for: an error when set
    to anything but an "off" value, rather than silently ignored."""
    for name, value in kwargs.items():
        if name not in _HARMLESS and value not in (None, False, 0, [], {}):
            raise _bad(f"{where}: {name}={value!r} is not supported by synapse")


def _grammar_text(grammar: Union[LlamaGrammar, str, None]) -> str:
    """The GBNF text of a `grammar=` argument: a LlamaGrammar, GBNF text
    (checked here, as LlamaGrammar.from_string would), or None / "" for none."""
    if grammar is None or isinstance(grammar, str) and not grammar:
        return ""
    if isinstance(grammar, str):
        grammar = LlamaGrammar.from_string(grammar)
    if not isinstance(grammar, LlamaGrammar):
        raise TypeError(f"grammar: expected a LlamaGrammar or GBNF text (str), got {type(grammar).__name__}")
    return grammar.grammar


def _response_format_schema(response_format: Optional[Dict[str, Any]]):
    """The JSON Schema a chat `response_format` asks for, as (field, schema),
    or None for plain text. llama-server's forms: {"type": "text"};
    {"type": "json_object"} with an optional "schema" (llama-cpp-python's
    form); {"type": "json_schema", "json_schema": {"schema": ..., "strict":
    ...}} (OpenAI's; enforced, strict or not). An absent or empty schema is
    {"type": "object"}: any JSON object."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise _bad(f"response_format = {response_format!r}: must be a dict such as {{'type': 'json_object'}}")
    kind = response_format.get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        field, schema = "response_format.schema", response_format.get("schema")
    elif kind == "json_schema":
        inner = response_format.get("json_schema")
        if not isinstance(inner, dict):
            raise _bad(f"response_format.json_schema = {inner!r}: must be a dict with a 'schema'")
        if not isinstance(inner.get("strict", False), bool):
            raise _bad(f"response_format.json_schema.strict = {inner['strict']!r}: must be a bool")
        field, schema = "response_format.json_schema.schema", inner.get("schema")
    else:
        raise _bad(f"response_format.type = {kind!r}: must be one of 'text', 'json_object', 'json_schema'")
    if schema is None or schema == {}:
        schema = {"type": "object"}
    if not isinstance(schema, (dict, bool)):
        raise _bad(f"{field} = {schema!r}: must be a JSON Schema (a dict)")
    return field, schema


class Llama:
    """A model and one context over it, as llama-cpp-python's `Llama`.

    Args:
        model_path: a GGUF file. Missing: ModelNotFoundError (a FileNotFoundError,
            and a ValueError as in llama-cpp-python);
            malformed or unsupported: FormatError / UnsupportedError (ValueErrors).
        n_ctx: positions of the context (the KV cache); 0 uses the model's
            training context (at most 4096).
        n_batch, n_ubatch: the most prompt tokens per forward pass (the
            smaller of the two is used; results do not depend on it).
        n_threads: threads of the forward pass; None uses the physical cores.
        seed: the default seed of the sampler; -1 (or LLAMA_DEFAULT_SEED)
            draws a new one for every call, as llama-cpp-python documents.
        logits_all: keep every evaluated token's logits (`scores`,
            `eval_logits`), as llama-cpp-python's logits_all=True.
        last_n_tokens_size: the repeat-penalty window in tokens.
        chat_format: None renders the file's tokenizer.chat_template with the
            library's Jinja engine, as llama-server does (the built-in formats
            when the file has none, or when the library cannot parse it: a
            warning says so); "jinja" renders it with Python's Jinja2 as
            Hugging Face does; another name picks a built-in format
            (`synapse.chat_formats()`). Tools and reasoning need a Jinja
            template (None or "jinja").
        embedding: allow embed() and create_embedding() (llama-cpp-python's
            flag; without it they raise RuntimeError, as there).
        pooling_type: how embed() pools an input's token vectors
            (LLAMA_POOLING_TYPE_*): UNSPECIFIED takes the file's
            <arch>.pooling_type, else NONE (one vector per token).
        type_k, type_v: the KV cache's K and V row types, as GGML type ids
            (GGML_TYPE_F16, the default when None; GGML_TYPE_BF16,
            GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_0, GGML_TYPE_IQ4_NL),
            as llama-cpp-python's; another id: InvalidArgumentError.
        verbose: print a line about the model to stderr on load.

    Threads: a Llama may be used from several threads; its calls are
    serialised by a lock (one runs, the others wait their turn), so it never
    hangs or aborts. A streaming iterator holds the lock only while it takes
    each step: another call on the same Llama, from any thread, cancels the
    stream in progress (its next step raises InvalidArgumentError) before it
    runs, since the two share one context. For parallel work use one Llama
    per thread, or create_completions (one batch of sequences).

    Memory (weights mapping, KV cache, threads) is freed when the object is
    dropped, at once by close(), or at the end of a `with Llama(...) as llm:`
    block; using it afterwards raises InvalidArgumentError.
    """

    def __init__(
        self,
        model_path: str,
        *,
        n_ctx: int = 512,
        n_batch: int = 512,
        n_ubatch: int = 512,
        n_threads: Optional[int] = None,
        seed: int = LLAMA_DEFAULT_SEED,
        logits_all: bool = False,
        last_n_tokens_size: int = 64,
        chat_format: Optional[str] = None,
        embedding: bool = False,
        pooling_type: int = LLAMA_POOLING_TYPE_UNSPECIFIED,
        type_k: Optional[int] = None,
        type_v: Optional[int] = None,
        verbose: bool = True,
        **kwargs: Any,
    ):
        self._lock = threading.RLock()
        self._closed = False
        for name, value in (("n_ctx", n_ctx), ("n_batch", n_batch), ("n_ubatch", n_ubatch)):
            if not isinstance(value, int) or value < (0 if name == "n_ctx" else 1):
                raise _bad(f"{name} = {value!r}: must be an integer >= {0 if name == 'n_ctx' else 1}")
        if n_threads is not None and (not isinstance(n_threads, int) or n_threads < 1):
            raise _bad(f"n_threads = {n_threads!r}: must be None or an integer >= 1")
        seed = _check_seed(seed)
        if not isinstance(last_n_tokens_size, int) or last_n_tokens_size < -1:
            raise _bad(f"last_n_tokens_size = {last_n_tokens_size!r}: must be an integer >= -1")
        if not isinstance(pooling_type, int) or not -1 <= pooling_type <= 4:
            raise _bad(f"pooling_type = {pooling_type!r}: must be one of LLAMA_POOLING_TYPE_* (-1 to 4)")
        self.embedding = bool(embedding)
        self._pooling_type = pooling_type
        self.model_path = os.fspath(model_path)
        self.verbose = verbose
        self.n_batch = n_batch
        self.n_ubatch = n_ubatch
        self.last_n_tokens_size = last_n_tokens_size
        self._logits_all = bool(logits_all)
        self._seed = seed
        self._stream: Optional[_synapse.Stream] = None
        self._stream_prefix: List[int] = []  # the tokens the reply in progress started from
        self.cache: Optional[BaseLlamaCache] = None
        self._restored_logits: Optional[np.ndarray] = None  # load_state: the saved last row until the next decode
        self._model = _synapse.Model.load(self.model_path)
        _legacy_context_args(self._model, kwargs)
        _refuse_unsupported("Llama", kwargs)
        for name, value in (("type_k", type_k), ("type_v", type_v)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise _bad(f"{name} = {value!r}: must be None or a GGML type id (GGML_TYPE_*)")
        self._ctx = _synapse.Context(self._model, n_threads or 0)
        self._ctx.set_kv_types(GGML_TYPE_F16 if type_k is None else type_k,
                               GGML_TYPE_F16 if type_v is None else type_v)
        self.n_threads = self._ctx.n_threads
        self._seq = self._ctx.new_sequence(n_ctx)
        # logits_all: row i holds the logits after input_ids[i] (NaN for rows a completion ran).
        self._scores = np.full((self._seq.n_ctx, self._model.n_vocab), np.nan, dtype=np.float32) \
            if self._logits_all else None
        self.context_params = SimpleNamespace(n_ctx=self._seq.n_ctx, n_batch=n_batch, n_ubatch=n_ubatch,
                                              n_threads=self.n_threads, n_threads_batch=self.n_threads,
                                              logits_all=self._logits_all, type_k=self._ctx.type_k,
                                              type_v=self._ctx.type_v)
        self._batch: Optional[_synapse.BatchRunner] = None  # create_completions' scheduler
        self.chat_format = _CHAT_FORMAT_ALIASES.get(chat_format, chat_format)
        self._jinja: Optional[Jinja2ChatFormatter] = None  # chat_format="jinja": Python's Jinja2
        self._template: Optional[_synapse.JinjaChatTemplate] = None  # chat_format=None: the library's engine
        self._syntax: Optional[_synapse.ChatSyntax] = None  # how the template's family writes calls and reasoning
        if self.chat_format is None and self._model.chat_template is not None:
            try:
                self._template = _synapse.JinjaChatTemplate.for_model(self._model)
            except Error as e:
                warnings.warn(f"{self.model_path}: tokenizer.chat_template: {e}; using the built-in chat formats "
                              "(chat_format='jinja' renders it with Jinja2)", stacklevel=2)
            else:
                self._syntax = self._template.syntax()
        elif self.chat_format == "jinja":
            template = self._model.chat_template
            if template is None:
                raise _bad(f"chat_format='jinja': {self.model_path} has no tokenizer.chat_template")
            self._jinja = Jinja2ChatFormatter(template, eos_token=self._token_str(self.token_eos()),
                                              bos_token=self._token_str(self.token_bos()))
            self._syntax = _synapse.ChatSyntax(template, self._model.architecture)
        elif self.chat_format is not None and self.chat_format not in chat_formats():
            raise _bad(f"chat_format = {chat_format!r}: expected None, 'jinja' or one of {chat_formats()}")
        self.metadata: Dict[str, str] = self._model.metadata
        if verbose:
            print(f"synapse: {self.model_path}: {self._model.architecture}, {self._model.n_params} parameters, "
                  f"n_ctx {self.n_ctx()}, {self.n_threads} threads", file=sys.stderr)

    # --- the model ---------------------------------------------------------

    def n_ctx(self) -> int:
        """Positions of the context (KV cache)."""
        return self._seq.n_ctx

    def n_vocab(self) -> int:
        return self._model.n_vocab

    def n_embd(self) -> int:
        return self._model.n_embd

    def token_bos(self) -> int:
        """The BOS token id (-1 when the vocabulary has none)."""
        return self._model.bos

    def token_eos(self) -> int:
        """The EOS token id (-1 when the vocabulary has none)."""
        return self._model.eos

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> List[int]:
        """llama_tokenize: `text` (UTF-8 bytes) to token ids. add_bos adds BOS (and
        EOS) as the vocabulary asks; special parses control-token texts such as
        "<|im_start|>" into their ids."""
        if isinstance(text, str):
            raise TypeError("tokenize() takes bytes (e.g. text.encode('utf-8')), as llama-cpp-python")
        return self._model.tokenize(bytes(text), add_bos, special)

    def detokenize(self, tokens: Sequence[int], prev_tokens: Optional[Sequence[int]] = None,
                   special: bool = False) -> bytes:
        """llama_detokenize: token ids to UTF-8 bytes (special renders control
        tokens' text). OutOfRangeError (a ValueError) for an id outside the
        vocabulary. prev_tokens is accepted for llama-cpp-python's signature."""
        return self._model.detokenize(list(tokens), special)

    def pooling_type(self) -> int:
        """The pooling embed() uses (LLAMA_POOLING_TYPE_*): pooling_type as given,
        else the file's <arch>.pooling_type, else NONE (llama_context's rule)."""
        if self._pooling_type != LLAMA_POOLING_TYPE_UNSPECIFIED:
            return self._pooling_type
        own = self._model.pooling_type
        return own if own != LLAMA_POOLING_TYPE_UNSPECIFIED else LLAMA_POOLING_TYPE_NONE

    # --- embeddings -------------------------------------------------------------

    def embed(self, input: Union[str, List[str]], normalize: bool = False, truncate: bool = True,
              return_count: bool = False):
        """llama-cpp-python's Llama.embed: the embeddings of a string or a list of
        strings, tokenized with BOS (as tokenize(text, add_bos=True)). Pooled
        (mean, cls, last): one list of n_embd floats per input; NONE: one such
        list per token; RANK: the classifier's outputs. A str input gives one
        result, a list a list of them. normalize: L2-normalise every vector
        (rank scores are left as they are). truncate: cut each input to n_batch
        tokens, else InvalidArgumentError when one is longer (either way an input
        must fit in n_ctx). return_count: also return the total token count.
        All inputs run in one batched forward pass (GIL released); each input's
        vectors are the same whatever else is in the call. RuntimeError unless
        the Llama was made with embedding=True."""
        if not self.embedding:
            raise RuntimeError("Llama model must be created with embedding=True to call this method")
        texts = [input] if isinstance(input, str) else list(input)
        if not texts or not all(isinstance(t, str) for t in texts):
            raise _bad("embed: input must be a string or a non-empty list of strings")
        inputs = []
        for i, text in enumerate(texts):
            ids = self.tokenize(text.encode("utf-8"))
            if truncate:
                ids = ids[:self.n_batch]
            elif len(ids) > self.n_batch:
                raise _bad(f"embed: input {i} is {len(ids)} tokens, more than n_batch {self.n_batch}")
            inputs.append(ids)
        pooling = self.pooling_type()
        norm = 2 if normalize and pooling != LLAMA_POOLING_TYPE_RANK else -1
        results = self._ctx.embed(inputs, pooling, norm, self.n_ctx())
        data = [rows if pooling == LLAMA_POOLING_TYPE_NONE else rows[0] for rows, _ in results]
        output = data[0] if isinstance(input, str) else data
        if return_count:
            return output, sum(n for _, n in results)
        return output

    def create_embedding(self, input: Union[str, List[str]], model: Optional[str] = None) -> Dict[str, Any]:
        """llama-cpp-python's Llama.create_embedding: OpenAI's embeddings reply
        {"object": "list", "data": [{"object": "embedding", "embedding", "index"}],
        "model", "usage"} over embed(input) (not normalised, as there)."""
        embeds, total_tokens = self.embed(input if isinstance(input, list) else [input], return_count=True)
        data = [{"object": "embedding", "embedding": e, "index": i} for i, e in enumerate(embeds)]
        return {"object": "list", "data": data, "model": model if model is not None else self.model_path,
                "usage": {"prompt_tokens": total_tokens, "total_tokens": total_tokens}}

    # --- low level: eval and logits -------------------------------------------

    @property
    def _tokens(self) -> List[int]:
        """The ids whose K/V the sequence holds, in order: kept by the library
        (Sequence.tokens), which every decode, truncate, clear and fork updates.
        While a reply runs on its worker (which decodes into the sequence), the
        prefix it started from: the sequence is read only once it is joined."""
        if self._stream is not None:
            return list(self._stream_prefix)
        return self._seq.tokens

    @property
    def n_tokens(self) -> int:
        """Tokens in the context (evaluated and kept)."""
        return len(self._tokens)

    @property
    def input_ids(self) -> np.ndarray:
        """The tokens in the context, int32 [n_tokens]."""
        return np.array(self._tokens, dtype=np.intc)

    _input_ids = input_ids  # llama-cpp-python's name for the same view

    @_locked
    def eval(self, tokens: Sequence[int]) -> None:
        """Appends `tokens` to the context and runs them (GIL released, in
        chunks of min(n_batch, n_ubatch): the results do not depend on it).
        Afterwards `logits` holds the last token's logits (with logits_all,
        `scores` every token's). InvalidArgumentError when they do not fit in
        n_ctx, OutOfRangeError for a bad id; nothing is kept then."""
        self._end_stream()
        tokens = [int(t) for t in tokens]
        step = min(self.n_batch, self.n_ubatch)
        if len(self._tokens) + len(tokens) > self.n_ctx():
            raise _bad(f"eval: {len(tokens)} tokens do not fit: {len(self._tokens)} of n_ctx {self.n_ctx()} "
                       "positions are in use")
        for i in range(0, len(tokens), step):
            chunk = tokens[i:i + step]
            n = self._seq.n_past
            self._ctx.decode(self._seq, chunk, self._logits_all)
            self._restored_logits = None
            if self._scores is not None:
                self._scores[n:n + len(chunk)] = self._ctx.logits

    @property
    def logits(self) -> np.ndarray:
        """The logits of the last token eval() ran: float32 [n_vocab], a read-only
        NumPy view of the engine's buffer (no copy). The next eval overwrites
        it in place; a completion invalidates it (InvalidArgumentError until
        the next eval). After load_state: the saved row (a copy)."""
        if self._restored_logits is not None:
            return self._restored_logits
        return self._ctx.logits[-1]

    @property
    def scores(self) -> np.ndarray:
        """logits_all=True: float32 [n_ctx, n_vocab], row i the logits after
        input_ids[i] for the tokens eval() (or generate()) ran; rows of tokens
        a completion ran are NaN (the generation loop keeps no logits rows).
        InvalidArgumentError without logits_all."""
        if self._scores is None:
            raise _bad("scores: needs Llama(..., logits_all=True)")
        return self._scores

    @property
    def eval_logits(self) -> Deque[List[float]]:
        """llama-cpp-python's eval_logits: the rows of `scores` for the tokens in
        the context (logits_all), or only the last token's logits (maxlen 1)."""
        if self._scores is not None:
            return deque(self._scores[:len(self._tokens)].tolist(), maxlen=self.n_ctx())
        rows = [self.logits.tolist()] if self._tokens else []
        return deque(rows, maxlen=1)

    @_locked
    def reset(self) -> None:
        """Empties the context: the next token is position 0."""
        self._end_stream()
        self._seq.clear()

    def set_seed(self, seed: int) -> None:
        """The seed of later calls that pass none (-1: random each call)."""
        self._seed = _check_seed(seed)

    def set_cache(self, cache: Optional[BaseLlamaCache]) -> None:
        """Uses `cache` (LlamaRAMCache, LlamaDiskCache; None: none) for
        completions: see synapse.llama_cache."""
        if cache is not None and not isinstance(cache, BaseLlamaCache):
            raise TypeError(f"set_cache: expected a LlamaRAMCache, LlamaDiskCache or None, got {type(cache).__name__}")
        self.cache = cache

    def tokenizer(self) -> LlamaTokenizer:
        """llama-cpp-python's LlamaTokenizer over this model's vocabulary."""
        return LlamaTokenizer(self)

    @_locked
    def save_state(self) -> LlamaState:
        """The context as a LlamaState: its tokens, their logits (see
        LlamaState.scores), the seed, and a copy of the KV cache. Loading it
        later continues byte for byte as this context would."""
        self._end_stream()
        n = len(self._tokens)
        scores = np.zeros((0, self.n_vocab()), dtype=np.float32)  # no logits kept (none yet, or a completion ran)
        if self._scores is not None:
            scores = self._scores[:n].copy()
        elif n and (self._restored_logits is not None or self._ctx.has_logits):
            scores = np.array(self.logits, dtype=np.float32).reshape(1, -1)
        copy = self._seq.fork(self._seq.n_past)
        return LlamaState(input_ids=np.array(self._tokens, dtype=np.intc), scores=scores, n_tokens=n,
                          llama_state=_KvSnapshot(self._model, copy),
                          llama_state_size=copy.capacity * self._model.kv_bytes_per_position, seed=self._seed)

    @_locked
    def load_state(self, state: LlamaState) -> None:
        """Makes the context what `state` saved: its tokens, KV cache, logits
        and seed. A state of another Llama of the same model, or an unpickled
        one, has its KV cache recomputed from its tokens (the same bits).
        InvalidArgumentError when its tokens do not fit in n_ctx or are not
        this model's."""
        if not isinstance(state, LlamaState):
            raise TypeError(f"load_state: expected a LlamaState, got {type(state).__name__}")
        self._end_stream()
        ids = [int(t) for t in np.asarray(state.input_ids)[:state.n_tokens]]
        if len(ids) > self.n_ctx():
            raise _bad(f"load_state: {len(ids)} tokens do not fit in n_ctx {self.n_ctx()}")
        snapshot = state.llama_state
        if isinstance(snapshot, _KvSnapshot) and snapshot.model is self._model and \
                snapshot.seq.n_past == len(ids) and snapshot.seq.n_ctx == self.n_ctx():
            self._seq = snapshot.seq.fork(len(ids))  # a copy (its tokens too): the state can be loaded again
            rows = np.asarray(state.scores, dtype=np.float32)
            if self._scores is not None:
                self._scores[:] = np.nan
                if rows.shape[0] == len(ids):
                    self._scores[:len(ids)] = rows
            self._restored_logits = rows[-1].copy() if len(ids) and rows.shape[0] else None
        else:
            self.reset()
            self.eval(ids)
        self._seed = _check_seed(int(state.seed))

    def close(self) -> None:
        """Frees the model, context and KV cache now; any later use raises
        InvalidArgumentError. Calling it again does nothing."""
        with self._lock:
            if self._closed:
                return
            self._end_stream()
            self._closed = True
            closed = _Closed(self.model_path)
            self._batch = None
            self._seq = self._ctx = self._model = closed
            self._scores = self._restored_logits = None

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgumentError(f"Llama({self.model_path!r}) is closed (close() or the end of its with "
                                       "block): make a new Llama")

    def __enter__(self) -> "Llama":
        self._check_open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self._end_stream()

    # --- llama-cpp-python's token-level API --------------------------------------

    def _sampler(self, top_k, top_p, min_p, typical_p, temp, repeat_penalty, frequency_penalty,
                 presence_penalty, tfs_z, mirostat_mode, grammar) -> "_synapse.Sampler":
        if grammar is not None:
            raise _bad("generate/sample: grammar is applied by the completion methods "
                       "(create_completion(grammar=...)), not here")
        if mirostat_mode:
            raise _bad(f"mirostat_mode = {mirostat_mode!r}: mirostat is not supported by synapse")
        if tfs_z != 1.0:
            raise _bad(f"tfs_z = {tfs_z!r}: tail-free sampling is not supported by synapse (llama.cpp removed it)")
        s = _synapse.SamplerParams()
        s.seed = self._seed
        s.temp, s.top_p, s.min_p, s.typical_p, s.top_k = temp, top_p, min_p, typical_p, top_k
        s.penalty_repeat, s.penalty_freq, s.penalty_present = repeat_penalty, frequency_penalty, presence_penalty
        s.penalty_last_n = self.last_n_tokens_size
        return _synapse.Sampler(s, self.n_ctx())

    def _draw(self, sampler: "_synapse.Sampler", logits_processor) -> int:
        if not self._tokens:
            raise _bad("sample: the context is empty (eval() a prompt first)")
        row = self.logits
        if logits_processor is not None:
            row = np.asarray(logits_processor(self.input_ids, np.array(row, dtype=np.float32)), dtype=np.float32)
        token = sampler.sample(row)
        sampler.accept(token)
        return token

    @_locked
    def sample(self, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, typical_p: float = 1.0,
               temp: float = 0.80, repeat_penalty: float = 1.0, frequency_penalty: float = 0.0,
               presence_penalty: float = 0.0, tfs_z: float = 1.0, mirostat_mode: int = 0,
               mirostat_eta: float = 0.1, mirostat_tau: float = 5.0, penalize_nl: bool = True,
               logits_processor: Optional[LogitsProcessorList] = None, grammar: Optional[LlamaGrammar] = None,
               idx: Optional[int] = None) -> int:
        """One token drawn from the last token's logits with llama.cpp's
        sampler chain (temp <= 0: greedy), seeded with the Llama's seed; it
        is not added to the context. logits_processor(input_ids, logits)
        may rewrite the row first. idx (another row) is not supported."""
        if idx is not None and idx != len(self._tokens) - 1:
            raise _bad(f"sample: idx={idx}: only the last token's logits are kept")
        sampler = self._sampler(top_k, top_p, min_p, typical_p, temp, repeat_penalty, frequency_penalty,
                                presence_penalty, tfs_z, mirostat_mode, grammar)
        return self._draw(sampler, logits_processor)

    def generate(self, tokens: Sequence[int], top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 typical_p: float = 1.0, temp: float = 0.80, repeat_penalty: float = 1.0, reset: bool = True,
                 frequency_penalty: float = 0.0, presence_penalty: float = 0.0, tfs_z: float = 1.0,
                 mirostat_mode: int = 0, mirostat_tau: float = 5.0, mirostat_eta: float = 0.1,
                 penalize_nl: bool = True, logits_processor: Optional[LogitsProcessorList] = None,
                 stopping_criteria: Optional[StoppingCriteriaList] = None,
                 grammar: Optional[LlamaGrammar] = None):
        """llama-cpp-python's token generator: evaluates `tokens`, then yields
        one sampled token at a time (each is evaluated before the next is
        drawn), forever: the caller stops (EOS is a token like any other).
        `generator.send(more_tokens)` appends tokens after the one just
        yielded. reset=True keeps the longest prefix the context already
        holds (at least the last token is recomputed); reset=False appends
        to the context. One sampler (seeded with the Llama's seed) serves the
        whole generation; stopping_criteria(input_ids, logits) ends it.
        Takes the lock for each step, as streams do."""
        tokens = [int(t) for t in tokens]
        with self._lock:
            self._check_open()
            sampler = self._sampler(top_k, top_p, min_p, typical_p, temp, repeat_penalty, frequency_penalty,
                                    presence_penalty, tfs_z, mirostat_mode, grammar)
            self._end_stream()
            if reset:
                keep = self._keep_prefix(tokens)
                tokens = tokens[keep:]
        while True:
            with self._lock:
                self._check_open()
                self.eval(tokens)
                token = self._draw(sampler, logits_processor)
                stop = stopping_criteria is not None and stopping_criteria(self.input_ids, np.array(self.logits))
            if stop:
                return
            more = yield token
            tokens = [token] + [int(t) for t in (more or [])]

    @classmethod
    def from_pretrained(cls, repo_id: str, filename: Optional[str], additional_files: Optional[List] = None,
                        local_dir: Optional[str] = None, local_dir_use_symlinks: Any = "auto",
                        cache_dir: Optional[str] = None, **kwargs: Any) -> "Llama":
        """Loads `filename` (a glob) of the Hugging Face repository `repo_id`
        from the local Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub or
        ~/.cache/huggingface/hub; or cache_dir), or from local_dir when
        given. Nothing is downloaded: a file not there is a ModelNotFoundError
        (a FileNotFoundError and a ValueError) saying how to fetch it.
        kwargs go to Llama()."""
        if filename is None:
            raise _bad("from_pretrained: filename is required (a file name or glob of the GGUF file)")
        if additional_files:
            raise _bad("from_pretrained: additional_files (split GGUF files) are not supported by synapse")
        if local_dir is not None:
            path = os.path.join(os.fspath(local_dir), filename)
            if not os.path.isfile(path):
                raise ModelNotFoundError(f"{path}: not found; synapse does not download models "
                                         f"(fetch {repo_id}/{filename} first)")
        else:
            path = find_cached_file(repo_id, filename, cache_dir)
        return cls(model_path=path, **kwargs)

    # --- completions -----------------------------------------------------------

    def __call__(self, prompt: Union[str, List[int]], **kwargs: Any):
        """Same as create_completion."""
        return self.create_completion(prompt, **kwargs)

    @_locked
    def create_completion(
        self,
        prompt: Union[str, List[int]],
        suffix: Optional[str] = None,
        max_tokens: Optional[int] = 16,
        temperature: float = 0.8,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        logprobs: Optional[int] = None,
        echo: bool = False,
        stop: Optional[Union[str, List[str]]] = [],
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        top_k: int = 40,
        stream: bool = False,
        seed: Optional[int] = None,
        logit_bias: Optional[Dict[int, float]] = None,
        model: Optional[str] = None,
        grammar: Optional[Union[LlamaGrammar, str]] = None,
        **kwargs: Any,
    ):
        """Generates a continuation of `prompt` (text, or token ids) with the
        library's generation loop and returns an OpenAI completion dict
        ({"id", "object": "text_completion", "created", "model", "choices":
        [{"text", "index", "logprobs", "finish_reason"}], "usage"}), or with
        stream=True an iterator of chunks of that shape whose texts concatenate
        to the whole text (the last chunk carries finish_reason "stop" or
        "length"). max_tokens None or <= 0: until the end of the context.
        temperature 0 is greedy. logprobs=N also reports each token's
        log-probability and its N most likely alternatives. grammar (a
        LlamaGrammar, or GBNF text) lets only tokens that keep the text a
        prefix of a sentence of the grammar be drawn; end of generation only
        once it is a sentence, and then, when nothing can follow, it is the
        only choice (finish_reason "stop"). The prompt's common prefix with
        the previous call's tokens is not recomputed."""
        if suffix is not None:
            raise _bad("suffix: fill-in-the-middle is not supported")
        _refuse_unsupported("create_completion", kwargs)
        ids = self._prompt_ids(prompt)
        params = self._params(max_tokens, temperature, top_p, min_p, typical_p, logprobs, stop,
                              frequency_penalty, presence_penalty, repeat_penalty, top_k, seed, logit_bias,
                              _grammar_text(grammar))
        text_prompt = prompt if isinstance(prompt, str) else self.detokenize(ids).decode("utf-8", "ignore")
        meta = _Meta("cmpl-", model or self.model_path, self._model)
        if stream:
            return self._stream_completion(ids, params, meta, text_prompt if echo else "", logprobs, len(text_prompt))
        result = self._run(ids, params)
        return meta.completion((text_prompt.encode("utf-8") if echo else b"") + result.text, result, logprobs,
                               len(text_prompt), len(ids))

    @_locked
    def create_completions(self, prompts: Sequence[Union[str, List[int]]], **kwargs: Any) -> List[Dict[str, Any]]:
        """Runs every prompt as one batch of sequences (the library's Scheduler:
        one forward pass per step for all of them) and returns, in order, the
        completion dict each would get from create_completion alone: the same
        tokens and text byte for byte (each row of a batch computes what it
        would alone). Takes create_completion's arguments except stream,
        suffix and echo (a grammar constrains every prompt's reply);
        seed=None gives each prompt the Llama's seed."""
        for bad in ("stream", "suffix", "echo"):
            if kwargs.get(bad):
                raise _bad(f"create_completions: {bad} is not supported")
            kwargs.pop(bad, None)
        model = kwargs.pop("model", None)
        _refuse_unsupported("create_completions", {k: v for k, v in kwargs.items() if k not in _COMPLETION_DEFAULTS})
        want_logprobs = kwargs.get("logprobs")
        kwargs["grammar"] = _grammar_text(kwargs.get("grammar"))
        params = self._params(**{**_COMPLETION_DEFAULTS, **kwargs})
        ids = [self._prompt_ids(p) for p in prompts]
        results = self._batch_runner(len(ids)).run(ids, [params] * len(ids)) if ids else []
        out = []
        for p, prompt_ids, r in zip(prompts, ids, results):
            text_prompt = p if isinstance(p, str) else self.detokenize(prompt_ids).decode("utf-8", "ignore")
            meta = _Meta("cmpl-", model or self.model_path, self._model)
            out.append(meta.completion(r.text, r, want_logprobs, len(text_prompt), len(prompt_ids)))
        return out

    @_locked
    def create_chat_completion(
        self,
        messages: List[Dict[str, Any]],
        functions: Optional[List[Dict[str, Any]]] = None,
        function_call: Optional[Union[str, Dict[str, Any]]] = None,
        tools: Optional[List[Dict[str, Any]]] = None,
        tool_choice: Optional[Union[str, Dict[str, Any]]] = None,
        temperature: float = 0.2,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        stream: bool = False,
        stop: Optional[Union[str, List[str]]] = [],
        seed: Optional[int] = None,
        max_tokens: Optional[int] = None,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        model: Optional[str] = None,
        logit_bias: Optional[Dict[int, float]] = None,
        logprobs: Optional[bool] = None,
        top_logprobs: Optional[int] = None,
        response_format: Optional[Dict[str, Any]] = None,
        grammar: Optional[Union[LlamaGrammar, str]] = None,
        parallel_tool_calls: bool = False,
        **kwargs: Any,
    ):
        """Formats `messages` ([{"role", "content"}, ...]) with the chat template
        (see chat_format) and generates the assistant's reply: an OpenAI
        chat-completion dict ({"id", "object": "chat.completion", "created",
        "model", "choices": [{"index", "message": {"role": "assistant",
        "content"}, "logprobs", "finish_reason"}], "usage"}), or with
        stream=True an iterator of "chat.completion.chunk" dicts (the first
        delta {"role": "assistant"}, then {"content": ...}, the last {} with
        finish_reason).

        Structured output: grammar (a LlamaGrammar, or GBNF text) constrains
        the reply as in create_completion; response_format {"type":
        "json_object"} (optionally with "schema": a JSON Schema) or {"type":
        "json_schema", "json_schema": {"schema": ...}} makes it a JSON value
        the schema accepts (no schema: any JSON object), {"type": "text"} or
        None leaves it free. Another type, a bad schema, or both grammar and a
        JSON response_format is an InvalidArgumentError (a ValueError).

        Tools (with a Jinja template: chat_format None or "jinja"): `tools`
        (OpenAI's [{"type": "function", "function": {"name", "description",
        "parameters"}}]) are rendered by the template; the reply is parsed in
        the syntax of the template's family (Hermes/Qwen <tool_call>, Llama 3,
        Mistral, gpt-oss, ...) into message["tool_calls"] ([{"id", "type":
        "function", "function": {"name", "arguments": JSON text}}]) with
        finish_reason "tool_calls"; text that does not parse as a call stays
        content. tool_choice "auto" (the default) lets the model choose,
        "none" parses no call, "required" or {"type": "function", "function":
        {"name": N}} forces one by constrained decoding (arguments valid for
        the tool's schema). parallel_tool_calls (llama-server's default,
        False) allows more than one call. Assistant messages with tool_calls
        and "tool" messages in `messages` are rendered as the template writes
        them. A <think> block (or the family's reasoning) goes to
        message["reasoning_content"] (streamed as delta.reasoning_content);
        streamed calls come as delta.tool_calls, the name first and the
        arguments after. Bad tools, tool_choice or history: an
        InvalidArgumentError naming the field. functions/function_call
        (OpenAI's deprecated form) are not supported: use tools."""
        _refuse_unsupported("create_chat_completion", kwargs)
        if functions is not None or function_call is not None:
            raise _bad("create_chat_completion: functions/function_call are not supported; use tools/tool_choice")
        if not isinstance(parallel_tool_calls, bool):
            raise _bad(f"parallel_tool_calls = {parallel_tool_calls!r}: must be a bool")
        gbnf = _grammar_text(grammar)
        wanted = _response_format_schema(response_format)
        if wanted is not None:
            field, schema = wanted
            if gbnf:
                raise _bad(f"create_chat_completion: grammar and {field} both constrain the reply; pass one of them")
            try:
                gbnf = _synapse.json_schema_to_gbnf(json.dumps(schema))
            except Error as e:  # the converter's message names the keyword and its JSON pointer
                raise type(e)(f"{field}: {e}") from e
        tools_json = self._tools_json(tools)
        choice_json = tool_choice_json(tool_choice)
        ids, prompt_text = self._chat_prompt(messages, tools_json)
        reply = None
        if self._syntax is not None:
            thinking_open = self._syntax.prompt_opens_reasoning(prompt_text)
            tool_gbnf = self._syntax.tool_call_grammar(tools_json, choice_json, parallel_tool_calls, thinking_open)
            calls_parsed = bool(tools) and tool_choice != "none"
            if calls_parsed and gbnf:
                # llama-server: "Cannot use custom grammar constraints with tools."
                raise _bad("create_chat_completion: grammar/response_format cannot be combined with tools "
                           "(unless tool_choice='none')")
            gbnf = gbnf or tool_gbnf
            # Ids of calls the model writes none for: the same seed gives the same ids.
            wanted_seed = self._seed if seed is None else _check_seed(seed)
            id_seed = random.getrandbits(64) if wanted_seed == LLAMA_DEFAULT_SEED else wanted_seed
            reply = dict(thinking_open=thinking_open, tools_json=tools_json, tool_choice_json=choice_json,
                         parallel_tool_calls=parallel_tool_calls, id_seed=id_seed)
        elif tools:
            raise _bad(f"tools: chat_format={self.chat_format!r} is a built-in format, which has no tool calls; "
                       "use a model with a Jinja chat template (chat_format=None or 'jinja')")
        if isinstance(stop, str):
            stop = [stop]
        n_probs = (top_logprobs or 0) if logprobs else None
        params = self._params(max_tokens, temperature, top_p, min_p, typical_p, n_probs,
                              list(stop or []), frequency_penalty, presence_penalty,
                              repeat_penalty, top_k, seed, logit_bias, gbnf)
        meta = _Meta("chatcmpl-", model or self.model_path, self._model)
        if stream:
            return self._stream_chat(ids, params, meta, n_probs, reply)
        result = self._run(ids, params)
        text = result.text.decode("utf-8", "ignore")
        finish = result.finish_reason
        if reply is None:
            message = {"role": "assistant", "content": text}
        else:
            message = json.loads(self._syntax.reply_message(result.text, **reply))
            if "tool_calls" in message and finish == "stop":
                finish = "tool_calls"
        return meta.chat(message, result if n_probs is not None else None, finish, len(ids), len(result.tokens))

    # --- internals ---------------------------------------------------------------

    def _batch_runner(self, n: int) -> "_synapse.BatchRunner":
        """The library's Scheduler with at least n slots of n_ctx positions,
        kept between calls (its Context and KV caches are the costly part)."""
        if self._batch is None or self._batch.n_parallel < n:
            self._batch = None  # free the old slots first
            sp = _synapse.SchedulerParams()
            sp.n_parallel = n
            sp.n_ctx = self.n_ctx()
            sp.n_ubatch = min(self.n_batch, self.n_ubatch)
            sp.n_batch = max(self.n_batch, sp.n_ubatch * n)
            sp.n_threads = self.n_threads
            sp.type_k = self._ctx.type_k
            sp.type_v = self._ctx.type_v
            self._batch = _synapse.BatchRunner(self._model, sp)
        return self._batch

    def _token_str(self, token: int) -> str:
        return self._model.token_text(token).decode("utf-8", "ignore") if token >= 0 else ""

    def _prompt_ids(self, prompt: Union[str, List[int]]) -> List[int]:
        if isinstance(prompt, str):
            # As llama-cpp-python: BOS per the vocabulary, special-token texts parsed.
            return self.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        if isinstance(prompt, (bytes, bytearray)):
            raise TypeError("prompt must be str or a list of token ids")
        return [int(t) for t in prompt]

    def _tools_json(self, tools: Optional[List[Dict[str, Any]]]) -> str:
        """`tools` as JSON text, checked by the library ("" for none)."""
        if tools is None or tools == []:
            return ""
        if not isinstance(tools, list):
            raise _bad(f"tools = {tools!r}: must be a list of {{'type': 'function', 'function': {{...}}}} dicts")
        text = json.dumps(tools)
        _synapse.validate_chat_tools(text)
        return text

    def _chat_prompt(self, messages: List[Dict[str, Any]], tools_json: str = ""):
        """The prompt's token ids and its text ("" for the built-in formats)."""
        check_messages(messages, parts_allowed=self._syntax is not None)
        if self._template is not None:
            # The library's engine: BOS text removed, BOS added per the vocabulary.
            text = self._template.apply(json.dumps(messages), True, tools_json)
            return self.tokenize(text.encode("utf-8"), add_bos=True, special=True), text
        if self._jinja is not None:
            _synapse.validate_chat_messages(json.dumps(messages))
            extra = {"tools": json.loads(tools_json)} if tools_json else {}
            text = self._jinja.render(messages, add_generation_prompt=True, **extra)
            bos = self._jinja.bos_token
            # The template writes BOS itself when the model wants one.
            add_bos = not (bos and text.startswith(bos))
            return self.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True), text
        pairs = [(m["role"], m.get("content") or "") for m in messages]
        return _synapse.tokenize_chat(self._model, self.chat_format, pairs, True), ""

    def _params(self, max_tokens, temperature, top_p, min_p, typical_p, logprobs, stop, frequency_penalty,
                presence_penalty, repeat_penalty, top_k, seed, logit_bias,
                grammar: str = "") -> "_synapse.GenerationParams":
        s = _synapse.SamplerParams()
        s.seed = self._seed if seed is None else _check_seed(seed)
        s.penalty_last_n = self.last_n_tokens_size
        s.temp, s.top_p, s.min_p, s.typical_p, s.top_k = temperature, top_p, min_p, typical_p, top_k
        s.penalty_repeat, s.penalty_freq, s.penalty_present = repeat_penalty, frequency_penalty, presence_penalty
        if logit_bias:
            biases = []
            for tok, bias in logit_bias.items():
                tok = int(tok)
                if not 0 <= tok < self.n_vocab():
                    raise OutOfRangeError(f"logit_bias: token {tok} outside the vocabulary [0, {self.n_vocab()})")
                biases.append(_synapse.LogitBias(tok, float(bias)))
            s.logit_bias = biases
        s.grammar = grammar  # GBNF text (_grammar_text); "": none
        p = _synapse.GenerationParams()
        p.sampling = s
        p.max_tokens = -1 if max_tokens is None or max_tokens <= 0 else int(max_tokens)
        p.stop = [stop] if isinstance(stop, str) else list(stop or [])
        if logprobs is not None:
            if not isinstance(logprobs, int) or logprobs < 0:
                raise _bad(f"logprobs = {logprobs!r}: must be None or an integer >= 0")
            p.logprobs = True
            p.n_probs = logprobs
        p.n_ubatch = min(self.n_batch, self.n_ubatch)
        return p

    def _end_stream(self) -> None:
        """Joins the reply in progress, if any (cancelling it unless it is
        over); the sequence's tokens are what its cache holds."""
        stream = getattr(self, "_stream", None)
        if stream is not None:
            stream.stop()
            self._stream = None

    def _start(self, ids: List[int], params, keep_steps: bool) -> "_synapse.Stream":
        """Starts the library's generate() on the context, reusing the longest
        prefix of `ids` already in the sequence (at least the last token is
        recomputed, for its logits)."""
        self._end_stream()
        if not ids:
            raise _bad("prompt: empty (no tokens and no BOS)")
        self._cache_lookup(ids)
        keep = self._keep_prefix(ids)
        self._restored_logits = None  # the generation loop overwrites the logits buffer
        if self._scores is not None:
            self._scores[keep:] = np.nan  # the loop keeps no rows
        self._stream_prefix = ids[:keep]
        self._stream = _synapse.Stream(self._ctx, self._seq, ids[keep:], params, keep_steps, ids[:keep])
        return self._stream

    def _keep_prefix(self, ids: List[int]) -> int:
        """Keeps the longest prefix of `ids` the context holds (at most all
        but the last id, which is recomputed for its logits) and returns its
        length: the library's prefix reuse (Sequence.keep_common_prefix).
        Where the cache cannot be cut back to it (a sliding window has given
        back some of it, or a recurrent model's state, Qwen3.5's, holds the
        whole sequence) it goes back to the latest snapshot before it (one
        is kept at the end of each prompt and every 256 positions), else to
        position 0, as the scheduler does."""
        n = self._seq.n_past
        keep = self._seq.keep_common_prefix(ids)
        if keep < n:
            self._restored_logits = None
        return keep

    def _cache_lookup(self, ids: List[int]) -> None:
        """With a cache set: loads the cached state sharing the longest prefix
        with `ids` when it shares more than the context does (llama-cpp-python)."""
        if self.cache is None:
            return
        try:
            state = self.cache[ids]
        except KeyError:
            return
        if longest_token_prefix(np.asarray(state.input_ids)[:state.n_tokens].tolist(), ids) > \
                longest_token_prefix(self._tokens, ids):
            self.load_state(state)

    def _cache_store(self) -> None:
        """With a cache set: stores the context's state under its tokens."""
        if self.cache is not None and self._tokens:
            self.cache[list(self._tokens)] = self.save_state()

    def _run(self, ids: List[int], params) -> "_synapse.GenerationResult":
        stream = self._start(ids, params, keep_steps=False)
        # A KeyboardInterrupt raised here has cancelled the reply; the next
        # call joins its worker (_end_stream) before using the context.
        result = stream.result()
        self._end_stream()
        self._cache_store()
        return result

    def _steps(self, ids: List[int], params) -> Iterator[tuple]:
        """The reply's steps as the worker produces them (see _synapse.Stream.poll),
        taking the lock for each batch of steps, never across a yield."""
        with self._lock:
            self._check_open()
            stream = self._start(ids, params, keep_steps=True)
        try:
            while True:
                with self._lock:
                    if self._stream is not stream:
                        raise _bad(_STREAM_CANCELLED)
                    steps = stream.poll()
                    if not steps:
                        self._end_stream()
                        self._cache_store()
                if not steps:
                    break
                for step in steps:
                    if self._stream is not stream:  # another call took the context meanwhile
                        raise _bad(_STREAM_CANCELLED)
                    yield step
        finally:
            if self._stream is stream:  # interrupted or abandoned: the next call joins it
                stream.cancel()

    def _stream_completion(self, ids, params, meta, echo_text, logprobs, prompt_len) -> Iterator[Dict[str, Any]]:
        if echo_text:
            yield meta.completion_chunk(echo_text, None, 0, None)
        offset = prompt_len
        for step in self._steps(ids, params):
            tok, eog, text, _, _, finish = step
            piece = text.decode("utf-8", "ignore")
            with_logprobs = logprobs is not None and tok >= 0 and not eog
            if piece or finish is not None or with_logprobs:
                yield meta.completion_chunk(text, [step] if with_logprobs else None, offset, finish)
            offset += len(piece)

    def _stream_chat(self, ids, params, meta, n_probs, reply) -> Iterator[Dict[str, Any]]:
        """Chunks of the reply: with a Jinja template, the library's streaming
        parser turns the pieces into content, reasoning_content and
        tool_calls deltas (text that may begin a call is held until it is
        decided); else each piece is content."""
        yield meta.chat_chunk({"role": "assistant"}, None, None)
        parser = self._syntax.stream(**reply) if reply is not None else None
        called = False
        for step in self._steps(ids, params):
            tok, eog, text, _, _, finish = step
            chunk_lp = [step] if n_probs is not None and tok >= 0 and not eog else None
            if parser is None:
                piece = text.decode("utf-8", "ignore")
                deltas = [{"content": piece}] if piece else []
            else:
                deltas = json.loads(parser.feed(text))
                if finish is not None:
                    deltas += json.loads(parser.finish())
            if not deltas and chunk_lp is not None:
                deltas = [{"content": ""}]
            for i, delta in enumerate(deltas):
                called = called or "tool_calls" in delta
                yield meta.chat_chunk(delta, chunk_lp if i == 0 else None, None)
            if finish is not None:
                yield meta.chat_chunk({}, None, "tool_calls" if called and finish == "stop" else finish)


_COMPLETION_DEFAULTS = dict(max_tokens=16, temperature=0.8, top_p=0.95, min_p=0.05, typical_p=1.0, logprobs=None,
                            stop=[], frequency_penalty=0.0, presence_penalty=0.0, repeat_penalty=1.0, top_k=40,
                            seed=None, logit_bias=None, grammar=None)


class _Meta:
    """The id, creation time and model name shared by one response's dicts,
    which the library's reply formatter writes in llama-cpp-python's dialect
    (synapse/reply_format.hpp: the chosen token in top_logprobs, text_offset
    in characters, invalid UTF-8 bytes dropped)."""

    def __init__(self, prefix: str, name: str, model: "_synapse.Model"):
        self.id = prefix + str(uuid.uuid4())
        self.created = int(time.time())
        self.name = name
        self._model = model

    def completion(self, text: bytes, result, logprobs: Optional[int], text_offset: int,
                   n_prompt: int) -> Dict[str, Any]:
        """A whole text_completion reply; `result`'s logprobs (counted from
        text_offset characters) when logprobs is not None."""
        return json.loads(_synapse.completion_json(
            self._model, self.id, self.created, self.name, text, result if logprobs is not None else None,
            text_offset, result.finish_reason, n_prompt, len(result.tokens), False))

    def completion_chunk(self, text: Union[str, bytes], steps, text_offset: int,
                         finish: Optional[str]) -> Dict[str, Any]:
        """One streamed chunk: `steps`' logprobs (Stream.poll() tuples), or None."""
        return json.loads(_synapse.completion_json(self._model, self.id, self.created, self.name, text, steps,
                                                   text_offset, finish, 0, 0, True))

    def chat(self, message: Dict[str, Any], result, finish: str, n_prompt: int, n_completion: int) -> Dict[str, Any]:
        """A whole chat.completion reply; `result`'s logprobs unless it is None."""
        return json.loads(_synapse.chat_json(self._model, self.id, self.created, self.name, json.dumps(message),
                                             result, finish, n_prompt, n_completion, False))

    def chat_chunk(self, delta: Dict[str, Any], steps, finish: Optional[str]) -> Dict[str, Any]:
        """One chat.completion.chunk: `steps`' logprobs (Stream.poll() tuples), or None."""
        return json.loads(_synapse.chat_json(self._model, self.id, self.created, self.name, json.dumps(delta), steps,
                                             finish, 0, 0, True))


def chat_formats() -> List[str]:
    """The names of the library's built-in chat formats (chat_format=...)."""
    return list(_synapse.chat_template_names())
