#!/usr/bin/env bash
# Sets up, builds and runs boltrt on the model shipped in models/tiny (a 4-bit Gemma 4 we trained
# ourselves). Without a shipped model it synthesizes a small random Gemma 4 and inspects it.
# Usage: tools/demo.sh ["your prompt"]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
tools/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DBOLTRT_TESTS=OFF -DBOLTRT_BENCH=OFF >/dev/null
cmake --build build/release --target boltrt -j"$(nproc)" >/dev/null
BOLTRT=build/release/boltrt
MODEL=models/tiny/tiny-q4_k.gguf
if [[ -f $MODEL ]] && $BOLTRT --help 2>/dev/null | grep -q generate; then
  PROMPT=${1:-"It is a truth universally acknowledged, that"}
  echo "\$ boltrt generate -m $MODEL -p \"$PROMPT\" -n 64 --temp 0"
  $BOLTRT generate -m "$MODEL" -p "$PROMPT" -n 64 --temp 0
  echo; echo
  echo "\$ boltrt generate -m $MODEL --chat --reasoning on --show-thinking -p \"Reverse the word: garden\" -n 120"
  $BOLTRT generate -m "$MODEL" --chat --reasoning on --show-thinking -p "Reverse the word: garden" -n 120 --temp 0
  echo
else
  mkdir -p build/demo
  $BOLTRT synth --preset tiny --type q4_k -o build/demo/tiny-synth.gguf
  $BOLTRT inspect build/demo/tiny-synth.gguf
fi
