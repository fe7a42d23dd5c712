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

namespace boltrt::cpu::detail {
namespace {

// A block's f16 scale as f32 in all 16 lanes: F16C's conversion, the value fp16_to_fp32 gives
// (exact; NaN quieted the same way), without the scalar bit manipulation.
inline __m512 scale16(uint16_t d) {
  return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(d)));
}

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
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes)), scale16(d));
  } else {
    // Q4_0: block i / 2 (18 bytes: f16 d, 16 bytes of nibbles); values 0..15 are the low
    // nibbles, 16..31 the high ones; value = (nibble - 8) * d
    const uint8_t* block = row + 18 * (i >> 1);
    uint16_t d;
    std::memcpy(&d, block, 2);
    __m512i n = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2)));
    if (i & 1) n = _mm512_srli_epi32(n, 4);
    n = _mm512_sub_epi32(_mm512_and_si512(n, _mm512_set1_epi32(15)), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(n), scale16(d));
  }
}

// Bytes of a row in format F that load16(row, i) reads per i (q8_0 / q4_0: on average).
template <KvFormat F>
constexpr size_t kChunkBytes = F == KvFormat::F32    ? 64
                               : F == KvFormat::F16  ? 32
                               : F == KvFormat::Q8_0 ? 17
                                                     : 9;

