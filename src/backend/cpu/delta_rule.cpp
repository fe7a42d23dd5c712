#include "backend/cpu/delta_rule.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "backend/cpu/matmul.h"

namespace boltrt::cpu {

namespace {

// The recurrence in two passes over the state per token instead of four (decay, Sᵀk, update,
// Sᵀq): the first reads S and sums the decayed rows against k, the second writes the decayed
// and updated rows and sums them against q. Each value goes through the float operations of
// the four-pass form, in the same order (decay·S rounded, then ·k; over key rows in order), so
// the bits are the same; only the memory traffic changes: a decode step streams each head's
// state (128 × 128 floats in the 4B shape, 48 MB per token over its 24 delta-net layers) from
// memory once for reading and once for writing. The loops over j (value columns) are
// independent lanes, which the compiler vectorises without reordering any sum.
// always_inline: the AVX2 and AVX-512 entries below compile this same body for their registers.
// delta and o_acc (dv floats each) are the caller's scratch, apart from the state.
[[gnu::always_inline]] inline void recurrent_two_pass(const DeltaRuleHead& h, float* delta,
                                                      float* o_acc) {
  const int64_t dk = h.dk, dv = h.dv;
  for (int64_t t = 0; t < h.n; ++t) {
    const float* q = h.q + t * h.q_stride;
    const float* k = h.k + t * h.k_stride;
    const float* v = h.v + t * h.v_stride;
    const float decay = std::exp(h.g[t]);
    const float beta = h.beta[t];
    // δ = β (v − (decay·S)ᵀ k), summed over key rows in order
    for (int64_t j = 0; j < dv; ++j) delta[j] = 0.0f;
    for (int64_t i = 0; i < dk; ++i) {
      const float* S = h.state + i * dv;
      const float ki = k[i];
      for (int64_t j = 0; j < dv; ++j) delta[j] += (S[j] * decay) * ki;
    }
    for (int64_t j = 0; j < dv; ++j) delta[j] = beta * (v[j] - delta[j]);
    // S ← decay·S + k δᵀ, and o = Sᵀ q on the new rows
    for (int64_t j = 0; j < dv; ++j) o_acc[j] = 0.0f;
    for (int64_t i = 0; i < dk; ++i) {
      float* S = h.state + i * dv;
      const float ki = k[i], qi = q[i];
      for (int64_t j = 0; j < dv; ++j) {
        const float s = S[j] * decay + ki * delta[j];
        S[j] = s;
        o_acc[j] += s * qi;
      }
    }
    float* o = h.out + t * h.out_stride;
    for (int64_t j = 0; j < dv; ++j) o[j] = o_acc[j];
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void recurrent_avx512(const DeltaRuleHead& h, float* delta,
                                                         float* o_acc) {
  recurrent_two_pass(h, delta, o_acc);
}
__attribute__((target("avx2"))) void recurrent_avx2(const DeltaRuleHead& h, float* delta,
                                                    float* o_acc) {
  recurrent_two_pass(h, delta, o_acc);
}
#endif

}  // namespace

// The matmul's SIMD level picks the entry (BOLTRT_SIMD lowers it): every entry gives the same
// bits (tests/test_delta_rule.cpp).
void delta_rule_recurrent(const DeltaRuleHead& h) {
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(2 * h.dv));
  float* delta = scratch.data();
  float* o_acc = scratch.data() + h.dv;
#if defined(__x86_64__)
  const SimdLevel level = simd_level();
  if (level == SimdLevel::Avx512) return recurrent_avx512(h, delta, o_acc);
  if (level == SimdLevel::Avx2) return recurrent_avx2(h, delta, o_acc);
#endif
  recurrent_two_pass(h, delta, o_acc);
}

namespace {

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

// One chunk of n tokens from state S0 (docs/qwen35.md §6.1), with G_t the inclusive cumulative
// log-decay inside the chunk:
//   A[t][s] = β_t (k_t·k_s) e^{G_t−G_s}  (s < t)     T = (I + A)^−1 by forward substitution
//   Unew    = T (β⊙V) − T (β⊙Γ⊙K) S0     = the per-token deltas δ_t            [n × dv]
//   O[t]    = Γ_t S0ᵀ q_t + Σ_{s≤t} (q_t·k_s) e^{G_t−G_s} Unew[s]            [n × dv]
//   S_new   = Γ_n S0 + Σ_s e^{G_n−G_s} k_s Unew[s]ᵀ                           [dk × dv]
// Solving (I + A) Unew = β⊙V − (β⊙Γ⊙K) S0 row by row gives Unew directly, so T is never formed.
void delta_rule_chunked(const DeltaRuleHead& h, int64_t chunk) {
  if (chunk < 1) chunk = 1;
  const int64_t dk = h.dk, dv = h.dv;
  std::vector<float> G(static_cast<size_t>(chunk));
  std::vector<float> U(static_cast<size_t>(chunk * dv));
  for (int64_t c0 = 0; c0 < h.n; c0 += chunk) {
    const int64_t n = (h.n - c0 < chunk) ? h.n - c0 : chunk;
    const float* Q = h.q + c0 * h.q_stride;
    const float* K = h.k + c0 * h.k_stride;
    const float* V = h.v + c0 * h.v_stride;
    const float* beta = h.beta + c0;
    float* S = h.state;
    float acc = 0.0f;
    for (int64_t t = 0; t < n; ++t) {
      acc += h.g[c0 + t];
      G[static_cast<size_t>(t)] = acc;
    }
    // right-hand side row t: β_t (v_t − Γ_t S0ᵀ k_t), then forward substitution with A
    for (int64_t t = 0; t < n; ++t) {
      float* u = U.data() + t * dv;
      const float* k = K + t * h.k_stride;
      for (int64_t j = 0; j < dv; ++j) u[j] = 0.0f;
      for (int64_t i = 0; i < dk; ++i) {
        for (int64_t j = 0; j < dv; ++j) u[j] += S[i * dv + j] * k[i];
      }
      const float gamma = std::exp(G[static_cast<size_t>(t)]);
      const float* v = V + t * h.v_stride;
      for (int64_t j = 0; j < dv; ++j) u[j] = beta[t] * (v[j] - gamma * u[j]);
      for (int64_t s = 0; s < t; ++s) {
        const float a = beta[t] * dot(k, K + s * h.k_stride, dk) *
                        std::exp(G[static_cast<size_t>(t)] - G[static_cast<size_t>(s)]);
        const float* us = U.data() + s * dv;
        for (int64_t j = 0; j < dv; ++j) u[j] -= a * us[j];
      }
    }
    // outputs, from the incoming state and this chunk's deltas
    for (int64_t t = 0; t < n; ++t) {
      const float* q = Q + t * h.q_stride;
      float* o = h.out + (c0 + t) * h.out_stride;
      const float gamma = std::exp(G[static_cast<size_t>(t)]);
      for (int64_t j = 0; j < dv; ++j) o[j] = 0.0f;
      for (int64_t i = 0; i < dk; ++i) {
        for (int64_t j = 0; j < dv; ++j) o[j] += S[i * dv + j] * q[i];
      }
      for (int64_t j = 0; j < dv; ++j) o[j] *= gamma;
      for (int64_t s = 0; s <= t; ++s) {
        const float m = dot(q, K + s * h.k_stride, dk) *
                        std::exp(G[static_cast<size_t>(t)] - G[static_cast<size_t>(s)]);
        const float* us = U.data() + s * dv;
        for (int64_t j = 0; j < dv; ++j) o[j] += m * us[j];
      }
    }
    // state at the end of the chunk
    const float Gn = G[static_cast<size_t>(n - 1)];
    const float gamma_n = std::exp(Gn);
    for (int64_t i = 0; i < dk * dv; ++i) S[i] *= gamma_n;
    for (int64_t s = 0; s < n; ++s) {
      const float w = std::exp(Gn - G[static_cast<size_t>(s)]);
      const float* k = K + s * h.k_stride;
      const float* us = U.data() + s * dv;
      for (int64_t i = 0; i < dk; ++i) {
        const float ki = w * k[i];
        for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += ki * us[j];
      }
    }
  }
}

}  // namespace boltrt::cpu
