"""The prompt cache on a hybrid model (issue 50 item 4): tiny-qwen35's
Gated DeltaNet state cannot be cut back to an arbitrary position, so the
server keeps snapshots of it at the end of each prompt. A 3-turn chat whose
template re-renders the earlier assistant turns differently from the tokens
the model generated (as Qwen3's and Qwen3.5's templates drop the <think>
block of earlier turns) prefills only the new turn's tokens, and each reply
is byte-identical to the same conversation sent to a fresh server.

Registered in CTest by the top CMakeLists.txt (serve.prompt_cache.*).
"""
import requests

from test_serve import Server, canon

# ChatML whose earlier assistant turns keep only what follows </think>.
TEMPLATE = (
    "{%- for m in messages -%}"
    "<|im_start|>{{ m['role'] }}\n"
    "{%- if m['role'] == 'assistant' -%}{{ m['content'].split('</think>')[-1] | trim }}"
    "{%- else -%}{{ m['content'] }}{%- endif -%}<|im_end|>\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}")
USERS = ["Tell me about a cat named Tom.", "And his friend the dog?", "Where do they live?"]


def chat(server, messages, seed):
    r = server.post("/v1/chat/completions", {
        "messages": messages, "max_tokens": 12, "seed": seed, "temperature": 0.9, "logprobs": True,
        "top_logprobs": 2})
    assert r.status_code == 200, r.text
    return r.json()


def sig(r):
    c = r["choices"][0]
    return canon([c["message"]["content"], c["finish_reason"], c["logprobs"]["content"]])


def test_hybrid_chat_reuses_snapshots():
    args = ("-np", "1", "-t", "1", "-c", "1024", "--metrics", "--chat-template", TEMPLATE)
    warm, turns = [], []
    messages = []
    with Server("tiny-qwen35-q8_0.gguf", *args) as s:
        for i, user in enumerate(USERS):
            messages.append({"role": "user", "content": user})
            turns.append(list(messages))
            r = chat(s, messages, 100 + i)
            warm.append(r)
            # The reply as a reasoning model's: all of it taken as its
            # thoughts, which the template drops from the history.
            reply = r["choices"][0]["message"]["content"]
            messages.append({"role": "assistant", "content": "<think>\n" + reply + "\n</think>\n\nSure."})
        # The slot's snapshots (each turn's prompt end, at most 4): 4 DeltaNet layers x
        # (3 x 256 conv inputs + 4 heads x 32 x 32) floats each.
        text = requests.get(s.url("/metrics"), timeout=10).text
        line = [x for x in text.splitlines() if x.startswith("synapse:snapshot_bytes ")]
        assert line and float(line[0].split()[1]) == 3 * 4 * (3 * 256 + 4 * 32 * 32) * 4, line
    for i in range(1, len(USERS)):
        prev, cur = warm[i - 1]["usage"], warm[i]["usage"]
        # The previous prompt but its last token (recomputed for its logits)
        # comes from the snapshot; the rest is the new turn.
        assert cur["prompt_tokens_details"]["cached_tokens"] == prev["prompt_tokens"] - 1, (i, prev, cur)
        assert cur["prompt_tokens"] > prev["prompt_tokens"] + 5
    assert warm[0]["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    for i, conv in enumerate(turns):
        with Server("tiny-qwen35-q8_0.gguf", *args) as cold_server:
            cold = chat(cold_server, conv, 100 + i)
        assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert cold["usage"]["prompt_tokens"] == warm[i]["usage"]["prompt_tokens"]
        assert sig(cold) == sig(warm[i]), i
    assert len(warm[2]["choices"][0]["logprobs"]["content"]) > 0
