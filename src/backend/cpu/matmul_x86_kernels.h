// x86 matmul kernels, compiled twice: by matmul_avx2.cpp (AVX2 + FMA + F16C) and by
// matmul_avx512.cpp (adds AVX512-VNNI/BF16, used on 256-bit vectors through AVX512-VL).
// The includer defines BOLTRT_X86_VNNI (0 or 1) and a namespace; everything here is internal to
// that translation unit.
//
// Shape of every kernel: one weight row against kNb (1..4) activation rows. The weight blocks are
// unpacked once and multiplied with all kNb activation rows, so a batch reads each weight byte
// from memory once per call (see gemm_tiled for the cache blocking).
//
// Integer dot products follow quant-formats.md §8: unsigned x signed byte products summed into
// int32 lanes (maddubs + madd on AVX2, dpbusd with VNNI), signed weights handled with the
// abs/sign trick, k-quant mins and the Q6_K offset folded in from the Q8_K bsums. For a given
// activation row, the integer sum of every block equals the scalar reference exactly; only the
// float accumulation order differs (8 lanes with FMA, then a horizontal sum).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/matmul_internal.h"
#include "quant/unpack.h"

#ifndef BOLTRT_X86_VNNI
#error "define BOLTRT_X86_VNNI before including matmul_x86_kernels.h"
#endif

namespace {

using boltrt::GgmlType;
using namespace boltrt;
using namespace boltrt::cpu;

inline float h2f(uint16_t h) {
  return _cvtsh_ss(h);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// acc + sum over groups of 4 of u8(u) * s8(s), per int32 lane.
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if BOLTRT_X86_VNNI
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  const __m256i pairs = _mm256_maddubs_epi16(u, s);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}

// Signed x signed bytes through the sign trick: |x| * (y with x's sign). Valid while no byte of
// y is -128 (our activation quantizers never produce it).
inline __m256i dot_s8s8(__m256i acc, __m256i x_abs, __m256i x, __m256i y) {
  return dot_u8s8(acc, x_abs, _mm256_sign_epi8(y, x));
}

// acc + int16 pair products of p and scales, per int32 lane.
inline __m256i madd16(__m256i acc, __m256i p, __m256i scales) {
#if BOLTRT_X86_VNNI
  return _mm256_dpwssd_epi32(acc, p, scales);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, scales));
#endif
}

// 16 packed nibble bytes -> 32 bytes: low nibbles in the low 128-bit lane (elements 0-15),
// high nibbles in the high lane (elements 16-31): the legacy block element order.
inline __m256i nibbles_to_bytes(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// 32 bits -> 32 bytes, 0xFF where bit i is set.
inline __m256i bits_to_bytes(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                             0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---- float weights --------------------------------------------------------------------------

// Float weights (activations are f32, already rounded for F16/BF16): 8 floats per step (16 in
// the AVX-512 build), kAcc
// independent accumulators per activation row so that one row alone is not bound by the FMA
// latency. kAcc is the same for every kNb: an activation row's arithmetic (and so its bits) does
// not depend on how many rows are computed with it (batch invariance).
struct F32Load {
  static __m256 weights(const uint8_t* p, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i);
  }
#if BOLTRT_X86_VNNI
  static __m512 weights16(const uint8_t* p, int64_t i) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p) + i);
  }
#endif
  static float scalar(const uint8_t* p, int64_t i) {
    return reinterpret_cast<const float*>(p)[i];
  }
};
struct F16Load {
  static __m256 weights(const uint8_t* p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(p) + i)));
  }
#if BOLTRT_X86_VNNI
  static __m512 weights16(const uint8_t* p, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(p) + i)));
  }
