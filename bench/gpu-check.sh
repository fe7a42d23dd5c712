#!/usr/bin/env bash
# The one script a device session runs (see DEVELOPERS.md): builds boltrt with CUDA for the local
# GPU, runs every CUDA test (they must not skip there), the kernel benchmarks (GEMV GB/s and % of
# the device's peak, prefill GEMM TFLOP/s, decode and prefill attention) and end to end on an
# E4B-shape Q4_K_M synth: prefill tokens/s and time to first token for a 512-token prompt (one
# 512-token chunk), decode tokens/s with and without CUDA graphs and with a Q8_0 KV cache; a
# 26B-A4B-shape (mixture of experts) Q4_K_M synth cut to 6 layers: decode and prefill; a Qwen3.5
# 4B-shape Q4_K_M synth (as far as the budget goes): decode and prefill; and writes
# one report to ${OUT:-build/gpu-check}/gpu-check.md (logs in logs.tar.gz beside it). Prints the report at the end.
# Budget: GPU_CHECK_BUDGET seconds (default 420) in all; each step's timeout is cut to what is left,
# so a hang cannot eat the rest and the report comes back (the device call's timeout must exceed
# the budget). With .gpu-prebuilt (tools/pack-gpu-prebuilt.sh, carried) nothing is compiled there;
# else the build takes about 2 minutes on 16 cores. Logs go to $OUT/logs.tar.gz.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/build/gpu-check}
mkdir -p "$OUT"
# The device tool returns at most 8 files from $OUT: the report and one archive of the logs.
REPORT=$OUT/gpu-check.md
LOGS=$ROOT/build/gpu-check-logs
rm -rf "$LOGS"; mkdir -p "$LOGS"
pack_logs() { tar -C "$LOGS" -czf "$OUT/logs.tar.gz" . 2>/dev/null; }
JOBS=$(nproc)
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
ARCH=${ARCH:-90}
B=build/gpu
t0=$(date +%s)
# One budget for the whole script (the device call's timeout must exceed it): each step's timeout
# is cut to what is left, so the report and the logs always come back.
BUDGET=${GPU_CHECK_BUDGET:-420}
elapsed() { echo "$(( $(date +%s) - t0 )) s"; }
left() { echo $(( BUDGET - ($(date +%s) - t0) )); }
# limit SECONDS: the step's own limit, or what is left of the budget less 15 s for the report
limit() { local l; l=$(( $(left) - 15 )); (( l < $1 )) && echo $(( l > 1 ? l : 1 )) || echo "$1"; }
{
  echo "# gpu-check $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
  echo; echo '```'; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1
  nvcc --version 2>&1 | tail -1; c++ --version 2>&1 | head -1; echo "$(nproc) cores"; echo '```'
} > "$REPORT"

