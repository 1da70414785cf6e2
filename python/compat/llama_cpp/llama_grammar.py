"""llama_cpp.llama_grammar: LlamaGrammar (synapse's: from_string, from_file, from_json_schema)."""
from synapse import LlamaGrammar  # noqa: F401  (re-exported)
