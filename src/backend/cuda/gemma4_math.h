// Scalar math of the CUDA Gemma 4 kernels (kernels/*.cu), written once as BOLTRT_HD functions so
// the CPU test (test_cuda_math, runs without a GPU) checks the very code the kernels run against
// the CPU backend's references in backend/cpu/ops.h.
#pragma once
#include <math.h>

#include <cstdint>

#include "quant/fp16.h"

namespace boltrt::cuda {

// GELU, tanh approximation, in f32 (cpu::gelu_exact; the CPU forward pass reads an f16 table
// instead, which the whole-model tolerance absorbs).
BOLTRT_HD inline float gelu_tanh(float x) {
  const float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  const float kCoef = 0.044715f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

// x -> cap * tanh(x / cap) (final logits; attention scores when a model asks for it).
BOLTRT_HD inline float softcap(float x, float cap) {
  return cap * tanhf(x / cap);
}

// NEOX RoPE angle of rotated pair i at position pos: pos * theta_scale^i / freq_factors[i],
// theta_scale = base^(-2 / n_rot) computed once on the host. The power is built by repeated
// multiplication in the same order as cpu::rope_angles, so the angle is bit-identical to the
// CPU's (only cosf/sinf may differ in the last ulp).
BOLTRT_HD inline float rope_angle(int64_t pos, int i, float theta_scale,
                                  const float* freq_factors) {
  float theta = static_cast<float>(pos);
  for (int k = 0; k < i; ++k) theta *= theta_scale;
  return freq_factors ? theta / freq_factors[i] : theta;
}

// Rotates the pair (a, b) = (x[i], x[i + n_rot/2]) by `angle` in place.
BOLTRT_HD inline void rope_rotate(float& a, float& b, float cos_angle, float sin_angle) {
  const float a0 = a, b0 = b;
  a = a0 * cos_angle - b0 * sin_angle;
  b = a0 * sin_angle + b0 * cos_angle;
}

// Online softmax over a stream of scores: running maximum m, running sum l of exp(s - m). The
// value accumulators are rescaled by the factor add() returns. Partial states of disjoint key
// ranges merge with merge() (split-KV attention).
struct SoftmaxState {
  float m = -INFINITY;
  float l = 0.0f;
  // Adds score s; returns the factor to rescale the accumulators by, and the weight of s in *p.
  BOLTRT_HD float add(float s, float* p) {
    const float m_new = s > m ? s : m;
    const float correction = expf(m - m_new);  // exp(-inf) = 0 on the first score
    *p = expf(s - m_new);
    l = l * correction + *p;
    m = m_new;
    return correction;
  }
  // Tile-wise form (flash attention): raises the running maximum to at least tile_max, the
  // largest score of the next tile, before that tile's weights p = exp(s - m) are added to l.
  // Returns the factor to rescale the accumulators by (0 while nothing was added yet).
  BOLTRT_HD float rescale(float tile_max) {
    const float m_new = tile_max > m ? tile_max : m;
    const float correction = m == -INFINITY ? 0.0f : expf(m - m_new);
    l *= correction;
    m = m_new;
    return correction;
  }
  // Merges another state; *self_factor and *other_factor rescale the two accumulators.
  BOLTRT_HD void merge(const SoftmaxState& other, float* self_factor, float* other_factor) {
    const float m_new = other.m > m ? other.m : m;
    *self_factor = m == -INFINITY ? 0.0f : expf(m - m_new);
    *other_factor = other.m == -INFINITY ? 0.0f : expf(other.m - m_new);
    l = l * *self_factor + other.l * *other_factor;
    m = m_new;
  }
};

// The keys a query at position `pos` sees: [first, pos] with first = pos - window + 1 on
// sliding-window layers (window > 0), else 0.
BOLTRT_HD inline int64_t first_visible_key(int64_t pos, int64_t window) {
  if (window <= 0) return 0;
  const int64_t first = pos - window + 1;
  return first > 0 ? first : 0;
}

// The keys a block of the prefill attention kernel stages: the union of the visible ranges of
// its query rows r0 .. min(r0 + rows, n_rows) - 1, row r being token r / group at position
// pos0 + r / group (first_visible_key is monotone in the position, so the first row's first
// key and the last row's position bound it). Both ends inclusive.
struct KeyRange {
  int64_t first, last;
};
BOLTRT_HD inline KeyRange prefill_block_keys(int64_t r0, int64_t rows, int64_t n_rows,
                                             int64_t group, int64_t pos0, int64_t window) {
  const int64_t r_last = (r0 + rows < n_rows ? r0 + rows : n_rows) - 1;
  return {first_visible_key(pos0 + r0 / group, window), pos0 + r_last / group};
}

// Mixture-of-experts routing of one token (cpu::route_top_k, shared/docs/gemma4.md §5.7):
// probs = softmax(logits[0..n_expert)) with the CPU's arithmetic (max subtracted, expf, the
// denominator summed in double, multiplied by the f32 reciprocal), then the k largest in
// descending order, ties to the lower index, weights renormalised to sum 1 (the sum clamped at
// 2^-14). No scratch: each probability is recomputed from its logit when needed, and pick j is
// the largest probability that ranks strictly after pick j-1 in (probability desc, index asc)
// order, so k passes over the logits need no "taken" flags. O(k * n_expert) per token (26B-A4B:
// 8 * 128), one thread per token in kernels/moe_route.cu.
BOLTRT_HD inline void moe_route_top_k(const float* logits, int n_expert, int k, int32_t* selected,
                                      float* weights) {
  float max = -INFINITY;
  for (int e = 0; e < n_expert; ++e) max = logits[e] > max ? logits[e] : max;
  double sum = 0.0;
  for (int e = 0; e < n_expert; ++e) sum += static_cast<double>(expf(logits[e] - max));
  const float inv = static_cast<float>(1.0 / sum);
  float prev_p = INFINITY;
  int prev_e = -1;
  float total = 0.0f;
  for (int j = 0; j < k; ++j) {
    int best_e = -1;
    float best_p = 0.0f;
    for (int e = 0; e < n_expert; ++e) {
      const float p = expf(logits[e] - max) * inv;
      const bool after_prev = p < prev_p || (p == prev_p && e > prev_e);
      // strictly larger wins, so among equal probabilities the lowest index stays
      if (after_prev && (best_e < 0 || p > best_p)) {
        best_e = e;
        best_p = p;
      }
    }
    selected[j] = best_e;
    weights[j] = best_p;
    total += best_p;
    prev_p = best_p;
    prev_e = best_e;
  }
  total = total > 6.103515625e-5f ? total : 6.103515625e-5f;
  for (int j = 0; j < k; ++j) weights[j] /= total;
}

// Q8_0 KV cache blocks (--kv-type q8_0): 32 values as an f16 scale d (little-endian, bytes 0-1)
// and 32 int8 q (bytes 2-33), value = d * q. The quantizer is the CPU cache's (quantize_row
// Q8_0: d = amax / 127 rounded to f16, q = round(x / d) with the f32 reciprocal of the unrounded
// d, halves away from zero), so a CUDA cache holds the CPU cache's bytes (test_cuda_math).
inline constexpr int kQ8_0Values = 32;
inline constexpr int kQ8_0Bytes = 34;
BOLTRT_HD inline void quantize_q8_0_block(const float* x, uint8_t* out) {
  float amax = 0.0f;
  for (int j = 0; j < kQ8_0Values; ++j) {
    const float a = fabsf(x[j]);
    amax = amax < a ? a : amax;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t h = fp32_to_fp16(d);
  out[0] = static_cast<uint8_t>(h & 0xff);
  out[1] = static_cast<uint8_t>(h >> 8);
  for (int j = 0; j < kQ8_0Values; ++j) {
    out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(roundf(x[j] * id))));
  }
}
// Value i (< 32) of a Q8_0 block.
BOLTRT_HD inline float q8_0_value(const uint8_t* block, int i) {
  const uint16_t h = static_cast<uint16_t>(block[0] | (block[1] << 8));
  return fp16_to_fp32(h) * static_cast<float>(static_cast<int8_t>(block[2 + i]));
}
// Bytes of a Q8_0 KV row of n values (n a multiple of 32).
BOLTRT_HD inline int64_t q8_0_row_bytes(int64_t n) {
  return n / kQ8_0Values * kQ8_0Bytes;
}

}  // namespace boltrt::cuda