#endif
  static float scalar(const uint8_t* p, int64_t i) {
    return h2f(reinterpret_cast<const uint16_t*>(p)[i]);
  }
};
struct BF16Load {
  static __m256 weights(const uint8_t* p, int64_t i) {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(p) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
#if BOLTRT_X86_VNNI
  static __m512 weights16(const uint8_t* p, int64_t i) {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(p) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
#endif
  static float scalar(const uint8_t* p, int64_t i) {
    return bf16_to_fp32(reinterpret_cast<const uint16_t*>(p)[i]);
  }
};

#if BOLTRT_X86_VNNI
// The AVX-512 build: 16 floats per step and 4 accumulators per activation row (32 registers hold
// the 4 x 4): element i goes to accumulator (i / 16) % 4 while 64 columns remain, the rest of the
// 16-column steps to accumulator 0, then ((a0 + a1) + (a2 + a3)), _mm512_reduce_add_ps and a
// scalar tail. Columns [i0, i1) of one weight row, the accumulators carried in st (4 per
// activation row) between column slices that start at multiples of 64: the slicing changes no
// operation.
template <typename Load, int kNb>
inline void float_part(int64_t i0, int64_t i1, const uint8_t* w, const uint8_t* const* ar,
                       __m512* st) {
  constexpr int kAcc = 4;
  __m512 acc[kNb][kAcc];
  for (int b = 0; b < kNb; ++b) {
    for (int k = 0; k < kAcc; ++k) acc[b][k] = st[b * kAcc + k];
  }
  int64_t i = i0;
  for (; i + 16 * kAcc <= i1; i += 16 * kAcc) {
    for (int k = 0; k < kAcc; ++k) {
      const __m512 wv = Load::weights16(w, i + 16 * k);
      for (int b = 0; b < kNb; ++b)
        acc[b][k] = _mm512_fmadd_ps(wv, F32Load::weights16(ar[b], i + 16 * k), acc[b][k]);
    }
  }
  for (; i + 16 <= i1; i += 16) {
    const __m512 wv = Load::weights16(w, i);
    for (int b = 0; b < kNb; ++b)
      acc[b][0] = _mm512_fmadd_ps(wv, F32Load::weights16(ar[b], i), acc[b][0]);
  }
  for (int b = 0; b < kNb; ++b) {
    for (int k = 0; k < kAcc; ++k) st[b * kAcc + k] = acc[b][k];
  }
}

template <typename Load>
float float_finish(int64_t n, const uint8_t* w, const uint8_t* a, const __m512* st) {
  const __m512 v = _mm512_add_ps(_mm512_add_ps(st[0], st[1]), _mm512_add_ps(st[2], st[3]));
  float s = _mm512_reduce_add_ps(v);
  for (int64_t j = n / 16 * 16; j < n; ++j) s += Load::scalar(w, j) * F32Load::scalar(a, j);
  return s;
}

// Blocking: 16 weight rows at a time; for each column slice of kSlice, every group of up to 4
// activation rows against the 16 rows' slice (64 KB of F32, in L2) with the group's slice (16 KB)
// in L1; the accumulators of all (row, activation row) pairs wait in `state` between slices.
// (Row-major sweeps re-read the whole activation rows from L3 for every weight row: 5x slower
// at batch 128 with 10240 columns.)
template <typename Load>
void gemm_float(const GemmTile& t) {
  constexpr int64_t kRows = 16;
  constexpr int64_t kSlice = 1024;  // a multiple of 64
  struct PairState {
    __m512 acc[16];  // 4 activation rows x 4 accumulators
  };
  const int64_t n_groups = (t.n_act + 3) / 4;
  thread_local std::vector<PairState> state;
  state.resize(static_cast<size_t>(kRows * n_groups));
  for (int64_t r0 = 0; r0 < t.n_rows; r0 += kRows) {
    const int64_t r1 = std::min(t.n_rows, r0 + kRows);
    for (PairState& p : state) {
      for (__m512& v : p.acc) v = _mm512_setzero_ps();
    }
    for (int64_t c0 = 0; c0 < t.cols; c0 += kSlice) {
      const int64_t c1 = std::min(t.cols, c0 + kSlice);
      for (int64_t g = 0; g < n_groups; ++g) {
        const int64_t b0 = 4 * g;
        const int nb = static_cast<int>(std::min<int64_t>(4, t.n_act - b0));
        const uint8_t* a[4];
        for (int b = 0; b < nb; ++b) a[b] = t.a + (b0 + b) * t.a_stride;
        dispatch_nb(nb, [&](auto kNb) {
          for (int64_t r = r0; r < r1; ++r) {
            float_part<Load, decltype(kNb)::value>(
                c0, c1, t.w + r * t.w_stride, a,
                state[static_cast<size_t>((r - r0) * n_groups + g)].acc);
          }
        });
      }
    }
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t b = 0; b < t.n_act; ++b) {
        const PairState& p = state[static_cast<size_t>((r - r0) * n_groups + b / 4)];
        t.y[b * t.y_stride + r] = float_finish<Load>(t.cols, t.w + r * t.w_stride,
                                                     t.a + b * t.a_stride, p.acc + (b % 4) * 4);
      }
    }
  }
}
#else
template <typename Load, int kNb>
void row_float(int64_t n, const uint8_t* w, const uint8_t* const* ar, float* out) {
  constexpr int kAcc = 2;  // AVX2's 16 registers hold 4 x 2 accumulators
  __m256 acc[kNb][kAcc];
  for (int b = 0; b < kNb; ++b) {
    for (int k = 0; k < kAcc; ++k) acc[b][k] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 8 * kAcc <= n; i += 8 * kAcc) {
    for (int k = 0; k < kAcc; ++k) {
      const __m256 wv = Load::weights(w, i + 8 * k);
      for (int b = 0; b < kNb; ++b)
        acc[b][k] = _mm256_fmadd_ps(wv, F32Load::weights(ar[b], i + 8 * k), acc[b][k]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 wv = Load::weights(w, i);
    for (int b = 0; b < kNb; ++b)
      acc[b][0] = _mm256_fmadd_ps(wv, F32Load::weights(ar[b], i), acc[b][0]);
  }
  for (int b = 0; b < kNb; ++b) {
    for (int k = 1; k < kAcc; ++k) acc[b][0] = _mm256_add_ps(acc[b][0], acc[b][k]);
    float s = hsum(acc[b][0]);
    for (int64_t j = i; j < n; ++j) s += Load::scalar(w, j) * F32Load::scalar(ar[b], j);
    out[b] = s;
  }
}
#endif

// ---- legacy 32-element blocks against Q8_0 / Q8_1 -------------------------------------------

// Signed codes (Q5_0, Q8_0, IQ4_NL, MXFP4; Q4_0 has gemm_q4_0_pairs below): the block gives 32
// signed bytes and a float weight scale; each block adds dot * (dx * dy).
struct Q5_0Decode {
  using Block = BlockQ5_0;
  static __m256i codes(const Block& x) {
    const __m256i high = _mm256_and_si256(bits_to_bytes(load_u32(x.qh)), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(nibbles_to_bytes(x.qs), high), _mm256_set1_epi8(16));
  }
  static float scale(const Block& x) { return h2f(x.d); }
};
struct Q8_0Decode {
  using Block = BlockQ8_0;
  static __m256i codes(const Block& x) { return load256(x.qs); }
  static float scale(const Block& x) { return h2f(x.d); }
};
struct IQ4_NLDecode {
  using Block = BlockIQ4_NL;
  static __m256i codes(const Block& x) {
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues)));
    return _mm256_shuffle_epi8(lut, nibbles_to_bytes(x.qs));
  }
  static float scale(const Block& x) { return h2f(x.d); }
};
struct MXFP4Decode {
  using Block = BlockMXFP4;
  static __m256i codes(const Block& x) {
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMXFP4Values)));
    return _mm256_shuffle_epi8(lut, nibbles_to_bytes(x.qs));
  }
  static float scale(const Block& x) { return e8m0_to_fp32_half(x.e); }
};

