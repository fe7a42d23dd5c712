// Gated RMSNorm of Qwen3.5 GDN layers (docs/qwen35.md §4.4), one head of width d:
//   y = o / sqrt(mean(o²) + ε) ⊙ w ⊙ SiLU(z)
// The norm is the backend's rms_norm (same bits as every other RMSNorm), then the gate. ε is
// applied exactly as written: early-token outputs can have mean(o²) of the order of ε.
#pragma once

#include <cstdint>

namespace boltrt::cpu {

// o, z, y: d floats (y may alias o); w: d weights shared by all heads.
void gated_rms_norm(const float* o, const float* z, const float* w, int64_t d, float eps, float* y);

}  // namespace boltrt::cpu
