"""llama_cpp.llama_cache: the prompt caches (synapse.llama_cache)."""
from synapse.llama_cache import (  # noqa: F401  (re-exported)
    BaseLlamaCache,
    LlamaCache,
    LlamaDiskCache,
    LlamaRAMCache,
)