template <typename Decode, int kNb>
void row_signed32(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const typename Decode::Block*>(wr);
  const ActQ8_0* y[kNb];
  __m256 acc[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_0*>(ar[b]);
    acc[b] = _mm256_setzero_ps();
  }
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    const __m256i q = Decode::codes(x[ib]);
    const __m256i q_abs = _mm256_abs_epi8(q);
    const float dx = Decode::scale(x[ib]);
    for (int b = 0; b < kNb; ++b) {
      const __m256i sum = dot_s8s8(_mm256_setzero_si256(), q_abs, q, load256(y[b][ib].qs));
      acc[b] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(dx * h2f(y[b][ib].d)), acc[b]);
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = hsum(acc[b]);
}

// Q4_0 two blocks at a time. row_signed32 spends ~22 instructions on each 18-byte block (a
// 128-bit unpack, the sign trick, two scalar fp16 conversions and a broadcast per block), so at
// batch 1 it computed 11-13 GB/s from the caches on Zen 5, a third of one core's streaming
// read. Here one 256-bit vector holds the qs of blocks A = 2p and B = 2p + 1 (low nibbles: both
// blocks' elements 0-15; high nibbles: 16-31), and each activation row is rearranged once per
// call to match, with its scales as a vector and the code offset (-8 * sum of its codes) as the
// start value of each block's integer sum.
struct Q4_0PairAct {
  int8_t lo[32];   // A's codes 0-15 | B's codes 0-15
  int8_t hi[32];   // A's codes 16-31 | B's codes 16-31
  float dy[8];     // A's scale x4 | B's scale x4
  int32_t off[8];  // -8 * sum(A's codes), 0, 0, 0 | -8 * sum(B's codes), 0, 0, 0
};

