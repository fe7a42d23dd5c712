// AVX-512 small-batch kernels (1 to avx512_gemv_max_batch activation rows) for Q4_0, Q5_0, Q8_0,
// Q4_K and Q6_K weights: the decode path, and the verify of a few drafted tokens. (Q4_0 matrices
// bound by a model are copied at load by LanePacks and read by avx512_gemm_q4_0_lanes instead,
// about 1.5x faster at one thread; the Q4_0 kernel here serves raw rows: a row range that does
// not start a 16-row group, a caller that did not pack. Same bits either way.)
//
// Decode reads every weight byte once per token, so these kernels aim at the fewest instructions
// per weight byte: a block's codes are unpacked once into zmm registers and used for up to 8
// activation rows; each activation row is rearranged once per call (in the thread's own scratch)
// into the byte order the weights unpack to. For k-quants the per-group scales are applied to the
// int16 pair products with vpdpwssd, whose scale vectors come from one vpermw each; Q4_0 and Q5_0
// take four blocks per step with vpdpbusd. Rows are walked in chunks of about kChunkBytes, so
// with more than 8 activation rows the chunk is read from memory once and from L2 after that.
//
// Integer sums per block are exact, as in the scalar reference (matmul_scalar.cpp). Q4_0, Q5_0,
// Q4_K and Q6_K then take the float steps of the 16-row lane kernels (matmul_avx512.cpp): one
// float per row and activation row (two for Q4_0: its even and its odd blocks), acc =
// fma(S_i, d_i * dy_i, acc) over the blocks in order, so small and large batches give the same
// bits (batch invariance). Q8_0's kernel here (16 float
// lanes, then a horizontal sum) is no longer used by the matmul. Every activation row goes
// through the same operations in the same order whatever the batch, the activation rows next to
// it, the column slicing, the row range or the thread count: batch-b results equal b batch-1
// calls bit for bit (tests/test_matmul_batch.cpp).
// GCC 12's AVX-512 headers build some results from _mm512_undefined_* (`__m512 __Y = __Y;`) and
// then warn about that self-initialised vector: a known false positive, as in matmul_avx512.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_internal.h"

namespace boltrt::cpu {
namespace {

constexpr size_t kChunkBytes = 128 * 1024;

// Short per-activation-row loops must be fully unrolled so the accumulators stay in registers.
#if defined(__clang__)
#define BOLTRT_UNROLL _Pragma("unroll")
#else
#define BOLTRT_UNROLL _Pragma("GCC unroll 16")
#endif

inline float hsum512(__m512 v) {
  return _mm512_reduce_add_ps(v);
}

inline __m512i load512(const void* p) {
  return _mm512_loadu_si512(p);
}

// d (fp16) at p, as float.
inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// A weight row's accumulators against one activation row, kept across column slices: the row
// kernels continue exactly where the previous slice stopped, so slicing the columns does not
// change a single operation of a row's arithmetic.
struct RowAcc {
  __m512 v;  // 16 float lanes, summed at the end
  __m128 m;  // Q4_K, Q6_K, Q5_0: lane 0 is the row's float accumulator; Q4_0: lanes 0 and 1
};

// The 16 int32 lanes of v reduced to 4 (exact: integers).
inline __m128i sum_to_128(__m512i v) {
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// [sum(a), sum(a), sum(m), sum(m)] of 16 int32 lanes a and 4 int32 lanes m.
inline __m128i sum_pair(__m512i a, __m128i m) {
  const __m128i v = sum_to_128(a);
  const __m128i c = _mm_add_epi32(_mm_unpacklo_epi64(v, m), _mm_unpackhi_epi64(v, m));
  return _mm_add_epi32(c, _mm_shuffle_epi32(c, _MM_SHUFFLE(2, 3, 0, 1)));
}

// sum(a) of 16 int32 lanes in lane 0.
inline __m128i sum_lane0(__m512i a) {
  __m128i v = sum_to_128(a);
  v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
  return _mm_add_epi32(v, _mm_shuffle_epi32(v, 1));
}

// Q4_K and Q6_K rows keep one float (lane 0 of RowAcc::m): the lane kernel's accumulator.
inline float finish_scalar(const RowAcc& a) {
  return _mm_cvtss_f32(a.m);
}

// Q4_0 rows keep two (lanes 0 and 1: the even and the odd blocks' chains), added as the lane
// kernel adds them.
inline float finish_two_chains(const RowAcc& a) {
  return _mm_cvtss_f32(_mm_add_ss(a.m, _mm_movehdup_ps(a.m)));
}

// [[maybe_unused]]: clang counts a function named only as a default argument as unneeded.
[[maybe_unused]] inline float finish(const RowAcc& a) {
  __m128 m = _mm_add_ps(a.m, _mm_movehl_ps(a.m, a.m));
  m = _mm_add_ss(m, _mm_movehdup_ps(m));
  return hsum512(a.v) - _mm_cvtss_f32(m);
}

// ---- Q4_K -----------------------------------------------------------------------------------
// Block (144 B): d, dmin (fp16), 12 bytes of packed 6-bit scales/mins, qs[128]. qs[32j + l]
// holds element 64j + l (low nibble, sub-block 2j) and 64j + 32 + l (high nibble, sub-block
// 2j+1). A zmm of 64 qs bytes (j, j+1) gives, masked to low nibbles, sub-blocks 2j | 2j+2 and,
// shifted, 2j+1 | 2j+3: the activation codes are stored in that order.
//
// dot = d*dy * sum_s sc_s * (codes_s . q8_s) - dmin*dy * sum_s m_s * bsum32_s.

struct alignas(64) Q4KAct {
  int8_t qs[256];     // order: sub-blocks 0 2 1 3 4 6 5 7, 32 codes each
  int16_t bsum32[8];  // sum of the codes of sub-block s, in natural order
  float d;            // activation scale
  float pad[3];
};

void prepare_q4k_act(const ActQ8_K* y, int64_t nsb, Q4KAct* out) {
  static constexpr int kOrder[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int64_t i = 0; i < nsb; ++i) {
    for (int k = 0; k < 8; ++k) {
      _mm256_store_si256(
          reinterpret_cast<__m256i*>(out[i].qs + 32 * k),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 32 * kOrder[k])));
    }
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
    const __m256i pairs = _mm256_madd_epi16(bsums, _mm256_set1_epi16(1));  // 8 x int32
    _mm_store_si128(
        reinterpret_cast<__m128i*>(out[i].bsum32),
        _mm_packs_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1)));
    out[i].d = y[i].d;
  }
}

