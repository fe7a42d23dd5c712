// aarch64 matmul kernels, compiled twice: by matmul_neon.cpp (plain Advanced SIMD, which every
// aarch64 CPU has) and by matmul_dotprod_neon.cpp (adds the ARMv8.2 dot product, SDOT, which the
// driver uses only where the kernel reports HWCAP_ASIMDDP). The includer defines
// BOLTRT_NEON_DOTPROD (0 or 1); everything here is internal to that translation unit.
//
// Shape of every kernel: one weight row against kNb (1..4) activation rows, as on x86
// (matmul_x86_kernels.h): the weight blocks are unpacked once and multiplied with all kNb
// activation rows, and gemm_tiled keeps a chunk of weight rows in L2 while it sweeps the batch.
//
// Integer dot products: 16 signed bytes x 16 signed bytes summed into the 4 int32 lanes of an
// accumulator, by SDOT with dotprod or by a widening multiply (int16) and a pairwise widening
// add (int32) without it. The lanes differ between the two but only their total is used. All
// codes fit in int8 (unsigned ones are at most 63), so weights multiply the activations directly:
// no sign trick and no -128 restriction. For a given activation row the integer sum of every block
// (k-quants: every sub-block times its scale) equals the scalar reference exactly; only the float
// accumulation order differs (4 lanes per block, then a horizontal sum).
#pragma once
#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backend/cpu/matmul_internal.h"
#include "quant/unpack.h"

#ifndef BOLTRT_NEON_DOTPROD
#error "define BOLTRT_NEON_DOTPROD before including matmul_neon_kernels.h"
#endif

// The dotprod kernels get the extension per function, after the library headers, so that no
// inline function of the standard library is compiled with it and later shared with callers on
// CPUs without it. GCC's arm_neon.h declares vdotq_s32 for armv8.2-a+dotprod, so that is the
// target (clang: see matmul_dotprod_neon.cpp).
#if BOLTRT_NEON_DOTPROD && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif

namespace {

using boltrt::GgmlType;
using namespace boltrt;
using namespace boltrt::cpu;

inline float h2f(uint16_t h) {
  __fp16 v;
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// acc + the products a[k] * b[k], k = 0..15, spread over the 4 int32 lanes.
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if BOLTRT_NEON_DOTPROD
  return vdotq_s32(acc, a, b);
#else
  // Two products per int16 lane: |a| <= 128 and |b| <= 127 keep the pair within 32512.
  const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), a, b);
  return vpadalq_s16(acc, p);
#endif
}

// 32 codes (lo: elements 0-15, hi: 16-31) against 32 activation bytes.
inline int32x4_t dot32(int8x16_t lo, int8x16_t hi, const int8_t* y) {
  return dot16(dot16(vdupq_n_s32(0), lo, vld1q_s8(y)), hi, vld1q_s8(y + 16));
}

inline int8x16_t s8(uint8x16_t v) {
  return vreinterpretq_s8_u8(v);
}

// 16 packed nibble bytes -> elements 0-15 (low nibbles) and 16-31 (high nibbles).
inline void nibbles(const uint8_t* qs, uint8x16_t& lo, uint8x16_t& hi) {
  const uint8x16_t q = vld1q_u8(qs);
  lo = vandq_u8(q, vdupq_n_u8(0x0f));
  hi = vshrq_n_u8(q, 4);
}

// 32 bits -> 0x10 in byte e where bit e is set (lo: bits 0-15, hi: bits 16-31).
inline void bits_to_0x10(uint32_t bits, uint8x16_t& lo, uint8x16_t& hi) {
  const uint8x8_t b = vcreate_u8(bits);
  const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ULL));
  const uint8x16_t sixteen = vdupq_n_u8(0x10);
  lo = vandq_u8(vtstq_u8(vcombine_u8(vdup_lane_u8(b, 0), vdup_lane_u8(b, 1)), bit), sixteen);
  hi = vandq_u8(vtstq_u8(vcombine_u8(vdup_lane_u8(b, 2), vdup_lane_u8(b, 3)), bit), sixteen);
}

