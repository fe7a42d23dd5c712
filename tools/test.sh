#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this):
#   1. setup (Debian packages), test data that scripts make (never committed)
#   2. Release build, warnings as errors, CUDA compiled when nvcc exists; all tests (here and in
#      4 the test drivers compile at -O0, the library and CLI as the build type says)
#   3. configure against tools/pack-deps.sh's folder (the GPU machine's build); aarch64 cross
#      build, op tests (NEON kernels) under qemu-user
#   4. clang ASan+UBSan build with the CUDA emulator (-DBOLTRT_CUDA_EMULATOR=ON): all tests, the
#      CUDA ones on the emulated device
#   5. libFuzzer runs of the parsers (GGUF reader, grammar / JSON Schema, HTTP), side by side
# Usage: tools/test.sh [--quick]   (--quick: Release build and tests only)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
JOBS=${JOBS:-$(nproc)}
QUICK=0; [[ ${1:-} == --quick ]] && QUICK=1
start=$(date +%s)
stamp() { echo "== $(($(date +%s) - start))s: $*"; }

# CI starts from an empty cache: ccache would only double the disk the objects take.
export CCACHE_DISABLE=${CCACHE_DISABLE:-1}
disk() { df -Pm . | awk 'NR==2 {print $4 " MB free"}'; }

stamp "setup ($(disk))"
tools/setup.sh
tools/fetch-test-data.sh

stamp "Release build"
cmake -S . -B build/ci-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DBOLTRT_WERROR=ON \
  -DBOLTRT_TESTS_O0=ON >/dev/null
cmake --build build/ci-release -j"$JOBS"
stamp "Release tests"
ctest --test-dir build/ci-release --output-on-failure -j"$JOBS"
stamp "Release tests passed ($(disk))"

if ((QUICK)); then stamp "done (quick)"; exit 0; fi

# The GPU machine builds against tools/pack-deps.sh's folder (bench/gpu-check.sh): keep that
# configuration working (seconds; the full build there was checked with the packages hidden).
stamp "configure with packed dependencies (the GPU machine's build)"
tools/pack-deps.sh >/dev/null
cmake -S . -B build/ci-deps -G Ninja -DBOLTRT_DEPS_DIR="$ROOT/.deps" -DBOLTRT_CUDA=OFF >/dev/null
rm -rf build/ci-deps

stamp "aarch64 cross build + op tests under qemu ($(disk))"
JOBS="$JOBS" tools/test-aarch64.sh
find build/aarch64 -name '*.o' -delete

# The Release objects are not needed any more; free their disk for the sanitizer build.
find build/ci-release -name '*.o' -delete
# One sanitizer build is also the CUDA emulator build: kernels/*.cu and src/backend/cuda/ compiled
# by clang against src/backend/cuda_emulator/, so every CUDA test runs, under ASan+UBSan.
stamp "ASan+UBSan + CUDA emulator build (clang) ($(disk))"
CC=clang CXX=clang++ cmake -S . -B build/ci-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DBOLTRT_SANITIZE=ON -DBOLTRT_WERROR=ON -DBOLTRT_CUDA_EMULATOR=ON -DBOLTRT_BENCH=OFF \
  -DBOLTRT_FUZZ=ON -DBOLTRT_TESTS_O0=ON >/dev/null
cmake --build build/ci-asan -j"$JOBS"
stamp "ASan+UBSan tests (CUDA on the emulator)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/ci-asan --output-on-failure -j"$JOBS" | tee build/ci-asan/ctest.log
# On the emulator no CUDA test may skip (a skip is not a pass).
if grep -E "\*\*\*Skipped|Skipped " build/ci-asan/ctest.log | grep -i cuda; then
  echo "CUDA tests skipped on the emulator" >&2
  exit 1
fi
stamp "ASan+UBSan tests passed ($(disk))"

# The parsers' fuzzers (GGUF reader, grammar / JSON Schema, HTTP) run side by side: each is one
# process on one core, so one after another they left the other core idle.
stamp "fuzz the parsers"
fuzz() {  # one libFuzzer target; prints the end of its log (more of it when it fails)
  local f=$1 name corpus log rc=0
  name=$(basename "$f"); corpus=build/ci-asan/corpus-$name; log=build/ci-asan/$name.log
  mkdir -p "$corpus"
  local seeds=(); [[ -d tests/data/fuzz/$name ]] && seeds=(tests/data/fuzz/$name)
  "$f" -runs="${FUZZ_RUNS:-300000}" -max_len=65536 -timeout=10 "$corpus" "${seeds[@]}" \
    >"$log" 2>&1 || rc=$?
  if ((rc)); then echo "== $name failed ($rc):"; tail -n 60 "$log"; else
    echo "== $name:"; tail -n 3 "$log"; fi
  return "$rc"
}
pids=()
for f in build/ci-asan/fuzz_*; do
  [[ -x $f ]] || continue
  fuzz "$f" & pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
stamp "all passed"