// sc[0..7] in bytes 0-7 and m[0..7] in bytes 8-15 of an xmm (quant-formats.md §5.1).
inline __m128i unpack_q4k_scales(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, 12);
  const uint32_t s0 = w[0] & 0x3f3f3f3f;
  const uint32_t s1 = (w[2] & 0x0f0f0f0f) | (((w[0] >> 6) & 0x03030303) << 4);
  const uint32_t m0 = w[1] & 0x3f3f3f3f;
  const uint32_t m1 = ((w[2] >> 4) & 0x0f0f0f0f) | (((w[1] >> 6) & 0x03030303) << 4);
  return _mm_setr_epi32(static_cast<int>(s0), static_cast<int>(s1), static_cast<int>(m0),
                        static_cast<int>(m1));
}

// One Q4_K super-block unpacked for the byte products with a Q4KAct row: the low and high
// nibbles of code bytes 16-79 (l0, h0) and 80-143 (l1, h1), in the order the activation's codes
// were laid out for, each product word's sub-block scale, the eight mins and [d, dmin].
// Shared by q4k_rows and q4k_rows2 so that both do exactly the same integer work.
struct Q4KBlock {
  __m512i l0, h0, l1, h1;          // 4-bit codes, one per byte
  __m512i sc02, sc13, sc46, sc57;  // int16 scale of each word of the products with l0, h0, l1, h1
  __m128i m16;                     // mins m0-7 (int16)
  __m128 wd;                       // [d, dmin]
};

// Word index vectors picking sc_a for words 0-15 and sc_b for words 16-31 of a product.
struct Q4KScaleIndex {
  __m512i idx02, idx13, idx46, idx57;
  Q4KScaleIndex() {
    idx02 = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002,
                             0x0002000200020002, 0, 0, 0, 0);
    idx13 = _mm512_add_epi16(idx02, _mm512_set1_epi16(1));
    idx46 = _mm512_add_epi16(idx02, _mm512_set1_epi16(4));
    idx57 = _mm512_add_epi16(idx13, _mm512_set1_epi16(4));
  }
};

inline Q4KBlock unpack_q4k(const uint8_t* row, const Q4KScaleIndex& ix) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m256i sm16 = _mm256_cvtepu8_epi16(unpack_q4k_scales(row + 4));  // sc0-7, m0-7
  const __m512i sc = _mm512_zextsi256_si512(sm16);
  const __m512i q0 = load512(row + 16), q1 = load512(row + 80);
  Q4KBlock w;
  w.l0 = _mm512_and_si512(q0, low4);
  w.h0 = _mm512_and_si512(_mm512_srli_epi16(q0, 4), low4);
  w.l1 = _mm512_and_si512(q1, low4);
  w.h1 = _mm512_and_si512(_mm512_srli_epi16(q1, 4), low4);
  w.sc02 = _mm512_permutexvar_epi16(ix.idx02, sc);
  w.sc13 = _mm512_permutexvar_epi16(ix.idx13, sc);
  w.sc46 = _mm512_permutexvar_epi16(ix.idx46, sc);
  w.sc57 = _mm512_permutexvar_epi16(ix.idx57, sc);
  w.m16 = _mm256_extracti128_si256(sm16, 1);
  int32_t d_dmin;
  std::memcpy(&d_dmin, row, 4);
  w.wd = _mm_cvtph_ps(_mm_cvtsi32_si128(d_dmin));
  return w;
}

// 16 int32 lanes whose total is isum = sum_s sc_s * (codes_s . q8_s) (exact), and the four
// lanes of msum = sum_s m_s * bsum32_s, of one super-block against one activation row.
inline __m512i q4k_isum_lanes(const Q4KBlock& w, const Q4KAct& ya) {
  const int8_t* a = ya.qs;
  __m512i s0 = _mm512_madd_epi16(_mm512_maddubs_epi16(w.l0, load512(a)), w.sc02);
  __m512i s1 = _mm512_madd_epi16(_mm512_maddubs_epi16(w.h0, load512(a + 64)), w.sc13);
  s0 = _mm512_dpwssd_epi32(s0, _mm512_maddubs_epi16(w.l1, load512(a + 128)), w.sc46);
  s1 = _mm512_dpwssd_epi32(s1, _mm512_maddubs_epi16(w.h1, load512(a + 192)), w.sc57);
  return _mm512_add_epi32(s0, s1);
}
inline __m128i q4k_msum_lanes(const Q4KBlock& w, const Q4KAct& ya) {
  return _mm_madd_epi16(w.m16, _mm_load_si128(reinterpret_cast<const __m128i*>(ya.bsum32)));
}

