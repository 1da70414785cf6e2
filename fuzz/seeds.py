#!/usr/bin/env python3
"""Writes the seed corpora and fuzz/gguf.dict from the real files in tests/data.

  fuzz/seeds.py OUT_DIR      seeds into OUT_DIR/<target>/ (scripts/fuzz uses
                             it when fuzz/corpus/<target> is empty)
  fuzz/seeds.py --dict FILE  the libFuzzer dictionary (GGUF key names, tensor
                             names and type ids)

fuzz_gguf: the smallest complete models (they load; one with MXFP4 experts, one with IQ1_M
matrices), and prefixes of every
model and vocabulary file (header + metadata, cut at several lengths).
fuzz_gguf_metadata: short descriptions (see fuzz/fuzz_gguf_metadata.cpp): the
template model as is, with each alignment choice, and a few edits.
fuzz_tokenizer: every distinct text of tests/data/tokenizer/cases.
fuzz_request: a route byte (0 chat, 1 completions, 2 /completion) and a body:
valid requests using every field, and the public attack inputs (issue 27).
fuzz_grammar: a mode byte (even GBNF, odd JSON Schema) and text: llama.cpp's
grammars of tests/data/grammar/gbnf and the schemas of
tests/data/grammar/schema_cases.json.
fuzz_template: a context byte and a chat template: llama.cpp's templates of
tests/data/templates/llama.cpp with each built-in context, and each with a
context of tests/data/templates/contexts.json after a NUL.
"""
import base64, glob, hashlib, json, os, struct, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
DATA = os.path.join(ROOT, 'tests', 'data')


def put(d, b):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(b).hexdigest()), 'wb') as f:
        f.write(b)


def data_offset(b):
    """End of the tensor infos of a well-formed GGUF image."""
    p = 24
    _, nt, nkv = struct.unpack_from('<IQQ', b, 4)
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def rs(p):
        return p + 8 + struct.unpack_from('<Q', b, p)[0]

    def rv(p, t):
        if t in sizes:
            return p + sizes[t]
        if t == 8:
            return rs(p)
        et, n = struct.unpack_from('<IQ', b, p)
        p += 12
        for _ in range(n):
            p = rv(p, et)
        return p

    for _ in range(nkv):
        p = rs(p)
        t = struct.unpack_from('<I', b, p)[0]
        p = rv(p + 4, t)
    for _ in range(nt):
        p = rs(p)
        nd = struct.unpack_from('<I', b, p)[0]
        p += 4 + 8 * nd + 12
    return p


def gguf_seeds(out):
    d = os.path.join(out, 'fuzz_gguf')
    for name in ('stories260K-q4_0.gguf', 'tiny-qwen2-q4_k_m.gguf', 'tiny-phi3-q4_k_m.gguf',
                 'tiny-mixtral-mxfp4_moe.gguf', 'tiny-llama-iq1_m.gguf'):
        put(d, open(os.path.join(DATA, 'models', name), 'rb').read())
    files = sorted(glob.glob(os.path.join(DATA, 'models', '*.gguf')) +
                   glob.glob(os.path.join(DATA, 'tokenizer', 'vocab', '*.gguf')))
    seen = set()
    for f in files:
        b = open(f, 'rb').read()
        end = data_offset(b)
        for n in (64, 512, 4096, end if end <= 32768 else 32768):
            if b[:n] not in seen:
                seen.add(b[:n])
                put(d, b[:n])


def metadata_seeds(out):
    d = os.path.join(out, 'fuzz_gguf_metadata')
    for flags in (0, 1, 2, 3, 6, 10, 14, 0x12, 0x22, 0x42):
        put(d, bytes([flags]))
    # Template plus a few ops (op byte, then its fields).
    put(d, bytes([2, 0, 1, 7, 4, 1]))
    put(d, bytes([2, 3, 0, 3, 0]))
    put(d, bytes([2, 5, 0, 1, 2, 0x80]))
    put(d, bytes([0, 0, 1, 0, 8, 1, 0, 5, 4, 1, 0, 1, 0x20]))