// ---- float weights --------------------------------------------------------------------------

struct F32Load {
  static float32x4_t weights(const uint8_t* p, int64_t i) {
    return vld1q_f32(reinterpret_cast<const float*>(p) + i);
  }
  static float scalar(const uint8_t* p, int64_t i) { return reinterpret_cast<const float*>(p)[i]; }
};
struct F16Load {
  static float32x4_t weights(const uint8_t* p, int64_t i) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p) + i)));
  }
  static float scalar(const uint8_t* p, int64_t i) {
    return h2f(reinterpret_cast<const uint16_t*>(p)[i]);
  }
};
struct BF16Load {
  static float32x4_t weights(const uint8_t* p, int64_t i) {
    return vreinterpretq_f32_u32(
        vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p) + i), 16));
  }
  static float scalar(const uint8_t* p, int64_t i) {
    return bf16_to_fp32(reinterpret_cast<const uint16_t*>(p)[i]);
  }
};

// Float weights against f32 activations (already rounded for F16/BF16): 4 floats per step and
// kAcc independent accumulators per activation row, so one row alone is not bound by the FMA
// latency (and each lane's chain is at most n / (4 kAcc) long).
template <typename Load, int kNb>
void row_float(int64_t n, const uint8_t* w, const uint8_t* const* ar, float* out) {
  constexpr int kAcc = 4;  // the same for every kNb (batch invariance); 32 vector registers
  float32x4_t acc[kNb][kAcc];
  for (int b = 0; b < kNb; ++b) {
    for (int k = 0; k < kAcc; ++k) acc[b][k] = vdupq_n_f32(0.0f);
  }
  int64_t i = 0;
  for (; i + 4 * kAcc <= n; i += 4 * kAcc) {
    for (int k = 0; k < kAcc; ++k) {
      const float32x4_t wv = Load::weights(w, i + 4 * k);
      for (int b = 0; b < kNb; ++b)
        acc[b][k] = vfmaq_f32(acc[b][k], wv, F32Load::weights(ar[b], i + 4 * k));
    }
  }
  for (; i + 4 <= n; i += 4) {
    const float32x4_t wv = Load::weights(w, i);
    for (int b = 0; b < kNb; ++b) acc[b][0] = vfmaq_f32(acc[b][0], wv, F32Load::weights(ar[b], i));
  }
  for (int b = 0; b < kNb; ++b) {
    for (int k = 1; k < kAcc; ++k) acc[b][0] = vaddq_f32(acc[b][0], acc[b][k]);
    float s = vaddvq_f32(acc[b][0]);
    for (int64_t j = i; j < n; ++j) s += Load::scalar(w, j) * F32Load::scalar(ar[b], j);
    out[b] = s;
  }
}

// ---- legacy 32-element blocks against Q8_0 / Q8_1 -------------------------------------------

