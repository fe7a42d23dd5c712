#!/usr/bin/env bash
# Builds the CUDA binaries bench/gpu-check.sh needs here (nvcc, for one architecture) and packs
# them, stripped, with the few shared libraries a CUDA image may lack, into
# .gpu-prebuilt/prebuilt.tar.xz (git-ignored; about 5 MB). A device call that carries
# .gpu-prebuilt then spends no device time compiling: gpu-check.sh checks that the binaries start
# there and falls back to building when they do not (another image's system libraries).
# Usage: [BUILD_DIR=build/...] tools/pack-gpu-prebuilt.sh [ARCH]   (default 90: the H200/H100)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ARCH=${1:-90}
B=${BUILD_DIR:-build/gpu-prebuilt-sm$ARCH}
# every CUDA test (tests/test_cuda_*.cpp), the Sub32 unpacker test and the CUDA benchmarks
TARGETS=(boltrt test_dequant_sub32 $(cd tests && ls test_cuda_*.cpp | sed 's/\.cpp$//')
         $(cd bench && ls bench_cuda_*.cpp | sed 's/\.cpp$//'))
[[ -d .deps ]] || tools/pack-deps.sh
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBOLTRT_CUDA=ON -DBOLTRT_WERROR=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DBOLTRT_DEPS_DIR="$ROOT/.deps" >/dev/null
cmake --build "$B" -j"${JOBS:-$(nproc)}" --target "${TARGETS[@]}"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for t in "${TARGETS[@]}"; do cp "$B/$t" "$stage/bin/"; done
strip "$stage/bin/"*
# Shared libraries outside glibc, libstdc++ and CUDA's own (the device image has those).
for lib in $(ldd "$stage/bin/"* | awk '/=> \// {print $3}' | sort -u); do
  case $(basename "$lib") in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libgcc_s.so* | libstdc++.so* | \
      libcuda* | libcublas*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
echo "sm_$ARCH $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes)" > "$stage/VERSION"
mkdir -p .gpu-prebuilt
tar -C "$stage" -cf - VERSION bin lib | xz -9 -T"${JOBS:-$(nproc)}" > .gpu-prebuilt/prebuilt.tar.xz
echo "packed $(du -h .gpu-prebuilt/prebuilt.tar.xz | cut -f1) into .gpu-prebuilt/ ($(cat "$stage/VERSION"))"
