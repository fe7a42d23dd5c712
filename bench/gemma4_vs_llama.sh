#!/usr/bin/env bash
# Side-by-side prompt (pp) and generation (tg) throughput of boltrt and llama.cpp's llama-bench on
# the same synthetic Gemma 4 files and thread count; prints both and the ratios.
#
#   bench/gemma4_vs_llama.sh [-t THREADS] [-p N_PROMPT] [-n N_GEN] [-r REPS] [-a ROUNDS]
#                            [PRESET|FILE ...]
#
# The two tools take turns, ROUNDS times (default 1): boltrt, llama-bench, boltrt, ... each with
# -r REPS. A host whose speed drifts (a shared VM can change by 2x within minutes) then shows in
# the spread of the per-round ratios instead of biasing one tool: with ROUNDS > 1 every round is
# a line and a last line gives the median of each column and the range of the ratios.
#
# PRESETs default to "e4b 26b-a4b" (Q4_K_M, written once to $BENCH_DIR, default
# ~/.cache/boltrt-bench; several GB each, never committed). An argument ending in .gguf is an
# existing model file, benchmarked as it is (bench/side_by_side.sh -m FILE does this). Needs build/<...>/boltrt
# (the newest that is not a sanitizer build; or set BOLTRT)
# and llama-ref (set LLAMA_REF_BIN; tools/setup.sh builds it).
set -euo pipefail
threads=2 n_prompt=512 n_gen=128 reps=3 rounds=1
while getopts "t:p:n:r:a:" opt; do
  case $opt in
    t) threads=$OPTARG ;; p) n_prompt=$OPTARG ;; n) n_gen=$OPTARG ;; r) reps=$OPTARG ;;
    a) rounds=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=(e4b 26b-a4b)
root="$(cd "$(dirname "$0")/.." && pwd)"
# the newest build that is not a sanitizer build (an ASan binary is several times slower)
newest_plain_build() {
  local b
  while read -r b; do
    grep -qs '^BOLTRT_SANITIZE:BOOL=ON' "$(dirname "$b")/CMakeCache.txt" || { echo "$b"; return; }
  done < <(find "$root"/build -mindepth 2 -maxdepth 2 -name boltrt -type f -printf '%T@ %p\n' 2>/dev/null |
    sort -rn | cut -d' ' -f2-)
}
boltrt="${BOLTRT:-$(newest_plain_build)}"
ref="${LLAMA_REF_BIN:-$HOME/.cache/llama-ref/build/bin}"
dir="${BENCH_DIR:-$HOME/.cache/boltrt-bench}"
[ -x "$boltrt" ] || { echo "no boltrt binary (build it or set BOLTRT)" >&2; exit 1; }
[ -x "$ref/llama-bench" ] || { echo "no llama-bench in $ref (run tools/setup.sh)" >&2; exit 1; }
mkdir -p "$dir"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)  threads: $threads"
# avg_ts of the pp / tg entries of a JSON array from either tool
rates() { python3 -c '
import json, sys
d = json.load(sys.stdin)
pp = [t["avg_ts"] for t in d if t["n_prompt"] > 0 and t["n_gen"] == 0]
tg = [t["avg_ts"] for t in d if t["n_gen"] > 0 and t["n_prompt"] == 0]
print(pp[0] if pp else 0, tg[0] if tg else 0)'; }
# One table line from rows "boltrt_pp llama_pp boltrt_tg llama_tg" on stdin: a single row as it
# is; several (the rounds) as the median of each column and of the ratios, and the ratios' range.
report() { python3 -c '
import statistics, sys
rows = [[float(x) for x in line.split()] for line in sys.stdin if line.strip()]
r = lambda a, b: a / b if b else 0
pp = [r(x[0], x[1]) for x in rows]
tg = [r(x[2], x[3]) for x in rows]
m = [statistics.median(c) for c in zip(*rows)]
line = "%-16s %12.2f %12.2f %8.2f %12.2f %12.2f %8.2f" % (
    sys.argv[1], m[0], m[1], statistics.median(pp), m[2], m[3], statistics.median(tg))
if len(rows) > 1:
    line += "   (ratios pp %.2f-%.2f, tg %.2f-%.2f)" % (min(pp), max(pp), min(tg), max(tg))
print(line)' "$1"; }
printf "%-16s %12s %12s %8s %12s %12s %8s\n" model "boltrt pp" "llama pp" ratio "boltrt tg" "llama tg" ratio
for preset in "${presets[@]}"; do
  if [[ "$preset" == *.gguf ]]; then
    f="$preset"
    [ -f "$f" ] || { echo "no such model file: $f" >&2; exit 1; }
    preset="$(basename "$f" .gguf)"
  else
    f="$dir/$preset-q4_k_m.gguf"
    [ -f "$f" ] || "$boltrt" synth --preset "$preset" --type q4_k_m -t "$threads" -o "$f" > /dev/null
  fi
  rows=()
  for ((round = 1; round <= rounds; round++)); do
    read -r bpp btg < <("$boltrt" bench -m "$f" -p "$n_prompt" -n "$n_gen" -t "$threads" -r "$reps" -o json | rates)
    read -r lpp ltg < <("$ref/llama-bench" -m "$f" -p "$n_prompt" -n "$n_gen" -t "$threads" -r "$reps" -o json 2>/dev/null | rates)
    rows+=("$bpp $lpp $btg $ltg")
    label="$preset"
    if [ "$rounds" -gt 1 ]; then label="$preset #$round"; fi
    report "$label" <<< "$bpp $lpp $btg $ltg"
  done
  if [ "$rounds" -gt 1 ]; then printf '%s\n' "${rows[@]}" | report "$preset median"; fi
done
