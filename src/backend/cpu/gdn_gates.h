// Small per-token pieces of a Qwen3.5 Gated DeltaNet layer (docs/qwen35.md §1, §4.4, §7.1).
#pragma once

#include <cstdint>

namespace boltrt::cpu {

// y = x / max(‖x‖₂, eps), sum of squares in double, scale in F32 (y may alias x). q and k heads.
void l2_norm(const float* x, int64_t n, float eps, float* y);

// Per value head h < n_heads, from the projections a = ssm_alpha·x and b = ssm_beta·x:
//   gamma[h] = softplus(a[h] + dt_bias[h]) · ssm_a[h]   (log-decay, ≤ 0 since ssm_a < 0)
//   beta[h]  = sigmoid(b[h])                             (write strength)
// softplus(x) = x for x > 20, else log(1 + e^x).
void gdn_gates(const float* a, const float* b, const float* dt_bias, const float* ssm_a,
               int64_t n_heads, float* gamma, float* beta);

}  // namespace boltrt::cpu