// Up to kMaxNb activation rows share each unpacked super-block; per activation row the
// arithmetic (and the float accumulation order) is the same for any kNb, so a row's result does
// not depend on how many activation rows were computed with it. Per super-block the integer sums
// isum = sum_s sc_s * (codes_s . q8_s) and msum = sum_s m_s * bsum32_s are exact; the float part
// is the 16-row lane kernel's (matmul_avx512.cpp q45k_compute), acc = fma(isum, d*dy, acc) then
// acc = fnmadd(msum, dmin*dy, acc) over the super-blocks in order, so every batch size has the
// same bits (batch invariance).
template <int kNb>
void q4k_rows(const uint8_t* row, const Q4KAct* const* y, int64_t i0, int64_t i1, RowAcc* st) {
  const Q4KScaleIndex ix;
  __m128 acc[kNb];
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) acc[b] = st[b].m;
  row += i0 * 144;
  for (int64_t i = i0; i < i1; ++i, row += 144) {
    const Q4KBlock w = unpack_q4k(row, ix);
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) {
      const Q4KAct& ya = y[b][i];
      const __m128 dd = _mm_mul_ps(w.wd, _mm_set1_ps(ya.d));  // [d, dmin] * dy
      // the lane kernel's float sequence (matmul_avx512.cpp q45k_compute) on the exact int32
      // sums [isum, isum, msum, msum], reduced together without leaving the vector registers
      const __m128 sums = _mm_cvtepi32_ps(sum_pair(q4k_isum_lanes(w, ya), q4k_msum_lanes(w, ya)));
      acc[b] = _mm_fmadd_ss(sums, dd, acc[b]);
      acc[b] = _mm_fnmadd_ss(_mm_movehl_ps(sums, sums), _mm_permute_ps(dd, 0x55), acc[b]);
    }
  }
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) st[b].m = acc[b];
}

// Decode (one activation row): two weight rows at a time, so that their super-blocks' sums are
// reduced together, [isum_a, isum_b, msum_a, msum_b], and their two fma chains interleave. Each
// row's operations are q4k_rows' (the same integer sums, the same float steps in the same order).
void q4k_rows2(const uint8_t* row_a, const uint8_t* row_b, const Q4KAct* y, int64_t nsb,
               float* out) {
  const Q4KScaleIndex ix;
  __m128 acc_a = _mm_setzero_ps(), acc_b = _mm_setzero_ps();
  for (int64_t i = 0; i < nsb; ++i, row_a += 144, row_b += 144) {
    const Q4KBlock wa = unpack_q4k(row_a, ix), wb = unpack_q4k(row_b, ix);
    const __m512i sa = q4k_isum_lanes(wa, y[i]), sb = q4k_isum_lanes(wb, y[i]);
    const __m128i ma = q4k_msum_lanes(wa, y[i]), mb = q4k_msum_lanes(wb, y[i]);
    const __m128 da = _mm_mul_ps(wa.wd, _mm_set1_ps(y[i].d));
    const __m128 db = _mm_mul_ps(wb.wd, _mm_set1_ps(y[i].d));
    // [a, b, a, b] partial sums of the isums, [a, b, a, b] of the msums, then exact totals
    const __m128i v =
        sum_to_128(_mm512_add_epi32(_mm512_unpacklo_epi32(sa, sb), _mm512_unpackhi_epi32(sa, sb)));
    const __m128i w = _mm_add_epi32(_mm_unpacklo_epi32(ma, mb), _mm_unpackhi_epi32(ma, mb));
    const __m128 f = _mm_cvtepi32_ps(
        _mm_add_epi32(_mm_unpacklo_epi64(v, w), _mm_unpackhi_epi64(v, w)));  // [ia, ib, ma, mb]
    acc_a = _mm_fmadd_ss(f, da, acc_a);
    acc_b = _mm_fmadd_ss(_mm_movehdup_ps(f), db, acc_b);
    acc_a = _mm_fnmadd_ss(_mm_movehl_ps(f, f), _mm_movehdup_ps(da), acc_a);
    acc_b = _mm_fnmadd_ss(_mm_shuffle_ps(f, f, 3), _mm_movehdup_ps(db), acc_b);
  }
  out[0] = _mm_cvtss_f32(acc_a);
  out[1] = _mm_cvtss_f32(acc_b);
}

// ---- Q6_K -----------------------------------------------------------------------------------
// Block (210 B): ql[128], qh[64], int8 scales[16], d (fp16). For half h (128 elements), with
// L = ql[64h .. 64h+63] and Q = qh[32h .. 32h+31] in both 256-bit halves:
//   elements 128h +  0..63: (L & 15) | ((Q << 4 (low half) / Q << 2 (high half)) & 0x30)
//   elements 128h + 64..127: (L >> 4) | ((Q (low half) / Q >> 2 (high half)) & 0x30)
// i.e. natural order: the activation codes need no rearranging. Unsigned codes u = q + 32:
// dot = d*dy * (sum_g sc_g * (u . q8)_g - 32 * sum_g sc_g * bsums_g).

