"""llama_cpp.llama_chat_format: the chat-formatter names code imports from
llama-cpp-python (Jinja2ChatFormatter, ChatFormatterResponse), over synapse's
Jinja2 renderer (synapse.chat). Chat formats are chosen with
Llama(chat_format=...) (synapse.chat_formats() lists the built-in ones);
multimodal chat handlers (Llava15ChatHandler, ...) are not provided."""
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from synapse import StoppingCriteriaList
from synapse.chat import Jinja2ChatFormatter as _Renderer


@dataclass
class ChatFormatterResponse:
    """A formatted prompt and the stops its format needs (llama-cpp-python's fields)."""
    prompt: str
    stop: Optional[Union[str, List[str]]] = None
    stopping_criteria: Optional[StoppingCriteriaList] = None
    added_special: bool = False


class Jinja2ChatFormatter(_Renderer):
    """llama-cpp-python's Jinja2ChatFormatter: called with messages (and
    tools, ...) it renders the template as Hugging Face does and returns a
    ChatFormatterResponse whose stop is the EOS text and whose
    stopping_criteria stops on stop_token_ids."""

    def __init__(self, template: str, eos_token: str, bos_token: str, add_generation_prompt: bool = True,
                 stop_token_ids: Optional[List[int]] = None):
        super().__init__(template, eos_token=eos_token, bos_token=bos_token)
        self.template = template
        self.add_generation_prompt = add_generation_prompt
        self.stop_token_ids = set(stop_token_ids) if stop_token_ids is not None else None

    def __call__(self, *, messages: List[Dict[str, Any]], functions=None, function_call=None, tools=None,
                 tool_choice=None, **kwargs: Any) -> ChatFormatterResponse:
        prompt = self.render(messages, add_generation_prompt=self.add_generation_prompt, functions=functions,
                             function_call=function_call, tools=tools, tool_choice=tool_choice, **kwargs)
        stopping = None
        if self.stop_token_ids is not None:
            ids = self.stop_token_ids
            stopping = StoppingCriteriaList([lambda tokens, logits: len(tokens) > 0 and int(tokens[-1]) in ids])
        return ChatFormatterResponse(prompt=prompt, stop=[self.eos_token], stopping_criteria=stopping,
                                     added_special=True)
