"""The calls LlamaIndex's LlamaCPP (llama_index/llms/llama_cpp/base.py) makes
on llama_cpp, in its order; LlamaIndex itself is not imported. Prints what
each call returned, as JSON.

    python llamaindex_llamacpp.py MODEL
"""
import json
import os
import sys

from llama_cpp import Llama

model_path = sys.argv[1]
context_window, verbose = 512, False  # LlamaCPP(context_window=512, verbose=False)
model_kwargs = {**{"n_ctx": context_window, "verbose": verbose}, **{"n_threads": 1}}
if not os.path.exists(model_path):
    raise ValueError("Provided model path does not exist. Please check the path or provide a model_url to download.")
model = Llama(model_path=model_path, **model_kwargs)
generate_kwargs = {"seed": 11}  # LlamaCPP(generate_kwargs=...)
generate_kwargs.update({"temperature": 0.1, "max_tokens": 12})

out = {"context_window": model.context_params.n_ctx}  # metadata
prompt = "<|user|>\nOnce upon a time</s>\n<|assistant|>\n"  # completion_to_prompt
# complete
generate_kwargs.update({"stream": False})
response = model(prompt=prompt, **generate_kwargs)
out["text"] = response["choices"][0]["text"]
# stream_complete
generate_kwargs.update({"stream": True})
response_iter = model(prompt=prompt, **generate_kwargs)
text = ""
for response in response_iter:
    delta = response["choices"][0]["text"]
    text += delta
out["stream_text"] = text
print(json.dumps(out))
