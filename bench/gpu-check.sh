#!/usr/bin/env bash
# The one script a device session runs (see DEVELOPERS.md): builds boltrt with CUDA for the local
# GPU, runs every CUDA test (they must not skip there), the kernel benchmarks (GEMV GB/s and % of
# the device's peak, prefill GEMM TFLOP/s, decode and prefill attention) and end to end on an
# E4B-shape Q4_K_M synth: prefill tokens/s and time to first token for a 512-token prompt (one
# 512-token chunk), decode tokens/s with and without CUDA graphs and with a Q8_0 KV cache; a
# 26B-A4B-shape (mixture of experts) Q4_K_M synth cut to 6 layers: decode and prefill; and writes
# one report to ${OUT:-build/gpu-check}/gpu-check.md (plus logs). Prints the report at the end.
# Budget: about 8 minutes on an H200 with 16 cores (build ~3, tests ~2, benches ~3); each step
# has its own timeout so one hang cannot eat the rest (the 26B-A4B step is skipped when less
# than 90 s of the 8 minutes remain).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/build/gpu-check}
mkdir -p "$OUT"
REPORT=$OUT/gpu-check.md
JOBS=$(nproc)
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
ARCH=${ARCH:-90}
B=build/gpu
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 )) s"; }
{
  echo "# gpu-check $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
  echo; echo '```'; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.mem --format=csv 2>&1; echo '```'
} > "$REPORT"

# --- build (tests and benches of the CUDA path only). The GPU machine has no fmt, nlohmann_json,
# CLI11 or GoogleTest packages and cannot download: tools/pack-deps.sh packs them into .deps here,
# and the device call carries it (carry: [".deps"]). No -Werror: that machine's compiler is another
# version, and a new warning there must not cost the device time (CI builds with -Werror).
DEPS=()
[[ -d $ROOT/.deps ]] && DEPS=(-DBOLTRT_DEPS_DIR="$ROOT/.deps")
BUILD_LIMIT=${GPU_CHECK_BUILD_TIMEOUT:-300}  # seconds for each of configure and build
if ! timeout "$BUILD_LIMIT" cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DBOLTRT_CUDA=ON \
     -DBOLTRT_WERROR=OFF -DCMAKE_CUDA_ARCHITECTURES="$ARCH" "${DEPS[@]}" > "$OUT/configure.log" 2>&1 ||
   ! timeout "$BUILD_LIMIT" cmake --build $B -j"$JOBS" --target boltrt test_cuda_gemv test_cuda_ops \
     test_cuda_math test_cuda_device test_cuda_gemma4 test_cuda_gemm test_cuda_moe test_dequant_sub32 \
     test_cuda_parity test_cuda_dflash \
     bench_cuda_gemv bench_cuda_gemm bench_cuda_attention bench_cuda_moe > "$OUT/build.log" 2>&1; then
  echo "BUILD FAILED (see configure.log, build.log)" >> "$REPORT"
  tail -20 "$OUT/configure.log"; tail -40 "$OUT/build.log"; cat "$REPORT"; exit 1
fi
echo "build: $(elapsed) for sm_$ARCH" >> "$REPORT"
status=0

# --- tests: every CUDA test, each with a timeout; a SKIPPED test counts as a failure here
echo; echo "## tests" >> "$REPORT"
# the kernel self-check first: the same checks the emulator passes in CI, on the real device
echo; echo "## boltrt selftest --device cuda" >> "$REPORT"
echo '```' >> "$REPORT"
timeout 60 "$B/boltrt" selftest --device cuda >> "$REPORT" 2>&1 || status=1
echo '```' >> "$REPORT"
for t in test_cuda_math test_dequant_sub32 test_cuda_gemv test_cuda_gemm test_cuda_ops test_cuda_moe \
         test_cuda_device test_cuda_gemma4 test_cuda_parity test_cuda_dflash; do
  log=$OUT/$t.log
  limit=240; [[ $t == test_cuda_gemma4 ]] && limit=300  # 15 whole-model cases, synth included
  timeout $limit "$B/$t" > "$log" 2>&1; rc=$?
  summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | tr '\n' ' ')
  if [[ $rc -ne 0 ]] || grep -q '^\[  SKIPPED' "$log"; then status=1; summary="**rc $rc** $summary"; fi
  echo "- $t: $summary" >> "$REPORT"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | head -10 | sed 's/^/  - /' >> "$REPORT"
  grep -E '^\[ [a-z0-9_]+ \] .*rows: worst' "$log" | sed 's/^/  - /' >> "$REPORT"
