"""The calls LangChain's LlamaCpp (langchain_community/llms/llamacpp.py) makes
on llama_cpp, in its order and with its field defaults; LangChain itself is not
imported. Prints what each call returned, as JSON.

    python langchain_llamacpp.py MODEL GRAMMAR_FILE
"""
import json
import sys

# validate_environment
from llama_cpp import Llama, LlamaGrammar

model_path, grammar_path = sys.argv[1], sys.argv[2]
values = {"rope_freq_scale": 0.0, "rope_freq_base": 0.0, "lora_path": None, "lora_base": None, "n_ctx": 512,
          "n_parts": -1, "seed": -1, "f16_kv": True, "logits_all": False, "vocab_only": False, "use_mlock": False,
          "n_threads": None, "n_batch": 8, "use_mmap": True, "last_n_tokens_size": 64, "verbose": False}
model_kwargs = {"n_threads": 1}  # LlamaCpp(model_kwargs=...)
model_params = dict(values)
model_params.update(model_kwargs)
try:
    client = Llama(model_path, **model_params)
except Exception as e:
    raise ValueError(f"Could not load Llama model from path: {model_path}. Received error {e}")
grammar = LlamaGrammar.from_string('root ::= "Once" [a-z ]*')
grammar_from_file = LlamaGrammar.from_file(grammar_path)

# _default_params, then _get_parameters: "stop_sequences" becomes "stop".
params = {"suffix": None, "max_tokens": 256, "temperature": 0.8, "top_p": 0.95, "logprobs": None, "echo": False,
          "repeat_penalty": 1.1, "top_k": 40, "stop": []}
invoke_kwargs = {"max_tokens": 12, "seed": 7}  # llm.invoke(prompt, max_tokens=..., seed=...)
prompt = "Once upon a time"

out = {}
# _call with streaming=False
result = client(prompt=prompt, **{**params, **invoke_kwargs})
out["text"] = result["choices"][0]["text"]
# _stream (streaming=True, the default): chunks' texts and logprobs
parts = client(prompt=prompt, stream=True, **{**params, **invoke_kwargs})
texts, logprobs = [], []
for part in parts:
    texts.append(part["choices"][0]["text"])
    logprobs.append(part["choices"][0].get("logprobs", None))
out["stream_text"] = "".join(texts)
out["stream_logprobs"] = logprobs
# grammar=LlamaGrammar, stop from the call
result = client(prompt=prompt, grammar=grammar, **{**params, "stop": ["."], **invoke_kwargs})
out["grammar_text"] = result["choices"][0]["text"]
result = client(prompt=prompt, grammar=grammar_from_file, **{**params, **invoke_kwargs})
out["grammar_file_text"] = result["choices"][0]["text"]
# get_num_tokens
out["num_tokens"] = len(client.tokenize(prompt.encode("utf-8")))
print(json.dumps(out))
