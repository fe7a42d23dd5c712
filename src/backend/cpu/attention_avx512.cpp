// AVX-512 attention kernels (cpu::attention, ops.cpp): the AVX2 kernels' arithmetic bit for bit,
// at twice the width and with more independent chains in flight.
//
// Why they are bit-identical to the AVX2 kernels:
//   - a dot product q.k in the AVX2 kernels keeps two accumulators of 8 lanes, a0 for the even
//     8-float chunks and a1 for the odd ones, adds them (a0 + a1) and sums the 8 lanes as
//     ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). One zmm accumulator fed 16 floats at a
//     time holds a0 in its lower half and a1 in its upper half, in the same order of fmas; the
//     horizontal sums below make the same additions, 8 keys at a time through transposes.
//   - the weighted sum acc[d] += e_j * v_j[d] is one fma chain per output element, in key order,
//     whatever the vector width.
// So a model decodes to the same bits at either SIMD level (tests/test_gemma4_ops.cpp checks).
//
// The keys and values are read in their cache format (KvFormat: f32, f16, q8_0, q4_0), each
// 16 values turned into f32 in registers just before use: f16 -> f32 is exact, and a q8_0 /
// q4_0 value is float(code) * d with d the block's f16 scale, one rounding, the very product
// dequantize_block() stores. So every fma sees the same operands as on rows converted to f32
// first, and the results are those of the f32 kernels bit for bit, without a conversion pass.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/attention_kernels.h"
#include "quant/fp16.h"

namespace boltrt::cpu::detail {
namespace {

// Values [16 i, 16 i + 16) of a row stored in format F, as f32.
template <KvFormat F>
inline __m512 load16(const uint8_t* row, int64_t i) {
  if constexpr (F == KvFormat::F32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + 16 * i);
  } else if constexpr (F == KvFormat::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * i)));
  } else if constexpr (F == KvFormat::Q8_0) {
    // block i / 2 (34 bytes: f16 d, 32 int8 codes), its half i % 2
    const uint8_t* block = row + 34 * (i >> 1);
    uint16_t d;
    std::memcpy(&d, block, 2);
    const __m128i codes =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + 16 * (i & 1)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes)),
                         _mm512_set1_ps(fp16_to_fp32(d)));
  } else {
    // Q4_0: block i / 2 (18 bytes: f16 d, 16 bytes of nibbles); values 0..15 are the low
    // nibbles, 16..31 the high ones; value = (nibble - 8) * d
    const uint8_t* block = row + 18 * (i >> 1);
    uint16_t d;
    std::memcpy(&d, block, 2);
    __m512i n = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
    if (i & 1) n = _mm512_srli_epi32(n, 4);
    n = _mm512_sub_epi32(_mm512_and_si512(n, _mm512_set1_epi32(15)), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(n), _mm512_set1_ps(fp16_to_fp32(d)));
  }
}

// a0 + a1 of the AVX2 kernels: the lower and upper halves of one zmm accumulator.
inline __m256 halves(__m512 a) {
  return _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}

