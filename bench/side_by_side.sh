#!/usr/bin/env bash
# boltrt against llama.cpp on the same GGUF file(s) and thread count.
#
#   bench/side_by_side.sh -m FILE [-m FILE ...] [-t THREADS] [-p N_PROMPT] [-n N_GEN] [-r REPS]
#                         [-a ROUNDS]
#     `boltrt bench` and `llama-bench`, with the boltrt/llama ratios of prompt (pp) and
#     generation (tg) tokens/s (bench/gemma4_vs_llama.sh measures and prints; it also
#     synthesizes the E4B and 26B-A4B shapes).
#
#   bench/side_by_side.sh --serve -m FILE [-t THREADS] [--parallel SLOTS] [-c CTX_PER_SLOT]
#                         [-- serve_load.mjs options, e.g. --clients 1,4,16,32 --requests 4]
#     `boltrt serve` and `llama-server` on the same file, threads and slots (llama-server:
#     -np SLOTS, -c SLOTS*CTX since it splits its context between slots, prompt caching on),
#     one after the other on this machine, each driven by bench/serve_load.mjs: tokens/s, TTFT
#     and inter-token p50/p99 per client count, then the agent replay with the prefix cache and
#     without it (boltrt: --no-prefix-cache; llama-server: cache_prompt false per request).
#     LLAMA_SERVER overrides ~/.cache/llama-ref/build/bin/llama-server, BOLTRT build/dev/boltrt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" != "--serve" ]; then
  files=() pass=()
  while [ $# -gt 0 ]; do
    case $1 in
      -m) files+=("$2"); shift 2 ;;
      -t | -p | -n | -r | -a) pass+=("$1" "$2"); shift 2 ;;
      *) echo "usage: $0 [--serve] -m FILE [-m FILE ...] [-t N] [-p N] [-n N] [-r N] [-a N]" >&2; exit 2 ;;
    esac
  done
  [ ${#files[@]} -gt 0 ] || { echo "usage: $0 [--serve] -m FILE ... (see the header)" >&2; exit 2; }
  for f in "${files[@]}"; do
    [[ "$f" == *.gguf ]] || { echo "$f: expected a .gguf file" >&2; exit 2; }
  done
  exec "$here/gemma4_vs_llama.sh" "${pass[@]}" "${files[@]}"
fi
shift
file="" threads=2 slots=4 ctx=1024 load=()
while [ $# -gt 0 ]; do
  case $1 in
    -m) file=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --parallel) slots=$2; shift 2 ;;
    -c) ctx=$2; shift 2 ;;
    --) shift; load=("$@"); break ;;
    *) echo "usage: $0 --serve -m FILE [-t N] [--parallel N] [-c N] [-- load options]" >&2; exit 2 ;;
  esac
done
[ -f "$file" ] || { echo "--serve needs -m FILE (a .gguf)" >&2; exit 2; }
boltrt=${BOLTRT:-$here/../build/dev/boltrt}
llama=${LLAMA_SERVER:-$HOME/.cache/llama-ref/build/bin/llama-server}
for b in "$boltrt" "$llama"; do [ -x "$b" ] || { echo "$b: not found" >&2; exit 2; }; done
log=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$log"; }
trap cleanup EXIT

# Starts a server (command in "$@"), waits until GET /health answers 200 on $port.
start() {
  "$@" >"$log/server.out" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then return 0; fi
    kill -0 "$pid" 2>/dev/null || { cat "$log/server.out" >&2; exit 1; }
    sleep 0.2
  done
  echo "server did not come up" >&2; cat "$log/server.out" >&2; exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $file, -t $threads, $slots slots, ctx $ctx per slot"
port=$(free_port)
start "$boltrt" serve -m "$file" -t "$threads" --parallel "$slots" -c "$ctx" --port "$port"
node "$here/serve_load.mjs" "http://127.0.0.1:$port/v1" --label boltrt "${load[@]}" || echo "(serve_load failed)"
stop
start "$boltrt" serve -m "$file" -t "$threads" --parallel "$slots" -c "$ctx" --port "$port" \
  --no-prefix-cache
node "$here/serve_load.mjs" "http://127.0.0.1:$port/v1" --label boltrt-nocache --clients 0 \
  "${load[@]}" || echo "(serve_load failed)"
stop
start "$llama" -m "$file" -t "$threads" -np "$slots" -c $((slots * ctx)) --port "$port" \
  --host 127.0.0.1 --cache-prompt
node "$here/serve_load.mjs" "http://127.0.0.1:$port/v1" --label llama "${load[@]}" || echo "(serve_load failed)"
node "$here/serve_load.mjs" "http://127.0.0.1:$port/v1" --label llama-nocache --clients 0 \
  --no-cache-prompt "${load[@]}" || echo "(serve_load failed)"
stop
