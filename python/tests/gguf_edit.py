"""Test helper: a copy of a GGUF file with one more string key (e.g. a
tokenizer.chat_template for a model that has none). Format: ggml's
docs/gguf.md (header, key/values, tensor infos, data aligned to
general.alignment, tensor offsets relative to the data section)."""
import struct

_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _UINT32 = 8, 9, 4


def _skip_value(b: bytes, pos: int, vtype: int) -> int:
    if vtype in _SIZES:
        return pos + _SIZES[vtype]
    if vtype == _STRING:
        (n,) = struct.unpack_from("<Q", b, pos)
        return pos + 8 + n
    if vtype == _ARRAY:
        etype, n = struct.unpack_from("<IQ", b, pos)
        pos += 12
        for _ in range(n):
            pos = _skip_value(b, pos, etype)
        return pos
    raise ValueError(f"GGUF value type {vtype}")


def _string(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def with_string_key(src: str, dst: str, key: str, value: str) -> None:
    b = open(src, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    assert magic == b"GGUF" and version >= 2
    pos = kv_start = 24
    alignment = 32
    for _ in range(n_kv):
        (n,) = struct.unpack_from("<Q", b, pos)
        name = b[pos + 8:pos + 8 + n]
        pos += 8 + n
        (vtype,) = struct.unpack_from("<I", b, pos)
        pos += 4
        if name == b"general.alignment" and vtype == _UINT32:
            (alignment,) = struct.unpack_from("<I", b, pos)
        pos = _skip_value(b, pos, vtype)
    kv_end = pos
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", b, pos)
        pos += 8 + n
        (n_dims,) = struct.unpack_from("<I", b, pos)
        pos += 4 + 8 * n_dims + 4 + 8
    data_start = (pos + alignment - 1) // alignment * alignment
    head = struct.pack("<4sIQQ", magic, version, n_tensors, n_kv + 1) + b[kv_start:kv_end]
    head += _string(key.encode()) + struct.pack("<I", _STRING) + _string(value.encode()) + b[kv_end:pos]
    head += b"\0" * (-len(head) % alignment)
    with open(dst, "wb") as f:
        f.write(head + b[data_start:])
