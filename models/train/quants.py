"""Our own f32 -> GGML block quantizers (numpy) and dequantizers, for q8_0, q4_0 and q4_K.

Block layouts (see /work/shared/docs/quant-formats.md):
  q8_0: 32 values -> f16 d, 32 x int8 q;            x = d*q
  q4_0: 32 values -> f16 d, 16 bytes (q[j] | q[j+16]<<4); x = d*(q-8)
  q4_K: 256 values -> f16 d, f16 dmin, 12 bytes of 6-bit (scale, min) for 8 sub-blocks of 32,
        128 bytes of nibbles (sub-block 2j in the low, 2j+1 in the high nibbles of bytes 32j..32j+31);
        x = d*sc*q - dmin*m
All functions take/return a 2-D float32 array [rows, n] with n a multiple of the block size.
"""
import numpy as np


def _f16(a):
    return a.astype(np.float16)


def quantize_q8_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(1)
    d = amax / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0)
    q = np.round(b * inv[:, None]).astype(np.int8)
    out = np.zeros((b.shape[0], 34), np.uint8)
    out[:, 0:2] = _f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def dequantize_q8_0(raw, n):
    a = np.frombuffer(raw, np.uint8).reshape(-1, 34)
    d = a[:, 0:2].copy().view(np.float16).astype(np.float32)
    q = a[:, 2:].copy().view(np.int8).astype(np.float32)
    return (d * q).reshape(-1, n)


def quantize_q4_0(x):
    b = x.reshape(-1, 32).astype(np.float32)
    idx = np.abs(b).argmax(1)
    mx = b[np.arange(b.shape[0]), idx]
    d = mx / -8.0
    inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0.0)
    q = np.minimum(15, np.trunc(b * inv[:, None] + 8.5)).astype(np.uint8)
    out = np.zeros((b.shape[0], 18), np.uint8)
    out[:, 0:2] = _f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def dequantize_q4_0(raw, n):
    a = np.frombuffer(raw, np.uint8).reshape(-1, 18)
    d = a[:, 0:2].copy().view(np.float16).astype(np.float32)
    qs = a[:, 2:]
    q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float32) - 8
    return (d * q).reshape(-1, n)


def quantize_q4_k(x):
    b = x.reshape(-1, 8, 32).astype(np.float32)             # [blocks, sub, 32]
    lo0 = np.minimum(b.min(2), 0.0)
    hi0 = b.max(2)
    # per sub-block, pick the clipped range [lo0*a, hi0*c] with the smallest squared error
    best_err = np.full(lo0.shape, np.inf, np.float32)
    lo, hi = lo0.copy(), hi0.copy()
    for a in (1.0, 0.95, 0.9, 0.85, 0.8, 0.75):
        for c in (1.0, 0.95, 0.9, 0.85, 0.8, 0.75):
            l, h = lo0 * a, hi0 * c
            st = np.where(h - l > 0, (h - l) / 15.0, 1.0)
            q = np.clip(np.round((b - l[:, :, None]) / st[:, :, None]), 0, 15)
            err = ((q * st[:, :, None] + l[:, :, None] - b) ** 2).sum(2)
            better = err < best_err
            best_err = np.where(better, err, best_err)
            lo, hi = np.where(better, l, lo), np.where(better, h, hi)
    scale = (hi - lo) / 15.0                                   # per sub-block step
    mins = -lo                                                 # >= 0
    d = scale.max(1) / 63.0
    dmin = mins.max(1) / 63.0
    d16, dmin16 = _f16(d).astype(np.float32), _f16(dmin).astype(np.float32)
    sc = np.clip(np.round(scale / np.where(d16 > 0, d16, 1)[:, None]), 0, 63).astype(np.uint8)
    m = np.clip(np.round(mins / np.where(dmin16 > 0, dmin16, 1)[:, None]), 0, 63).astype(np.uint8)
    # where a sub-block step rounded to 0, bump it so values can still be represented
    sc = np.where((sc == 0) & (scale > 0), 1, sc).astype(np.uint8)
    step = d16[:, None] * sc
    off = dmin16[:, None] * m
    q = np.where(step[:, :, None] > 0,
                 np.round((b + off[:, :, None]) / np.where(step > 0, step, 1)[:, :, None]), 0)
    q = np.clip(q, 0, 15).astype(np.uint8)
    scales = np.zeros((b.shape[0], 12), np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(-1, 128)   # pairs (2j, 2j+1)
    out = np.zeros((b.shape[0], 144), np.uint8)
    out[:, 0:2] = _f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = _f16(dmin).view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = scales
    out[:, 16:] = qs
    return out.tobytes()


def dequantize_q4_k(raw, n):
    a = np.frombuffer(raw, np.uint8).reshape(-1, 144)
    d = a[:, 0:2].copy().view(np.float16).astype(np.float32)[:, 0]
    dmin = a[:, 2:4].copy().view(np.float16).astype(np.float32)[:, 0]
    s = a[:, 4:16].astype(np.int32)
    sc = np.zeros((a.shape[0], 8), np.float32)
    m = np.zeros((a.shape[0], 8), np.float32)
    for j in range(8):
        if j < 4:
            sc[:, j] = s[:, j] & 63
            m[:, j] = s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
            m[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    qs = a[:, 16:].reshape(-1, 4, 32)
    q = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.float32)
    y = d[:, None, None] * sc[:, :, None] * q - dmin[:, None, None] * m[:, :, None]
    return y.reshape(-1, n)


QUANTIZERS = {"q8_0": quantize_q8_0, "q4_0": quantize_q4_0, "q4_k": quantize_q4_k}
DEQUANTIZERS = {"q8_0": dequantize_q8_0, "q4_0": dequantize_q4_0, "q4_k": dequantize_q4_k}
