#!/usr/bin/env bash
# Regenerates the Qwen3.5 parity goldens in this folder from llama.cpp (llama-ref).
#
#   tests/data/qwen35/make_goldens.sh [BOLTRT_CLI] [LLAMA_REF_BIN]
#
# For each case: `boltrt synth --arch qwen35` writes the synthetic model (the test rebuilds the
# identical file at run time from the same arguments), llama-ref's llama_logits prints the logits
# of the 64-token prompt below with an F32 KV cache (its default), one batch, 1 thread, and
# ../gemma4/logits_to_golden.py packs them as little-endian f32 (format in that script).
# The prompt: (i * 7919 + 13) % 512 for i = 0..63 (the tiny vocabulary has 512 tokens).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cli="${1:-$here/../../../build/dev/boltrt}"
ref="${2:-$HOME/.cache/llama-ref/build/bin}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
ids="13"
for i in $(seq 1 63); do ids="$ids,$(( (i * 7919 + 13) % 512 ))"; done

# case name | synth arguments | positions to keep (all | every4)
cases=(
  "tiny_f32|--preset tiny --type f32|all"
  "tiny-i3-untied-mtp_f32|--preset tiny --type f32 --interval 3 --untied --nextn 1|all"
  "tiny_q8_0|--preset tiny --type q8_0|every4"
  "tiny_q4_k_m|--preset tiny --type q4_k_m|every4"
  "tiny-i2-untied-mtp_q4_k_m|--preset tiny --type q4_k_m --interval 2 --untied --nextn 1|every4"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name args keep <<< "$c"
  # shellcheck disable=SC2086
  "$cli" synth --arch qwen35 $args --seed 1 -o "$tmp/$name.gguf" > /dev/null
  "$ref/llama_logits" "$tmp/$name.gguf" "$ids" 1 > "$tmp/$name.txt"
  python3 "$here/../gemma4/logits_to_golden.py" "$tmp/$name.txt" "$ids" "$keep" "$tmp/$name.gguf" \
    "$here/$name.bin"
  echo "$name: $(stat -c %s "$here/$name.bin") bytes"
done
