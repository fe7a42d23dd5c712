// Internal numeric helpers of the reference quantizers (shared/docs/quant-formats.md §0, §4).
// All of them follow ggml-quants.c operation for operation in fp32 (sequential sums, no FMA
// contraction, divisions where it divides) because the quantizers must produce identical bytes.
#pragma once
#include <cstdint>
#include <cstring>

#include "quant/fp16.h"

namespace boltrt::quant_detail {

inline constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int: adds 1.5*2^23 and reads the low mantissa bits, i.e. round to nearest with
// ties to even for |v| <= 4194303. Outside that range (and for NaN) it still returns a well-defined
// value, which only matters for blocks that are rejected afterwards.
inline int nearest_int(float v) {
  const uint32_t bits = float_bits(v + 12582912.0f);
  return static_cast<int>(bits & 0x007FFFFFu) - 0x00400000;
}

// A C float -> integer cast as ggml's x86-64 build executes it (cvttss2si): truncation toward
// zero, and 0x80000000 for NaN or out-of-range values. Narrowing casts keep the low bits.
// Using this instead of a plain cast keeps the rare degenerate blocks (an fp32 scale that
// underflows so that 1/d is inf) byte-identical and free of undefined behaviour.
inline int32_t truncate_like_x86(float v) {
  if (!(v > -2147483904.0f && v < 2147483648.0f)) return INT32_MIN;
  return static_cast<int32_t>(v);
}
inline int8_t truncate_to_int8(float v) {
  return static_cast<int8_t>(static_cast<uint8_t>(truncate_like_x86(v) & 0xFF));
}
inline uint8_t truncate_to_uint8(float v) {
  return static_cast<uint8_t>(truncate_like_x86(v) & 0xFF);
}

// §4.1: symmetric codes l in [-nmax, nmax-1] with a scale search; L receives l + nmax.
// weights == nullptr means w = x^2 (rmse_type 1). Returns the signed scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, const float* weights);

// §4.2: Q3_K's coordinate-descent search; L receives l + nmax. Returns the signed scale.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L);

// §4.3: affine codes x ~ scale*l - the_min with l in [0, nmax]. Returns scale, sets *the_min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad);

// make_qkx2_quants(32, nmax, ..., use_mad = false) on the 8 sub-blocks of a 256-element
// super-block at once (x, weights, L: 256 entries; scales, the_mins: 8), with identical results:
// each sub-block is one lane whose sums run in the reference's order, so the compiler can
// vectorize across sub-blocks (the Q4_K/Q5_K quantizers spend their time here).
void make_qkx2_quants_x8(int nmax, const float* x, const float* weights, uint8_t* L, float* scales,
                         float* the_mins, float rmin, float rdelta, int nstep);

// §4.3 (imatrix paths): as make_qkx2_quants, except that weights == nullptr means w = x^2 and
// a group with max <= min returns early.
float make_qkx3_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad);

// §4.4: unsigned codes (0..nmax) for the non-negative values x (group scales or mins) with
// importance weights; returns the scale.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* weights);

// §6.1: index of the nearest IQ4_NL code book entry to v (ties go to the upper entry).
int best_index_iq4nl(float v);

}  // namespace boltrt::quant_detail
