// AVX-512 matrix-vector kernels for k-quant weights against 1-3 activation rows: the decode path.
//
// Decode reads every weight byte once per token, so these kernels aim at the fewest instructions
// per weight byte: a whole super-block's codes sit in two or four zmm registers, each activation
// row is rearranged once per call (in the thread's own scratch) into the byte order the weights
// unpack to, and per-group scales are applied to the int16 pair products with vpdpwssd, whose
// scale vectors come from one vpermw each. One weight row is swept against one activation row at
// a time; rows are walked in chunks of about kChunkBytes, so with 2-3 activation rows the chunk is
// read from memory once and from L2 for the others.
//
// Integer sums per super-block are exact, as in the scalar reference (matmul_scalar.cpp); only
// the float accumulation order differs (16 lanes, then a horizontal sum). A row's result does
// not depend on the rows around it, the row range or the thread count.
// GCC 12's AVX-512 headers build some results from _mm512_undefined_* (`__m512 __Y = __Y;`) and
// then warn about that self-initialised vector: a known false positive, as in matmul_avx512.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul_internal.h"

namespace boltrt::cpu {
namespace {

constexpr size_t kChunkBytes = 128 * 1024;

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

float dot_q4k_row(const uint8_t* row, const Q4KAct* y, int64_t nsb) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  // word index vectors picking sc_a for words 0-15 and sc_b for words 16-31
  const __m512i idx02 = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002,
                                         0x0002000200020002, 0, 0, 0, 0);
  const __m512i one = _mm512_set1_epi16(1);
  const __m512i idx13 = _mm512_add_epi16(idx02, one);
  const __m512i four = _mm512_set1_epi16(4);
  const __m512i idx46 = _mm512_add_epi16(idx02, four);
  const __m512i idx57 = _mm512_add_epi16(idx13, four);
  __m512 acc = _mm512_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
  for (int64_t i = 0; i < nsb; ++i, row += 144) {
    const __m256i sm16 = _mm256_cvtepu8_epi16(unpack_q4k_scales(row + 4));  // sc0-7, m0-7
    const __m512i sc = _mm512_zextsi256_si512(sm16);
    const __m512i q0 = load512(row + 16), q1 = load512(row + 80);
    const __m512i l0 = _mm512_and_si512(q0, low4);
    const __m512i h0 = _mm512_and_si512(_mm512_srli_epi16(q0, 4), low4);
    const __m512i l1 = _mm512_and_si512(q1, low4);
    const __m512i h1 = _mm512_and_si512(_mm512_srli_epi16(q1, 4), low4);
    const int8_t* a = y[i].qs;
    const __m512i p0 = _mm512_maddubs_epi16(l0, load512(a));
    const __m512i p1 = _mm512_maddubs_epi16(h0, load512(a + 64));
    const __m512i p2 = _mm512_maddubs_epi16(l1, load512(a + 128));
    const __m512i p3 = _mm512_maddubs_epi16(h1, load512(a + 192));
    __m512i s0 = _mm512_madd_epi16(p0, _mm512_permutexvar_epi16(idx02, sc));
    __m512i s1 = _mm512_madd_epi16(p1, _mm512_permutexvar_epi16(idx13, sc));
    s0 = _mm512_dpwssd_epi32(s0, p2, _mm512_permutexvar_epi16(idx46, sc));
    s1 = _mm512_dpwssd_epi32(s1, p3, _mm512_permutexvar_epi16(idx57, sc));
    // [d, dmin] * dy
    int32_t d_dmin;
    std::memcpy(&d_dmin, row, 4);
    const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(d_dmin)), _mm_set1_ps(y[i].d));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_broadcastss_ps(dd),
                          acc);
    const __m128i mins =
        _mm_madd_epi16(_mm256_extracti128_si256(sm16, 1),
                       _mm_load_si128(reinterpret_cast<const __m128i*>(y[i].bsum32)));
    acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_permute_ps(dd, 0x55), acc_min);
  }
  __m128 m = _mm_add_ps(acc_min, _mm_movehl_ps(acc_min, acc_min));
  m = _mm_add_ss(m, _mm_movehdup_ps(m));
  return hsum512(acc) - _mm_cvtss_f32(m);
}