// Sum of a Q8_0 block's 32 codes (exact).
inline int32_t q8_0_code_sum(const int8_t* qs) {
  const __m256i w = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), load256(qs)),
                                      _mm256_set1_epi16(1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)));
}

// One activation row (nblk Q8_0 blocks) into (nblk + 1) / 2 pairs; a missing last B is zeros.
// (Each tile of a matmul call prepares its own copy: ~4 % of the row kernel's time at batch 1;
// once per call, in the activation conversion, would be the right place.)
inline void prepare_q4_0_pairs(const ActQ8_0* y, int64_t nblk, Q4_0PairAct* out) {
  for (int64_t p = 0; p < (nblk + 1) / 2; ++p) {
    Q4_0PairAct& o = out[p];
    for (int h = 0; h < 2; ++h) {
      const int64_t ib = 2 * p + h;
      int32_t sum = 0;
      float dy = 0.0f;
      if (ib < nblk) {
        std::memcpy(o.lo + 16 * h, y[ib].qs, 16);
        std::memcpy(o.hi + 16 * h, y[ib].qs + 16, 16);
        sum = q8_0_code_sum(y[ib].qs);
        dy = h2f(y[ib].d);
      } else {
        std::memset(o.lo + 16 * h, 0, 16);
        std::memset(o.hi + 16 * h, 0, 16);
      }
      for (int k = 0; k < 4; ++k) {
        o.dy[4 * h + k] = dy;
        o.off[4 * h + k] = k == 0 ? -8 * sum : 0;
      }
    }
  }
}

// acc[b] += per pair: float(codes . y + off) * (dx * dy), 8 lanes, block A in lanes 0-3 and B in
// 4-7. |maddubs lane| <= 2 * 15 * 128, so the low + high int16 sum cannot overflow. The same
// operations for every kNb. ar[b]: activation row b's Q4_0PairAct array.
template <int kNb>
void row_q4_0_pairs(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const BlockQ4_0*>(wr);
  const Q4_0PairAct* y[kNb];
  for (int b = 0; b < kNb; ++b) y[b] = reinterpret_cast<const Q4_0PairAct*>(ar[b]);
  const int64_t nblk = n / 32;
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  __m256 acc[kNb];
  for (int b = 0; b < kNb; ++b) acc[b] = _mm256_setzero_ps();
  auto pair = [&](int64_t p, __m128i qb, uint16_t db) __attribute__((always_inline)) {
    const BlockQ4_0& a = x[2 * p];
    const __m256i v = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs))), qb, 1);
    const __m256i lo = _mm256_and_si256(v, low4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    const __m128i dpair = _mm_cvtsi32_si128(static_cast<int>(a.d | (uint32_t{db} << 16)));
    const __m256 dx = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_cvtph_ps(dpair)), spread);
    for (int b = 0; b < kNb; ++b) {
      const Q4_0PairAct& ya = y[b][p];
      const __m256i prod = _mm256_add_epi16(_mm256_maddubs_epi16(lo, load256(ya.lo)),
                                            _mm256_maddubs_epi16(hi, load256(ya.hi)));
      const __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(prod, ones), load256(ya.off));
      acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dx, _mm256_loadu_ps(ya.dy)),
                               acc[b]);
    }
  };
  int64_t p = 0;
  for (; 2 * p + 1 < nblk; ++p) {
    const BlockQ4_0& bb = x[2 * p + 1];
    pair(p, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bb.qs)), bb.d);
  }
  if (2 * p < nblk) pair(p, _mm_setzero_si128(), 0);
  for (int b = 0; b < kNb; ++b) out[b] = hsum(acc[b]);
}