def tokenizer_seeds(out):
    d = os.path.join(out, 'fuzz_tokenizer')
    texts = set()
    for f in glob.glob(os.path.join(DATA, 'tokenizer', 'cases', '*.jsonl')):
        for line in open(f, encoding='utf-8'):
            j = json.loads(line)
            b = j['text'].encode() if 'text' in j else base64.b64decode(j['text_b64'])
            if len(b) <= 2048:
                texts.add(b)
    for t in ('<s>hello</s>', '<|endoftext|>a<|im_start|>user\n', '<|begin_of_text|><|start_header_id|>',
              '\u2581\u2581x', '<0x0A>'):
        texts.add(t.encode())
    for b in texts:
        put(d, b)


KEYS = [
    'general.architecture', 'general.alignment', 'general.name', 'general.file_type',
    'general.quantization_version', 'tokenizer.ggml.model', 'tokenizer.ggml.pre',
    'tokenizer.ggml.tokens', 'tokenizer.ggml.scores', 'tokenizer.ggml.token_type',
    'tokenizer.ggml.merges', 'tokenizer.ggml.bos_token_id', 'tokenizer.ggml.eos_token_id',
    'tokenizer.ggml.eot_token_id', 'tokenizer.ggml.unknown_token_id',
    'tokenizer.ggml.padding_token_id', 'tokenizer.ggml.add_bos_token',
    'tokenizer.ggml.add_eos_token', 'tokenizer.ggml.add_space_prefix', 'tokenizer.chat_template',
]
ARCH_KEYS = [
    'context_length', 'embedding_length', 'block_count', 'feed_forward_length',
    'attention.head_count', 'attention.head_count_kv', 'attention.key_length',
    'attention.value_length', 'rope.dimension_count', 'attention.layer_norm_rms_epsilon',
    'rope.freq_base', 'rope.scaling.type', 'rope.scaling.factor', 'rope.scaling.attn_factor',
    'rope.scaling.original_context_length', 'attention.sliding_window', 'expert_count',
    'expert_used_count',
]
TENSORS = ['token_embd.weight', 'output_norm.weight', 'output.weight', 'rope_freqs.weight'] + [
    'blk.0.' + s for s in ('attn_norm.weight', 'ffn_norm.weight', 'attn_q.weight', 'attn_k.weight',
                           'attn_v.weight', 'attn_output.weight', 'attn_qkv.weight', 'attn_q.bias',
                           'ffn_gate.weight', 'ffn_up.weight', 'ffn_down.weight',
                           'ffn_gate_inp.weight', 'ffn_gate_exps.weight', 'ffn_up_exps.weight',
                           'ffn_down_exps.weight')]


def request_seeds(out):
    d = os.path.join(out, 'fuzz_request')
    chat = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <|im_end|>"}],
            "max_tokens": 8, "seed": 1, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
            "logprobs": True, "top_logprobs": 3, "stop": ["\n", "end"], "presence_penalty": 0.5,
            "frequency_penalty": 0.1, "logit_bias": {"5": -1.5}, "n": 2, "stream": True,
            "stream_options": {"include_usage": True}}
    comp = {"prompt": ["Once upon", [1, 400, 401]], "max_tokens": 4, "logprobs": 2, "echo": False, "seed": 7}
    native = {"prompt": "The cat", "n_predict": 6, "n_probs": 2, "cache_prompt": False, "repeat_penalty": 1.1,
              "repeat_last_n": 16, "logit_bias": [[3, False], [4, 2.0]], "ignore_eos": True, "return_tokens": True}
    for route, body in ((0, chat), (1, comp), (2, native), (1, {"prompt": [-1]}), (2, {"prompt": [-1]}),
                        (1, {"prompt": "x", "temperature": 999999}), (1, {"prompt": "x", "top_p": -1}),
                        (2, {"prompt": "x", "n_discard": -100, "n_keep": -1}),
                        (0, {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]})):
        put(d, bytes([route]) + json.dumps(body).encode())
    put(d, b'\x01{"prompt": ' + b'[' * 100 + b']' * 100 + b'}')


