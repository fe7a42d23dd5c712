#!/usr/bin/env bash
# Regenerates the Gemma 4 parity goldens in this folder from llama.cpp (llama-ref).
#
#   tests/data/gemma4/make_goldens.sh [BOLTRT_CLI] [LLAMA_REF_BIN]
#
# For each case: `boltrt synth` writes the synthetic model (the test rebuilds the identical file
# at run time from the same preset, type and seed), llama-ref's llama_logits prints the logits of
# the 96-token prompt below with an F32 KV cache (its default), one batch, 1 thread, and
# logits_to_golden.py packs them as little-endian f32 (format in that script).
# The prompt: BOS (2) then (i * 7919 + 13) % 512 for i = 1..95; it crosses the synthetic
# models' 8-token sliding window many times.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cli="${1:-$here/../../../build/gemma4/boltrt}"
ref="${2:-$HOME/.cache/llama-ref/build/bin}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
ids="2"
for i in $(seq 1 95); do ids="$ids,$(( (i * 7919 + 13) % 512 ))"; done

# case name | synth arguments | positions to keep (all | every4)
cases=(
  "tiny_f32|--preset tiny --type f32|all"
  "tiny-e2b-like_f32|--preset tiny-e2b-like --type f32|all"
  "tiny-moe_f32|--preset tiny-moe --type f32|all"
  "tiny-moe-split-untied_f32|--preset tiny-moe --type f32 --split-experts --untied|every4"
  "tiny_q8_0|--preset tiny --type q8_0|every4"
  "tiny_q4_k_m|--preset tiny --type q4_k_m|every4"
  "tiny-e2b-like_q4_k_m|--preset tiny-e2b-like --type q4_k_m|every4"
  "tiny-moe_q8_0|--preset tiny-moe --type q8_0|all"
  "tiny-moe_q4_0|--preset tiny-moe --type q4_0|all"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name args keep <<< "$c"
  # shellcheck disable=SC2086
  "$cli" synth $args --seed 1 -o "$tmp/$name.gguf" > /dev/null
  "$ref/llama_logits" "$tmp/$name.gguf" "$ids" 1 > "$tmp/$name.txt"
  python3 "$here/logits_to_golden.py" "$tmp/$name.txt" "$ids" "$keep" "$tmp/$name.gguf" "$here/$name.bin"
  echo "$name: $(stat -c %s "$here/$name.bin") bytes"
done
