"""llama-cpp-python's LlamaTokenizer: a Llama's vocabulary behind the
tokenize / detokenize / encode / decode names (what `Llama.tokenizer()`
returns). Thread-safe: the vocabulary is read-only."""
from __future__ import annotations

from typing import List, Optional, Sequence


class LlamaTokenizer:
    def __init__(self, llama):
        self._llama = llama

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = True) -> List[int]:
        """UTF-8 bytes to ids (special: control-token texts become their ids;
        llama-cpp-python's default here is True, unlike Llama.tokenize)."""
        return self._llama.tokenize(text, add_bos=add_bos, special=special)

    def detokenize(self, tokens: Sequence[int], prev_tokens: Optional[Sequence[int]] = None,
                   special: bool = False) -> bytes:
        return self._llama.detokenize(tokens, prev_tokens=prev_tokens, special=special)

    def encode(self, text: str, add_bos: bool = True, special: bool = True) -> List[int]:
        return self.tokenize(text.encode("utf-8", errors="ignore"), add_bos=add_bos, special=special)

    def decode(self, tokens: Sequence[int]) -> str:
        return self.detokenize(tokens).decode("utf-8", errors="ignore")

    @classmethod
    def from_ggml_file(cls, path: str) -> "LlamaTokenizer":
        from . import Llama
        return cls(Llama(model_path=path, verbose=False))
