#!/usr/bin/env bash
# Packs the build dependencies that come from Debian packages here (fmt, nlohmann_json, CLI11
# headers and the GoogleTest sources) into .deps/ (git-ignored), for a machine that has a
# compiler, CMake and CUDA but not those packages and cannot download them: the GPU machine of
# the `device` tool. Carry `.deps` there and configure with -DBOLTRT_DEPS_DIR=$PWD/.deps
# (bench/gpu-check.sh does so when .deps exists). fmt is then used header-only; about 6 MB.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/.deps
need() { [[ -e $1 ]] || { echo "pack-deps: $1 is missing (run tools/setup.sh first)" >&2; exit 1; }; }
need /usr/include/fmt/format-inl.h
need /usr/include/nlohmann/json.hpp
need /usr/include/CLI/CLI.hpp
need /usr/src/googletest/CMakeLists.txt
rm -rf "$DEST"
mkdir -p "$DEST/include"
cp -r /usr/include/fmt /usr/include/nlohmann /usr/include/CLI "$DEST/include/"
cp -r /usr/src/googletest "$DEST/googletest"
echo "packed $(du -sh "$DEST" | cut -f1) into $DEST"
