#!/usr/bin/env bash
# Nsight Compute's view of the decode step's heaviest kernels on a lent GPU: throughput against the
# hardware's limits, memory traffic, warp stall reasons, occupancy and registers for the Q4_K and
# Q6_K GEMVs and the residual rms_norm of an E4B-shape Q4_K_M decode (bench/RESULTS.md says why:
# they are 75-85 % of a decode step). One device call, carry .gpu-prebuilt (and .deps for the
# fallback build of gpu-check.sh, which this script does not repeat: it needs the prebuilt
# binaries). Writes $OUT/gpu-profile.txt. About 2 minutes.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/build/gpu-profile}
mkdir -p "$OUT" build/gpu-pre
REPORT=$OUT/gpu-profile.txt
tar -C build/gpu-pre -xJf .gpu-prebuilt/prebuilt.tar.xz || exit 1
export LD_LIBRARY_PATH=$ROOT/build/gpu-pre/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:/usr/local/cuda/lib64
B=build/gpu-pre/bin
MODEL=build/gpu-pre/e4b-q4_k_m.gguf
timeout 120 "$B/boltrt" synth --preset e4b --type q4_k_m -t "$(nproc)" -o "$MODEL" > /dev/null 2>&1 ||
  { echo "synth failed" > "$REPORT"; exit 1; }
SECTIONS=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
          --section Occupancy --section LaunchStats --section SchedulerStats)
profile() {  # profile TITLE KERNEL_REGEX COUNT
  echo "=== $1" >> "$REPORT"
  BOLTRT_CUDA_GRAPHS=0 timeout 100 ncu --clock-control none --kernel-name-base demangled \
    -k "regex:$2" --launch-skip 8 --launch-count "$3" "${SECTIONS[@]}" \
    "$B/boltrt" bench -m "$MODEL" --device cuda -p 0 -n 4 -r 1 >> "$REPORT" 2>&1
  echo "rc $?" >> "$REPORT"
}
profile "Q4_K GEMV, batch 1" 'gemv_quant_kernel<boltrt::BlockQ4_K, \(int\)1,' 3
profile "Q6_K GEMV, batch 1 (includes the 262,144-row head)" 'gemv_quant_kernel<boltrt::BlockQ6_K, \(int\)1,' 3
profile "rms_norm + residual, 2560 values" 'rms_norm_kernel<\(bool\)1, \(int\)16>' 1
rm -f "$MODEL"
grep -E '^===|Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Registers Per|Theoretical Occupancy|Stall|Issued Warp|No Eligible|Block Limit|Compute \(SM\) Throughput|Elapsed Cycles|rc ' "$REPORT" | head -150
