// IMROPE (interleaved multi-section RoPE) angles for text tokens, as llama.cpp applies it to
// Qwen3.5's full-attention layers (docs/qwen35.md §4.3). Rotation pair i (dims i and i + n_rot/2,
// NEOX pairing) belongs to stream T, H, W or E by s = i mod (s0+s1+s2+s3):
//   H if s%3 == 1 and s < 3·s1,  W if s%3 == 2 and s < 3·s2,  T if s%3 == 0 and s < 3·s0,  else E.
// Text tokens carry position p in streams T, H, W and 0 in E, so E pairs are not rotated
// (cos 1, sin 0) and every other pair gets rope_angles' angle for p. Apply with rope_neox.
#pragma once

#include <array>
#include <cstdint>

namespace boltrt::cpu {

// cos_out, sin_out: n_rot / 2 values each.
void imrope_text_angles(int64_t pos, int64_t n_rot, float base,
                        const std::array<int64_t, 4>& sections, float* cos_out, float* sin_out);

}  // namespace boltrt::cpu
