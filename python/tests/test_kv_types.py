"""type_k / type_v: the KV cache's types as llama-cpp-python passes them (GGML
type ids). A quantized cache gives the same text as the command line with the
same -ctk/-ctv, the same in a batch as alone, and ids synapse cannot cache in
are an InvalidArgumentError naming them."""
import subprocess

import pytest

import synapse
from synapse import GGML_TYPE_BF16, GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, InvalidArgumentError, Llama

from conftest import DATA

TINY = str(DATA / "models" / "tiny-llama-f32.gguf")  # head size 64: every block type fits
PROMPT = "Once upon a time"


def test_ids_are_ggmls():
    # ggml.h's enum ggml_type, as llama-cpp-python's llama_cpp.GGML_TYPE_*.
    assert (GGML_TYPE_F16, GGML_TYPE_Q4_0, synapse.GGML_TYPE_Q5_0, GGML_TYPE_Q8_0, synapse.GGML_TYPE_IQ4_NL,
            GGML_TYPE_BF16) == (1, 2, 6, 8, 20, 30)


def test_quantized_cache_equals_the_cli_and_batches(synapse_bin):
    llm = Llama(TINY, n_ctx=128, type_k=GGML_TYPE_Q8_0, type_v=GGML_TYPE_Q4_0, verbose=False)
    assert (llm.context_params.type_k, llm.context_params.type_v) == (8, 2)
    out = llm(PROMPT, max_tokens=16, temperature=0)["choices"][0]["text"]
    cli = subprocess.run([synapse_bin, "run", "-m", TINY, "-p", PROMPT, "-n", "16", "--temp", "0",
                          "-ctk", "q8_0", "-ctv", "q4_0"], check=True, capture_output=True)
    # run's closing newline aside; the text drops bytes that are no UTF-8, as llama-cpp-python's does.
    assert out == cli.stdout.decode("utf-8", "ignore").removesuffix("\n")
    # The F16 cache gives other text on this random-weight model: the types are used.
    f16 = Llama(TINY, n_ctx=128, verbose=False)(PROMPT, max_tokens=16, temperature=0)["choices"][0]["text"]
    assert f16 != out
    # create_completions' batch runs with the same types.
    batch = llm.create_completions([PROMPT, "The little dog"], max_tokens=16, temperature=0)
    assert batch[0]["choices"][0]["text"] == out


@pytest.mark.parametrize("kwargs, message", [
    (dict(type_k=3), "type_k: Q4_1 is not a KV cache type"),
    (dict(type_v=0), "type_v: F32 is not a KV cache type"),
    (dict(type_k=4), "type_k = 4: not a GGML type id"),
    (dict(type_v=999), "type_v = 999: not a GGML type id"),
    (dict(type_k="q8_0"), "type_k = 'q8_0': must be None or a GGML type id"),
])
def test_bad_types_are_refused(kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        Llama(TINY, n_ctx=64, verbose=False, **kwargs)


def test_head_size_must_take_the_block(stories_path):
    with pytest.raises(InvalidArgumentError, match="type_k Q8_0: the head size 8"):
        Llama(stories_path, n_ctx=64, type_k=GGML_TYPE_Q8_0, verbose=False)
    Llama(stories_path, n_ctx=64, type_k=GGML_TYPE_BF16, type_v=GGML_TYPE_BF16, verbose=False)