template <int kNb>
void q6k_rows(const uint8_t* row, const ActQ8_K* const* y, int64_t i0, int64_t i1, RowAcc* st) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  const __m512i shl = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002,
                                       0x0002000200020002, 0x0004000400040004, 0x0004000400040004,
                                       0x0004000400040004, 0x0004000400040004);
  const __m512i shr = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002,
                                       0x0002000200020002, 0, 0, 0, 0);
  // word w of a product vector belongs to group base + w / 8
  const __m512i idx0 =
      _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002,
                       0x0002000200020002, 0x0001000100010001, 0x0001000100010001, 0, 0);
  const __m512i four = _mm512_set1_epi16(4);
  const __m512i idx1 = _mm512_add_epi16(idx0, four);
  const __m512i idx2 = _mm512_add_epi16(idx1, four);
  const __m512i idx3 = _mm512_add_epi16(idx2, four);
  __m128 acc[kNb];
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) acc[b] = st[b].m;
  row += i0 * 210;
  for (int64_t i = i0; i < i1; ++i, row += 210) {
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 192)));
    const __m512i sc = _mm512_zextsi256_si512(sc16);
    __m512i ua[2], ub[2];
    for (int h = 0; h < 2; ++h) {
      const __m512i l = load512(row + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 128 + 32 * h)));
      ua[h] = _mm512_or_si512(_mm512_and_si512(l, low4),
                              _mm512_and_si512(_mm512_sllv_epi16(qh, shl), bits45));
      ub[h] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4),
                              _mm512_and_si512(_mm512_srlv_epi16(qh, shr), bits45));
    }
    const __m512i sc0 = _mm512_permutexvar_epi16(idx0, sc);
    const __m512i sc1 = _mm512_permutexvar_epi16(idx1, sc);
    const __m512i sc2 = _mm512_permutexvar_epi16(idx2, sc);
    const __m512i sc3 = _mm512_permutexvar_epi16(idx3, sc);
    const float wd = f16_at(row + 208);
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) {
      const int8_t* a = y[b][i].qs;
      __m512i s0 = _mm512_madd_epi16(_mm512_maddubs_epi16(ua[0], load512(a)), sc0);
      s0 = _mm512_dpwssd_epi32(s0, _mm512_maddubs_epi16(ub[0], load512(a + 64)), sc1);
      __m512i s1 = _mm512_madd_epi16(_mm512_maddubs_epi16(ua[1], load512(a + 128)), sc2);
      s1 = _mm512_dpwssd_epi32(s1, _mm512_maddubs_epi16(ub[1], load512(a + 192)), sc3);
      // -32 * sum_g sc_g * bsums_g, added to lanes 0-7
      const __m256i off = _mm256_slli_epi32(
          _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b][i].bsums)),
                            sc16),
          5);
      const __m512i sumi = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_zextsi256_si512(off));
      // the lane kernel's float step (matmul_avx512.cpp q6k_compute) on the exact int32 sum
      acc[b] = _mm_fmadd_ss(_mm_cvtepi32_ps(sum_lane0(sumi)), _mm_set_ss(wd * y[b][i].d), acc[b]);
    }
  }
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) st[b].m = acc[b];
}

// ---- Q4_0 -----------------------------------------------------------------------------------
// Four 32-element blocks per step, block k of the four in 128-bit lane k of two zmm: elements
// 0-15 in one (A), 16-31 in the other (B). Codes are unsigned for vpdpbusd (the nibbles as they
// are), so each block's integer dot is
//   dpbusd(A, act 0-15) + dpbusd(B, act 16-31) - 8 * sum(act codes),
// exact in int32, spread over the 4 dword lanes of the block's 128-bit lane. Each activation row
// is rearranged once per call: 128 code bytes per step (LegacyCodes), then per step the 4 offset
// terms and the 4 block scales (LegacyMeta), 160 bytes per 128 columns, so that a 10240-column
// row (12.8 KB) stays in L1 while the weights stream past. A step is then 2 vpdpbusd, the
// block-sum reduction (three shuffles), the offset terms added to the 4 sums (exact), a
// conversion, the 4 scales d_k * dy_k as one 128-bit product and the fmas. (Two more permutes
// per step, the offsets moved to dword lanes 4k and dy spread over 16 lanes, cost 1.1x at
// batch 1: the step is shuffle-bound; offsets stored in their lanes made the rows longer than
// the 16 KB activation slice at 10240 columns, 1.1-1.2x slower there.)
// Rows whose block count is not a multiple of 4 end with a step on a zero-padded copy.

struct alignas(64) LegacyCodes {
  int8_t lo[64];  // elements 0-15 of blocks 0-3
  int8_t hi[64];  // elements 16-31
};

struct LegacyMeta {
  int32_t start[4];  // -offset * sum of block k's codes
  float dy[4];       // block k's activation scale
};

// Per activation row: ngroups LegacyCodes, then ngroups LegacyMeta, in units of LegacyCodes.
int64_t legacy_act_units(int64_t ngroups) {
  return ngroups + (ngroups * static_cast<int64_t>(sizeof(LegacyMeta)) + 127) / 128;
}

void prepare_legacy_act(const ActQ8_0* y, int64_t nblk, int offset, LegacyCodes* out) {
  const int64_t ngroups = (nblk + 3) / 4;
  auto* meta = reinterpret_cast<LegacyMeta*>(out + ngroups);
  std::memset(static_cast<void*>(out), 0, static_cast<size_t>(legacy_act_units(ngroups)) * 128);
  for (int64_t g = 0; g < ngroups; ++g) {
    // missing blocks of the last step stay zero: no codes, no offset, scale 0
    for (int k = 0; k < 4 && 4 * g + k < nblk; ++k) {
      const ActQ8_0& blk = y[4 * g + k];
      std::memcpy(out[g].lo + 16 * k, blk.qs, 16);
      std::memcpy(out[g].hi + 16 * k, blk.qs + 16, 16);
      int sum = 0;
      for (int j = 0; j < 32; ++j) sum += blk.qs[j];
      meta[g].start[k] = -offset * sum;
      meta[g].dy[k] = _cvtsh_ss(blk.d);
    }
  }
}

inline __m512i load4x128(const uint8_t* p, size_t stride) {
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + stride)), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * stride)), 2);
  return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * stride)),
                            3);
}

