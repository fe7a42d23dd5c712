#!/usr/bin/env python3
"""Packs llama_logits output ("pos argmax v0 v1 ...", one line per position) into a golden file.

Format (little-endian): b"G4GL", u32 version = 2, u32 n_tokens, u32 n_vocab, u32 n_rows,
u64 model_hash (FNV-1a 64 of the model file's bytes, so a test notices when the synthesizer's
output changed), i32 tokens[n_tokens], u32 positions[n_rows], f32 logits[n_rows][n_vocab].

usage: logits_to_golden.py LOGITS.txt IDS(comma-separated) all|every4 MODEL.gguf OUT.bin
"""
import struct
import sys


def fnv1a64(path):
    h = 0xCBF29CE484222325
    with open(path, "rb") as f:
        for byte in f.read():
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    text, ids, keep, model, out = sys.argv[1:6]
    tokens = [int(t) for t in ids.split(",")]
    rows = [line.split() for line in open(text) if line.strip()]
    assert len(rows) == len(tokens), (len(rows), len(tokens))
    n_vocab = len(rows[0]) - 2
    if keep == "all":
        positions = list(range(len(tokens)))
    else:  # every 4th position plus the last one
        positions = sorted(set(range(0, len(tokens), 4)) | {len(tokens) - 1})
    with open(out, "wb") as f:
        f.write(b"G4GL" + struct.pack("<4I", 2, len(tokens), n_vocab, len(positions)))
        f.write(struct.pack("<Q", fnv1a64(model)))
        f.write(struct.pack("<%di" % len(tokens), *tokens))
        f.write(struct.pack("<%dI" % len(positions), *positions))
        for p in positions:
            assert int(rows[p][0]) == p
            values = [float(v) for v in rows[p][2:]]
            assert len(values) == n_vocab
            f.write(struct.pack("<%df" % n_vocab, *values))


if __name__ == "__main__":
    main()
