"""llama_cpp.llama_tokenizer: LlamaTokenizer (synapse.llama_tokenizer)."""
from synapse.llama_tokenizer import LlamaTokenizer  # noqa: F401  (re-exported)