// Four Q4_0 blocks (18 B: d, qs[16] with element j low / j+16 high nibble).
struct Q4_0Step {
  static constexpr size_t kBytes = 18;
  static constexpr int kOffset = 8;
  static constexpr bool kTwoChains = true;  // see lanes32_compute
  static void decode(const uint8_t* p, __m512i& a, __m512i& b, __m128& d) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i q = load4x128(p + 2, kBytes);
    a = _mm512_and_si512(q, low4);
    b = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
    // d of block k is word 9k of the first 64 bytes, into word k
    const __m512i idx = _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, 0x001b001200090000);
    d = _mm_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi16(idx, load512(p))));
  }
};

// Four Q5_0 blocks (22 B: d, qh[4], qs[16]); element j is nibble | (qh bit j) << 4, offset 16.
// The fifth bits of the four blocks become two 64-bit byte masks (bit 16k + j of a mask is
// element j, resp. j + 16, of block k), added in as 16 where set. The block scales sit 22 bytes
// apart, past the first 64 bytes, so they are gathered as four halves instead of one permute.
struct Q5_0Step {
  static constexpr size_t kBytes = 22;
  static constexpr int kOffset = 16;
  static constexpr bool kTwoChains = false;
  static void decode(const uint8_t* p, __m512i& a, __m512i& b, __m128& d) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i sixteen = _mm512_set1_epi8(0x10);
    const __m512i q = load4x128(p + 6, kBytes);
    uint64_t mask_a = 0, mask_b = 0;
    uint16_t dk[4];
    for (int k = 0; k < 4; ++k) {
      uint32_t qh;
      std::memcpy(&qh, p + k * kBytes + 2, 4);
      mask_a |= static_cast<uint64_t>(qh & 0xffffu) << (16 * k);
      mask_b |= static_cast<uint64_t>(qh >> 16) << (16 * k);
      std::memcpy(&dk[k], p + k * kBytes, 2);
    }
    a = _mm512_and_si512(q, low4);
    b = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
    a = _mm512_mask_add_epi8(a, mask_a, a, sixteen);
    b = _mm512_mask_add_epi8(b, mask_b, b, sixteen);
    d = _mm_cvtph_ps(_mm_setr_epi16(static_cast<short>(dk[0]), static_cast<short>(dk[1]),
                                    static_cast<short>(dk[2]), static_cast<short>(dk[3]), 0, 0, 0,
                                    0));
  }
};

template <typename Step, int kNb>
inline void legacy_step(const uint8_t* p, const LegacyCodes* const* y, int64_t ngroups, int64_t g,
                        __m128* acc) {
  __m512i wa, wb;
  __m128 wd;  // d_k in lane k
  Step::decode(p, wa, wb, wd);
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) {
    const LegacyCodes& ya = y[b][g];
    const LegacyMeta& meta = reinterpret_cast<const LegacyMeta*>(y[b] + ngroups)[g];
    __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wa, load512(ya.lo));
    s = _mm512_dpbusd_epi32(s, wb, load512(ya.hi));
    // The lane kernel's float steps (matmul_avx512.cpp lanes32_compute) on the 4 blocks' exact
    // int32 dots, acc = fma(S_k, d_k * dy_k, acc) in block order: Q4_0 in two chains (even
    // blocks in lane 0, odd blocks in lane 1; lanes 2 and 3 stay 0, their scale is 0), Q5_0 in
    // one (lane 0).
    s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
    s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));  // lane 4k: block k's dot
    const __m512i first4 = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
    // plus the offset terms (exact: integers), as floats
    const __m128 sv = _mm_cvtepi32_ps(
        _mm_add_epi32(_mm512_castsi512_si128(_mm512_permutexvar_epi32(first4, s)),
                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(meta.start))));
    const __m128 scale = _mm_mul_ps(wd, _mm_loadu_ps(meta.dy));  // d_k * dy_k in lane k
    if constexpr (Step::kTwoChains) {
      const __m128 scale01 = _mm_castsi128_ps(_mm_move_epi64(_mm_castps_si128(scale)));
      const __m128 scale23 = _mm_movehl_ps(_mm_setzero_ps(), scale);
      acc[b] = _mm_fmadd_ps(sv, scale01, acc[b]);                     // blocks 0, 1
      acc[b] = _mm_fmadd_ps(_mm_movehl_ps(sv, sv), scale23, acc[b]);  // blocks 2, 3
    } else {  // one chain in lane 0, blocks in order
      __m128 a = acc[b];
      a = _mm_fmadd_ss(sv, scale, a);
      a = _mm_fmadd_ss(_mm_movehdup_ps(sv), _mm_movehdup_ps(scale), a);
      a = _mm_fmadd_ss(_mm_movehl_ps(sv, sv), _mm_movehl_ps(scale, scale), a);
      a = _mm_fmadd_ss(_mm_shuffle_ps(sv, sv, 3), _mm_shuffle_ps(scale, scale, 3), a);
      acc[b] = a;
    }
  }
}

// Steps [g0, g1) of a row of nblk blocks; step nblk / 4 (if any) is the zero-padded rest.
template <typename Step, int kNb>
void legacy_rows(const uint8_t* row, const LegacyCodes* const* y, int64_t nblk, int64_t g0,
                 int64_t g1, RowAcc* st) {
  __m128 acc[kNb];
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) acc[b] = st[b].m;
  const int64_t full = nblk / 4, ngroups = (nblk + 3) / 4;
  for (int64_t g = g0; g < std::min(g1, full); ++g)
    legacy_step<Step, kNb>(row + g * 4 * Step::kBytes, y, ngroups, g, acc);
  if (g1 > full) {
    // zero blocks: d = 0 and zero codes against zero activations add exactly 0
    alignas(64) uint8_t pad[4 * Step::kBytes + 64] = {};
    std::memcpy(pad, row + full * 4 * Step::kBytes,
                static_cast<size_t>(nblk - 4 * full) * Step::kBytes);
    legacy_step<Step, kNb>(pad, y, ngroups, full, acc);
  }
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) st[b].m = acc[b];
}

