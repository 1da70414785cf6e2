"""POST /infill (issue 47 item 7) against llama-server v0.5.0's replies on the same model:
tests/data/server/infill.tiny-qwen2-f32.json (scripts/golden/make_infill_golden.py, llama-server
-t 1 -c 1024 -b 256 -np 1 -fa off; greedy, so each reply is a function of its prompt).

The real binary on loopback (tests/server/test_serve.py's Server). Registered in CTest by the top
CMakeLists.txt (serve.infill.*).
"""
import json
import os

import requests

from test_serve import DATA, Server, canon, sse

GOLDEN = os.path.join(DATA, "server", "infill.tiny-qwen2-f32.json")
ARGS = ("-t", "1", "-c", "1024", "-b", "256", "-np", "1")
# The fields of llama-server's reply synapse's /completion reply has too, all but the timings,
# the settings and the model's name (llama-server's path). "prompt" is the prompt sent to the
# model, detokenized with its special tokens: the FIM layout, byte for byte.
FIELDS = ("index", "content", "tokens", "id_slot", "stop", "prompt", "tokens_predicted", "tokens_evaluated",
          "stop_type", "stopping_word", "truncated", "has_new_line")


def golden():
    with open(GOLDEN) as f:
        return json.load(f)


def test_replies_are_llama_servers():
    g = golden()
    with Server(g["model"], *ARGS) as s:
        for case in g["cases"]:
            body, want = case["request"], case["reply"]
            r = s.post("/infill", body, stream=body.get("stream", False))
            assert r.status_code == want["status"], r.text
            if "events" in want:
                got = sse(r)
                # Every token's event: its text and id, as llama-server streams them.
                assert [(e["content"], e["tokens"], e["stop"]) for e in got[:-1]] == \
                       [(e["content"], e["tokens"], e["stop"]) for e in want["events"][:-1]]
                assert canon({k: got[-1][k] for k in FIELDS if k != "tokens"}) == \
                       canon({k: want["events"][-1][k] for k in FIELDS if k != "tokens"})
                continue
            got = r.json()
            assert canon({k: got[k] for k in FIELDS}) == canon({k: want["body"][k] for k in FIELDS}), body
        # Bad bodies: llama-server's 400s, message for message; where llama-server goes on or fails
        # with a 500, a 400 naming the field.
        for case, param in zip(g["bad_cases"], ["input_extra[0].text", "input_extra[0].filename", "input_extra",
                                                 "prompt", "input_suffix"]):
            r = s.post("/infill", case["request"])
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert err["type"] == "invalid_request_error" and err["param"] == param, err
            if case["reply"]["status"] == 400:
                assert err["message"] == case["reply"]["body"]["error"]["message"]
        assert s.post("/infill", {"input_prefix": {"a": 1}, "input_suffix": ""}).status_code == 400
        r = requests.post(s.url("/infill"), data=b"{not json", timeout=30)
        assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]


def test_model_without_fim_tokens_is_501():
    g = golden()
    want = g["no_fim_cases"][0]["reply"]
    with Server(g["no_fim_model"], *ARGS) as s:
        r = s.post("/infill", g["no_fim_cases"][0]["request"])
        assert r.status_code == want["status"] == 501, r.text
        err = r.json()["error"]
        assert (err["message"], err["type"], err["code"]) == \
               (want["body"]["error"]["message"], want["body"]["error"]["type"], 501)
        # /completion's "prompt" as llama-server v0.5.0 writes it on this model (BOS and a
        # special token's text written out; its reply to the same body, by hand).
        r = s.post("/completion", {"prompt": "Once upon a time <s>", "n_predict": 2, "temperature": 0}).json()
        assert (r["prompt"], r["tokens_evaluated"]) == ("<s> Once upon a time <s>", 7), r
        r = s.post("/completion", {"prompt": [1, 400, 401], "n_predict": 2, "temperature": 0}).json()
        assert r["prompt"] == "<s> do lo", r
