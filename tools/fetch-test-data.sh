#!/usr/bin/env bash
# Test data that is too big to commit and that a script can make again:
#   tests/data/vocab/ggml-vocab-gemma-4.gguf — the real 262,144-token Gemma 4 vocabulary, and
#   ggml-vocab-qwen35.gguf — the Qwen2 vocabulary (151,936 tokens) with Qwen3.5's `qwen35`
#   pre-tokenizer, from the llama.cpp source bundle inside the npm package node-llama-cpp (the same
#   one llama-ref builds);
#   tests/serve_client/node_modules/ — the official `openai` npm client that test_serve_client
#   drives `boltrt serve` with (version pinned in tests/serve_client/package-lock.json).
# Idempotent; nothing here is tracked by git.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [[ ! -s $ROOT/tests/serve_client/node_modules/openai/package.json ]]; then
  (cd "$ROOT/tests/serve_client" && npm ci --no-audit --no-fund --loglevel=error)
fi
DEST=$ROOT/tests/data/vocab
VERSION=${NODE_LLAMA_CPP_VERSION:-3.21.1}
mkdir -p "$DEST"
want=(ggml-vocab-gemma-4.gguf ggml-vocab-gemma-4.gguf.inp ggml-vocab-gemma-4.gguf.out ggml-vocab-llama-spm.gguf
      ggml-vocab-llama-spm.gguf.inp ggml-vocab-llama-spm.gguf.out ggml-vocab-qwen35.gguf
      ggml-vocab-qwen35.gguf.inp ggml-vocab-qwen35.gguf.out)
have_all=1
for f in "${want[@]}"; do [[ -s $DEST/$f ]] || have_all=0; done
((have_all)) && exit 0
SRC=${LLAMA_REF_DIR:-$HOME/.cache/llama-ref}/src
if [[ -d $SRC/models ]]; then
  for f in "${want[@]}"; do cp "$SRC/models/$f" "$DEST/"; done
  exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "node-llama-cpp@$VERSION" >/dev/null && tar xzf node-llama-cpp-*.tgz)
git clone -q --no-checkout "$tmp/package/llama/gitRelease.bundle" "$tmp/src"
for f in "${want[@]}"; do git -C "$tmp/src" show "HEAD:models/$f" > "$DEST/$f"; done