// ---- Q8_0 -----------------------------------------------------------------------------------
// Block (34 B): d (fp16), qs[32] signed codes. Every activation row gets exactly the arithmetic
// of the x86 row kernel (matmul_x86_kernels.h, row_signed32 with Q8_0Decode), which batch-1
// calls used before this kernel existed: per block an int32 dot in 8 lanes of 4 products,
// converted and accumulated by one fma with the float dx * dy into 8 float lanes (ymm), then
// the same horizontal sum. So batch-1 results did not change, and each row of a verify batch
// equals the one-token decode of its token bit for bit.
// Each activation row is copied once per call: its codes into aligned 32-byte blocks, then its
// scales dy as floats (36 bytes per block: a 10240-column row stays in L1 while the weights
// stream past; with an extra offset vector per block, 68 bytes, 10240->2560 ran 2.6x slower).
// dx * dy is a scalar product broadcast from a register (through a stack array and a
// broadcast load it cost 30% at batch 1: store-to-load forwarding stalls).

struct alignas(32) Q8Act {
  int8_t qs[32];
};

// Per activation row: nblk Q8Act, then the nblk scales dy as floats, in units of Q8Act.
int64_t q8_0_act_units(int64_t nblk) {
  return nblk + (nblk * static_cast<int64_t>(sizeof(float)) + 31) / 32;
}

void prepare_q8_0_act(const ActQ8_0* y, int64_t nblk, Q8Act* out) {
  auto* dy = reinterpret_cast<float*>(out + nblk);
  for (int64_t i = 0; i < nblk; ++i) {
    std::memcpy(out[i].qs, y[i].qs, 32);
    dy[i] = _cvtsh_ss(y[i].d);
  }
}

// One weight row against kNb activation rows: out[b] = W[row] . A[b].
template <int kNb>
inline void q8_0_row(const uint8_t* row, const Q8Act* const* y, int64_t nblk, float* out) {
  __m256 acc[kNb];
  const float* dy[kNb];
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) {
    acc[b] = _mm256_setzero_ps();
    dy[b] = reinterpret_cast<const float*>(y[b] + nblk);
  }
  for (int64_t i = 0; i < nblk; ++i, row += 34) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2));
    const __m256i q_abs = _mm256_abs_epi8(q);
    const float dx = f16_at(row);
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) {
      const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(y[b][i].qs));
      const __m256i sum =
          _mm256_dpbusd_epi32(_mm256_setzero_si256(), q_abs, _mm256_sign_epi8(a, q));
      acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(dx * dy[b][i]), acc[b]);
    }
  }
  // the row kernel's horizontal sum: halves, then pairs, then the last two
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[b]), _mm256_extractf128_ps(acc[b], 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    out[b] = _mm_cvtss_f32(s);
  }
}

// Each weight row is read once per group of up to 8 activation rows (a verify batch is one
// group); the group's activations (36 B per block and row) stay in L1/L2 meanwhile.
void gemv_q8_0(const GemmTile& t) {
  constexpr int64_t kMaxNb = 8;
  const int64_t nblk = t.cols / 32;
  const int64_t units = q8_0_act_units(nblk);
  thread_local std::vector<Q8Act> act;
  act.resize(static_cast<size_t>(units * t.n_act));
  for (int64_t b = 0; b < t.n_act; ++b) {
    prepare_q8_0_act(reinterpret_cast<const ActQ8_0*>(t.a + b * t.a_stride), nblk,
                     act.data() + b * units);
  }
  for (int64_t b0 = 0; b0 < t.n_act; b0 += kMaxNb) {
    const int64_t nb = std::min(kMaxNb, t.n_act - b0);
    const Q8Act* y[kMaxNb];
    for (int64_t b = 0; b < nb; ++b) y[b] = act.data() + (b0 + b) * units;
    dispatch_nb(nb, [&](auto kNb) {
      constexpr int n = decltype(kNb)::value;
      for (int64_t r = 0; r < t.n_rows; ++r) {
        float out[n];
        q8_0_row<n>(t.w + r * t.w_stride, y, nblk, out);
        for (int b = 0; b < n; ++b) t.y[(b0 + b) * t.y_stride + r] = out[b];
      }
    });
  }
}

// ---- drivers --------------------------------------------------------------------------------

