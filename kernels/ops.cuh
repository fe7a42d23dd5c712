// Launchers of the model kernels (Gemma 4, Qwen3.5), one op per .cu file in this directory. All
// pointers are device memory; every launcher queues its work on `stream` and returns the launch
// status (cudaGetLastError). Shapes are row-major: [rows][n] means rows of n contiguous values. The
// scalar math lives in backend/cuda/gemma4_math.h (checked on the CPU by test_cuda_math); each
// launcher is checked against the CPU backend by test_cuda_ops (the Qwen3.5 ones by
// test_cuda_qwen35_ops).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "portable.cuh"

namespace boltrt::kernels {

// rms_norm.cu: y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w (w null: no weight); x, y [rows][n],
// y may alias x. Per-head Q/K/V norms are the same op with rows = tokens * heads, n = head_dim.
cudaError_t launch_rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps,
                            float* y, cudaStream_t stream);
// rms_norm.cu: h[r] += rms_norm(x[r]) * w — the post-norms that feed the residual stream.
cudaError_t launch_rms_norm_add(const float* x, const float* w, int64_t rows, int64_t n, float eps,
                                float* h, cudaStream_t stream);

// The KV cache formats of kv_store and the attention kernels: F16 values, or Q8_0 blocks (34
// bytes per 32 values: f16 scale + 32 int8, cuda::quantize_q8_0_block; --kv-type q8_0).
enum class KvFormat { kF16, kQ8_0 };

// device_pos0 (rope, kv_store, attention_decode): when not null, pos0 is read from this device
// address instead of the argument, so a captured CUDA graph of the decode step serves every
// position (the runtime writes the position before launching the graph).

// rope_neox.cu: NEOX RoPE in place on x [n_tokens][n_heads][head_dim], token t at position
// pos0 + t; pairs (i, i + n_rot/2) for i < n_rot/2 rotate by rope_angle(pos, i, theta_scale,
// freq_factors) (freq_factors: device [n_rot/2] or null); dims >= n_rot pass through.
cudaError_t launch_rope_neox(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
                             int64_t n_rot, int64_t pos0, float theta_scale,
                             const float* freq_factors, cudaStream_t stream,
                             const int64_t* device_pos0 = nullptr);

// gelu_mul.cu: out[r][i] = gelu_tanh(x[r][i]) * y[r * y_stride + i]; x, out [rows][n]
// (out may alias x). GELU-tanh gating of the MLP (y = up) and of the per-layer embeddings
// (y = the layer's slice of the PLE rows).
cudaError_t launch_gelu_mul(const float* x, const float* y, int64_t y_stride, int64_t rows,
                            int64_t n, float* out, cudaStream_t stream);

// embed_rows.cu: out[t] = scale * dequantize(table row tokens[t]) for t < n; table rows of
// `cols` values in ggml type `type`, row_stride bytes apart; tokens device int32 [n].
cudaError_t launch_embed_rows(uint32_t type, const void* table, size_t row_stride, int64_t cols,
                              const int32_t* tokens, int64_t n, float scale, float* out,
                              cudaStream_t stream);

// ple_mix.cu: Gemma 4 per-layer embedding mix, per row r of P values (rows = tokens * layers):
//   proj[r] = (rms_norm(proj[r] * proj_scale) * w + tok[r] * tok_scale) * mix_scale
cudaError_t launch_ple_mix(float* proj, const float* tok, const float* w, int64_t rows, int64_t P,
                           float proj_scale, float tok_scale, float mix_scale, float eps,
                           cudaStream_t stream);

// add.cu: y[i] += x[i] for i < n (residual connections).
cudaError_t launch_add(const float* x, int64_t n, float* y, cudaStream_t stream);

// scale.cu: x[i] *= s for i < n.
cudaError_t launch_scale(float* x, int64_t n, float s, cudaStream_t stream);

// softcap.cu: x[i] = cap * tanh(x[i] / cap) for i < n (final logits).
cudaError_t launch_softcap(float* x, int64_t n, float cap, cudaStream_t stream);