// The 8-lane horizontal sums of s[0..7] (one per key), each ((s0 + s4) + (s2 + s6)) +
// ((s1 + s5) + (s3 + s7)) like dot_avx2's, written to out[0..7].
inline __m256 reduce8(const __m256* s) {
  // t_r = lower 4 + upper 4 of s_r; key r in the low 128 bits, key r + 4 in the high ones
  __m256 z[4];
  for (int r = 0; r < 4; ++r) {
    z[r] = _mm256_add_ps(_mm256_permute2f128_ps(s[r], s[r + 4], 0x20),
                         _mm256_permute2f128_ps(s[r], s[r + 4], 0x31));
  }
  // t'_r = (t_r0 + t_r2, t_r1 + t_r3)
  const __m256 w01 = _mm256_add_ps(_mm256_shuffle_ps(z[0], z[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(z[0], z[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 w23 = _mm256_add_ps(_mm256_shuffle_ps(z[2], z[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(z[2], z[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // t'_r0 + t'_r1, keys 0..3 in the low half and 4..7 in the high half: in order
  return _mm256_add_ps(_mm256_shuffle_ps(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Dot products of 8 keys (k_r = k + r * stride bytes) with q, head_dim = 16 * chunks.
template <KvFormat F>
inline __m256 dots8(const float* q, const uint8_t* k, size_t stride, int64_t chunks) {
  __m512 a[8];
  for (int r = 0; r < 8; ++r) a[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < chunks; ++i) {
    const __m512 qi = _mm512_loadu_ps(q + 16 * i);
    for (int r = 0; r < 8; ++r) a[r] = _mm512_fmadd_ps(qi, load16<F>(k + r * stride, i), a[r]);
  }
  __m256 s[8];
  for (int r = 0; r < 8; ++r) s[r] = halves(a[r]);
  return reduce8(s);
}

// acc[0 .. 16 kZ) += sum_j e[j] * v_j[16 c0 .. 16 (c0 + kZ)) (v_j = v + j * stride bytes): kZ
// chains per job, two jobs (e0/acc0 and e1/acc1, the same keys) at once when kPair, so short
// heads still keep 8+ fmas in flight.
template <KvFormat F, int kZ, bool kPair>
inline void weighted_sum_chunk(const float* e0, const float* e1, const uint8_t* v, size_t stride,
                               int64_t c0, int64_t count, float* acc0, float* acc1) {
  __m512 a[kZ], b[kPair ? kZ : 1];
  for (int z = 0; z < kZ; ++z) a[z] = _mm512_loadu_ps(acc0 + 16 * z);
  if constexpr (kPair) {
    for (int z = 0; z < kZ; ++z) b[z] = _mm512_loadu_ps(acc1 + 16 * z);
  }
  for (int64_t j = 0; j < count; ++j) {
    const uint8_t* vj = v + static_cast<size_t>(j) * stride;
    const __m512 w0 = _mm512_set1_ps(e0[j]);
    if constexpr (kPair) {
      const __m512 w1 = _mm512_set1_ps(e1[j]);
      for (int z = 0; z < kZ; ++z) {
        const __m512 vz = load16<F>(vj, c0 + z);
        a[z] = _mm512_fmadd_ps(w0, vz, a[z]);
        b[z] = _mm512_fmadd_ps(w1, vz, b[z]);
      }
    } else {
      for (int z = 0; z < kZ; ++z) a[z] = _mm512_fmadd_ps(w0, load16<F>(vj, c0 + z), a[z]);
    }
  }
  for (int z = 0; z < kZ; ++z) _mm512_storeu_ps(acc0 + 16 * z, a[z]);
  if constexpr (kPair) {
    for (int z = 0; z < kZ; ++z) _mm512_storeu_ps(acc1 + 16 * z, b[z]);
  }
}

template <KvFormat F, bool kPair>
void weighted_sum(const float* e0, const float* e1, const uint8_t* v, size_t stride, int64_t count,
                  float* acc0, float* acc1, int64_t head_dim) {
  // chunks of 128 dims (64 for pairs), then the rest (a multiple of 16)
  constexpr int64_t kStep = kPair ? 64 : 128;
  int64_t d = 0;
  for (; d + kStep <= head_dim; d += kStep) {
    // acc1 is null without a pair: no offset may be applied to it (UBSan: pointer overflow)
    weighted_sum_chunk<F, kStep / 16, kPair>(e0, e1, v, stride, d / 16, count, acc0 + d,
                                             kPair ? acc1 + d : nullptr);
  }
  for (; d < head_dim; d += 16) {
    weighted_sum_chunk<F, 1, kPair>(e0, e1, v, stride, d / 16, count, acc0 + d,
                                    kPair ? acc1 + d : nullptr);
  }
}

template <KvFormat F>
void dots(const float* q, const uint8_t* k, size_t stride, int64_t count, int64_t head_dim,
          float* out) {
  const int64_t chunks = head_dim / 16;
  int64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    _mm256_storeu_ps(out + j, dots8<F>(q, k + static_cast<size_t>(j) * stride, stride, chunks));
  }
  if (j < count) {  // the last keys again in the lanes past the end: the same arithmetic
    const int64_t left = count - j;
    alignas(32) float tail[8];
    __m512 a[8];
    for (int r = 0; r < 8; ++r) a[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < chunks; ++i) {
      const __m512 qi = _mm512_loadu_ps(q + 16 * i);
      for (int r = 0; r < 8; ++r) {
        const uint8_t* kr = k + static_cast<size_t>(j + std::min<int64_t>(r, left - 1)) * stride;
        a[r] = _mm512_fmadd_ps(qi, load16<F>(kr, i), a[r]);
      }
    }
    __m256 s[8];
    for (int r = 0; r < 8; ++r) s[r] = halves(a[r]);
    _mm256_store_ps(tail, reduce8(s));
    std::copy(tail, tail + left, out + j);
  }
}

template <KvFormat F>
void weighted_sum_any(const float* e0, const float* e1, const uint8_t* v, size_t stride,
                      int64_t count, float* acc0, float* acc1, int64_t head_dim) {
  if (e1) return weighted_sum<F, true>(e0, e1, v, stride, count, acc0, acc1, head_dim);
  weighted_sum<F, false>(e0, nullptr, v, stride, count, acc0, nullptr, head_dim);
}

const uint8_t* bytes(const float* p) {
  return reinterpret_cast<const uint8_t*>(p);
}

}  // namespace

void attention_dots_avx512(const float* q, const float* k, int64_t stride, int64_t count,
                           int64_t head_dim, float* out) {
  dots<KvFormat::F32>(q, bytes(k), static_cast<size_t>(stride) * 4, count, head_dim, out);
}

void attention_weighted_sum_avx512(const float* e, const float* v, int64_t stride, int64_t count,
                                   float* acc, int64_t head_dim) {
  weighted_sum<KvFormat::F32, false>(e, nullptr, bytes(v), static_cast<size_t>(stride) * 4, count,
                                     acc, nullptr, head_dim);
}

void attention_weighted_sum_pair_avx512(const float* e0, const float* e1, const float* v,
                                        int64_t stride, int64_t count, float* acc0, float* acc1,
                                        int64_t head_dim) {
  weighted_sum<KvFormat::F32, true>(e0, e1, bytes(v), static_cast<size_t>(stride) * 4, count, acc0,
                                    acc1, head_dim);
}

void attention_dots_kv_avx512(KvFormat format, const float* q, const uint8_t* k, size_t stride,
                              int64_t count, int64_t head_dim, float* out) {
  switch (format) {
    case KvFormat::F32:
      return dots<KvFormat::F32>(q, k, stride, count, head_dim, out);
    case KvFormat::F16:
      return dots<KvFormat::F16>(q, k, stride, count, head_dim, out);
    case KvFormat::Q8_0:
      return dots<KvFormat::Q8_0>(q, k, stride, count, head_dim, out);
    case KvFormat::Q4_0:
      return dots<KvFormat::Q4_0>(q, k, stride, count, head_dim, out);
  }
}

void attention_weighted_sum_kv_avx512(KvFormat format, const float* e0, const float* e1,
                                      const uint8_t* v, size_t stride, int64_t count, float* acc0,
                                      float* acc1, int64_t head_dim) {
  switch (format) {
    case KvFormat::F32:
      return weighted_sum_any<KvFormat::F32>(e0, e1, v, stride, count, acc0, acc1, head_dim);
    case KvFormat::F16:
      return weighted_sum_any<KvFormat::F16>(e0, e1, v, stride, count, acc0, acc1, head_dim);
    case KvFormat::Q8_0:
      return weighted_sum_any<KvFormat::Q8_0>(e0, e1, v, stride, count, acc0, acc1, head_dim);
    case KvFormat::Q4_0:
      return weighted_sum_any<KvFormat::Q4_0>(e0, e1, v, stride, count, acc0, acc1, head_dim);
  }
}

}  // namespace boltrt::cpu::detail