// Weight rows in chunks of about kChunkBytes; each chunk against groups of up to kMaxNb
// activation rows, each weight row unpacked once per group (with more than kMaxNb activation
// rows the chunk is read again from L2). The columns are cut into equal slices whose activations
// (act_unit_bytes per unit of columns and activation row) fit in about kActSliceBytes, so that
// with long rows (10240 columns: 12-14 KB of rearranged activations per row) several activation
// rows still stay in L1 while the weights stream past; the accumulators carry over between
// slices. Measured at 10240->2560 (Q4_K, one thread): batch 2 took 2.0x batch 1 without slices,
// 1.45x with 16 KB slices and the prefetch below (without the prefetch slicing was slower still).
// rows(kNb, w_row, act pointers, u0, u1, acc) runs units [u0, u1) of one weight row.
// finish_row(acc) turns a row's accumulators into its result.
template <typename Act, typename Rows, typename Finish = float (*)(const RowAcc&)>
void sweep(const GemmTile& t, const Act* act, int64_t act_stride, int64_t n_units,
           size_t act_unit_bytes, Rows&& rows, Finish finish_row = &finish) {
  constexpr int64_t kMaxNb = 8;
  constexpr int64_t kAhead = 2;
  constexpr auto kHint = _MM_HINT_T1;
  constexpr size_t kActSliceBytes = 16 * 1024;
  const int64_t chunk =
      std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / std::max<size_t>(1, t.w_stride)));
  thread_local std::vector<RowAcc> state;
  state.resize(static_cast<size_t>(chunk * kMaxNb));
  for (int64_t r0 = 0; r0 < t.n_rows; r0 += chunk) {
    const int64_t r1 = std::min(t.n_rows, r0 + chunk);
    for (int64_t b0 = 0; b0 < t.n_act; b0 += kMaxNb) {
      const int64_t nb = std::min(kMaxNb, t.n_act - b0);
      const Act* y[kMaxNb];
      for (int64_t b = 0; b < nb; ++b) y[b] = act + (b0 + b) * act_stride;
      const int64_t max_slice = std::max<int64_t>(
          1, static_cast<int64_t>(kActSliceBytes / (static_cast<size_t>(nb) * act_unit_bytes)));
      const int64_t n_slices = (n_units + max_slice - 1) / max_slice;
      const int64_t slice = (n_units + n_slices - 1) / n_slices;  // equal slices
      const RowAcc zero{_mm512_setzero_ps(), _mm_setzero_ps()};
      if (n_slices == 1) {
        // Whole rows: the accumulators stay on the stack (in registers once inlined).
        dispatch_nb(nb, [&](auto kNb) {
          for (int64_t r = r0; r < r1; ++r) {
            RowAcc st[decltype(kNb)::value];
            for (RowAcc& a : st) a = zero;
            rows(kNb, t.w + r * t.w_stride, y, int64_t{0}, n_units, st);
            for (int b = 0; b < decltype(kNb)::value; ++b)
              t.y[(b0 + b) * t.y_stride + r] = finish_row(st[b]);
          }
        });
        continue;
      }
      // Slices: the accumulators of the chunk's rows wait in `state` (nb per row) between them.
      for (int64_t k = 0; k < (r1 - r0) * nb; ++k) state[static_cast<size_t>(k)] = zero;
      dispatch_nb(nb, [&](auto kNb) {
        for (int64_t u0 = 0; u0 < n_units; u0 += slice) {
          const int64_t u1 = std::min(n_units, u0 + slice);
          // A slice of each row is a short run of memory that the hardware prefetchers
          // barely start on: fetch the slice two rows ahead into L2 by hand.
          const size_t p0 = static_cast<size_t>(u0) * t.w_stride / static_cast<size_t>(n_units);
          const size_t p1 = static_cast<size_t>(u1) * t.w_stride / static_cast<size_t>(n_units);
          for (int64_t r = r0; r < r1; ++r) {
            if (b0 == 0 && r + kAhead < t.n_rows) {
              const uint8_t* ahead = t.w + (r + kAhead) * t.w_stride;
              for (size_t p = p0; p < p1; p += 64) _mm_prefetch(ahead + p, kHint);
            }
            rows(kNb, t.w + r * t.w_stride, y, u0, u1, &state[static_cast<size_t>((r - r0) * nb)]);
          }
        }
      });
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t b = 0; b < nb; ++b)
          t.y[(b0 + b) * t.y_stride + r] =
              finish_row(state[static_cast<size_t>((r - r0) * nb + b)]);
      }
    }
  }
}

void gemv_q4k(const GemmTile& t) {
  const int64_t nsb = t.cols / 256;
  thread_local std::vector<Q4KAct> act;
  act.resize(static_cast<size_t>(nsb * t.n_act));
  for (int64_t b = 0; b < t.n_act; ++b) {
    prepare_q4k_act(reinterpret_cast<const ActQ8_K*>(t.a + b * t.a_stride), nsb,
                    act.data() + b * nsb);
  }
  // Decode of long rows on Intel: row pairs, an odd last row through sweep below. Both walks
  // give the same bits; only their speed differs, by vendor. Measured, one thread, CPU time:
  // Intel Emerald Rapids, against e388cb2's kernel, 10240->2560 0.85x with pairs, 1.1x with
  // single rows, 2560-column rows 1.1x either way; AMD Zen 4, 10240->2560 1,470 us with pairs,
  // 700 us with single rows (2,000 against 700 with pairs of 2560-column rows as well): the
  // two interleaved streams of adjacent rows defeat its prefetchers (pairs of rows half a
  // matrix apart ran at the single rows' speed in one layout and 30 % slower in another).
  static const bool row_pairs = !cpu_features().amd;
  if (row_pairs && t.n_act == 1 && nsb >= 16) {
    const int64_t pairs = t.n_rows / 2;
    for (int64_t p = 0; p < pairs; ++p) {
      float out[2];
      const uint8_t* w = t.w + 2 * p * t.w_stride;
      q4k_rows2(w, w + t.w_stride, act.data(), nsb, out);
      t.y[2 * p] = out[0];
      t.y[2 * p + 1] = out[1];
    }
    if (t.n_rows % 2 == 0) return;
    GemmTile rest = t;
    rest.w = t.w + (t.n_rows - 1) * t.w_stride;
    rest.n_rows = 1;
    rest.y = t.y + (t.n_rows - 1);
    sweep(
        rest, act.data(), nsb, nsb, sizeof(Q4KAct),
        [&](auto kNb, const uint8_t* row, const Q4KAct* const* y, int64_t i0, int64_t i1,
            RowAcc* st) { q4k_rows<decltype(kNb)::value>(row, y, i0, i1, st); },
        &finish_scalar);
    return;
  }
  sweep(
      t, act.data(), nsb, nsb, sizeof(Q4KAct),
      [&](auto kNb, const uint8_t* row, const Q4KAct* const* y, int64_t i0, int64_t i1,
          RowAcc* st) { q4k_rows<decltype(kNb)::value>(row, y, i0, i1, st); },
      &finish_scalar);
}