// kv_store.cu: writes the K and V rows of n_tokens consecutive positions pos0.. (k, v
// [n_tokens][row] f32) into an F16 cache of `cells` rows (k_cache, v_cache [cells][row]) at
// cell = position % cells (full layers: cells = n_ctx; window layers: a ring).
cudaError_t launch_kv_store(const float* k, const float* v, int64_t n_tokens, int64_t row,
                            int64_t pos0, int64_t cells, uint16_t* k_cache, uint16_t* v_cache,
                            cudaStream_t stream, const int64_t* device_pos0 = nullptr);
// kv_store.cu: the same into a Q8_0 cache (rows of q8_0_row_bytes(row) bytes; row a multiple
// of 32): each 32-value block quantized as the CPU cache does (cuda::quantize_q8_0_block).
cudaError_t launch_kv_store_q8_0(const float* k, const float* v, int64_t n_tokens, int64_t row,
                                 int64_t pos0, int64_t cells, uint8_t* k_cache, uint8_t* v_cache,
                                 cudaStream_t stream, const int64_t* device_pos0 = nullptr);

// attention_decode.cu: causal GQA attention of n_tokens queries at positions pos0.. over a
// cache written by launch_kv_store (format kF16) or launch_kv_store_q8_0 (format kQ8_0).
//   q, out: [n_tokens][n_head][head_dim] f32    k_cache, v_cache: [cells][n_head_kv][head_dim]
// Query at position p sees keys [first_visible_key(p, window), p]; query head h reads KV head
// h / (n_head / n_head_kv); score = scale * q.k, then softcap(score, cap) when cap > 0.
// head_dim a multiple of 64, at most 512. Keys are split over `n_split` blocks per (token,
// head) whose partial softmax states are merged at the end; `partials` is device scratch of
// attention_partials_floats(...) floats (unused when n_split == 1). n_split may exceed the keys
// (a decode graph sizes it for its context bucket): empty splits merge as nothing.
int attention_split_count(int64_t max_keys, int64_t n_tokens, int64_t n_head);
size_t attention_partials_floats(int64_t n_tokens, int64_t n_head, int64_t head_dim, int n_split);
cudaError_t launch_attention_decode(const float* q, const void* k_cache, const void* v_cache,
                                    int64_t n_tokens, int64_t pos0, int64_t cells, int64_t n_head,
                                    int64_t n_head_kv, int64_t head_dim, int64_t window,
                                    float scale, float cap, int n_split, float* partials,
                                    float* out, cudaStream_t stream,
                                    const int64_t* device_pos0 = nullptr,
                                    KvFormat format = KvFormat::kF16);

// attention_prefill.cu: the same attention as launch_attention_decode (same arguments, masks,
// GQA mapping, scale and cap) for many queries at once: flash attention with K/V tiles staged
// in shared memory once per block of query rows that share a KV head. Every key of
// [first_visible_key(pos0), pos0 + n_tokens) must still be in the cache (cells >= the span).
// head_dim 64, 128, 192, 256 or 512 (attention_prefill_head_dim_supported). Used for prefill
// chunks and DFlash verify batches.
cudaError_t launch_attention_prefill(const float* q, const void* k_cache, const void* v_cache,
                                     int64_t n_tokens, int64_t pos0, int64_t cells, int64_t n_head,
                                     int64_t n_head_kv, int64_t head_dim, int64_t window,
                                     float scale, float cap, float* out, cudaStream_t stream,
                                     KvFormat format = KvFormat::kF16);
// Whether launch_attention_prefill has a kernel for this head size (the CUDA model refuses
// others at load).
bool attention_prefill_head_dim_supported(int64_t head_dim);

// moe_route.cu: per token, the k experts of largest softmax(logits) probability, descending
// (ties to the lower index), weights renormalised to sum 1 (cuda::moe_route_top_k, the same
// selection and weights as cpu::route_top_k). logits [n_tokens][n_expert] f32; selected
// (int32) and weights (f32) [n_tokens][k]. 1 <= k <= n_expert.
cudaError_t launch_moe_route(const float* logits, int64_t n_tokens, int n_expert, int k,
                             int32_t* selected, float* weights, cudaStream_t stream);

// moe_group.cu: order = the pairs 0..pairs-1 (<= 65535) grouped by selected[p] (experts
// 0..n_expert-1, n_expert <= 4096; ascending expert, any order within one), device int32.
cudaError_t launch_moe_group(const int32_t* selected, int64_t pairs, int n_expert, int32_t* order,
                             cudaStream_t stream);