done
echo "tests done: $(elapsed)" >> "$REPORT"

# --- kernel benchmarks
echo; echo "## bench_cuda_gemv (E4B shapes)" >> "$REPORT"
timeout 120 "$B/bench_cuda_gemv" 100 >> "$REPORT" 2>&1 || status=1
echo; echo "## bench_cuda_gemm (prefill / verify, E4B shapes, f16 tensor cores)" >> "$REPORT"
timeout 90 "$B/bench_cuda_gemm" 30 >> "$REPORT" 2>&1 || status=1
echo; echo "## bench_cuda_attention (decode and prefill, F16 KV)" >> "$REPORT"
timeout 60 "$B/bench_cuda_attention" >> "$REPORT" 2>&1 || status=1
echo; echo "## bench_cuda_moe (26B-A4B expert GEMVs: decode, 512-token prefill)" >> "$REPORT"
timeout 60 "$B/bench_cuda_moe" 30 >> "$REPORT" 2>&1 || status=1

# --- end to end: E4B-shape Q4_K_M synth (random blocks; about 5 GB), decode and prefill
echo; echo "## end to end: boltrt bench, E4B-shape Q4_K_M synth" >> "$REPORT"
MODEL=$B/e4b-q4_k_m.gguf
if [[ ! -f $MODEL ]]; then
  timeout 240 "$B/boltrt" synth --preset e4b --type q4_k_m -t "$JOBS" -o "$MODEL" > "$OUT/synth.log" 2>&1 ||
    { echo "synth failed (see synth.log)" >> "$REPORT"; status=1; }