def grammar_seeds(out):
    d = os.path.join(out, 'fuzz_grammar')
    for p in sorted(glob.glob(os.path.join(DATA, 'grammar', 'gbnf', '*.gbnf'))):
        put(d, b'\x00' + open(p, 'rb').read())
    cases = os.path.join(DATA, 'grammar', 'schema_cases.json')
    if os.path.exists(cases):
        for c in json.load(open(cases))['cases']:
            if isinstance(c, dict) and 'schema' in c:
                put(d, b'\x01' + json.dumps(c['schema']).encode())
    put(d, b'\x00root ::= ' + b'(' * 300 + b'"a"' + b')' * 300 + b'\n')


def template_seeds(out):
    d = os.path.join(out, 'fuzz_template')
    tdir = os.path.join(DATA, 'templates', 'llama.cpp')
    contexts = json.load(open(os.path.join(DATA, 'templates', 'contexts.json'), encoding='utf-8'))['contexts']
    for k, p in enumerate(sorted(glob.glob(os.path.join(tdir, '*.jinja')))):
        src = open(p, 'rb').read()
        for which in range(4):
            put(d, bytes([which]) + src)
        c = contexts[k % len(contexts)]['context']
        put(d, b'\x00' + src + b'\x00' + json.dumps(c, ensure_ascii=False).encode())
    put(d, b'\x00{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}')
    put(d, b'\x00{% set ns = namespace(s="x") %}{% for i in range(30) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}')
    put(d, b'\x00{{ ' + b'(' * 300 + b'1' + b')' * 300 + b' }}')


def esc(b):
    return ''.join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\' else '\\x%02x' % c for c in b)


def write_dict(path):
    lines = ['# GGUF dictionary for libFuzzer (fuzz/seeds.py --dict): magic, versions,',
             '# value type ids (u32), ggml type ids (u32), keys and tensor names as GGUF',
             '# strings (u64 length + bytes) and bare.',
             'magic="GGUF"', 'v3="\\x03\\x00\\x00\\x00"', 'v2="\\x02\\x00\\x00\\x00"']
    for t in range(13):
        lines.append('vtype_%d="%s"' % (t, esc(struct.pack('<I', t))))
    for t in list(range(0, 42)):
        lines.append('ggml_%d="%s"' % (t, esc(struct.pack('<I', t))))
    lines.append('u64_max="\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff"')
    lines.append('u64_2p40="\\x00\\x00\\x00\\x00\\x00\\x01\\x00\\x00"')
    names = KEYS + [a + '.' + k for a in ('llama', 'qwen2', 'phi3', 'mistral') for k in ARCH_KEYS] + TENSORS
    for i, n in enumerate(names):
        b = n.encode()
        lines.append('s%d="%s"' % (i, esc(struct.pack('<Q', len(b)) + b)))
        lines.append('k%d="%s"' % (i, esc(b)))
    for a in ('llama', 'mistral', 'qwen2', 'phi3', 'gpt2', 'yarn', 'linear', 'none'):
        lines.append('a_%s="%s"' % (a, esc(struct.pack('<Q', len(a)) + a.encode())))
    open(path, 'w').write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--dict':
        write_dict(sys.argv[2])
    elif len(sys.argv) == 2:
        gguf_seeds(sys.argv[1])
        metadata_seeds(sys.argv[1])
        tokenizer_seeds(sys.argv[1])
        request_seeds(sys.argv[1])
        grammar_seeds(sys.argv[1])
        template_seeds(sys.argv[1])
    else:
        sys.exit(__doc__)