// Signed codes (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4): each block adds dot * (dx * dy).
struct Q4_0Decode {
  using Block = BlockQ4_0;
  static void codes(const Block& x, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t l, h;
    nibbles(x.qs, l, h);
    lo = vsubq_s8(s8(l), vdupq_n_s8(8));
    hi = vsubq_s8(s8(h), vdupq_n_s8(8));
  }
  static float scale(const Block& x) { return h2f(x.d); }
};
struct Q5_0Decode {
  using Block = BlockQ5_0;
  static void codes(const Block& x, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t l, h, bl, bh;
    nibbles(x.qs, l, h);
    bits_to_0x10(load_u32(x.qh), bl, bh);
    lo = vsubq_s8(s8(vorrq_u8(l, bl)), vdupq_n_s8(16));
    hi = vsubq_s8(s8(vorrq_u8(h, bh)), vdupq_n_s8(16));
  }
  static float scale(const Block& x) { return h2f(x.d); }
};
struct Q8_0Decode {
  using Block = BlockQ8_0;
  static void codes(const Block& x, int8x16_t& lo, int8x16_t& hi) {
    lo = vld1q_s8(x.qs);
    hi = vld1q_s8(x.qs + 16);
  }
  static float scale(const Block& x) { return h2f(x.d); }
};
template <const int8_t* kValues>
inline void codebook(const uint8_t* qs, int8x16_t& lo, int8x16_t& hi) {
  const int8x16_t lut = vld1q_s8(kValues);
  uint8x16_t l, h;
  nibbles(qs, l, h);
  lo = vqtbl1q_s8(lut, l);
  hi = vqtbl1q_s8(lut, h);
}
struct IQ4_NLDecode {
  using Block = BlockIQ4_NL;
  static void codes(const Block& x, int8x16_t& lo, int8x16_t& hi) {
    codebook<kIQ4NLValues>(x.qs, lo, hi);
  }
  static float scale(const Block& x) { return h2f(x.d); }
};
struct MXFP4Decode {
  using Block = BlockMXFP4;
  static void codes(const Block& x, int8x16_t& lo, int8x16_t& hi) {
    codebook<kMXFP4Values>(x.qs, lo, hi);
  }
  static float scale(const Block& x) { return e8m0_to_fp32_half(x.e); }
};

template <typename Decode, int kNb>
void row_signed32(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const typename Decode::Block*>(wr);
  const ActQ8_0* y[kNb];
  float32x4_t acc[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_0*>(ar[b]);
    acc[b] = vdupq_n_f32(0.0f);
  }
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    int8x16_t lo, hi;
    Decode::codes(x[ib], lo, hi);
    const float dx = Decode::scale(x[ib]);
    for (int b = 0; b < kNb; ++b) {
      const int32x4_t sum = dot32(lo, hi, y[b][ib].qs);
      acc[b] = vfmaq_n_f32(acc[b], vcvtq_f32_s32(sum), dx * h2f(y[b][ib].d));
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = vaddvq_f32(acc[b]);
}

// Unsigned codes with a min (Q4_1, Q5_1) against Q8_1: dot * (dx * dy) + m * s.
struct Q4_1Decode {
  using Block = BlockQ4_1;
  static void codes(const Block& x, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t l, h;
    nibbles(x.qs, l, h);
    lo = s8(l);
    hi = s8(h);
  }
};
struct Q5_1Decode {
  using Block = BlockQ5_1;
  static void codes(const Block& x, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t l, h, bl, bh;
    nibbles(x.qs, l, h);
    bits_to_0x10(load_u32(x.qh), bl, bh);
    lo = s8(vorrq_u8(l, bl));
    hi = s8(vorrq_u8(h, bh));
  }
};

template <typename Decode, int kNb>
void row_affine32(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const typename Decode::Block*>(wr);
  const ActQ8_1* y[kNb];
  float32x4_t acc[kNb];
  float mins[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_1*>(ar[b]);
    acc[b] = vdupq_n_f32(0.0f);
    mins[b] = 0.0f;
  }
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    int8x16_t lo, hi;
    Decode::codes(x[ib], lo, hi);
    const float dx = h2f(x[ib].d), mx = h2f(x[ib].m);
    for (int b = 0; b < kNb; ++b) {
      const int32x4_t sum = dot32(lo, hi, y[b][ib].qs);
      acc[b] = vfmaq_n_f32(acc[b], vcvtq_f32_s32(sum), dx * h2f(y[b][ib].d));
      mins[b] += mx * h2f(y[b][ib].s);
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = vaddvq_f32(acc[b]) + mins[b];
}

// ---- k-quants against Q8_K ------------------------------------------------------------------

// sum_j bsums[j] * v[j / 2] for the 16 group sums and 8 unsigned values (one per 32 elements).
inline int bsums_dot8(const int16_t* bsums, const uint8_t* v) {
  // Pair sums are at most 32 * 127 in magnitude: int16 holds them.
  const int16x8_t pairs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
  const int16x8_t vv = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(v)));
  const int32x4_t prod =
      vmlal_high_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(vv)), pairs, vv);
  return vaddvq_s32(prod);
}

