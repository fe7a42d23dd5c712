#include "backend/cpu/imrope.h"

#include "backend/cpu/ops.h"

namespace boltrt::cpu {

void imrope_text_angles(int64_t pos, int64_t n_rot, float base,
                        const std::array<int64_t, 4>& sections, float* cos_out, float* sin_out) {
  rope_angles(pos, n_rot, base, nullptr, cos_out, sin_out);
  const int64_t n_sections = sections[0] + sections[1] + sections[2] + sections[3];
  if (n_sections <= 0) return;
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const int64_t s = i % n_sections;
    const bool positional = (s % 3 == 1 && s < 3 * sections[1]) ||
                            (s % 3 == 2 && s < 3 * sections[2]) ||
                            (s % 3 == 0 && s < 3 * sections[0]);
    if (!positional) {  // stream E: position 0 for text, angle 0
      cos_out[i] = 1.0f;
      sin_out[i] = 0.0f;
    }
  }
}

}  // namespace boltrt::cpu
