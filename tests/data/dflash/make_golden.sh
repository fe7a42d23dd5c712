#!/bin/sh
# Regenerates golden.bin: llama.cpp v0.4.0's DFlash draft logits on the synthetic pair
# `boltrt synth --preset tiny` (f32, seed 1) + `boltrt synth-draft` (defaults, seed 1).
# Usage: tests/data/dflash/make_golden.sh BUILD_DIR   (BUILD_DIR holds the boltrt CLI)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: make_golden.sh BUILD_DIR}
ref=${LLAMA_REF:-$HOME/.cache/llama-ref}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/boltrt" synth --preset tiny --type f32 --seed 1 -o "$tmp/target.gguf"
"$build/boltrt" synth-draft --dflash-for "$tmp/target.gguf" --seed 1 -o "$tmp/draft.gguf"
g++ -std=c++17 -O2 -I"$ref/src/include" -I"$ref/src/src" -I"$ref/src/ggml/include" \
  "$here/make_golden.cpp" -L"$ref/build/bin" -lllama -lggml-base \
  -Wl,-rpath,"$ref/build/bin" -o "$tmp/make_golden"
"$tmp/make_golden" "$tmp/target.gguf" "$tmp/draft.gguf" "$here/golden.bin" 2>"$tmp/log" ||
  { tail -20 "$tmp/log"; exit 1; }