// Unsigned codes with a min (Q4_1, Q5_1) against Q8_1: dot * (dx * dy) + m * s.
struct Q4_1Decode {
  using Block = BlockQ4_1;
  static __m256i codes(const Block& x) { return nibbles_to_bytes(x.qs); }
};
struct Q5_1Decode {
  using Block = BlockQ5_1;
  static __m256i codes(const Block& x) {
    const __m256i high = _mm256_and_si256(bits_to_bytes(load_u32(x.qh)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(nibbles_to_bytes(x.qs), high);
  }
};

template <typename Decode, int kNb>
void row_affine32(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const typename Decode::Block*>(wr);
  const ActQ8_1* y[kNb];
  __m256 acc[kNb];
  float mins[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_1*>(ar[b]);
    acc[b] = _mm256_setzero_ps();
    mins[b] = 0.0f;
  }
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    const __m256i q = Decode::codes(x[ib]);
    const float dx = h2f(x[ib].d), mx = h2f(x[ib].m);
    for (int b = 0; b < kNb; ++b) {
      const __m256i sum = dot_u8s8(_mm256_setzero_si256(), q, load256(y[b][ib].qs));
      acc[b] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(dx * h2f(y[b][ib].d)), acc[b]);
      mins[b] += mx * h2f(y[b][ib].s);
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = hsum(acc[b]) + mins[b];
}

// ---- k-quants against Q8_K ------------------------------------------------------------------

// The 8 sub-block scales and 8 mins of a Q4_K / Q5_K block (the 12 packed bytes k4_scales_mins
// decodes) as one vector: bytes 0-3 sc0-3, 4-7 mn0-3, 8-11 sc4-7, 12-15 mn4-7. Same fields as
// k4_scales_mins, computed on two 64-bit words (no byte stores for the vector code to reload).
inline __m128i k4_scales_mins_vec(const uint8_t* packed) {
  uint64_t x;
  uint32_t z;
  std::memcpy(&x, packed, 8);
  std::memcpy(&z, packed + 8, 4);
  const uint64_t low6 = x & 0x3f3f3f3f3f3f3f3fULL;         // sc0-3 | mn0-3
  const uint64_t top2 = (x >> 2) & 0x3030303030303030ULL;  // bits 6-7 of bytes 0-7, at 4-5
  const uint64_t nib = (z | (uint64_t{z} << 28)) & 0x0f0f0f0f0f0f0f0fULL;  // z & 0xf | z >> 4
  return _mm_set_epi64x(static_cast<long long>(nib | top2), static_cast<long long>(low6));
}

// A vpshufb control vector (32 bytes, one 128-bit lane each half; -1 zeroes the byte).
struct alignas(32) ByteMask {
  int8_t v[32];
};

// Over k4_scales_mins_vec broadcast to both 128-bit lanes: 16 int16 copies of sc_s.
constexpr ByteMask k4_scale_mask(int s) {
  ByteMask m{};
  for (int t = 0; t < 16; ++t) {
    m.v[2 * t] = static_cast<int8_t>(s < 4 ? s : s + 4);
    m.v[2 * t + 1] = -1;
  }
  return m;
}
// The same vector: int16 lane t = mn_{t/2}, lined up with the Q8_K bsums (two 16-element groups
// per 32-element sub-block), so one vpmaddwd gives m_s * (bsums[2s] + bsums[2s+1]) in int32 lane s.
constexpr ByteMask k4_min_mask() {
  ByteMask m{};
  for (int t = 0; t < 16; ++t) {
    const int s = t / 2;
    m.v[2 * t] = static_cast<int8_t>(s < 4 ? s + 4 : s + 8);
    m.v[2 * t + 1] = -1;
  }
  return m;
}
constexpr ByteMask kK4ScaleMask[8] = {k4_scale_mask(0), k4_scale_mask(1), k4_scale_mask(2),
                                      k4_scale_mask(3), k4_scale_mask(4), k4_scale_mask(5),
                                      k4_scale_mask(6), k4_scale_mask(7)};
constexpr ByteMask kK4MinMask = k4_min_mask();

inline __m256i load_mask(const ByteMask& m) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(m.v));
}