// sum_g bsums[g] * v[g] for 16 int16 values.
inline int bsums_dot16(const int16_t* bsums, const int16_t* v) {
  const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
  const int16x8_t v0 = vld1q_s16(v), v1 = vld1q_s16(v + 8);
  int32x4_t prod = vmull_s16(vget_low_s16(b0), vget_low_s16(v0));
  prod = vmlal_high_s16(prod, b0, v0);
  prod = vmlal_s16(prod, vget_low_s16(b1), vget_low_s16(v1));
  prod = vmlal_high_s16(prod, b1, v1);
  return vaddvq_s32(prod);
}

// Q4_K (kFifthBit = false) and Q5_K: codes 0..15 / 0..31 per 32-element sub-block s,
// dot = d*dy * sum_s sc_s * (codes . q8) - dmin*dy * sum_s m_s * bsums(s).
template <typename Block, bool kFifthBit, int kNb>
void row_q45_k(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const Block*>(wr);
  const ActQ8_K* y[kNb];
  float32x4_t acc[kNb];
  float mins[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_K*>(ar[b]);
    acc[b] = vdupq_n_f32(0.0f);
    mins[b] = 0.0f;
  }
  const uint8x16_t low4 = vdupq_n_u8(0x0f);
  for (int64_t i = 0; i < n / 256; ++i) {
    uint8_t sc[8], mn[8];
    k4_scales_mins(x[i].scales, sc, mn);
    int32x4_t sumi[kNb];
    for (int b = 0; b < kNb; ++b) sumi[b] = vdupq_n_s32(0);
    // Q5_K: bit 2j of qh[l] is the fifth bit of element l of sub-block 2j, bit 2j+1 of 2j+1;
    // shifted down by 2 after each pair of sub-blocks.
    [[maybe_unused]] uint8x16_t qh0, qh1;
    if constexpr (kFifthBit) {
      qh0 = vld1q_u8(x[i].qh);
      qh1 = vld1q_u8(x[i].qh + 16);
    }
    for (int j = 0; j < 4; ++j) {
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * j), q1 = vld1q_u8(x[i].qs + 32 * j + 16);
      uint8x16_t lo0 = vandq_u8(q0, low4), lo1 = vandq_u8(q1, low4);
      uint8x16_t hi0 = vshrq_n_u8(q0, 4), hi1 = vshrq_n_u8(q1, 4);
      if constexpr (kFifthBit) {
        const uint8x16_t sixteen = vdupq_n_u8(0x10);
        lo0 = vorrq_u8(lo0, vandq_u8(vshlq_n_u8(qh0, 4), sixteen));
        lo1 = vorrq_u8(lo1, vandq_u8(vshlq_n_u8(qh1, 4), sixteen));
        hi0 = vorrq_u8(hi0, vandq_u8(vshlq_n_u8(qh0, 3), sixteen));
        hi1 = vorrq_u8(hi1, vandq_u8(vshlq_n_u8(qh1, 3), sixteen));
        qh0 = vshrq_n_u8(qh0, 2);
        qh1 = vshrq_n_u8(qh1, 2);
      }
      for (int b = 0; b < kNb; ++b) {
        const int8_t* q8 = y[b][i].qs + 64 * j;
        const int32x4_t p_lo = dot32(s8(lo0), s8(lo1), q8);
        const int32x4_t p_hi = dot32(s8(hi0), s8(hi1), q8 + 32);
        sumi[b] = vmlaq_n_s32(vmlaq_n_s32(sumi[b], p_lo, sc[2 * j]), p_hi, sc[2 * j + 1]);
      }
    }
    const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
    for (int b = 0; b < kNb; ++b) {
      acc[b] = vfmaq_n_f32(acc[b], vcvtq_f32_s32(sumi[b]), d * y[b][i].d);
      mins[b] += dmin * y[b][i].d * static_cast<float>(bsums_dot8(y[b][i].bsums, mn));
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = vaddvq_f32(acc[b]) - mins[b];
}

// Q6_K: signed 6-bit codes q6 - 32 per 16-element group g with int8 scale sc_g;
// dot = d*dy * sum_g sc_g * (codes . q8)_g.
template <int kNb>
void row_q6_k(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const BlockQ6_K*>(wr);
  const ActQ8_K* y[kNb];
  float32x4_t acc[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_K*>(ar[b]);
    acc[b] = vdupq_n_f32(0.0f);
  }
  const uint8x16_t low4 = vdupq_n_u8(0x0f), two = vdupq_n_u8(0x03), bits45 = vdupq_n_u8(0x30);
  const int8x16_t offset = vdupq_n_s8(32);
  for (int64_t i = 0; i < n / 256; ++i) {
    const int8_t* scales = x[i].scales;
    int32x4_t sumi[kNb];
    for (int b = 0; b < kNb; ++b) sumi[b] = vdupq_n_s32(0);
    for (int half = 0; half < 2; ++half) {
      // Elements 128*half + 32*k + l, l < 32, for k = 0..3; [h] = l < 16 or l >= 16.
      for (int h = 0; h < 2; ++h) {
        const uint8x16_t ql0 = vld1q_u8(x[i].ql + 64 * half + 16 * h);
        const uint8x16_t ql1 = vld1q_u8(x[i].ql + 64 * half + 32 + 16 * h);
        const uint8x16_t qh = vld1q_u8(x[i].qh + 32 * half + 16 * h);
        int8x16_t q[4];
        q[0] =
            vsubq_s8(s8(vorrq_u8(vandq_u8(ql0, low4), vshlq_n_u8(vandq_u8(qh, two), 4))), offset);
        q[1] = vsubq_s8(
            s8(vorrq_u8(vandq_u8(ql1, low4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), two), 4))),
            offset);
        q[2] = vsubq_s8(s8(vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, bits45))), offset);
        q[3] =
            vsubq_s8(s8(vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(vshrq_n_u8(qh, 2), bits45))), offset);
        for (int k = 0; k < 4; ++k) {
          const int g = 8 * half + 2 * k + h;
          for (int b = 0; b < kNb; ++b) {
            const int32x4_t p =
                dot16(vdupq_n_s32(0), q[k], vld1q_s8(y[b][i].qs + 128 * half + 32 * k + 16 * h));
            sumi[b] = vmlaq_n_s32(sumi[b], p, scales[g]);
          }
        }
      }
    }
    const float d = h2f(x[i].d);
    for (int b = 0; b < kNb; ++b) {
      acc[b] = vfmaq_n_f32(acc[b], vcvtq_f32_s32(sumi[b]), d * y[b][i].d);
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = vaddvq_f32(acc[b]);
}

