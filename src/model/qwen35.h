// Qwen3.5 (dense, GGUF architecture "qwen35"), docs/qwen35.md. A hybrid of Gated DeltaNet
// (linear-attention, recurrent state) layers and gated full-attention layers.
//
// This file holds, in reading order:
//   1. Qwen35Config::from_gguf   metadata -> hyper-parameters and the layer schedule, with the
//                                checks llama.cpp imposes (§2.4), so a file llama.cpp refuses is
//                                refused here with one clear error.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace boltrt {

namespace gguf {
class File;
}

struct Qwen35Config {
  int64_t n_embd = 0;       // D
  int64_t n_block = 0;      // block_count: trunk layers + MTP blocks
  int64_t n_nextn = 0;      // MTP ("nextn") blocks stored after the trunk, present but unused
  int64_t n_layer = 0;      // L = n_block − n_nextn, the layers the forward pass runs
  int64_t n_ctx_train = 0;  // context_length
  float rms_eps = 0.0f;     // every RMSNorm and the q/k L2Norm

  // per block (size n_block): FFN width, attention heads, KV heads
  std::vector<int64_t> n_ff, n_head, n_head_kv;
  // is_gdn[i]: block i is a Gated DeltaNet layer; otherwise gated full attention (MTP blocks
  // always attention)
  std::vector<bool> is_gdn;

  // full attention
  int64_t head_dim = 0;                    // hd = key_length = value_length
  int64_t n_rot = 0;                       // rotated dims per head (IMROPE), even, ≤ hd
  std::array<int64_t, 4> rope_sections{};  // M-RoPE sections [s0, s1, s2, s3] in rotation pairs
  float rope_base = 10000.0f;

  // Gated DeltaNet
  int64_t conv_kernel = 0;   // Kc
  int64_t ssm_d_state = 0;   // dk = dv (state_size)
  int64_t ssm_n_v_head = 0;  // Hv (time_step_rank)
  int64_t ssm_n_k_head = 0;  // Hk (group_count), divides Hv
  int64_t ssm_d_inner = 0;   // Hv·dv (inner_size)
  // conv channels C = [q | k | v] = 2·Hk·dk + Hv·dv
  int64_t conv_channels() const { return 2 * ssm_n_k_head * ssm_d_state + ssm_d_inner; }

  int64_t n_gdn_layers() const;   // GDN layers among the trunk's n_layer
  int64_t n_attn_layers() const;  // full-attention layers among the trunk's n_layer

  // Per-sequence memory (§5.1), for the memory figures. Recurrent state is always F32: per GDN
  // layer a conv window of Kc−1 raw inputs [C] and Hv delta states dk × dv; it does not grow
  // with the context. The KV cache of the trunk's attention layers grows by kv_bytes_per_token.
  int64_t conv_state_bytes_per_layer() const;
  int64_t delta_state_bytes_per_layer() const;
  int64_t recurrent_state_bytes() const;  // all trunk GDN layers, one sequence
  int64_t kv_bytes_per_token(int64_t bytes_per_element) const;

  static Qwen35Config from_gguf(const gguf::File& file);
};

}  // namespace boltrt
