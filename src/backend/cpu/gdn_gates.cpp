#include "backend/cpu/gdn_gates.h"

#include <algorithm>
#include <cmath>

namespace boltrt::cpu {

void l2_norm(const float* x, int64_t n, float eps, float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  const float scale = 1.0f / std::max(static_cast<float>(std::sqrt(sum)), eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
}

void gdn_gates(const float* a, const float* b, const float* dt_bias, const float* ssm_a,
               int64_t n_heads, float* gamma, float* beta) {
  for (int64_t h = 0; h < n_heads; ++h) {
    const float x = a[h] + dt_bias[h];
    const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
    gamma[h] = softplus * ssm_a[h];
    beta[h] = 1.0f / (1.0f + std::exp(-b[h]));
  }
}

}  // namespace boltrt::cpu
