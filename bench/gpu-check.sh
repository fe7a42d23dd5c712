#!/usr/bin/env bash
# The one script a device session runs (see DEVELOPERS.md): builds boltrt with CUDA for the local
# GPU, runs every CUDA test (they must not skip there) and the GPU benchmarks, and writes one
# report to ${OUT:-build/gpu-check}/gpu-check.md (plus logs). Prints the report at the end.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/build/gpu-check}
mkdir -p "$OUT"
REPORT=$OUT/gpu-check.md
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
ARCH=${ARCH:-90}
{
  echo "# gpu-check $(date -u +%Y-%m-%dT%H:%MZ)"
  echo; echo '```'; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.mem --format=csv 2>&1; echo '```'
} > "$REPORT"
start=$(date +%s)
if ! cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DBOLTRT_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES="$ARCH" > "$OUT/configure.log" 2>&1 ||
   ! cmake --build build/gpu -j"$(nproc)" --target test_cuda_gemv test_dequant_sub32 bench_cuda_gemv \
     > "$OUT/build.log" 2>&1; then
  echo "BUILD FAILED (see build.log)" >> "$REPORT"; tail -30 "$OUT/build.log"; cat "$REPORT"; exit 1
fi
echo "build: $(( $(date +%s) - start )) s for sm_$ARCH" >> "$REPORT"
status=0
for t in build/gpu/test_cuda_*; do
  [[ -x $t ]] || continue
  "$t" > "$OUT/$(basename "$t").log" 2>&1 || status=1
  echo "$(basename "$t"): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$(basename "$t").log" | tr '\n' ' ')" >> "$REPORT"
done
echo; echo "## bench_cuda_gemv" >> "$REPORT"
build/gpu/bench_cuda_gemv 200 >> "$REPORT" 2>&1 || status=1
cat "$REPORT"
exit $status
