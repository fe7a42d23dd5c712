#!/usr/bin/env bash
# Regenerates tests/data/perplexity/goldens.txt: llama-perplexity (llama.cpp v0.4.0, built by the
# project's llama-ref setup) on the tiny models over sample.txt, default settings except the ones
# listed (few windows where one run covers the text already: the tests also run under ASan).
# One line per run:
#   MODEL N_CTX N_BATCH KV CHUNKS | running estimates after each window | final PPL and its +/-
# Run from the repository root:  tests/data/perplexity/make_goldens.sh
set -euo pipefail
BIN=${LLAMA_REF_BIN:-$HOME/.cache/llama-ref/build/bin}
DIR=tests/data/perplexity
OUT=$DIR/goldens.txt
: > "$OUT.tmp"
run() {  # model n_ctx n_batch kv chunks (-1: all)
  local log
  log=$("$BIN/llama-perplexity" -m "models/tiny/$1" -f "$DIR/sample.txt" -c "$2" -b "$3" \
    -ctk "$4" -ctv "$4" --chunks "$5" -t 1 2>&1)
  local windows final
  windows=$(grep -o '\[[0-9]*\][0-9.]*' <<<"$log" | sed 's/^\[[0-9]*\]//' | tr '\n' ' ')
  final=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p' <<<"$log")
  [ -n "$windows" ] && [ -n "$final" ] || { echo "llama-perplexity failed: $log" >&2; exit 1; }
  echo "$1 $2 $3 $4 $5 | ${windows% } | $final" >> "$OUT.tmp"
}
run tiny-f32.gguf 128 2048 f16 -1
run tiny-f32.gguf 256 64 f16 2
run tiny-f32.gguf 128 2048 f32 2
run tiny-q8_0.gguf 128 2048 f16 4
run tiny-q4_k.gguf 512 128 f16 1
mv "$OUT.tmp" "$OUT"