# --- binaries: prebuilt here by tools/pack-gpu-prebuilt.sh (carry .gpu-prebuilt) when they start
# on this machine, else built here. The GPU machine has no fmt, nlohmann_json, CLI11 or
# GoogleTest packages and cannot download: tools/pack-deps.sh packs them into .deps (carry
# .deps). No -Werror: that machine's compiler is another version, and a new warning there must not
# cost the device time (CI builds with -Werror).
PRE=$ROOT/.gpu-prebuilt/prebuilt.tar.xz
prebuilt=0
if [[ -f $PRE ]]; then
  rm -rf build/gpu-pre; mkdir -p build/gpu-pre
  if tar -C build/gpu-pre -xJf "$PRE" 2>"$LOGS/prebuilt.log"; then
    export LD_LIBRARY_PATH=$ROOT/build/gpu-pre/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:/usr/local/cuda/lib64
    ldd build/gpu-pre/bin/* >> "$LOGS/prebuilt.log" 2>&1
    if ! grep -q 'not found' "$LOGS/prebuilt.log" && build/gpu-pre/bin/boltrt --help >/dev/null 2>>"$LOGS/prebuilt.log"; then
      prebuilt=1; B=build/gpu-pre/bin
      echo "binaries: prebuilt $(cat build/gpu-pre/VERSION) (tools/pack-gpu-prebuilt.sh)" >> "$REPORT"
    else
      echo "prebuilt binaries do not start here (see prebuilt.log): building" >> "$REPORT"
    fi
  fi
fi
if (( ! prebuilt )); then
  DEPS=()
  [[ -d $ROOT/.deps ]] && DEPS=(-DBOLTRT_DEPS_DIR="$ROOT/.deps")
  if ! timeout "$(limit 200)" cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBOLTRT_CUDA=ON \
       -DBOLTRT_WERROR=OFF -DCMAKE_CUDA_ARCHITECTURES="$ARCH" "${DEPS[@]}" > "$LOGS/configure.log" 2>&1 ||
     ! timeout "$(limit 300)" cmake --build $B -j"$JOBS" --target boltrt test_cuda_gemv test_cuda_ops \
       test_cuda_math test_cuda_device test_cuda_gemma4 test_cuda_gemm test_cuda_moe test_dequant_sub32 \
       test_cuda_parity test_cuda_dflash test_cuda_qwen35 test_cuda_qwen35_ops \
       bench_cuda_gemv bench_cuda_gemm bench_cuda_attention bench_cuda_moe > "$LOGS/build.log" 2>&1; then
    echo "BUILD FAILED (see configure.log, build.log)" >> "$REPORT"
    tail -20 "$LOGS/configure.log"; tail -40 "$LOGS/build.log"; pack_logs; cat "$REPORT"; exit 1
  fi
  echo "build: $(elapsed) for sm_$ARCH" >> "$REPORT"
fi
# The tests find the repository, their build folder and the CLI through these when prebuilt.
export BOLTRT_TEST_SOURCE_DIR=$ROOT BOLTRT_TEST_BINARY_DIR=$ROOT/$B BOLTRT_TEST_CLI=$ROOT/$B/boltrt
status=0

# --- tests: every CUDA test, each with a timeout; a SKIPPED test counts as a failure here
echo; echo "## tests" >> "$REPORT"
# the kernel self-check first: the same checks the emulator passes in CI, on the real device
echo; echo "## boltrt selftest --device cuda" >> "$REPORT"
echo '```' >> "$REPORT"
timeout "$(limit 60)" "$B/boltrt" selftest --device cuda >> "$REPORT" 2>&1 || status=1
echo '```' >> "$REPORT"
for t in test_cuda_math test_dequant_sub32 test_cuda_gemv test_cuda_gemm test_cuda_ops test_cuda_moe \
         test_cuda_device test_cuda_gemma4 test_cuda_parity test_cuda_dflash test_cuda_qwen35_ops \
         test_cuda_qwen35; do
  log=$LOGS/$t.log
  tl=120; [[ $t == test_cuda_gemma4 ]] && tl=180  # 15 whole-model cases, synth included
  timeout "$(limit $tl)" "$B/$t" > "$log" 2>&1; rc=$?
  summary="$(grep -E '^\[  PASSED  \] [0-9]' "$log") skipped $(grep -cE '^\[  SKIPPED \] [A-Za-z]' "$log"), failed $(grep -cE '^\[  FAILED  \] [A-Za-z]' "$log")"
  if [[ $rc -ne 0 ]] || grep -q '^\[  SKIPPED' "$log"; then status=1; summary="**rc $rc** $summary"; fi
  echo "- $t: $summary" >> "$REPORT"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | head -10 | sed 's/^/  - /' >> "$REPORT"
  grep -E '^\[ [a-z0-9_]+(, [A-Za-z ]+)? \] .*rows: worst' "$log" | sed 's/^/  - /' >> "$REPORT"
done
# the shipped model end to end: greedy text on the device equals the CPU's (text and speed)
echo; echo "## boltrt generate, models/tiny, greedy: CUDA vs CPU" >> "$REPORT"
gen() {  # gen NAME ARGS...: --json output of one greedy generation into $LOGS/NAME.json
  local name=$1; shift
  timeout "$(limit 30)" "$B/boltrt" generate -p "Mr. Darcy walked" -n 160 --temp 0 --json "$@" \
    > "$LOGS/$name.json" 2> "$LOGS/$name.err"
}
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@" 2>/dev/null; }
# same_tokens A B: "equals" when both runs produced the same token ids, else where they part
same_tokens() {
  python3 -c "
import json, sys
a, b = (json.load(open(f))['tokens'] for f in sys.argv[1:3])
d = next((i for i, (p, q) in enumerate(zip(a, b)) if p != q), None)
print('equals' if a == b else 'differs from (first at token %s of %d)' % (d if d is not None else min(len(a), len(b)), len(a)))
" "$@" 2>/dev/null || echo "could not be compared with"
}
for m in tiny-f32 tiny-q8_0 tiny-q4_k; do
  gen $m-cpu -m models/tiny/$m.gguf --device cpu
  gen $m-cuda -m models/tiny/$m.gguf --device cuda
  same=$(same_tokens "$LOGS/$m-cpu.json" "$LOGS/$m-cuda.json")
  echo "- $m: CUDA greedy text $same the CPU's (quantized: the CPU rounds activations to 8 bits, CUDA does not, so near ties may part); cuda $(field "$LOGS/$m-cuda.json" tokens_per_second) tok/s, TTFT $(field "$LOGS/$m-cuda.json" ttft_ms) ms (cpu $(field "$LOGS/$m-cpu.json" tokens_per_second) tok/s)" >> "$REPORT"
done
gen draft-cuda -m models/tiny/tiny-q8_0.gguf --draft models/tiny/tiny-dflash.gguf --device cuda
same=$(same_tokens "$LOGS/tiny-q8_0-cuda.json" "$LOGS/draft-cuda.json")
echo "- tiny-q8_0 --draft tiny-dflash on cuda: greedy text $same plain device decoding; $(field "$LOGS/draft-cuda.json" tokens_per_second) tok/s" >> "$REPORT"
echo "tests done: $(elapsed)" >> "$REPORT"
pack_logs

# --- kernel benchmarks
echo; echo "## bench_cuda_gemv (E4B shapes)" >> "$REPORT"
timeout "$(limit 120)" "$B/bench_cuda_gemv" 100 >> "$REPORT" 2>&1 || status=1
echo; echo "## bench_cuda_gemm (prefill / verify, E4B shapes, f16 tensor cores)" >> "$REPORT"
timeout "$(limit 90)" "$B/bench_cuda_gemm" 30 >> "$REPORT" 2>&1 || status=1
echo; echo "## bench_cuda_attention (decode and prefill, F16 KV)" >> "$REPORT"
timeout "$(limit 60)" "$B/bench_cuda_attention" >> "$REPORT" 2>&1 || status=1
echo; echo "## bench_cuda_moe (26B-A4B expert GEMVs: decode, 512-token prefill)" >> "$REPORT"
timeout "$(limit 60)" "$B/bench_cuda_moe" 30 >> "$REPORT" 2>&1 || status=1

# --- end to end: E4B-shape Q4_K_M synth (random blocks; about 5 GB), decode and prefill
echo; echo "## end to end: boltrt bench, E4B-shape Q4_K_M synth" >> "$REPORT"
MODEL=$B/e4b-q4_k_m.gguf
if [[ ! -f $MODEL ]]; then
  timeout "$(limit 240)" "$B/boltrt" synth --preset e4b --type q4_k_m -t "$JOBS" -o "$MODEL" > "$LOGS/synth.log" 2>&1 ||
    { echo "synth failed (see synth.log)" >> "$REPORT"; status=1; }
fi
if [[ -f $MODEL ]]; then
  echo '```' >> "$REPORT"
  timeout "$(limit 240)" "$B/boltrt" bench -m "$MODEL" --device cuda -p 512 -n 128 -r 3 -b 512 \
    > "$LOGS/bench-e2e.md" 2> "$LOGS/bench-e2e.err"; rc=$?
  cat "$LOGS/bench-e2e.err" "$LOGS/bench-e2e.md" >> "$REPORT"
  echo '```' >> "$REPORT"
  [[ $rc -eq 0 ]] || { echo "boltrt bench: rc $rc" >> "$REPORT"; status=1; }
  # time to first token: the 512-token prompt is one forward pass ending in the first logits
  pp=$(grep -E '\| pp512 \|' "$LOGS/bench-e2e.md" | awk -F'|' '{print $8}' | awk '{print $1}')
  if [[ -n ${pp:-} ]]; then
    awk -v p="$pp" 'BEGIN { printf("prefill %.0f tokens/s; time to first token (512-token prompt) %.1f ms\n", p, 512000 / p) }' >> "$REPORT"
  fi
  # decode without CUDA graphs (kernels launched one by one): the graphs' gain
  echo '```' >> "$REPORT"
  BOLTRT_CUDA_GRAPHS=0 timeout "$(limit 120)" "$B/boltrt" bench -m "$MODEL" --device cuda -p 0 -n 128 -r 2 \
    2> "$LOGS/bench-nograph.err" | grep -E 'tg128' | sed 's/tg128/tg128 (no graphs)/' >> "$REPORT" ||
    { echo "boltrt bench without graphs failed (see bench-nograph.err)" >> "$REPORT"; status=1; }
  # decode with a Q8_0 KV cache (half the KV bytes; attention dequantizes the blocks)
  timeout "$(limit 120)" "$B/boltrt" bench -m "$MODEL" --device cuda -p 0 -n 128 -r 2 --kv-type q8_0 \
    2> "$LOGS/bench-kvq8.err" | grep -E 'tg128' | sed 's/tg128/tg128 (KV q8_0)/' >> "$REPORT" ||
    { echo "boltrt bench with --kv-type q8_0 failed (see bench-kvq8.err)" >> "$REPORT"; status=1; }
  # prefill without the tensor-core GEMM and flash attention (GEMV batches of 8): their gain
  BOLTRT_CUDA_GEMM=0 timeout "$(limit 120)" "$B/boltrt" bench -m "$MODEL" --device cuda -p 512 -n 0 -r 1 \
    -b 512 2> "$LOGS/bench-nogemm.err" | grep -E 'pp512' | sed 's/pp512/pp512 (GEMV only)/' >> "$REPORT" ||
    { echo "boltrt bench without the GEMM failed (see bench-nogemm.err)" >> "$REPORT"; status=1; }
  echo '```' >> "$REPORT"
  # roofline: weight bytes on the device per token / peak bandwidth (bench_cuda_gemv's header)
  weights_mib=$(grep -oE 'weights [0-9.]+ MiB' "$LOGS/bench-e2e.err" | grep -oE '[0-9.]+' | head -1)
  peak=$(grep -oE 'peak [0-9.]+ GB/s' "$REPORT" | grep -oE '[0-9.]+' | head -1)
  tg=$(grep -E '\| tg128 \|' "$LOGS/bench-e2e.md" | awk -F'|' '{print $8}' | awk '{print $1}')
  if [[ -n ${weights_mib:-} && -n ${peak:-} && -n ${tg:-} ]]; then
    awk -v w="$weights_mib" -v p="$peak" -v t="$tg" 'BEGIN {
      roof = p * 1e9 / (w * 1048576); printf("roofline %.0f tokens/s (weights %.0f MiB at %.0f GB/s); tg128 %.1f tokens/s = %.0f%% of roofline\n", roof, w, p, t, 100 * t / roof) }' >> "$REPORT"
  fi
  # where decode time goes, per kernel (Nsight Compute's kernel durations, eager launches so
  # every kernel is its own record; about 3 decode steps after the first-use self-check)
  if command -v ncu >/dev/null && (( $(left) > 150 )); then
    echo; echo "## decode profile (ncu, E4B-shape Q4_K_M, eager launches)" >> "$REPORT"
    BOLTRT_CUDA_GRAPHS=0 timeout "$(limit 80)" ncu --clock-control none --metrics gpu__time_duration.sum \
      --csv --page raw --launch-count 3000 "$B/boltrt" bench -m "$MODEL" --device cuda -p 0 -n 8 -r 1 \
      > "$LOGS/ncu-decode.csv" 2> "$LOGS/ncu-decode.err"
    python3 bench/ncu_summary.py "$LOGS/ncu-decode.csv" 15 >> "$REPORT" 2>&1
  fi
  rm -f "$MODEL"
fi

# --- end to end: 26B-A4B shape (128 experts, top 8, expert width 704, D 2816), 6 of its 30
# layers (about 3 GB): decode reads the router and only the 8 selected experts per layer
# (one expert-GEMV launch per matrix for all 8); prefill runs every (token, expert) pair
echo; echo "## end to end: boltrt bench, 26B-A4B-shape Q4_K_M synth, 6 layers" >> "$REPORT"
if (( $(left) < 90 )); then
  echo "skipped: $(elapsed) spent, less than 90 s of the ${BUDGET} s budget left" >> "$REPORT"
else
  MOE=$B/26b-a4b-6l-q4_k_m.gguf
  timeout "$(limit 150)" "$B/boltrt" synth --preset 26b-a4b --layers 6 --type q4_k_m -t "$JOBS" -o "$MOE" \
    > "$LOGS/synth-moe.log" 2>&1 || { echo "synth failed (see synth-moe.log)" >> "$REPORT"; status=1; }
  if [[ -f $MOE ]]; then
    echo '```' >> "$REPORT"
    timeout "$(limit 150)" "$B/boltrt" bench -m "$MOE" --device cuda -p 512 -n 128 -r 2 -b 512 \
      > "$LOGS/bench-moe.md" 2> "$LOGS/bench-moe.err"; rc=$?
    cat "$LOGS/bench-moe.err" "$LOGS/bench-moe.md" >> "$REPORT"
    echo '```' >> "$REPORT"
    [[ $rc -eq 0 ]] || { echo "boltrt bench (26B-A4B shape): rc $rc" >> "$REPORT"; status=1; }
    rm -f "$MOE"
  fi
fi
# --- end to end: Qwen3.5 4B shape, Q4_K_M (24 Gated DeltaNet + 8 gated attention layers, about
# 2.7 GB): decode (the delta rule streams each head's state) and prefill
echo; echo "## end to end: boltrt bench, Qwen3.5 4B-shape Q4_K_M synth" >> "$REPORT"
if (( $(left) < 90 )); then
  echo "skipped: $(elapsed) spent, less than 90 s of the ${BUDGET} s budget left" >> "$REPORT"
else
  QWEN=$B/qwen35-4b-q4_k_m.gguf
  timeout "$(limit 150)" "$B/boltrt" synth --arch qwen35 --preset 4b --type q4_k_m -t "$JOBS" \
    -o "$QWEN" > "$LOGS/synth-qwen35.log" 2>&1 ||
    { echo "synth failed (see synth-qwen35.log)" >> "$REPORT"; status=1; }
  if [[ -f $QWEN ]]; then
    echo '```' >> "$REPORT"
    timeout "$(limit 150)" "$B/boltrt" bench -m "$QWEN" --device cuda -p 512 -n 128 -r 2 -b 512 \
      > "$LOGS/bench-qwen35.md" 2> "$LOGS/bench-qwen35.err"; rc=$?
    cat "$LOGS/bench-qwen35.err" "$LOGS/bench-qwen35.md" >> "$REPORT"
    echo '```' >> "$REPORT"
    [[ $rc -eq 0 ]] || { echo "boltrt bench (Qwen3.5 4B shape): rc $rc" >> "$REPORT"; status=1; }
    rm -f "$QWEN"
  fi
fi
# --- compute-sanitizer (the hardware's own memcheck and racecheck: what the emulator's checks
# approximate) on the kernel tests, as far as the budget goes
if command -v compute-sanitizer >/dev/null && (( $(left) > 60 )); then
  echo; echo "## compute-sanitizer" >> "$REPORT"
  for tool in memcheck racecheck synccheck; do
    for t in test_cuda_gemv test_cuda_ops; do
      (( $(left) > 40 )) || break 2
      log=$LOGS/sanitizer-$tool-$t.log
      timeout "$(limit 90)" compute-sanitizer --tool $tool --report-api-errors no --print-limit 20 "$B/$t" > "$log" 2>&1; rc=$?
      echo "- $tool $t: rc $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1), $(grep -cE '^\[       OK \]' "$log") tests ran" >> "$REPORT"
    done
  done
fi
echo; echo "total: $(elapsed)" >> "$REPORT"
pack_logs
cat "$REPORT"
exit $status
