"""llama_cpp.llama: the Llama class and its helpers (synapse's)."""
from synapse import (  # noqa: F401  (re-exported)
    Llama,
    LlamaGrammar,
    LlamaState,
    LogitsProcessorList,
    StoppingCriteriaList,
)