// ---- Q6_K -----------------------------------------------------------------------------------
// Block (210 B): ql[128], qh[64], int8 scales[16], d (fp16). For half h (128 elements), with
// L = ql[64h .. 64h+63] and Q = qh[32h .. 32h+31] in both 256-bit halves:
//   elements 128h +  0..63: (L & 15) | ((Q << 4 (low half) / Q << 2 (high half)) & 0x30)
//   elements 128h + 64..127: (L >> 4) | ((Q (low half) / Q >> 2 (high half)) & 0x30)
// i.e. natural order: the activation codes need no rearranging. Unsigned codes u = q + 32:
// dot = d*dy * (sum_g sc_g * (u . q8)_g - 32 * sum_g sc_g * bsums_g).

float dot_q6k_row(const uint8_t* row, const ActQ8_K* y, int64_t nsb) {
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
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < nsb; ++i, row += 210) {
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 192)));
    const __m512i sc = _mm512_zextsi256_si512(sc16);
    const int8_t* a = y[i].qs;
    __m512i s[2];
    for (int h = 0; h < 2; ++h) {
      const __m512i l = load512(row + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 128 + 32 * h)));
      const __m512i ua = _mm512_or_si512(_mm512_and_si512(l, low4),
                                         _mm512_and_si512(_mm512_sllv_epi16(qh, shl), bits45));
      const __m512i ub = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4),
                                         _mm512_and_si512(_mm512_srlv_epi16(qh, shr), bits45));
      const __m512i pa = _mm512_maddubs_epi16(ua, load512(a + 128 * h));
      const __m512i pb = _mm512_maddubs_epi16(ub, load512(a + 128 * h + 64));
      s[h] = _mm512_madd_epi16(pa, _mm512_permutexvar_epi16(h == 0 ? idx0 : idx2, sc));
      s[h] = _mm512_dpwssd_epi32(s[h], pb, _mm512_permutexvar_epi16(h == 0 ? idx1 : idx3, sc));
    }
    // -32 * sum_g sc_g * bsums_g, added to lanes 0-7
    const __m256i off = _mm256_slli_epi32(
        _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums)), sc16),
        5);
    const __m512i sumi =
        _mm512_sub_epi32(_mm512_add_epi32(s[0], s[1]), _mm512_zextsi256_si512(off));
    acc =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(f16_at(row + 208) * y[i].d), acc);
  }
  return hsum512(acc);
}

// ---- drivers --------------------------------------------------------------------------------

// Weight rows in chunks of about kChunkBytes; each chunk against every activation row.
template <typename RowDot>
void sweep(const GemmTile& t, RowDot&& dot) {
  const int64_t chunk =
      std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / std::max<size_t>(1, t.w_stride)));
  for (int64_t r0 = 0; r0 < t.n_rows; r0 += chunk) {
    const int64_t r1 = std::min(t.n_rows, r0 + chunk);
    for (int64_t b = 0; b < t.n_act; ++b) {
      for (int64_t r = r0; r < r1; ++r) t.y[b * t.y_stride + r] = dot(t.w + r * t.w_stride, b);
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
  const Q4KAct* y = act.data();
  sweep(t, [&](const uint8_t* row, int64_t b) { return dot_q4k_row(row, y + b * nsb, nsb); });
}

void gemv_q6k(const GemmTile& t) {
  const int64_t nsb = t.cols / 256;
  sweep(t, [&](const uint8_t* row, int64_t b) {
    return dot_q6k_row(row, reinterpret_cast<const ActQ8_K*>(t.a + b * t.a_stride), nsb);
  });
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

GemmFn avx512_gemv(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_K:
      return &gemv_q4k;
    case GgmlType::Q6_K:
      return &gemv_q6k;
    default:
      return nullptr;
  }
}

}  // namespace boltrt::cpu