// IQ4_XS: codebook values per 32-element sub-block with scale ls - 32.
template <int kNb>
void row_iq4_xs(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const BlockIQ4_XS*>(wr);
  const ActQ8_K* y[kNb];
  float32x4_t acc[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_K*>(ar[b]);
    acc[b] = vdupq_n_f32(0.0f);
  }
  for (int64_t i = 0; i < n / 256; ++i) {
    int32x4_t sumi[kNb];
    for (int b = 0; b < kNb; ++b) sumi[b] = vdupq_n_s32(0);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = iq4xs_scale(ib, x[i]);
      int8x16_t lo, hi;
      codebook<kIQ4NLValues>(x[i].qs + 16 * ib, lo, hi);
      for (int b = 0; b < kNb; ++b) {
        sumi[b] = vmlaq_n_s32(sumi[b], dot32(lo, hi, y[b][i].qs + 32 * ib), ls - 32);
      }
    }
    const float d = h2f(x[i].d);
    for (int b = 0; b < kNb; ++b) {
      acc[b] = vfmaq_n_f32(acc[b], vcvtq_f32_s32(sumi[b]), d * y[b][i].d);
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = vaddvq_f32(acc[b]);
}

// Q2_K and Q3_K: 2-bit codes per 16-element group g with scale S_g, in 32-element chunks
// (k, j): elements 128k + 32j + l take bits 2j..2j+1 of qs[32k + l].
//   Q2_K: u = code, S_g = scales[g] & 15; dot = d*dy * sum_g S_g (u . q8)_g
//         - dmin*dy * sum_g (scales[g] >> 4) * bsums[g].
//   Q3_K: signed code = u + 4 * (bit 4k+j of hmask[l]) - 4, S_g the signed 6-bit scale;
//         dot = d*dy * sum_g S_g (code . q8)_g.
template <bool kQ3, int kNb>
void row_q23_k(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  using Block = std::conditional_t<kQ3, BlockQ3_K, BlockQ2_K>;
  const auto* x = reinterpret_cast<const Block*>(wr);
  const ActQ8_K* y[kNb];
  float32x4_t acc[kNb];
  float corr[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_K*>(ar[b]);
    acc[b] = vdupq_n_f32(0.0f);
    corr[b] = 0.0f;
  }
  const uint8x16_t three = vdupq_n_u8(3);
  for (int64_t i = 0; i < n / 256; ++i) {
    int16_t sc[16], mn[16];
    if constexpr (kQ3) {
      q3k_scale_values(x[i].scales, sc);
    } else {
      for (int g = 0; g < 16; ++g) {
        sc[g] = static_cast<int16_t>(x[i].scales[g] & 15);
        mn[g] = static_cast<int16_t>(x[i].scales[g] >> 4);
      }
    }
    int32x4_t sumi[kNb];
    for (int b = 0; b < kNb; ++b) sumi[b] = vdupq_n_s32(0);
    for (int k = 0; k < 2; ++k) {
      for (int h = 0; h < 2; ++h) {  // l < 16 and l >= 16
        const uint8x16_t q2 = vld1q_u8(x[i].qs + 32 * k + 16 * h);
        [[maybe_unused]] uint8x16_t hm;
        if constexpr (kQ3) hm = vld1q_u8(x[i].hmask + 16 * h);
        for (int j = 0; j < 4; ++j) {
          uint8x16_t u;
          switch (j) {  // shift counts must be constants
            case 0:
              u = vandq_u8(q2, three);
              break;
            case 1:
              u = vandq_u8(vshrq_n_u8(q2, 2), three);
              break;
            case 2:
              u = vandq_u8(vshrq_n_u8(q2, 4), three);
              break;
            default:
              u = vshrq_n_u8(q2, 6);
              break;
          }
          int8x16_t code = s8(u);
          if constexpr (kQ3) {
            const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1u << (4 * k + j)));
            // 0 where the high bit is set, -4 where it is not.
            const int8x16_t minus4 =
                vreinterpretq_s8_u8(vbicq_u8(vdupq_n_u8(0xfc), vtstq_u8(hm, bit)));
            code = vaddq_s8(code, minus4);
          }
          const int g = 8 * k + 2 * j + h;
          for (int b = 0; b < kNb; ++b) {
            const int32x4_t p =
                dot16(vdupq_n_s32(0), code, vld1q_s8(y[b][i].qs + 128 * k + 32 * j + 16 * h));
            sumi[b] = vmlaq_n_s32(sumi[b], p, sc[g]);
          }
        }
      }
    }
    const float d = h2f(x[i].d);
    for (int b = 0; b < kNb; ++b) {
      const float dy = y[b][i].d;
      acc[b] = vfmaq_n_f32(acc[b], vcvtq_f32_s32(sumi[b]), d * dy);
      if constexpr (!kQ3) {
        corr[b] += h2f(x[i].dmin) * dy * static_cast<float>(bsums_dot16(y[b][i].bsums, mn));
      }
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = vaddvq_f32(acc[b]) - corr[b];
}

// ---- tiling ---------------------------------------------------------------------------------

using RowFn = void (*)(int64_t n, const uint8_t* w, const uint8_t* const* a, float* out);

// Weight rows are taken in chunks of about kChunkBytes (kept in L2), and each chunk is swept by
// groups of up to 4 activation rows; every weight row is unpacked once per group.
template <RowFn kRow1, RowFn kRow2, RowFn kRow3, RowFn kRow4>
void gemm_tiled(const GemmTile& t) {
  constexpr size_t kChunkBytes = 96 * 1024;
  const int64_t chunk =
      std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / std::max<size_t>(1, t.w_stride)));
  for (int64_t r0 = 0; r0 < t.n_rows; r0 += chunk) {
    const int64_t r1 = std::min(t.n_rows, r0 + chunk);
    for (int64_t b0 = 0; b0 < t.n_act; b0 += 4) {
      const int nb = static_cast<int>(std::min<int64_t>(4, t.n_act - b0));
      const uint8_t* a[4];
      for (int b = 0; b < nb; ++b) a[b] = t.a + (b0 + b) * t.a_stride;
      const RowFn row = nb == 4 ? kRow4 : nb == 3 ? kRow3 : nb == 2 ? kRow2 : kRow1;
      for (int64_t r = r0; r < r1; ++r) {
        float out[4];
        row(t.cols, t.w + r * t.w_stride, a, out);
        for (int b = 0; b < nb; ++b) t.y[(b0 + b) * t.y_stride + r] = out[b];
      }
    }
  }
}