// Q4_K (kFifthBit = false) and Q5_K: codes 0..15 / 0..31 per 32-element sub-block s,
// dot = d*dy * sum_s sc_s * (codes . q8) - dmin*dy * sum_s m_s * bsums(s).
// Per block the scales and mins are one vector (k4_scales_mins_vec), each sub-block's int16 scale
// vector one vpshufb of it, and the mins term one vpmaddwd against the bsums, folded into the same
// float accumulator with an FMA: no horizontal sum and no scalar byte work per block. (Those kept
// one-token decode short of the read bandwidth on AVX2: bench_matmul q4_K 2560->10240, batch 1,
// one Zen 3 thread, 1230 -> 1055 us, 12.0 -> 14.0 GB/s.)
template <typename Block, bool kFifthBit, int kNb>
void row_q45_k(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const Block*>(wr);
  const ActQ8_K* y[kNb];
  __m256 acc[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_K*>(ar[b]);
    acc[b] = _mm256_setzero_ps();
  }
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int64_t i = 0; i < n / 256; ++i) {
    const __m256i sm = _mm256_broadcastsi128_si256(k4_scales_mins_vec(x[i].scales));
    __m256i sumi[kNb];
    for (int b = 0; b < kNb; ++b) sumi[b] = _mm256_setzero_si256();
    [[maybe_unused]] __m256i hbits;
    if constexpr (kFifthBit) hbits = load256(x[i].qh);
    for (int j = 0; j < 4; ++j) {
      const __m256i q = load256(x[i].qs + 32 * j);
      __m256i lo = _mm256_and_si256(q, low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (kFifthBit) {
        const __m256i bit_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * j)));
        const __m256i bit_hi = _mm256_set1_epi8(static_cast<char>(2 << (2 * j)));
        const __m256i sixteen = _mm256_set1_epi8(16);
        lo = _mm256_or_si256(
            lo,
            _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, bit_lo), bit_lo), sixteen));
        hi = _mm256_or_si256(
            hi,
            _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, bit_hi), bit_hi), sixteen));
      }
      const __m256i sc_lo = _mm256_shuffle_epi8(sm, load_mask(kK4ScaleMask[2 * j]));
      const __m256i sc_hi = _mm256_shuffle_epi8(sm, load_mask(kK4ScaleMask[2 * j + 1]));
      for (int b = 0; b < kNb; ++b) {
        const __m256i p_lo = _mm256_maddubs_epi16(lo, load256(y[b][i].qs + 64 * j));
        const __m256i p_hi = _mm256_maddubs_epi16(hi, load256(y[b][i].qs + 64 * j + 32));
        sumi[b] = madd16(madd16(sumi[b], p_lo, sc_lo), p_hi, sc_hi);
      }
    }
    const __m256i mins = _mm256_shuffle_epi8(sm, load_mask(kK4MinMask));
    const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
    for (int b = 0; b < kNb; ++b) {
      // lane s: m_s * (bsums[2s] + bsums[2s+1]), exact (|.| <= 63 * 4064)
      const __m256i m = _mm256_madd_epi16(load256(y[b][i].bsums), mins);
      acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[b]), _mm256_set1_ps(d * y[b][i].d), acc[b]);
      acc[b] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(dmin * y[b][i].d), acc[b]);
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = hsum(acc[b]);
}

// Over a Q6_K block's 8 int16 scales of one half (groups 8h..8h+7, in both 128-bit lanes):
// sc_{8h+2k} in lane 0 and sc_{8h+2k+1} in lane 1, the two 16-element groups of a 32-byte code
// vector.
constexpr ByteMask q6_scale_mask(int k) {
  ByteMask m{};
  for (int t = 0; t < 16; ++t) {
    const int g = t < 8 ? 2 * k : 2 * k + 1;
    m.v[2 * t] = static_cast<int8_t>(2 * g);
    m.v[2 * t + 1] = static_cast<int8_t>(2 * g + 1);
  }
  return m;
}
constexpr ByteMask kQ6ScaleMask[4] = {q6_scale_mask(0), q6_scale_mask(1), q6_scale_mask(2),
                                      q6_scale_mask(3)};

