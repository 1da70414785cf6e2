"""llama_cpp: synapse under llama-cpp-python's module and class names, for code
written against llama-cpp-python (LangChain's LlamaCpp and ChatLlamaCpp,
LlamaIndex's LlamaCPP, scripts from its README). Opt-in: installed only by
`pip install --no-build-isolation --no-index ./python/compat` (distribution
synapse-llama-cpp-compat), which refuses when a real llama-cpp-python is
installed; importing it with one present raises ImportError naming both.

Everything here is the `synapse` package: Llama, LlamaGrammar, LlamaState,
the caches and the tokenizer are synapse's classes (their docstrings say what
is supported and what is refused with a clear error). The ctypes low-level
API (llama_cpp.llama_cpp's llama_* functions), multimodal chat handlers and
speculative decoding are not provided.
"""
from ._guard import refusal as _refusal

_message = _refusal()
if _message is not None:
    raise ImportError(_message)

from synapse import (  # noqa: E402,F401  (re-exported)
    LLAMA_DEFAULT_SEED,
    BaseLlamaCache,
    Llama,
    LlamaCache,
    LlamaDiskCache,
    LlamaGrammar,
    LlamaRAMCache,
    LlamaState,
    LlamaTokenizer,
    LogitsProcessorList,
    StoppingCriteriaList,
)

from . import llama, llama_cache, llama_chat_format, llama_grammar, llama_tokenizer  # noqa: E402,F401

# llama-cpp-python's API level these names follow; the local label says it is synapse.
__version__ = "0.3.0+synapse"


def llama_supports_gpu_offload() -> bool:
    """synapse runs on the CPU only."""
    return False
