"""The calls LangChain's ChatLlamaCpp (langchain_community/chat_models/llamacpp.py)
makes on llama_cpp, with its field defaults, and a prompt built with
llama_cpp.llama_chat_format.Jinja2ChatFormatter as scripts written for
llama-cpp-python build one. Prints what each call returned, as JSON.

    python chat_llamacpp.py MODEL
"""
import json
import sys

from llama_cpp import Llama, LlamaGrammar  # noqa: F401  (validate_environment imports both)
from llama_cpp.llama_chat_format import ChatFormatterResponse, Jinja2ChatFormatter

model_path = sys.argv[1]
model_params = {"rope_freq_scale": 1.0, "rope_freq_base": 10000.0, "lora_path": None, "lora_base": None,
                "n_ctx": 512, "n_parts": -1, "seed": -1, "f16_kv": True, "logits_all": False, "vocab_only": False,
                "use_mlock": False, "n_threads": 1, "n_batch": 8, "use_mmap": True, "last_n_tokens_size": 64,
                "verbose": False}
client = Llama(model_path, **model_params)
params = {"max_tokens": 12, "temperature": 0.8, "top_p": 0.95, "top_k": 40, "logprobs": None, "stop": [],
          "repeat_penalty": 1.1, "seed": 5}
messages = [{"content": "You are a storyteller.", "role": "system"},
            {"content": "Tell me a story.", "role": "user"}]

out = {}
# _generate with streaming=False
response = client.create_chat_completion(messages=messages, **params)
out["content"] = response["choices"][0]["message"]["content"]
out["finish_reason"] = response["choices"][0].get("finish_reason")
out["usage"] = response.get("usage", {})
# _stream
content = []
for chunk in client.create_chat_completion(messages=messages, stream=True, **params):
    if len(chunk["choices"]) == 0:
        continue
    choice = chunk["choices"][0]
    if choice["delta"] is None:
        continue
    content.append(choice["delta"].get("content") or "")
out["stream_content"] = "".join(content)

# llama_chat_format
template = ("{% for m in messages %}{{ bos_token }}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}{% endfor %}"
            "{% if add_generation_prompt %}[assistant]{% endif %}")
formatter = Jinja2ChatFormatter(template=template, eos_token="</s>", bos_token="<s>", stop_token_ids=[2])
formatted = formatter(messages=messages)
assert isinstance(formatted, ChatFormatterResponse)
out["formatted_prompt"] = formatted.prompt
out["formatted_stop"] = formatted.stop
out["stops_on_eos_id"] = formatted.stopping_criteria([5, 2], None)
result = client(formatted.prompt, stop=formatted.stop, max_tokens=12, seed=5)
out["formatted_text"] = result["choices"][0]["text"]
print(json.dumps(out))
