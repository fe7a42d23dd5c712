#!/usr/bin/env bash
# Checks models/tiny against the reference llama.cpp (llama-ref):
#   1. llama-completion loads every GGUF and writes text (greedy);
#   2. tokenizer.py == llama-tokenize on ~120 strings;
#   3. PyTorch (gemma4.py, weights read back from the GGUF) == llama_logits (F32 KV) within 2e-3
#      relative, incl. a prompt longer than the sliding window;
#   4. chat with thinking on / off, prompt rendered from the GGUF's own chat template.
# Usage: models/train/check_llama.sh [WORK_DIR]   (WORK_DIR from prepare_data.py, for held-out text)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MODELS=$HERE/../tiny
WORK=${1:-/tmp/boltrt-tiny}
BIN=${LLAMA_REF_BIN:-$HOME/.cache/llama-ref/build/bin}
PY=${PYTHON:-/usr/bin/python3}
[[ -f $WORK/austen_heldout.txt ]] || "$PY" "$HERE/prepare_data.py" "$WORK"
cd "$HERE"

echo "== 1. llama-completion, greedy"
for t in f32 q8_0 q4_k; do
  echo "-- tiny-$t.gguf"
  "$BIN/llama-completion" -m "$MODELS/tiny-$t.gguf" -p "It is a truth universally acknowledged" \
    -n 48 --temp 0 -no-cnv 2>/dev/null
  echo
done

echo "== 2. tokenizer"
"$PY" check_tokenizer.py "$MODELS/tiny-f32.gguf" "$MODELS/tiny-f32.gguf" "$WORK/austen_heldout.txt"

echo "== 3. logits, PyTorch vs llama.cpp"
"$PY" check_logits.py "$MODELS/tiny-f32.gguf" "$MODELS/tiny-f32.gguf" "$BIN/llama_logits"
for t in q8_0 q4_k; do
  echo "-- tiny-$t.gguf (PyTorch on our dequantized weights; llama.cpp also quantizes activations, info only)"
  "$PY" check_logits.py "$MODELS/tiny-$t.gguf" "$MODELS/tiny-$t.gguf" "$BIN/llama_logits" || true
done

echo "== 4. chat, thinking on / off (greedy, f32)"
for q in "What is 347 + 586?" "How many times does the letter 'e' appear in 'excellent'?" \
         "Reverse the word 'garden'."; do
  for mode in on off; do
    echo "-- thinking $mode: $q"
    "$BIN/llama-completion" -m "$MODELS/tiny-f32.gguf" -p "$("$PY" chat_prompt.py "$MODELS/tiny-f32.gguf" "$q" $mode)" \
      -n 160 --temp 0 -no-cnv -sp --no-display-prompt 2>/dev/null
    echo
  done
done
echo "== all checks passed"
