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


# --- tool calls and reasoning (the library's ChatSyntax) ---------------------


def check_messages(messages: Any, parts_allowed: bool) -> None:
    """The shape create_chat_completion needs: a non-empty list of dicts with a
    string role and content that is a str, None or (Jinja templates) a list of
    {"type": "text", "text": str} parts. Tool calls and tool messages are
    checked by the library (validate_chat_messages)."""
    if not isinstance(messages, list) or not messages:
        raise InvalidArgumentError("messages: a non-empty list of {'role', 'content'} dicts is required")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise InvalidArgumentError(f"messages[{i}]: must be a dict with a string 'role'")
        content = m.get("content")
        if content is None or isinstance(content, str):
            continue
        if not parts_allowed or not isinstance(content, list):
            raise InvalidArgumentError(f"messages[{i}].content: only text content is supported "
                                       + ("(a str, or a list of text parts)" if parts_allowed else "(a str)"))
        for k, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise InvalidArgumentError(f"messages[{i}].content[{k}]: only {{'type': 'text', 'text': str}} "
                                           "parts are supported")


def tool_choice_json(tool_choice: Any) -> str:
    """OpenAI's tool_choice as JSON text for the library: None is "auto"; a
    str ("auto", "none", "required") or {"type": "function", "function":
    {"name": ...}} is passed on (the library names what is wrong)."""
    if tool_choice is None:
        return ""
    if not isinstance(tool_choice, (str, dict)):
        raise InvalidArgumentError(f"tool_choice = {tool_choice!r}: must be 'auto', 'none', 'required' or "
                                   "{'type': 'function', 'function': {'name': ...}}")
    return json.dumps(tool_choice)
