#!/bin/sh
# Regenerates golden.bin (gemma4) or golden_qwen35.bin (qwen35): llama.cpp v0.4.0's tapped
# target hidden states and DFlash draft logits on the synthetic pair
# `boltrt synth --arch ARCH --preset tiny` (f32, seed 1) + `boltrt synth-draft` (defaults, seed 1).
# Usage: tests/data/dflash/make_golden.sh BUILD_DIR [gemma4|qwen35]   (BUILD_DIR holds the CLI)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: make_golden.sh BUILD_DIR [gemma4|qwen35]}
arch=${2:-gemma4}
case $arch in
  gemma4) out=golden.bin; target_cache= ;;
  qwen35) out=golden_qwen35.bin; target_cache=f32 ;;  # the target's taps at f32 too
  *) echo "make_golden.sh: unknown architecture $arch" >&2; exit 2 ;;
esac
ref=${LLAMA_REF:-$HOME/.cache/llama-ref}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/boltrt" synth --arch "$arch" --preset tiny --type f32 --seed 1 -o "$tmp/target.gguf"
"$build/boltrt" synth-draft --dflash-for "$tmp/target.gguf" --seed 1 -o "$tmp/draft.gguf"
g++ -std=c++17 -O2 -I"$ref/src/include" -I"$ref/src/src" -I"$ref/src/ggml/include" \
  "$here/make_golden.cpp" -L"$ref/build/bin" -lllama -lggml-base \
  -Wl,-rpath,"$ref/build/bin" -o "$tmp/make_golden"
"$tmp/make_golden" "$tmp/target.gguf" "$tmp/draft.gguf" "$here/$out" $target_cache 2>"$tmp/log" ||
  { tail -20 "$tmp/log"; exit 1; }