#define BOLTRT_GEMM(tmpl, ...)                                                  \
  &gemm_tiled<&tmpl<__VA_ARGS__ 1>, &tmpl<__VA_ARGS__ 2>, &tmpl<__VA_ARGS__ 3>, \
              &tmpl<__VA_ARGS__ 4>>

GemmFn neon_kernels(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return BOLTRT_GEMM(row_float, F32Load, );
    case GgmlType::F16:
      return BOLTRT_GEMM(row_float, F16Load, );
    case GgmlType::BF16:
      return BOLTRT_GEMM(row_float, BF16Load, );
    case GgmlType::Q4_0:
      return BOLTRT_GEMM(row_signed32, Q4_0Decode, );
    case GgmlType::Q5_0:
      return BOLTRT_GEMM(row_signed32, Q5_0Decode, );
    case GgmlType::Q8_0:
      return BOLTRT_GEMM(row_signed32, Q8_0Decode, );
    case GgmlType::IQ4_NL:
      return BOLTRT_GEMM(row_signed32, IQ4_NLDecode, );
    case GgmlType::MXFP4:
      return BOLTRT_GEMM(row_signed32, MXFP4Decode, );
    case GgmlType::Q4_1:
      return BOLTRT_GEMM(row_affine32, Q4_1Decode, );
    case GgmlType::Q5_1:
      return BOLTRT_GEMM(row_affine32, Q5_1Decode, );
    case GgmlType::Q4_K:
      return BOLTRT_GEMM(row_q45_k, BlockQ4_K, false, );
    case GgmlType::Q5_K:
      return BOLTRT_GEMM(row_q45_k, BlockQ5_K, true, );
    case GgmlType::Q6_K:
      return BOLTRT_GEMM(row_q6_k, );
    case GgmlType::IQ4_XS:
      return BOLTRT_GEMM(row_iq4_xs, );
    case GgmlType::Q2_K:
      return BOLTRT_GEMM(row_q23_k, false, );
    case GgmlType::Q3_K:
      return BOLTRT_GEMM(row_q23_k, true, );
    default:
      return nullptr;
  }
}
#undef BOLTRT_GEMM

}  // namespace

#if BOLTRT_NEON_DOTPROD && !defined(__clang__)
#pragma GCC pop_options
#endif