// Into L2: the cache lines that chunk i of the row at `row` reaches first (over i = 0, 1, ...
// each line of the row once). Decode streams the cache from memory through a few rows at a
// time, a pattern the hardware prefetchers follow badly; the kernels prefetch the next block's
// rows while they compute on this one. (asm: GCC deletes loops of _mm_prefetch.)
template <KvFormat F>
inline void prefetch_chunk(uintptr_t row, int64_t i) {
  const uintptr_t end = row + static_cast<uintptr_t>(i + 1) * kChunkBytes<F> - 1;
  if (i == 0) __asm__ volatile("prefetcht1 (%0)" : : "r"(row));
  if (i == 0 || end / 64 != (end - kChunkBytes<F>) / 64) {
    __asm__ volatile("prefetcht1 (%0)" : : "r"(end));
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

// out[c][j] = q[c] . k_j for kQ queries and the keys k_j = k + j * stride bytes, j < count;
// head_dim = 16 * chunks. kK keys at a time, each loaded (and converted) once for all kQ
// queries. Every product is one zmm accumulator fed in chunk order and summed by halves() and
// reduce8(), whatever kQ and kK: one query alone gets the same bits as in a group. Past the last
// key, the lanes repeat it (the same arithmetic, results dropped).
template <KvFormat F, int kQ, int kK>
void dots(const float* const* q, const uint8_t* k, size_t stride, int64_t count, int64_t chunks,
          float* const* out, bool prefetch) {
  // the rows after these (the next block), `ahead` bytes on
  const uintptr_t ahead = static_cast<uintptr_t>(count) * stride;
  static_assert(kQ * kK % 8 == 0, "products are reduced 8 at a time");
  for (int64_t j = 0; j < count; j += kK) {
    const int64_t left = std::min<int64_t>(kK, count - j);
    const uint8_t* kr[kK];
    for (int r = 0; r < kK; ++r) {
      kr[r] = k + static_cast<size_t>(j + std::min<int64_t>(r, left - 1)) * stride;
    }
    __m512 a[kQ * kK];
    for (int p = 0; p < kQ * kK; ++p) a[p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < chunks; ++i) {
      __m512 kv[kK];
      for (int r = 0; r < kK; ++r) kv[r] = load16<F>(kr[r], i);
      if (prefetch) {
        for (int r = 0; r < kK; ++r) {
          prefetch_chunk<F>(reinterpret_cast<uintptr_t>(k) + (j + r) * stride + ahead, i);
        }
      }
      for (int c = 0; c < kQ; ++c) {
        const __m512 qi = _mm512_loadu_ps(q[c] + 16 * i);
        for (int r = 0; r < kK; ++r) a[c * kK + r] = _mm512_fmadd_ps(qi, kv[r], a[c * kK + r]);
      }
    }
    for (int g = 0; g < kQ * kK / 8; ++g) {  // products 8g .. 8g + 7: query p / kK, key p % kK
      __m256 s[8];
      for (int x = 0; x < 8; ++x) s[x] = halves(a[8 * g + x]);
      alignas(32) float sums[8];
      _mm256_store_ps(sums, reduce8(s));
      for (int x = 0; x < 8; ++x) {
        const int p = 8 * g + x;
        if (p % kK < left) out[p / kK][j + p % kK] = sums[x];
      }
    }
  }
}

// acc[c][d0 + d] += sum_j e[c][j] * v_j[d0 + d] for d < 16 kZ and kJ jobs over the same values
// (v_j = v + j * stride bytes): one fma chain per (job, element) in key order, whatever kJ and
// kZ, each value row read (and converted) once for all jobs.
template <KvFormat F, int kJ, int kZ>
inline void weighted_sum_chunk(const float* const* e, const uint8_t* v, size_t stride, int64_t d0,
                               int64_t count, float* const* acc, bool prefetch) {
  const uintptr_t ahead = static_cast<uintptr_t>(count) * stride;
  __m512 a[kJ][kZ];
  for (int c = 0; c < kJ; ++c) {
    for (int z = 0; z < kZ; ++z) a[c][z] = _mm512_loadu_ps(acc[c] + d0 + 16 * z);
  }
  for (int64_t j = 0; j < count; ++j) {
    const uint8_t* vj = v + static_cast<size_t>(j) * stride;
    __m512 w[kJ];
    for (int c = 0; c < kJ; ++c) w[c] = _mm512_set1_ps(e[c][j]);
    if (prefetch) {
      for (int z = 0; z < kZ; ++z) {
        prefetch_chunk<F>(reinterpret_cast<uintptr_t>(vj) + ahead, d0 / 16 + z);
      }
    }
    for (int z = 0; z < kZ; ++z) {
      const __m512 vz = load16<F>(vj, d0 / 16 + z);
      for (int c = 0; c < kJ; ++c) a[c][z] = _mm512_fmadd_ps(w[c], vz, a[c][z]);
    }
  }
  for (int c = 0; c < kJ; ++c) {
    for (int z = 0; z < kZ; ++z) _mm512_storeu_ps(acc[c] + d0 + 16 * z, a[c][z]);
  }
}

template <KvFormat F, int kJ>
void weighted_sum(const float* const* e, const uint8_t* v, size_t stride, int64_t count,
                  float* const* acc, int64_t head_dim, bool prefetch) {
  // 128 dims at a time for one job, 64 for several (8+ chains in flight, all in registers),
  // then the rest (a multiple of 16)
  constexpr int kZ = kJ == 1 ? 8 : 4;
  int64_t d = 0;
  for (; d + 16 * kZ <= head_dim; d += 16 * kZ) {
    weighted_sum_chunk<F, kJ, kZ>(e, v, stride, d, count, acc, prefetch);
  }
  for (; d < head_dim; d += 16) {
    weighted_sum_chunk<F, kJ, 1>(e, v, stride, d, count, acc, prefetch);
  }
}

template <KvFormat F>
void dots_any(const float* const* q, int n, const uint8_t* k, size_t stride, int64_t count,
              int64_t head_dim, float* const* out, bool prefetch) {
  const int64_t chunks = head_dim / 16;
  for (int c = 0; c < n;) {
    if (n - c >= 4) {
      dots<F, 4, 4>(q + c, k, stride, count, chunks, out + c, prefetch && c == 0);
      c += 4;
    } else if (n - c >= 2) {
      dots<F, 2, 8>(q + c, k, stride, count, chunks, out + c, prefetch && c == 0);
      c += 2;
    } else {
      dots<F, 1, 8>(q + c, k, stride, count, chunks, out + c, prefetch && c == 0);
      c += 1;
    }
  }
}

template <KvFormat F>
void weighted_sum_any(const float* const* e, int n, const uint8_t* v, size_t stride, int64_t count,
                      float* const* acc, int64_t head_dim, bool prefetch) {
  for (int c = 0; c < n;) {
    const int m = std::min(4, n - c);
    const bool first = prefetch && c == 0;
    if (m == 4) weighted_sum<F, 4>(e + c, v, stride, count, acc + c, head_dim, first);
    if (m == 3) weighted_sum<F, 3>(e + c, v, stride, count, acc + c, head_dim, first);
    if (m == 2) weighted_sum<F, 2>(e + c, v, stride, count, acc + c, head_dim, first);
    if (m == 1) weighted_sum<F, 1>(e + c, v, stride, count, acc + c, head_dim, first);
    c += m;
  }
}

}  // namespace

void attention_dots_avx512(KvFormat format, const float* const* q, int n, const uint8_t* k,
                           size_t stride, int64_t count, int64_t head_dim, float* const* out,
                           bool prefetch) {
  switch (format) {
    case KvFormat::F32:
      return dots_any<KvFormat::F32>(q, n, k, stride, count, head_dim, out, prefetch);
    case KvFormat::F16:
      return dots_any<KvFormat::F16>(q, n, k, stride, count, head_dim, out, prefetch);
    case KvFormat::Q8_0:
      return dots_any<KvFormat::Q8_0>(q, n, k, stride, count, head_dim, out, prefetch);
    case KvFormat::Q4_0:
      return dots_any<KvFormat::Q4_0>(q, n, k, stride, count, head_dim, out, prefetch);
  }
}

void attention_weighted_sum_avx512(KvFormat format, const float* const* e, int n, const uint8_t* v,
                                   size_t stride, int64_t count, float* const* acc,
                                   int64_t head_dim, bool prefetch) {
  switch (format) {
    case KvFormat::F32:
      return weighted_sum_any<KvFormat::F32>(e, n, v, stride, count, acc, head_dim, prefetch);
    case KvFormat::F16:
      return weighted_sum_any<KvFormat::F16>(e, n, v, stride, count, acc, head_dim, prefetch);
    case KvFormat::Q8_0:
      return weighted_sum_any<KvFormat::Q8_0>(e, n, v, stride, count, acc, head_dim, prefetch);
    case KvFormat::Q4_0:
      return weighted_sum_any<KvFormat::Q4_0>(e, n, v, stride, count, acc, head_dim, prefetch);
  }
}

}  // namespace boltrt::cpu::detail