// moe_combine.cu: out[t][i] = sum_j weights[t * k + j] * y[(t * k + j) * n + i] for t <
// n_tokens (<= 65535), i < n; y [n_tokens * k][n], out [n_tokens][n] (not aliasing y).
cudaError_t launch_moe_combine(const float* y, const float* weights, int64_t n_tokens, int k,
                               int64_t n, float* out, cudaStream_t stream);

// convert_activations.cu: out[i] = x[i] rounded to f16 (bf16 when `bf16`), nearest even, for
// i < n (the activations of a cuBLAS GEMM over F16/BF16 weights).
cudaError_t launch_convert_activations(const float* x, int64_t n, bool bf16, uint16_t* out,
                                       cudaStream_t stream);

// --- Qwen3.5: gated attention and Gated DeltaNet layers (shared/docs/qwen35.md §4) ---

// split_halves.cu: x [rows][2][n] -> a [rows][n] (first halves), b [rows][n] (second halves).
cudaError_t launch_split_halves(const float* x, int64_t rows, int64_t n, float* a, float* b,
                                cudaStream_t stream);

// silu_mul.cu: out[i] = silu(gate[i]) * x[i] for i < n, silu(g) = g / (1 + e^-g) (out may
// alias gate or x). SwiGLU (gate, up) and the gated RMSNorm's gate (z, normed output).
cudaError_t launch_silu_mul(const float* gate, const float* x, int64_t n, float* out,
                            cudaStream_t stream);

// sigmoid_mul.cu: x[i] *= sigmoid(gate[i]) for i < n.
cudaError_t launch_sigmoid_mul(const float* gate, int64_t n, float* x, cudaStream_t stream);

// causal_conv1d.cu: depthwise causal conv over time, then SiLU (cpu::causal_conv1d + SiLU).
//   m, u [n_tokens][channels]; w [channels][kc] (tap kc-1 = the current token);
//   state [channels][kc-1], the last kc-1 inputs per channel, oldest first, read and updated.
// u[t][c] = silu(sum_j w[c][j] * input(t - (kc-1) + j)[c]), inputs before token 0 from state.
// kc in [1, 64]; u must not alias m.
cudaError_t launch_causal_conv1d_silu(const float* m, int64_t n_tokens, int64_t channels,
                                      int64_t kc, const float* w, float* state, float* u,
                                      cudaStream_t stream);

// l2_norm.cu: in place, for each token t < n_tokens the first `heads` rows of n values of
// x + t * token_stride: row /= max(||row||_2, eps) (cpu::l2_norm).
cudaError_t launch_l2_norm_heads(float* x, int64_t n_tokens, int64_t heads, int64_t n,
                                 int64_t token_stride, float eps, cudaStream_t stream);

// gdn_gates.cu: per (token, value head), alpha, beta_in, gamma, beta [n_tokens][heads]:
//   gamma = softplus(alpha + dt_bias[h]) * ssm_a[h],  beta = sigmoid(beta_in)  (cpu::gdn_gates)
cudaError_t launch_gdn_gates(const float* alpha, const float* beta_in, const float* dt_bias,
                             const float* ssm_a, int64_t n_tokens, int64_t heads, float* gamma,
                             float* beta, cudaStream_t stream);

// delta_rule.cu: the gated delta rule, token by token (cpu::delta_rule_recurrent), for every
// value head h < n_v_heads (paired with key head h mod n_k_heads) of one sequence:
//   u [n_tokens][token_stride]: token t's q heads at q_offset, k heads at k_offset (n_k_heads
//   rows of dk each, already L2-normalised), v heads at v_offset (n_v_heads rows of dv);
//   gamma, beta [n_tokens][n_v_heads]; state [n_v_heads][dk][dv], read and advanced;
//   out [n_tokens][n_v_heads][dv] = scale * S^T q on the updated state. dk <= 4096,
//   n_v_heads <= 65535.
cudaError_t launch_delta_rule(const float* u, int64_t n_tokens, int64_t token_stride,
                              int64_t q_offset, int64_t k_offset, int64_t v_offset,
                              int64_t n_k_heads, int64_t n_v_heads, int64_t dk, int64_t dv,
                              const float* gamma, const float* beta, float scale, float* state,
                              float* out, cudaStream_t stream);

}  // namespace boltrt::kernels
