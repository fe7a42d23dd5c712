#include "backend/cpu/gated_rms_norm.h"

#include <cmath>

#include "backend/cpu/ops.h"

namespace boltrt::cpu {

void gated_rms_norm(const float* o, const float* z, const float* w, int64_t d, float eps,
                    float* y) {
  rms_norm(o, w, d, eps, y);
  for (int64_t i = 0; i < d; ++i) y[i] *= z[i] / (1.0f + std::exp(-z[i]));
}

}  // namespace boltrt::cpu
