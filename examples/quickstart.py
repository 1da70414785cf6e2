from synapse import Llama

llm = Llama(model_path="models/stories260K.gguf", n_ctx=512, verbose=False)

# A completion, as llama-cpp-python returns it (an OpenAI dict).
out = llm("Once upon a time", max_tokens=32, temperature=0)
print(out["choices"][0]["text"])

# A chat reply, streamed (the model's chat template; ChatML when it has none).
messages = [{"role": "user", "content": "Tell me a story."}]
for chunk in llm.create_chat_completion(messages, max_tokens=32, seed=1, stream=True):
    print(chunk["choices"][0]["delta"].get("content", ""), end="", flush=True)
print()

# Many prompts as one batch: each result is what it would be alone.
for r in llm.create_completions(["The dog", "The cat"], max_tokens=16, temperature=0):
    print(r["choices"][0]["text"])
