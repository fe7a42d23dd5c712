#!/usr/bin/env bash
# Installs what boltrt needs to build and test, from Debian's packages only (CMake downloads
# nothing). Idempotent: installs only what is missing. Run as root or with sudo available.
set -euo pipefail
# Libraries and headers: checked by package name.
PKGS=(build-essential pkg-config libclang-rt-14-dev libgtest-dev libgmock-dev googletest libbenchmark-dev
      libfmt-dev libcli11-dev nlohmann-json3-dev libedit-dev python3-numpy
      libboost-context-dev)
# Tools: checked by command, since they may come from elsewhere (e.g. Node.js with its own npm).
declare -A TOOLS=([cmake]=cmake [ninja]=ninja-build [ccache]=ccache [clang++]=clang
                  [python3]=python3 [git]=git [node]=nodejs [npm]=npm [script]=bsdutils
                  [chromium]=chromium)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
for t in "${!TOOLS[@]}"; do
  command -v "$t" >/dev/null 2>&1 || missing+=("${TOOLS[$t]}")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