// Q6_K: unsigned 6-bit codes u = q6 + 32 per 16-element group g with int8 scale sc_g;
// dot = d*dy * (sum_g sc_g * (u . q8) - 32 * sum_g sc_g * bsums[g]).
// The offset term starts the integer accumulator as one vpmaddwd of the bsums with 32 * sc (no
// horizontal sum), and each pair of group scales is one vpshufb of the sign-extended scales
// (not two scalar broadcasts): the block loop is vector work only.
template <int kNb>
void row_q6_k(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const BlockQ6_K*>(wr);
  const ActQ8_K* y[kNb];
  __m256 acc[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_K*>(ar[b]);
    acc[b] = _mm256_setzero_ps();
  }
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  for (int64_t i = 0; i < n / 256; ++i) {
    // int16 scales: lanes 0-7 groups 0-7, lanes 8-15 groups 8-15
    const __m256i scales16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
    const __m256i scales32 = _mm256_slli_epi16(scales16, 5);  // 32 * sc_g, |.| <= 4096
    __m256i sumi[kNb];
    for (int b = 0; b < kNb; ++b) {
      // -32 * sum_g sc_g * bsums[g], spread over the 8 int32 lanes (exact: |.| < 2^25)
      sumi[b] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                 _mm256_madd_epi16(load256(y[b][i].bsums), scales32));
    }
    for (int half = 0; half < 2; ++half) {
      const __m256i sc_half = half == 0 ? _mm256_permute2x128_si256(scales16, scales16, 0x00)
                                        : _mm256_permute2x128_si256(scales16, scales16, 0x11);
      const __m256i ql0 = load256(x[i].ql + 64 * half);
      const __m256i ql1 = load256(x[i].ql + 64 * half + 32);
      const __m256i qh = load256(x[i].qh + 32 * half);
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                             _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
      q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                             _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                             _mm256_and_si256(qh, bits45));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
      for (int k = 0; k < 4; ++k) {
        // groups 8*half + 2k (elements 0-15 of this chunk) and the next (16-31)
        const __m256i sc = _mm256_shuffle_epi8(sc_half, load_mask(kQ6ScaleMask[k]));
        for (int b = 0; b < kNb; ++b) {
          const __m256i p = _mm256_maddubs_epi16(q[k], load256(y[b][i].qs + 128 * half + 32 * k));
          sumi[b] = madd16(sumi[b], p, sc);
        }
      }
    }
    const float d = h2f(x[i].d);
    for (int b = 0; b < kNb; ++b) {
      acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[b]), _mm256_set1_ps(d * y[b][i].d), acc[b]);
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = hsum(acc[b]);
}

// IQ4_XS: codebook values per 32-element sub-block with scale ls - 32.
template <int kNb>
void row_iq4_xs(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  const auto* x = reinterpret_cast<const BlockIQ4_XS*>(wr);
  const ActQ8_K* y[kNb];
  __m256 acc[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_K*>(ar[b]);
    acc[b] = _mm256_setzero_ps();
  }
  const __m256i lut =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues)));
  for (int64_t i = 0; i < n / 256; ++i) {
    __m256i sumi[kNb];
    for (int b = 0; b < kNb; ++b) sumi[b] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = iq4xs_scale(ib, x[i]);
      const __m256i sc = _mm256_set1_epi16(static_cast<int16_t>(ls - 32));
      const __m256i q = _mm256_shuffle_epi8(lut, nibbles_to_bytes(x[i].qs + 16 * ib));
      const __m256i q_abs = _mm256_abs_epi8(q);
      for (int b = 0; b < kNb; ++b) {
        const __m256i p =
            _mm256_maddubs_epi16(q_abs, _mm256_sign_epi8(load256(y[b][i].qs + 32 * ib), q));
        sumi[b] = madd16(sumi[b], p, sc);
      }
    }
    const float d = h2f(x[i].d);
    for (int b = 0; b < kNb; ++b) {
      acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[b]), _mm256_set1_ps(d * y[b][i].d), acc[b]);
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = hsum(acc[b]);
}

// Q2_K and Q3_K: 2-bit codes (plus Q3_K's high bit) per 16-element group g with scale S_g:
// dot = d*dy * sum_g S_g * (u . q8)_g - corr, where u is the unsigned code and corr folds in
// Q2_K's mins (dmin*dy * sum_g m_g * bsums[g]) or Q3_K's -4 offset (4 * sum_g S_g * bsums[g]).

// The 16 group scales and mins of a Q2_K block as int16 vectors.
inline void q2k_scales(const BlockQ2_K& x, __m256i& scales, __m256i& mins) {
  const __m256i packed =
      _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales)));
  scales = _mm256_and_si256(packed, _mm256_set1_epi16(0x0f));
  mins = _mm256_srli_epi16(packed, 4);
}

