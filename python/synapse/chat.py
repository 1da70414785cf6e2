"""Jinja chat templates, rendered as Hugging Face transformers renders them.

A GGUF file's `tokenizer.chat_template` is the Jinja source of the model's
tokenizer_config.json. transformers' `apply_chat_template` renders it in a
sandboxed environment with trim_blocks and lstrip_blocks, the loopcontrols
extension, a `tojson` filter that keeps non-ASCII characters, the globals
`raise_exception(message)` and `strftime_now(format)`, and the variables
`messages`, `bos_token`, `eos_token`, `add_generation_prompt` (plus any extra
keyword). Jinja2ChatFormatter does the same (llama-cpp-python has a class of
the same name for the same purpose).
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Dict, List

from ._synapse import InvalidArgumentError


def _raise_exception(message: str):
    # A template's own check (e.g. "roles must alternate"): the caller's
    # messages were wrong, so it is a bad argument (a ValueError).
    raise InvalidArgumentError(f"chat template: {message}")


def _tojson(value: Any, ensure_ascii: bool = False, indent=None, separators=None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class Jinja2ChatFormatter:
    """Renders a Jinja chat template.

    Args:
        template: the Jinja source (e.g. a GGUF's tokenizer.chat_template).
        eos_token, bos_token: the texts of the model's EOS and BOS tokens.

    Raises InvalidArgumentError (a ValueError) for a template that does not
    parse, or when the template calls raise_exception.
    """

    def __init__(self, template: str, eos_token: str, bos_token: str):
        try:
            import jinja2
            import jinja2.ext
            import jinja2.sandbox
        except ImportError as e:  # pragma: no cover - Debian's python3-jinja2 is a set-up dependency
            raise ImportError("chat_format='jinja' needs Jinja2 (Debian: python3-jinja2)") from e
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                           extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            self._template = env.from_string(template)
        except jinja2.TemplateError as e:
            raise InvalidArgumentError(f"chat template does not parse: {e}") from None
        self._jinja2 = jinja2
        self.eos_token = eos_token
        self.bos_token = bos_token

    def render(self, messages: List[Dict[str, Any]], add_generation_prompt: bool = True, **kwargs: Any) -> str:
        """The prompt text for `messages` ([{"role", "content"}, ...])."""
        try:
            return self._template.render(messages=messages, bos_token=self.bos_token, eos_token=self.eos_token,
                                         add_generation_prompt=add_generation_prompt, **kwargs)
        except InvalidArgumentError:
            raise
        except self._jinja2.TemplateError as e:
            raise InvalidArgumentError(f"chat template: {e}") from None