void gemv_q6k(const GemmTile& t) {
  const int64_t nsb = t.cols / 256;
  const auto* act = reinterpret_cast<const ActQ8_K*>(t.a);
  // activation rows are a_stride bytes apart: a whole number of Q8_K blocks
  const auto stride = static_cast<int64_t>(t.a_stride / sizeof(ActQ8_K));
  sweep(
      t, act, stride, nsb, sizeof(ActQ8_K),
      [&](auto kNb, const uint8_t* row, const ActQ8_K* const* y, int64_t i0, int64_t i1,
          RowAcc* st) { q6k_rows<decltype(kNb)::value>(row, y, i0, i1, st); },
      &finish_scalar);
}

template <typename Step>
void gemv_legacy(const GemmTile& t) {
  const int64_t nblk = t.cols / 32;
  const int64_t ngroups = (nblk + 3) / 4;
  const int64_t units = legacy_act_units(ngroups);
  thread_local std::vector<LegacyCodes> act;
  act.resize(static_cast<size_t>(units * t.n_act));
  for (int64_t b = 0; b < t.n_act; ++b) {
    prepare_legacy_act(reinterpret_cast<const ActQ8_0*>(t.a + b * t.a_stride), nblk, Step::kOffset,
                       act.data() + b * units);
  }
  sweep(
      t, act.data(), units, ngroups, sizeof(LegacyCodes) + sizeof(LegacyMeta),
      [&](auto kNb, const uint8_t* row, const LegacyCodes* const* y, int64_t g0, int64_t g1,
          RowAcc* st) { legacy_rows<Step, decltype(kNb)::value>(row, y, nblk, g0, g1, st); },
      Step::kTwoChains ? &finish_two_chains : &finish_scalar);
}

}  // namespace

// Bit-identical to the scalar quantize_act_q8_k (matmul_scalar.cpp): the same max search (first
// element of the largest magnitude gives the sign), the same float products, and vcvtps2dq
// under the default round-to-nearest-even equals ggml's nearest_int for |v| <= 127.
void avx512_quantize_act_q8_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<ActQ8_K*>(dst);
  for (int64_t b = 0; b < n / 256; ++b, x += 256) {
    __m512 vmax = _mm512_setzero_ps();
    for (int j = 0; j < 256; j += 16)
      vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
    const float amax = _mm512_reduce_max_ps(vmax);
    if (!(amax > 0.0f)) {
      std::memset(&y[b], 0, sizeof(ActQ8_K));
      continue;
    }
    float max = 0.0f;
    const __m512 target = _mm512_set1_ps(amax);
    for (int j = 0; j < 256; j += 16) {
      const __mmask16 hit =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)), target, _CMP_EQ_OQ);
      if (hit != 0) {
        max = x[j + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    const __m512i cap = _mm512_set1_epi32(127);
    alignas(64) int16_t sums[16];
    for (int g = 0; g < 16; ++g) {
      const __m512i q =
          _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * g))), cap);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16 * g), _mm512_cvtepi32_epi8(q));
      sums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    std::memcpy(y[b].bsums, sums, sizeof sums);
    y[b].d = 1.0f / iscale;
  }
}

// Bit-identical to the scalar quantize_act_q8_0 (matmul_scalar.cpp): the maximum is exact in
// any order, d and 127 / amax are the same float operations, fp16(d) rounds to nearest even as
// fp32_to_fp16 does, and vcvtps2dq under the default round-to-nearest-even equals nearest_int
// for |v| <= 127. A small model quantizes ~35 activation rows per token (a tenth of a verify).
void avx512_quantize_act_q8_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<ActQ8_0*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    const __m512 vid = _mm512_set1_ps(id);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs),
                     _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, vid))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16),
                     _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, vid))));
  }
}

// Crossover to the lane kernels, measured single-threaded (bench_matmul 1 --cpu-time --batches)
// at the E4B shapes 2560->2048, 2560->10240 and 10240->2560: the row kernels are faster up to
// batch 4 for Q4_0 and Q4_K (the lane kernels win from 5 on, mostly at 10240->2560) and up to 8
// for Q6_K, whose lane kernel spends more on transposes. With more than 8 activation rows the
// row kernels read each weight chunk twice (the second time from L2).
// Q8_0 keeps the x86 row kernel's arithmetic (a 4-block form with codes + 128 was up to 25%
// slower at batch 1, 10240->2560) up to 3 rows: on the tiny model's matrices (256 columns)
// each further row costs the row kernel 0.6x a batch-1 call and the lane kernels 0.2x (a
// conversion and an fma per block and activation row here, once per block of 16 weight rows
// there); at 3 rows both take 2.1x batch 1.
int64_t avx512_gemv_max_batch(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0:
      return 3;
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q4_K:
      return 4;
    case GgmlType::Q6_K:
      return 8;
    default:
      return 0;
  }
}

GemmFn avx512_gemv(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_K:
      return &gemv_q4k;
    case GgmlType::Q6_K:
      return &gemv_q6k;
    case GgmlType::Q4_0:
      return &gemv_legacy<Q4_0Step>;
    case GgmlType::Q5_0:
      return &gemv_legacy<Q5_0Step>;
    case GgmlType::Q8_0:
      return &gemv_q8_0;
    default:
      return nullptr;
  }
}

}  // namespace boltrt::cpu