// sum_g v[g] * bsums[g] for 16 int16 values.
inline int bsums_dot16(const int16_t* bsums, __m256i v) {
  const __m256i prod = _mm256_madd_epi16(load256(bsums), v);
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

template <bool kQ3, int kNb>
void row_q23_k(int64_t n, const uint8_t* wr, const uint8_t* const* ar, float* out) {
  using Block = std::conditional_t<kQ3, BlockQ3_K, BlockQ2_K>;
  const auto* x = reinterpret_cast<const Block*>(wr);
  const ActQ8_K* y[kNb];
  __m256 acc[kNb];
  float corr[kNb];
  for (int b = 0; b < kNb; ++b) {
    y[b] = reinterpret_cast<const ActQ8_K*>(ar[b]);
    acc[b] = _mm256_setzero_ps();
    corr[b] = 0.0f;
  }
  const __m256i three = _mm256_set1_epi8(3);
  for (int64_t i = 0; i < n / 256; ++i) {
    alignas(32) int16_t sc[16];
    __m256i mins16 = _mm256_setzero_si256();
    if constexpr (kQ3) {
      q3k_scale_values(x[i].scales, sc);
    } else {
      __m256i scales16;
      q2k_scales(x[i], scales16, mins16);
      _mm256_store_si256(reinterpret_cast<__m256i*>(sc), scales16);
    }
    [[maybe_unused]] __m256i hbits;
    if constexpr (kQ3) hbits = load256(x[i].hmask);
    __m256i sumi[kNb];
    for (int b = 0; b < kNb; ++b) sumi[b] = _mm256_setzero_si256();
    for (int k = 0; k < 2; ++k) {
      const __m256i q2 = load256(x[i].qs + 32 * k);
      for (int j = 0; j < 4; ++j) {
        __m256i u = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * j), three);
        if constexpr (kQ3) {
          const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * k + j)));
          u = _mm256_or_si256(u,
                              _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, bit), bit),
                                               _mm256_set1_epi8(4)));
        }
        const int g = 8 * k + 2 * j;
        const __m256i scale = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
        for (int b = 0; b < kNb; ++b) {
          const __m256i p = _mm256_maddubs_epi16(u, load256(y[b][i].qs + 128 * k + 32 * j));
          sumi[b] = madd16(sumi[b], p, scale);
        }
      }
    }
    const float d = h2f(x[i].d);
    for (int b = 0; b < kNb; ++b) {
      const float dy = y[b][i].d;
      acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[b]), _mm256_set1_ps(d * dy), acc[b]);
      if constexpr (kQ3) {
        const int offset =
            4 * bsums_dot16(y[b][i].bsums, _mm256_load_si256(reinterpret_cast<const __m256i*>(sc)));
        corr[b] += d * dy * static_cast<float>(offset);
      } else {
        corr[b] += h2f(x[i].dmin) * dy * static_cast<float>(bsums_dot16(y[b][i].bsums, mins16));
      }
    }
  }
  for (int b = 0; b < kNb; ++b) out[b] = hsum(acc[b]) - corr[b];
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

// Q4_0: the activation rows rearranged once per call (prepare_q4_0_pairs), then gemm_tiled over
// them.
inline void gemm_q4_0_pairs(const GemmTile& t) {
  const int64_t nblk = t.cols / 32, npair = (nblk + 1) / 2;
  thread_local std::vector<Q4_0PairAct> act;
  act.resize(static_cast<size_t>(npair * t.n_act));
  for (int64_t b = 0; b < t.n_act; ++b) {
    prepare_q4_0_pairs(reinterpret_cast<const ActQ8_0*>(t.a + b * t.a_stride), nblk,
                       act.data() + b * npair);
  }
  GemmTile pairs = t;
  pairs.a = reinterpret_cast<const uint8_t*>(act.data());
  pairs.a_stride = static_cast<size_t>(npair) * sizeof(Q4_0PairAct);
  gemm_tiled<&row_q4_0_pairs<1>, &row_q4_0_pairs<2>, &row_q4_0_pairs<3>, &row_q4_0_pairs<4>>(pairs);
}

#define BOLTRT_GEMM(tmpl, ...)                                                  \
  &gemm_tiled<&tmpl<__VA_ARGS__ 1>, &tmpl<__VA_ARGS__ 2>, &tmpl<__VA_ARGS__ 3>, \
              &tmpl<__VA_ARGS__ 4>>

GemmFn x86_gemm(GgmlType type) {
  switch (type) {
#if BOLTRT_X86_VNNI
    case GgmlType::F32:
      return &gemm_float<F32Load>;
    case GgmlType::F16:
      return &gemm_float<F16Load>;
    case GgmlType::BF16:
      return &gemm_float<BF16Load>;
#else
    case GgmlType::F32:
      return BOLTRT_GEMM(row_float, F32Load, );
    case GgmlType::F16:
      return BOLTRT_GEMM(row_float, F16Load, );
    case GgmlType::BF16:
      return BOLTRT_GEMM(row_float, BF16Load, );
#endif
    case GgmlType::Q4_0:
      return &gemm_q4_0_pairs;
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