fi
if [[ -f $MODEL ]]; then
  echo '```' >> "$REPORT"
  timeout 240 "$B/boltrt" bench -m "$MODEL" --device cuda -p 512 -n 128 -r 3 -b 512 \
    > "$OUT/bench-e2e.md" 2> "$OUT/bench-e2e.err"; rc=$?
  cat "$OUT/bench-e2e.err" "$OUT/bench-e2e.md" >> "$REPORT"
  echo '```' >> "$REPORT"
  [[ $rc -eq 0 ]] || { echo "boltrt bench: rc $rc" >> "$REPORT"; status=1; }
  # time to first token: the 512-token prompt is one forward pass ending in the first logits
  pp=$(grep -E '\| pp512 \|' "$OUT/bench-e2e.md" | awk -F'|' '{print $8}' | awk '{print $1}')
  if [[ -n ${pp:-} ]]; then
    awk -v p="$pp" 'BEGIN { printf("prefill %.0f tokens/s; time to first token (512-token prompt) %.1f ms\n", p, 512000 / p) }' >> "$REPORT"
  fi
  # decode without CUDA graphs (kernels launched one by one): the graphs' gain
  echo '```' >> "$REPORT"
  BOLTRT_CUDA_GRAPHS=0 timeout 120 "$B/boltrt" bench -m "$MODEL" --device cuda -p 0 -n 128 -r 2 \
    2> "$OUT/bench-nograph.err" | grep -E 'tg128' | sed 's/tg128/tg128 (no graphs)/' >> "$REPORT" ||
    { echo "boltrt bench without graphs failed (see bench-nograph.err)" >> "$REPORT"; status=1; }
  # decode with a Q8_0 KV cache (half the KV bytes; attention dequantizes the blocks)
  timeout 120 "$B/boltrt" bench -m "$MODEL" --device cuda -p 0 -n 128 -r 2 --kv-type q8_0 \
    2> "$OUT/bench-kvq8.err" | grep -E 'tg128' | sed 's/tg128/tg128 (KV q8_0)/' >> "$REPORT" ||
    { echo "boltrt bench with --kv-type q8_0 failed (see bench-kvq8.err)" >> "$REPORT"; status=1; }
  # prefill without the tensor-core GEMM and flash attention (GEMV batches of 8): their gain
  BOLTRT_CUDA_GEMM=0 timeout 120 "$B/boltrt" bench -m "$MODEL" --device cuda -p 512 -n 0 -r 1 \
    -b 512 2> "$OUT/bench-nogemm.err" | grep -E 'pp512' | sed 's/pp512/pp512 (GEMV only)/' >> "$REPORT" ||
    { echo "boltrt bench without the GEMM failed (see bench-nogemm.err)" >> "$REPORT"; status=1; }
  echo '```' >> "$REPORT"
  # roofline: weight bytes on the device per token / peak bandwidth (bench_cuda_gemv's header)
  weights_mib=$(grep -oE 'weights [0-9.]+ MiB' "$OUT/bench-e2e.err" | grep -oE '[0-9.]+' | head -1)
  peak=$(grep -oE 'peak [0-9.]+ GB/s' "$REPORT" | grep -oE '[0-9.]+' | head -1)
  tg=$(grep -E '\| tg128 \|' "$OUT/bench-e2e.md" | awk -F'|' '{print $8}' | awk '{print $1}')
  if [[ -n ${weights_mib:-} && -n ${peak:-} && -n ${tg:-} ]]; then
    awk -v w="$weights_mib" -v p="$peak" -v t="$tg" 'BEGIN {
      roof = p * 1e9 / (w * 1048576); printf("roofline %.0f tokens/s (weights %.0f MiB at %.0f GB/s); tg128 %.1f tokens/s = %.0f%% of roofline\n", roof, w, p, t, 100 * t / roof) }' >> "$REPORT"
  fi
  rm -f "$MODEL"
fi

# --- end to end: 26B-A4B shape (128 experts, top 8, expert width 704, D 2816), 6 of its 30
# layers (about 3 GB): decode reads the router and only the 8 selected experts per layer
# (one expert-GEMV launch per matrix for all 8); prefill runs every (token, expert) pair
echo; echo "## end to end: boltrt bench, 26B-A4B-shape Q4_K_M synth, 6 layers" >> "$REPORT"
if (( $(date +%s) - t0 > 390 )); then
  echo "skipped: $(elapsed) spent, over the 8-minute budget" >> "$REPORT"
else
  MOE=$B/26b-a4b-6l-q4_k_m.gguf
  timeout 150 "$B/boltrt" synth --preset 26b-a4b --layers 6 --type q4_k_m -t "$JOBS" -o "$MOE" \
    > "$OUT/synth-moe.log" 2>&1 || { echo "synth failed (see synth-moe.log)" >> "$REPORT"; status=1; }
  if [[ -f $MOE ]]; then
    echo '```' >> "$REPORT"
    timeout 150 "$B/boltrt" bench -m "$MOE" --device cuda -p 512 -n 128 -r 2 -b 512 \
      > "$OUT/bench-moe.md" 2> "$OUT/bench-moe.err"; rc=$?
    cat "$OUT/bench-moe.err" "$OUT/bench-moe.md" >> "$REPORT"
    echo '```' >> "$REPORT"
    [[ $rc -eq 0 ]] || { echo "boltrt bench (26B-A4B shape): rc $rc" >> "$REPORT"; status=1; }
    rm -f "$MOE"
  fi
fi
echo; echo "total: $(elapsed)" >> "$REPORT"
cat "$REPORT"
exit $status
