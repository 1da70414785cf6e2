#!/usr/bin/env python3
"""Makes tests/data/models/tiny-qwen3-reranker-f32.gguf: tiny-qwen3-f32.gguf laid out as
llama.cpp v0.5.0's converter writes a Qwen3-Reranker (conversion/qwen.py, Qwen3Model with
is_rerank):

- qwen3.pooling_type = 4 (LLAMA_POOLING_TYPE_RANK) and qwen3.classifier.output_labels ["yes", "no"];
- tokenizer.chat_template.rerank: the converter's rerank template ({query} and {document});
- cls.output.weight [n_embd, 2]: two rows of the (tied) output matrix, the "yes" row first, as
  _get_cls_out_tensor stacks lm_head[yes] and lm_head[no]. The tiny vocabulary has no "yes" or
  "no" token, so the rows of the tokens "Ġy" and "Ġn" stand for them (YES_TOKEN, NO_TOKEN).

Every other key and tensor is copied unchanged. Usage (Debian's python3 has NumPy; gguf-py from
the llama.cpp source):
  PYTHONPATH=/work/ref/llama.cpp/gguf-py /usr/bin/python3 scripts/golden/make_tiny_qwen3_reranker.py \\
      --out tests/data/models
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

YES_TOKEN, NO_TOKEN = "Ġy", "Ġn"
RERANK_TEMPLATE = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n"
    "<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n")


def main() -> int:
    import gguf
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="tests/data/models")
    a = ap.parse_args()
    src = gguf.GGUFReader(os.path.join(a.out, "tiny-qwen3-f32.gguf"))
    dst_path = os.path.join(a.out, "tiny-qwen3-reranker-f32.gguf")
    w = gguf.GGUFWriter(dst_path, "qwen3")
    for key, field in src.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                val = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
            else:
                val = [field.parts[i].tolist()[0] for i in field.data]
            w.add_key_value(key, val, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_key_value(key, bytes(field.parts[field.data[0]]).decode("utf-8"), vtype)
        else:
            w.add_key_value(key, field.parts[field.data[0]].tolist()[0], vtype)
    w.add_pooling_type(gguf.PoolingType.RANK)
    w.add_classifier_output_labels(["yes", "no"])
    w.add_chat_template([{"name": "rerank", "template": RERANK_TEMPLATE}])
    tokens = [bytes(src.fields["tokenizer.ggml.tokens"].parts[i]).decode() for i in
              src.fields["tokenizer.ggml.tokens"].data]
    yes, no = tokens.index(YES_TOKEN), tokens.index(NO_TOKEN)
    for t in src.tensors:
        data = np.array(t.data).reshape([int(x) for x in reversed(t.shape)])
        w.add_tensor(t.name, data)
        if t.name == "token_embd.weight":
            w.add_tensor("cls.output.weight", np.stack([data[yes], data[no]]).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{dst_path}: cls.output rows = token_embd rows {yes} ({YES_TOKEN}) and {no} ({NO_TOKEN})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
