"""The opt-in `llama_cpp` compatibility package (python/compat): scripts that
make the calls LangChain's LlamaCpp / ChatLlamaCpp and LlamaIndex's LlamaCPP
make (tests/integration/*.py, run as programs) get what synapse.Llama gives for
the same arguments; the package refuses to install or import beside a real
llama-cpp-python."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from synapse import Llama

HERE = Path(__file__).resolve().parent
COMPAT = HERE.parent / "compat"


def _run(script: str, *args: str, env=None) -> dict:
    proc = subprocess.run([sys.executable, str(HERE / "integration" / script), *args], capture_output=True,
                          text=True, env=env, timeout=120)
    if "No module named 'llama_cpp'" in proc.stderr:
        pytest.fail("llama_cpp is not installed: pip install --no-build-isolation --no-index ./python/compat "
                    "(scripts/python.sh does)")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def ref(stories_path):
    """synapse.Llama with the settings the integrations pass."""
    llm = Llama(stories_path, n_ctx=512, n_batch=8, n_threads=1, verbose=False)
    yield llm
    llm.close()


def test_llama_cpp_is_synapse():
    proc = subprocess.run([sys.executable, "-c", "import llama_cpp, synapse; "
                           "assert llama_cpp.Llama is synapse.Llama and llama_cpp.LlamaGrammar is synapse.LlamaGrammar; "
                           "from llama_cpp.llama import LlamaState; from llama_cpp.llama_cache import LlamaRAMCache; "
                           "print(llama_cpp.__version__, llama_cpp.llama_supports_gpu_offload())"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0.3.0+synapse", "False"]


def test_langchain_llamacpp_calls(ref, stories_path, tmp_path):
    grammar = tmp_path / "words.gbnf"
    grammar.write_text("root ::= [a-z ]+\n")
    out = _run("langchain_llamacpp.py", stories_path, str(grammar))
    sampling = dict(max_tokens=12, seed=7, temperature=0.8, top_p=0.95, repeat_penalty=1.1, top_k=40)
    want = ref("Once upon a time", **sampling)["choices"][0]["text"]
    assert want and out["text"] == want
    assert out["stream_text"] == want
    assert out["stream_logprobs"] and all(lp is None for lp in out["stream_logprobs"])
    assert re.fullmatch(r"Once[a-z ]*", out["grammar_text"])
    assert out["grammar_text"] == ref("Once upon a time", grammar='root ::= "Once" [a-z ]*', stop=["."],
                                      **sampling)["choices"][0]["text"]
    assert re.fullmatch(r"[a-z ]+", out["grammar_file_text"])
    assert out["num_tokens"] == len(ref.tokenize(b"Once upon a time")) == 5


def test_llamaindex_llamacpp_calls(ref, stories_path):
    out = _run("llamaindex_llamacpp.py", stories_path)
    assert out["context_window"] == 512
    prompt = "<|user|>\nOnce upon a time</s>\n<|assistant|>\n"
    want = ref(prompt, seed=11, temperature=0.1, max_tokens=12)["choices"][0]["text"]
    assert out["text"] == want and out["stream_text"] == want


def test_chat_llamacpp_calls(ref, stories_path):
    out = _run("chat_llamacpp.py", stories_path)
    messages = [{"content": "You are a storyteller.", "role": "system"},
                {"content": "Tell me a story.", "role": "user"}]
    sampling = dict(max_tokens=12, temperature=0.8, top_p=0.95, top_k=40, repeat_penalty=1.1, seed=5)
    reply = ref.create_chat_completion(messages, **sampling)
    assert out["content"] == reply["choices"][0]["message"]["content"]
    assert out["stream_content"] == out["content"]
    assert out["finish_reason"] in ("stop", "length") and out["usage"]["completion_tokens"] > 0
    assert out["formatted_prompt"] == ("<s>[system] You are a storyteller.</s><s>[user] Tell me a story.</s>"
                                       "[assistant]")
    assert out["formatted_stop"] == ["</s>"] and out["stops_on_eos_id"] is True
    assert out["formatted_text"] == ref(out["formatted_prompt"], stop=["</s>"], max_tokens=12,
                                        seed=5)["choices"][0]["text"]


def _fake_llama_cpp_python(root: Path) -> dict:
    """An environment in which llama-cpp-python 0.3.16 looks installed (its dist-info)."""
    info = root / "llama_cpp_python-0.3.16.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: 0.3.16\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


def test_refuses_beside_real_llama_cpp_python(tmp_path):
    env = _fake_llama_cpp_python(tmp_path)
    proc = subprocess.run([sys.executable, "-c", "import llama_cpp"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode != 0
    assert "ImportError: llama-cpp-python 0.3.16 is installed in this environment" in proc.stderr
    proc = subprocess.run([sys.executable, str(COMPAT / "setup.py"), "--name"], capture_output=True, text=True,
                          env=env, cwd=COMPAT, timeout=60)
    assert proc.returncode != 0
    assert "synapse-llama-cpp-compat: not installed: llama-cpp-python 0.3.16 is installed" in proc.stderr
    # Without it, the same set-up script goes ahead.
    proc = subprocess.run([sys.executable, str(COMPAT / "setup.py"), "--name"], capture_output=True, text=True,
                          cwd=COMPAT, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "synapse-llama-cpp-compat", proc.stderr
