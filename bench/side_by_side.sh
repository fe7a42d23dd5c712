#!/usr/bin/env bash
# `boltrt bench` and llama.cpp's `llama-bench` on the same existing GGUF file(s) and thread
# count, with the boltrt/llama ratios of prompt (pp) and generation (tg) tokens/s:
#
#   bench/side_by_side.sh -m FILE [-m FILE ...] [-t THREADS] [-p N_PROMPT] [-n N_GEN] [-r REPS]
#
# e.g. bench/side_by_side.sh -m models/tiny/tiny-q4_k.gguf -t 1
# The measuring and printing are bench/gemma4_vs_llama.sh's (which also synthesizes the E4B and
# 26B-A4B shapes); this only passes the files to it.
set -euo pipefail
files=() pass=()
while [ $# -gt 0 ]; do
  case $1 in
    -m) files+=("$2"); shift 2 ;;
    -t | -p | -n | -r) pass+=("$1" "$2"); shift 2 ;;
    *) echo "usage: $0 -m FILE [-m FILE ...] [-t N] [-p N] [-n N] [-r N]" >&2; exit 2 ;;
  esac
done
[ ${#files[@]} -gt 0 ] || { echo "usage: $0 -m FILE [-m FILE ...] [-t N] [-p N] [-n N] [-r N]" >&2; exit 2; }
for f in "${files[@]}"; do
  [[ "$f" == *.gguf ]] || { echo "$f: expected a .gguf file" >&2; exit 2; }
done
exec "$(dirname "$0")/gemma4_vs_llama.sh" "${pass[@]}" "${files[@]}"
