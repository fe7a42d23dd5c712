"""Minimal GGUF v3 reader and writer (our own; layout per /work/shared/docs/gguf.md).

Writer: GGUFWriter(path).add(key, value, vtype) ... add_tensor(name, ne, ggml_type, raw_bytes); write().
Reader: read_gguf(path) -> (metadata dict, {name: (ne, ggml_type, bytes)}).
"""
import struct

import numpy as np

# metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
               BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}

# ggml tensor types we use, with (block elements, block bytes)
GGML_F32, GGML_Q4_0, GGML_Q8_0, GGML_Q4_K = 0, 2, 8, 12
GGML_BLOCK = {GGML_F32: (1, 4), GGML_Q4_0: (32, 18), GGML_Q8_0: (32, 34), GGML_Q4_K: (256, 144)}
ALIGNMENT = 32


def _pack_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _pack_value(vtype, value):
    if vtype == STRING:
        return _pack_str(value)
    if vtype in _SCALAR_FMT:
        return struct.pack(_SCALAR_FMT[vtype], value)
    raise ValueError(f"bad value type {vtype}")


class GGUFWriter:
    def __init__(self, path):
        self.path = path
        self.kv = []       # (key, vtype, value, elem_type)
        self.tensors = []  # (name, ne, ggml_type, raw)

    def add(self, key, value, vtype, elem_type=None):
        self.kv.append((key, vtype, value, elem_type))

    def add_tensor(self, name, ne, ggml_type, raw):
        blk_el, blk_bytes = GGML_BLOCK[ggml_type]
        n = int(np.prod(ne))
        assert ne[0] % blk_el == 0, (name, ne, ggml_type)
        assert len(raw) == n // blk_el * blk_bytes, (name, len(raw))
        self.tensors.append((name, list(ne), ggml_type, raw))

    def write(self):
        out = bytearray(b"GGUF")
        out += struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for key, vtype, value, elem_type in self.kv:
            out += _pack_str(key) + struct.pack("<I", vtype)
            if vtype == ARRAY:
                out += struct.pack("<IQ", elem_type, len(value))
                for v in value:
                    out += _pack_value(elem_type, v)
            else:
                out += _pack_value(vtype, value)
        offset = 0
        offsets = []
        for name, ne, gt, raw in self.tensors:
            offsets.append(offset)
            out += _pack_str(name) + struct.pack("<I", len(ne))
            out += struct.pack(f"<{len(ne)}Q", *ne)
            out += struct.pack("<IQ", gt, offset)
            offset += (len(raw) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        out += b"\0" * (-len(out) % ALIGNMENT)
        for (name, ne, gt, raw), off in zip(self.tensors, offsets):
            out += raw
            out += b"\0" * (-len(raw) % ALIGNMENT)
        with open(self.path, "wb") as f:
            f.write(out)


def read_gguf(path, want_tensors=True):
    data = open(path, "rb").read()
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return vals

    def take_str():
        nonlocal pos
        (n,) = take("<Q")
        s = data[pos:pos + n].decode("utf-8", errors="surrogateescape")
        pos += n
        return s

    def take_val(vtype):
        if vtype == STRING:
            return take_str()
        if vtype == ARRAY:
            et, n = take("<IQ")
            if et in _SCALAR_FMT:
                fmt = _SCALAR_FMT[et]
                vals = list(struct.unpack_from("<" + fmt[1] * n, data, pos))
                nonlocal_pos_add(struct.calcsize(fmt) * n)
                return vals
            return [take_val(et) for _ in range(n)]
        return take(_SCALAR_FMT[vtype])[0]

    def nonlocal_pos_add(k):
        nonlocal pos
        pos += k

    magic = data[:4]
    assert magic == b"GGUF", path
    pos = 4
    version, n_tensors, n_kv = take("<IQQ")
    meta = {}
    for _ in range(n_kv):
        key = take_str()
        (vtype,) = take("<I")
        meta[key] = take_val(vtype)
    infos = []
    for _ in range(n_tensors):
        name = take_str()
        (nd,) = take("<I")
        ne = list(take(f"<{nd}Q"))
        gt, off = take("<IQ")
        infos.append((name, ne, gt, off))
    align = meta.get("general.alignment", ALIGNMENT)
    base = (pos + align - 1) // align * align
    tensors = {}
    if want_tensors:
        for name, ne, gt, off in infos:
            blk_el, blk_bytes = GGML_BLOCK[gt]
            nbytes = int(np.prod(ne)) // blk_el * blk_bytes
            tensors[name] = (ne, gt, data[base + off: base + off + nbytes])
    return meta, tensors
