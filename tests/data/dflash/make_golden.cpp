// Golden maker (not built by CMake): runs llama.cpp v0.4.0's DFlash draft on a synthetic
// Gemma 4 or Qwen3.5 target + draft pair and writes what a boltrt test needs to compare against:
// the target's tapped hidden states for the prompt (as llama.cpp captures them: the inputs of
// the stored target layers) and the draft's logits for block slots 1..B-1.
//
// Build and run: see make_golden.sh next to this file.
//
// Output (little-endian binary, f32 unless noted):
//   i32 n_ctx, n_taps, n_embd, n_block, n_vocab, last_token
//   i32 prompt[n_ctx]
//   f32 taps[n_ctx][n_taps][n_embd]
//   f32 logits[n_block-1][n_vocab]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "llama-ext.h"
#include "llama.h"

static void die(const char* what) {
  std::fprintf(stderr, "make_golden: %s\n", what);
  std::exit(1);
}

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) die("usage: make_golden TARGET.gguf DRAFT.gguf OUT.bin [f32]");
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* target = llama_model_load_from_file(argv[1], mp);
  llama_model* draft = llama_model_load_from_file(argv[2], mp);
  if (!target || !draft) die("cannot load the models");

  const int32_t n_embd = llama_model_n_embd(target);
  const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(target));
  const int32_t* layer_ids = llama_model_target_layer_ids(draft);
  const int32_t n_taps = (int32_t)llama_model_target_layer_ids_n(draft);
  const int32_t mask = llama_vocab_mask(llama_model_get_vocab(draft));
  const int32_t n_block = 8;

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = 64;
  cp.n_ubatch = 64;
  cp.n_threads = 1;
  cp.n_threads_batch = 1;
  // argv[4] == "f32": the target too with an f32 K/V cache and no flash attention, so its taps
  // hold the target graph's math at f32 (qwen35: the taps after an attention layer otherwise
  // carry the f16 cache's and f16 flash attention's rounding, ~1e-4 relative)
  llama_context_params tp = cp;
  if (argc == 5 && std::strcmp(argv[4], "f32") == 0) {
    tp.type_k = GGML_TYPE_F32;
    tp.type_v = GGML_TYPE_F32;
    tp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  }
  llama_context* ctx_tgt = llama_init_from_model(target, tp);
  if (!ctx_tgt) die("cannot create the target context");
  for (int32_t k = 0; k < n_taps; ++k) llama_set_embeddings_layer_inp(ctx_tgt, layer_ids[k], true);

  // prompt: fixed token ids of the synthetic vocabulary
  const std::vector<int32_t> prompt = {2, 17, 88, 301, 45, 9, 260, 133, 77, 412, 5};
  const int32_t n_ctx = (int32_t)prompt.size();
  llama_batch b = llama_batch_init(64, 0, 1);
  for (int32_t i = 0; i < n_ctx; ++i) {
    b.token[i] = prompt[i];
    b.pos[i] = i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = i == n_ctx - 1;
  }
  b.n_tokens = n_ctx;
  if (llama_decode(ctx_tgt, b) != 0) die("target decode failed");
  const float* last = llama_get_logits_ith(ctx_tgt, n_ctx - 1);
  int32_t last_token = 0;
  for (int32_t i = 1; i < n_vocab; ++i) {
    if (last[i] > last[last_token]) last_token = i;
  }
  std::vector<float> taps((size_t)n_ctx * n_taps * n_embd);
  for (int32_t k = 0; k < n_taps; ++k) {
    const float* rows = llama_get_embeddings_layer_inp(ctx_tgt, (uint32_t)layer_ids[k]);
    if (!rows) die("layer input not extracted");
    for (int32_t i = 0; i < n_ctx; ++i) {
      std::memcpy(&taps[((size_t)i * n_taps + k) * n_embd], rows + (size_t)i * n_embd,
                  sizeof(float) * n_embd);
    }
  }

  // Draft context with an f32 K/V cache and no flash attention, so the golden holds the draft
  // graph's math at f32 (the default f16 cache + CPU flash attention add ~1e-3 relative noise).
  llama_context_params dp = cp;
  dp.ctx_other = ctx_tgt;
  dp.type_k = GGML_TYPE_F32;
  dp.type_v = GGML_TYPE_F32;
  dp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx_dft = llama_init_from_model(draft, dp);
  if (!ctx_dft) die("cannot create the draft context");
  llama_set_causal_attn(ctx_dft, false);

  // KV injection: the concatenated taps at the prompt positions
  llama_batch inj = llama_batch_init(64, n_taps * n_embd, 1);
  std::memcpy(inj.embd, taps.data(), taps.size() * sizeof(float));
  for (int32_t i = 0; i < n_ctx; ++i) {
    inj.pos[i] = i;
    inj.n_seq_id[i] = 1;
    inj.seq_id[i][0] = 0;
    inj.logits[i] = false;
  }
  inj.n_tokens = n_ctx;
  if (llama_decode(ctx_dft, inj) != 0) die("injection decode failed");

  // the block [last_token, mask x (B-1)] at positions n_ctx ..
  llama_batch blk = llama_batch_init(64, 0, 1);
  for (int32_t i = 0; i < n_block; ++i) {
    blk.token[i] = i == 0 ? last_token : mask;
    blk.pos[i] = n_ctx + i;
    blk.n_seq_id[i] = 1;
    blk.seq_id[i][0] = 0;
    blk.logits[i] = true;
  }
  blk.n_tokens = n_block;
  if (llama_decode(ctx_dft, blk) != 0) die("block decode failed");

  FILE* out = std::fopen(argv[3], "wb");
  if (!out) die("cannot write the output");
  const int32_t header[6] = {n_ctx, n_taps, n_embd, n_block, n_vocab, last_token};
  std::fwrite(header, sizeof(header), 1, out);
  std::fwrite(prompt.data(), sizeof(int32_t), prompt.size(), out);
  std::fwrite(taps.data(), sizeof(float), taps.size(), out);
  for (int32_t i = 1; i < n_block; ++i) {
    const float* row = llama_get_logits_ith(ctx_dft, i);
    if (!row) die("no draft logits");
    std::fwrite(row, sizeof(float), (size_t)n_vocab, out);
    int32_t best = 0;
    for (int32_t j = 1; j < n_vocab; ++j) {
      if (row[j] > row[best]) best = j;
    }
    std::printf("slot %d: argmax %d\n", i, best);
  }
  std::fclose(out);
  std::printf("last_token %d mask %d taps", last_token, mask);
  for (int32_t k = 0; k < n_taps; ++k) std::printf(" %d", layer_ids[k]);
  std::printf("\n");
  return 0;
}
