// AVX-512 level (F/BW/VL/DQ + VNNI). Quantized types use "row-lane" kernels: 16 weight rows are
// processed together, one row per 32-bit lane of a zmm register, so the per-block scales of the
// 16 rows form one vector and no horizontal sum is needed until the very end.
//
//   weights: each block's bytes of the 16 rows are loaded 16 at a time and transposed in
//            registers (load4x16), giving lane r = codes 4q..4q+3 of row r;
//   activations: the same 4 int8 codes broadcast to all lanes, so vpdpbusd adds the 4-element
//            dot product of each row in its own lane.
//
// Codes are made unsigned for vpdpbusd (u8 x s8) by adding an offset where the format is signed
// (Q4_0 +8, Q5_0 +16, Q8_0/IQ4_NL/MXFP4/IQ4_XS +128, Q6_K -32 as +32 codes); -offset *
// sum(activation codes), computed once per call, is the start value of each block's dot product. A
// lane's arithmetic does not depend on the other lanes, the batch or the thread split, so results
// are identical for any batch size, thread count and row range. Batch invariance: small batches
// of Q4_0, Q5_0, Q4_K and Q6_K go to gemv_avx512.cpp, whose kernels compute this arithmetic per
// row without the transposes (exact int32 block dots, then the same float steps in block order);
// Q8_0 to gemm_q8_0_rows (the same); the other quantized types take the lane kernel at every batch
// size. Matrices LanePacks copied (Q4_0, Q5_0, Q8_0, Q4_K, Q5_K) take the lane kernels' arithmetic
// on the copy at every batch size (the end of this file). Float weights use the x86 row kernels
// (matmul_x86_kernels.h) at every batch size.
#define BOLTRT_X86_VNNI 1
#include <cstddef>
#include <limits>
#include <type_traits>
#include <vector>

// GCC 12's AVX-512 headers build some results from _mm512_undefined_* and then warn about their
// own self-initialised vector (a known false positive); nothing here reads an undefined value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "backend/cpu/matmul_x86_kernels.h"
#include "util/error.h"

namespace {

// Register tiles only work when these short loops are fully unrolled (GCC otherwise keeps the
// per-activation accumulators in memory).
#if defined(__clang__)
#define BOLTRT_UNROLL _Pragma("unroll")
#else
#define BOLTRT_UNROLL _Pragma("GCC unroll 16")
#endif

// 16 weight rows; lanes past the last row repeat the last row (their results are not stored).
struct RowGroup {
  const uint8_t* rows[16];
  __mmask16 mask;
};

// The 32-bit word at byte_offset of each row, lane r = row r. (Hardware gathers are slow here.)
inline __m512i gather32(const RowGroup& g, size_t byte_offset) {
  alignas(64) uint32_t v[16];
  for (int r = 0; r < 16; ++r) std::memcpy(&v[r], g.rows[r] + byte_offset, 4);
  return _mm512_load_si512(v);
}

// Four consecutive words at byte_offset .. byte_offset+15 of the 16 rows, transposed:
// out[k] lane r = word k of row r. 16 loads, 12 inserts and 8 unpacks.
inline void load4x16(const RowGroup& g, size_t o, __m512i* out) {
  __m512i z[4];
  for (int k = 0; k < 4; ++k) {
    auto ld = [&](int r) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.rows[r] + o));
    };
    __m512i v = _mm512_castsi128_si512(ld(k));
    v = _mm512_inserti32x4(v, ld(k + 4), 1);
    v = _mm512_inserti32x4(v, ld(k + 8), 2);
    z[k] = _mm512_inserti32x4(v, ld(k + 12), 3);
  }
  // z[k] 128-bit lane L holds row 4L + k; after the 4x4 transposes lane L, word j of out[w] is
  // word w of row 4L + j.
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Eight consecutive words at o .. o+31 of the 16 rows, transposed: out[k] lane r = word k of
// row r; the result of load4x16 at o and o + 16 with 8 inserts, 16 unpacks, 8 lane shuffles and
// 8 blends instead of 40 shuffles. (Q6_K decode: 139 -> 103 ns per super-block of 16 rows;
// Q8_0 at batch 16: +13%; Q4_K decode measured no faster with it. A two-source vpermt2q for the
// last step was slower.)
inline void load8x16(const RowGroup& g, size_t o, __m512i* out) {
  __m512i z[8];
  for (int k = 0; k < 8; ++k) {
    auto ld = [&](int r) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.rows[r] + o));
    };
    z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(ld(k)), ld(k + 8), 1);
  }
  // z[k] 256-bit half H holds row 8H + k: an 8x8 transpose of words in each half.
  __m512i t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm512_unpacklo_epi32(z[k], z[k + 1]);
    t[k + 1] = _mm512_unpackhi_epi32(z[k], z[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm512_unpacklo_epi64(t[k], t[k + 2]);
    u[k + 1] = _mm512_unpackhi_epi64(t[k], t[k + 2]);
    u[k + 2] = _mm512_unpacklo_epi64(t[k + 1], t[k + 3]);
    u[k + 3] = _mm512_unpackhi_epi64(t[k + 1], t[k + 3]);
  }
  // u[j] 128-bit lane 2H + c holds word j + 4c of rows 8H..8H+3; u[j + 4] of rows 8H+4..8H+7.
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm512_mask_blend_epi64(
        0xcc, u[j], _mm512_shuffle_i64x2(u[j + 4], u[j + 4], _MM_SHUFFLE(2, 2, 0, 0)));
    out[j + 4] = _mm512_mask_blend_epi64(
        0xcc, _mm512_shuffle_i64x2(u[j], u[j], _MM_SHUFFLE(3, 3, 1, 1)), u[j + 4]);
  }
}

// fp16 at byte_offset of each row; reads the 4 bytes ending at byte_offset + 2 when the field is
// the last one of the block (kAtEnd) so no read goes past the block.
template <bool kAtEnd = false>
inline __m512 gather_f16(const RowGroup& g, size_t byte_offset) {
  __m512i v =
      kAtEnd ? _mm512_srli_epi32(gather32(g, byte_offset - 2), 16) : gather32(g, byte_offset);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

inline __m512 f16_lo(__m512i v) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}
inline __m512 f16_hi(__m512i v) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
}

// acc + codes . (the 4 int8 at p, broadcast): vpdpbusd with an embedded {1to16} memory operand,
// which GCC 12 does not form from _mm512_set1_epi32; a separate vpbroadcastd costs an issue slot
// per vpdpbusd in the compute loops.
inline __m512i dpbusd_bcast(__m512i acc, __m512i codes, const void* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0"
          : "+v"(acc)
          : "v"(codes), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}

inline __m512i nibble_lo(__m512i v) {
  return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}
inline __m512i nibble_hi(__m512i v) {
  return _mm512_and_si512(_mm512_srli_epi32(v, 4), _mm512_set1_epi8(0x0f));
}

// Bits 0-3 of each lane -> bytes 0-3 with 0x10 where the bit is set (Q5 fifth bits).
inline __m512i spread4_bits_to_0x10(__m512i nibble) {
  const __m512i table =
      _mm512_setr_epi32(0x00000000, 0x00000010, 0x00001000, 0x00001010, 0x00100000, 0x00100010,
                        0x00101000, 0x00101010, 0x10000000, 0x10000010, 0x10001000, 0x10001010,
                        0x10100000, 0x10100010, 0x10101000, 0x10101010);
  return _mm512_permutexvar_epi32(_mm512_and_si512(nibble, _mm512_set1_epi32(0x0f)), table);
}

inline __m512i lut16_plus128(const int8_t* values) {
  alignas(16) int8_t shifted[16];
  for (int i = 0; i < 16; ++i) shifted[i] = static_cast<int8_t>(values[i] + 128);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(shifted)));
}

// ---- legacy 32-element blocks ---------------------------------------------------------------
// Each decoder fills w[8] (lane r, dword q = unsigned codes 4q..4q+3 of row r's block), the row
// scales, and for Q4_1/Q5_1 the row mins.

struct LaneQ4_0 {
  static constexpr size_t kBytes = 18;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
  static void decode(const RowGroup& g, size_t o, __m512i* w, __m512& d, __m512&) {
    __m512i raw[4];
    load4x16(g, o + 2, raw);
    for (int q = 0; q < 4; ++q) {
      w[q] = nibble_lo(raw[q]);
      w[q + 4] = nibble_hi(raw[q]);
    }
    d = gather_f16(g, o);
  }
};

struct LaneIQ4_NL {
  static constexpr size_t kBytes = 18;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
  static void decode(const RowGroup& g, size_t o, __m512i* w, __m512& d, __m512&) {
    const __m512i lut = lut16_plus128(kIQ4NLValues);
    __m512i raw[4];
    load4x16(g, o + 2, raw);
    for (int q = 0; q < 4; ++q) {
      w[q] = _mm512_shuffle_epi8(lut, nibble_lo(raw[q]));
      w[q + 4] = _mm512_shuffle_epi8(lut, nibble_hi(raw[q]));
    }
    d = gather_f16(g, o);
  }
};

struct LaneMXFP4 {
  static constexpr size_t kBytes = 17;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
  static void decode(const RowGroup& g, size_t o, __m512i* w, __m512& d, __m512&) {
    const __m512i lut = lut16_plus128(kMXFP4Values);
    __m512i raw[4];
    load4x16(g, o + 1, raw);
    for (int q = 0; q < 4; ++q) {
      w[q] = _mm512_shuffle_epi8(lut, nibble_lo(raw[q]));
      w[q + 4] = _mm512_shuffle_epi8(lut, nibble_hi(raw[q]));
    }
    // 2^(e-128): (e-1) << 23, or the subnormals 0x00200000 << e for e < 2.
    const __m512i e = _mm512_and_si512(gather32(g, o), _mm512_set1_epi32(0xff));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 small = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
    d = _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, sub));
  }
};

struct LaneQ8_0 {
  static constexpr size_t kBytes = 34;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
  static void decode(const RowGroup& g, size_t o, __m512i* w, __m512& d, __m512&) {
    load8x16(g, o + 2, w);
    for (int q = 0; q < 8; ++q) w[q] = _mm512_xor_si512(w[q], _mm512_set1_epi8(-128));
    d = gather_f16(g, o);
  }
};

// Q5_0 / Q5_1: qh (32 bits, bit e = fifth bit of element e) at qh_at, nibbles at qs_at.
// raw: the nibble words (lane r = qs bytes 4q..4q+3 of row r), qh: lane r = row r's qh.
inline void q5_codes(const __m512i* raw, __m512i qh, __m512i* w) {
  for (int q = 0; q < 4; ++q) {
    w[q] = _mm512_or_si512(nibble_lo(raw[q]), spread4_bits_to_0x10(_mm512_srli_epi32(qh, 4 * q)));
    w[q + 4] =
        _mm512_or_si512(nibble_hi(raw[q]), spread4_bits_to_0x10(_mm512_srli_epi32(qh, 16 + 4 * q)));
  }
}
inline void decode_q5(const RowGroup& g, size_t qh_at, size_t qs_at, __m512i* w) {
  __m512i raw[4];
  load4x16(g, qs_at, raw);
  q5_codes(raw, gather32(g, qh_at), w);
}

struct LaneQ5_0 {
  static constexpr size_t kBytes = 22;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  static void decode(const RowGroup& g, size_t o, __m512i* w, __m512& d, __m512&) {
    decode_q5(g, o + 2, o + 6, w);
    d = gather_f16(g, o);
  }
};

struct LaneQ4_1 {
  static constexpr size_t kBytes = 20;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static void decode(const RowGroup& g, size_t o, __m512i* w, __m512& d, __m512& m) {
    __m512i raw[4];
    load4x16(g, o + 4, raw);
    for (int q = 0; q < 4; ++q) {
      w[q] = nibble_lo(raw[q]);
      w[q + 4] = nibble_hi(raw[q]);
    }
    const __m512i dm = gather32(g, o);
    d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
    m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));
  }
};

struct LaneQ5_1 {
  static constexpr size_t kBytes = 24;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static void decode(const RowGroup& g, size_t o, __m512i* w, __m512& d, __m512& m) {
    decode_q5(g, o + 4, o + 8, w);
    const __m512i dm = gather32(g, o);
    d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
    m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));
  }
};

// Activation block layouts: Q8_0 {d, qs} or Q8_1 {d, s, qs}.
template <bool kQ8_1>
struct ActView {
  static constexpr size_t kBytes = kQ8_1 ? 36 : 34;
  static constexpr size_t kQs = kQ8_1 ? 4 : 2;
};

// Per activation row and 32-block, converted once per call rather than once per 16-row group:
// the start value of the block's dot product, -offset * sum(activation codes) (the offset
// correction, so no subtraction per row), the fp32 scale dy and, for Q8_1, the fp32 s.
struct ActBlockTerms {
  std::vector<int32_t> start;
  std::vector<float> dy, sy;
};

template <bool kQ8_1>
void act_block_terms(const GemmTile& t, int offset, ActBlockTerms& terms) {
  using Act = ActView<kQ8_1>;
  const int64_t nblk = t.cols / 32;
  const auto n = static_cast<size_t>(t.n_act * nblk);
  terms.start.resize(n);
  terms.dy.resize(n);
  terms.sy.resize(kQ8_1 ? n : 0);
  for (int64_t b = 0; b < t.n_act; ++b) {
    for (int64_t i = 0; i < nblk; ++i) {
      const uint8_t* blk = t.a + b * t.a_stride + i * Act::kBytes;
      const auto k = static_cast<size_t>(b * nblk + i);
      const auto* qs = reinterpret_cast<const int8_t*>(blk + Act::kQs);
      int s = 0;
      for (int j = 0; j < 32; ++j) s += qs[j];
      terms.start[k] = -offset * s;
      uint16_t h;
      std::memcpy(&h, blk, 2);
      terms.dy[k] = h2f(h);
      if constexpr (kQ8_1) {
        std::memcpy(&h, blk + 2, 2);
        terms.sy[k] = h2f(h);
      }
    }
  }
}

RowGroup row_group(const GemmTile& t, int64_t r0) {
  const int64_t n = std::min<int64_t>(16, t.n_rows - r0);
  RowGroup g;
  for (int64_t r = 0; r < 16; ++r) g.rows[r] = t.w + (r0 + std::min(r, n - 1)) * t.w_stride;
  g.mask = static_cast<__mmask16>((1u << n) - 1);
  return g;
}

inline void store_rows(const GemmTile& t, int64_t b, int64_t r0, __mmask16 mask, __m512 v) {
  _mm512_mask_storeu_ps(t.y + b * t.y_stride + r0, mask, v);
}

// Bytes [o, o + kBytes) of each row of the next row group (nullptr: none), into L2 while this
// group computes. The 16 rows are 16 strided streams that the hardware prefetchers do not follow:
// without this, batch-16 Q4_K ran at ~97 GMAC/s with the weights in DRAM vs ~140 in L3. Issued from
// the compute loops, whose load ports are mostly idle. A loop over the lines actually touched:
// an unrolled fixed count of prefetches measured ~10% slower for Q6_K. (asm: GCC 12 deletes a
// loop of _mm_prefetch as side-effect free.)
template <size_t kBytes>
inline void prefetch_block(const RowGroup* next, size_t o) {
  if (next == nullptr) return;
  for (int r = 0; r < 16; ++r) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(next->rows[r] + o) & ~uintptr_t{63};
    const uintptr_t end = reinterpret_cast<uintptr_t>(next->rows[r] + o + kBytes);
    for (uintptr_t a = begin; a < end; a += 64)
      __asm__ volatile("prefetcht1 %0" : : "m"(*reinterpret_cast<const char*>(a)));
  }
}

// Decoded weights of one 16-row group are kept in a panel (a few hundred KB at most, in L2) and
// reused by every group of up to 8 activation rows: a call decodes each weight block once.
template <typename T>
T* panel_buffer(size_t n) {
  thread_local std::vector<T> panel;
  if (panel.size() < n) panel.resize(n);
  return panel.data();
}

// For each 16-row group: decode(g, panel) once, then compute<nb>(panel, r0, b0, mask, next) for
// each group of up to 8 activation rows, where next (the first call only) is the following group
// to prefetch, or nullptr.
template <typename Decode, typename Compute>
void for_groups(const GemmTile& t, Decode&& decode, Compute&& compute) {
  for (int64_t r0 = 0; r0 < t.n_rows; r0 += 16) {
    const RowGroup g = row_group(t, r0);
    const bool has_next = r0 + 16 < t.n_rows;
    RowGroup next;
    if (has_next) next = row_group(t, r0 + 16);
    decode(g);
    for (int64_t b0 = 0; b0 < t.n_act; b0 += 8) {
      const RowGroup* pf = b0 == 0 && has_next ? &next : nullptr;
      dispatch_nb(std::min<int64_t>(8, t.n_act - b0),
                  [&](auto nb) { compute(nb, r0, b0, g.mask, pf); });
    }
  }
}

struct LegacyPanel {
  __m512i w[8];
  __m512 d, m;
};

// Q4_0 rows sum their even and their odd blocks in two fma chains, added at the end (even +
// odd): at batch 1 its row kernel (gemv_avx512.cpp, legacy_step) waited on one chain of four
// dependent fmas per four blocks (72 B). Two chains, one thread, bench_matmul --batch1: 1,090 ->
// 960 us at 2560->10240 and 10240->2560; two threads up to 1.4x at 10240->2560. The lane kernel
// keeps the same two chains so that every batch size gives the same bits. Q5_0 (its step is
// bound by the decode of the fifth bits: two chains were 0.9-1.07x) and the other 32-element
// types keep one chain.
template <typename Lane>
constexpr bool kTwoChains = std::is_same_v<Lane, LaneQ4_0>;

// Where lanes32_compute finds block i's decoded weights: a panel decoded for this call
// (gemm_lanes32), or LanePacks' copy (PackedBlocks, avx512_gemm_lane_packed).
struct PanelBlocks {
  const LegacyPanel* panel;
  const LegacyPanel& operator()(int64_t i) const { return panel[i]; }
};

template <typename Lane, bool kQ8_1, int kNb, typename Blocks = PanelBlocks>
void lanes32_compute(const GemmTile& t, const Blocks& blocks, int64_t r0, int64_t b0,
                     __mmask16 mask, const ActBlockTerms& terms, const RowGroup* pf) {
  using Act = ActView<kQ8_1>;
  const int64_t nblk = t.cols / 32;
  const uint8_t* act[kNb];
  __m512 acc[kNb], odd[kNb];
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) {
    act[b] = t.a + (b0 + b) * t.a_stride;
    acc[b] = _mm512_setzero_ps();
    odd[b] = _mm512_setzero_ps();
  }
  // block i of every activation row into the chains `into`
  auto block = [&](int64_t i, __m512* into) {
    if (i % 8 == 0) prefetch_block<8 * Lane::kBytes>(pf, static_cast<size_t>(i) * Lane::kBytes);
    decltype(auto) p = blocks(i);
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) {
      const uint8_t* blk = act[b] + i * Act::kBytes;
      const auto k = static_cast<size_t>((b0 + b) * nblk + i);
      __m512i s = Lane::kOffset != 0 ? _mm512_set1_epi32(terms.start[k]) : _mm512_setzero_si512();
      // two dependent chains of 4 (exact integers: the same sum); at batch 1 eight in one chain
      // were latency-bound (Q5_0 10240->2560 one thread 1,204-1,260 -> 1,064-1,098 us)
      __m512i s1 = _mm512_setzero_si512();
      for (int q = 0; q < 4; ++q) {
        s = dpbusd_bcast(s, p.w[q], blk + Act::kQs + 4 * q);
        s1 = dpbusd_bcast(s1, p.w[q + 4], blk + Act::kQs + 16 + 4 * q);
      }
      s = _mm512_add_epi32(s, s1);
      into[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
                                _mm512_mul_ps(p.d, _mm512_set1_ps(terms.dy[k])), into[b]);
      if constexpr (Lane::kMin)
        into[b] = _mm512_fmadd_ps(p.m, _mm512_set1_ps(terms.sy[k]), into[b]);
    }
  };
  if constexpr (kTwoChains<Lane>) {
    int64_t i = 0;
    for (; i + 1 < nblk; i += 2) {
      block(i, acc);
      block(i + 1, odd);
    }
    if (i < nblk) block(i, acc);
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) acc[b] = _mm512_add_ps(acc[b], odd[b]);
  } else {
    for (int64_t i = 0; i < nblk; ++i) block(i, acc);
  }
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) store_rows(t, b0 + b, r0, mask, acc[b]);
}

template <typename Lane, bool kQ8_1>
void gemm_lanes32(const GemmTile& t) {
  thread_local ActBlockTerms terms;
  act_block_terms<kQ8_1>(t, Lane::kOffset, terms);
  const int64_t nblk = t.cols / 32;
  LegacyPanel* panel = panel_buffer<LegacyPanel>(static_cast<size_t>(nblk));
  for_groups(
      t,
      [&](const RowGroup& g) {
        for (int64_t i = 0; i < nblk; ++i) {
          LegacyPanel& p = panel[i];
          p.m = _mm512_setzero_ps();
          Lane::decode(g, static_cast<size_t>(i) * Lane::kBytes, p.w, p.d, p.m);
        }
      },
      [&](auto nb, int64_t r0, int64_t b0, __mmask16 mask, const RowGroup* pf) {
        lanes32_compute<Lane, kQ8_1, decltype(nb)::value>(t, PanelBlocks{panel}, r0, b0, mask,
                                                          terms, pf);
      });
}

// ---- Q8_0: the same bits at every batch size -------------------------------------------------
// On raw rows (matrices LanePacks did not copy), one to kQ8_0RowsMaxBatch activation
// rows (decode, short verify batches) get the lane kernel's arithmetic: per row, the block's
// exact int32 dot S_i and acc = fma(float(S_i), d_i * dy_i, acc) over the blocks in order from 0
// (lanes32_compute). Here without the 16-row transposes: a zmm holds the 32 codes of rows j and
// j + 4 (or 8 + j and 12 + j), vpdpbusd of the +128 codes against the activation block in both
// halves gives 8 partial sums per row, and a reduction tree (two unpack levels and one 128-bit
// lane shuffle) turns the 8 vectors into the 16 rows' block sums in natural order; the +128
// offset comes out as the start value -128 * sum(activation codes). On the tiny model's 256-
// column matrices one token takes 0.080 ms instead of the row kernel's 0.094.
constexpr int64_t kQ8_0RowsMaxBatch = 3;

// Sum of the 8 partials of each row, rows in natural order (see above): p[j] holds rows j | j+4
// for j < 4 and 8+(j-4) | 12+(j-4) for j >= 4, each as two 128-bit lanes of 4 partials.
inline __m512i q8_0_reduce_rows(const __m512i* p) {
  __m512i s[4], v[2];
  for (int k = 0; k < 4; ++k) {
    const __m512i a = p[2 * k], b = p[2 * k + 1];
    s[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  }
  for (int k = 0; k < 2; ++k) {
    const __m512i a = s[2 * k], b = s[2 * k + 1];
    v[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
  }
  return _mm512_add_epi32(_mm512_shuffle_i32x4(v[0], v[1], 0x88),
                          _mm512_shuffle_i32x4(v[0], v[1], 0xdd));
}

template <int kNb>
void q8_0_rows_group(const GemmTile& t, const RowGroup& g, int64_t r0, const ActBlockTerms& terms,
                     const RowGroup* pf) {
  static constexpr int kRow[8][2] = {{0, 4},  {1, 5},  {2, 6},   {3, 7},
                                     {8, 12}, {9, 13}, {10, 14}, {11, 15}};
  const int64_t nblk = t.cols / 32;
  const __m512i flip = _mm512_set1_epi8(-128);
  __m512 acc[kNb];
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) acc[b] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nblk; ++i) {
    const size_t o = static_cast<size_t>(i) * 34;
    if (i % 8 == 0) prefetch_block<8 * 34>(pf, o);
    __m512i w[8];
    for (int j = 0; j < 8; ++j) {
      const __m256i lo =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.rows[kRow[j][0]] + o + 2));
      const __m256i hi =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.rows[kRow[j][1]] + o + 2));
      w[j] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), flip);
    }
    const __m512 d = gather_f16(g, o);
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) {
      const uint8_t* blk = t.a + b * t.a_stride + o;
      const __m512i a =
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)));
      __m512i part[8];
      for (int j = 0; j < 8; ++j) part[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[j], a);
      const auto k = static_cast<size_t>(b * nblk + i);
      const __m512i sum =
          _mm512_add_epi32(q8_0_reduce_rows(part), _mm512_set1_epi32(terms.start[k]));
      acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                               _mm512_mul_ps(d, _mm512_set1_ps(terms.dy[k])), acc[b]);
    }
  }
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) store_rows(t, b, r0, g.mask, acc[b]);
}

// The next group's 16 rows are prefetched into L2 as in the lane kernels (prefetch_block): the
// hardware prefetchers do not follow 16 interleaved streams. Zen 4, one thread, batch 1:
// 2560->2048 387-392 -> 245-258 us, 2560->10240 1,654-1,770 -> 1,267-1,348, 10240->2560
// 1,219-1,226 -> 997-1,094 (two threads: within this host's noise).
void gemm_q8_0_rows(const GemmTile& t) {
  thread_local ActBlockTerms terms;
  act_block_terms<false>(t, LaneQ8_0::kOffset, terms);
  for (int64_t r0 = 0; r0 < t.n_rows; r0 += 16) {
    const RowGroup g = row_group(t, r0);
    RowGroup next;
    const RowGroup* pf = nullptr;
    if (r0 + 16 < t.n_rows) {
      next = row_group(t, r0 + 16);
      pf = &next;
    }
    if (t.n_act == 3) {
      q8_0_rows_group<3>(t, g, r0, terms, pf);
    } else if (t.n_act == 2) {
      q8_0_rows_group<2>(t, g, r0, terms, pf);
    } else {
      q8_0_rows_group<1>(t, g, r0, terms, pf);
    }
  }
}

// Q8_0 at AVX-512: every matrix and batch size gets the lane kernel's arithmetic (batch
// invariance): gemm_q8_0_rows up to kQ8_0RowsMaxBatch activation rows (decode, short verify
// batches), the lane kernel beyond. The x86 row kernel's arithmetic (gemv_avx512.cpp q8_0_row),
// which large matrices used for decode before, summed in another order than any batched kernel.
void gemm_q8_0(const GemmTile& t) {
  if (t.n_act <= kQ8_0RowsMaxBatch) return gemm_q8_0_rows(t);
  gemm_lanes32<LaneQ8_0, false>(t);
}

// ---- Q4_K / Q5_K ----------------------------------------------------------------------------
// Per super-block and row: int32 sum over the 8 sub-blocks of sc_s * (codes . q8), then
// d*dy * that - dmin*dy * sum_s m_s * bsum32_s (the mins through the Q8_K bsums).

// Per activation row and super-block, the 32-element code sums as int16 pairs for vpdpwssd:
// dwords (b0,b2), (b1,b3), (b4,b6), (b5,b7), matching the byte order of the packed mins.
void q8k_bsum32_pairs(const GemmTile& t, std::vector<int32_t>& pairs) {
  const int64_t nsb = t.cols / 256;
  pairs.resize(static_cast<size_t>(t.n_act * nsb * 4));
  for (int64_t b = 0; b < t.n_act; ++b) {
    const auto* y = reinterpret_cast<const ActQ8_K*>(t.a + b * t.a_stride);
    for (int64_t i = 0; i < nsb; ++i) {
      int32_t s[8];
      for (int k = 0; k < 8; ++k) s[k] = y[i].bsums[2 * k] + y[i].bsums[2 * k + 1];
      int32_t* p = &pairs[static_cast<size_t>((b * nsb + i) * 4)];
      auto pack = [](int32_t lo, int32_t hi) {
        return static_cast<int32_t>((static_cast<uint32_t>(lo) & 0xffff) |
                                    (static_cast<uint32_t>(hi) << 16));
      };
      p[0] = pack(s[0], s[2]);
      p[1] = pack(s[1], s[3]);
      p[2] = pack(s[4], s[6]);
      p[3] = pack(s[5], s[7]);
    }
  }
}

// Scales, mins and d / dmin of one Q4_K / Q5_K super-block of 16 rows.
struct Q45KScales {
  __m512i scale[8];  // per sub-block, one int32 per row
  __m512i min_pairs[4];
  __m512 d, dmin;
};

struct Q45KPanel {
  __m512i codes[8][8];  // [sub-block][word]
  Q45KScales s;
};

// A super-block's scales from its first four transposed words (d | dmin, then the 12 scale bytes
// as words w0, w1, w2).
inline void q45k_scales(const __m512i* head, Q45KScales& p) {
  const __m512i m6 = _mm512_set1_epi32(0x3f3f3f3f), m4 = _mm512_set1_epi32(0x0f0f0f0f),
                m2 = _mm512_set1_epi32(0x03030303), byte = _mm512_set1_epi32(0xff),
                lo16 = _mm512_set1_epi32(0x00ff00ff);
  p.d = f16_lo(head[0]);
  p.dmin = f16_hi(head[0]);
  const __m512i w0 = head[1], w1 = head[2], w2 = head[3];
  const __m512i sc_lo = _mm512_and_si512(w0, m6);
  const __m512i sc_hi =
      _mm512_or_si512(_mm512_and_si512(w2, m4),
                      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), m2), 4));
  const __m512i mn_lo = _mm512_and_si512(w1, m6);
  const __m512i mn_hi =
      _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), m4),
                      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), m2), 4));
  for (int s = 0; s < 8; ++s) {
    p.scale[s] = _mm512_and_si512(_mm512_srli_epi32(s < 4 ? sc_lo : sc_hi, 8 * (s & 3)), byte);
  }
  // Mins as int16 pairs (m0,m2), (m1,m3), (m4,m6), (m5,m7) against the bsum32 pairs.
  p.min_pairs[0] = _mm512_and_si512(mn_lo, lo16);
  p.min_pairs[1] = _mm512_and_si512(_mm512_srli_epi32(mn_lo, 8), lo16);
  p.min_pairs[2] = _mm512_and_si512(mn_hi, lo16);
  p.min_pairs[3] = _mm512_and_si512(_mm512_srli_epi32(mn_hi, 8), lo16);
}

// Codes of sub-blocks 2j (low nibbles) and 2j + 1 (high) from the 8 transposed words of the
// super-block's qs bytes 32j .. 32j + 31, with Q5_K's fifth bits from its 8 words of qh.
template <bool kFifthBit>
inline void q45k_codes(const __m512i* raw, [[maybe_unused]] const __m512i* qh, int j, __m512i* lo,
                       __m512i* hi) {
  for (int q = 0; q < 8; ++q) {
    lo[q] = nibble_lo(raw[q]);
    hi[q] = nibble_hi(raw[q]);
    if constexpr (kFifthBit) {
      const __m512i one = _mm512_set1_epi8(1);
      lo[q] = _mm512_or_si512(
          lo[q], _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[q], 2 * j), one), 4));
      hi[q] = _mm512_or_si512(
          hi[q], _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[q], 2 * j + 1), one), 4));
    }
  }
}

// isum + scale * (codes . the sub-block's 32 activation codes qy), exact in int32
inline __m512i q45k_sub_block(__m512i isum, const __m512i* codes, __m512i scale, const int8_t* qy) {
  __m512i dot = _mm512_setzero_si512();
  for (int q = 0; q < 8; ++q) dot = dpbusd_bcast(dot, codes[q], qy + 4 * q);
  return _mm512_add_epi32(isum, _mm512_mullo_epi32(dot, scale));
}

// The float steps of one super-block: acc + isum * d*dy - (mins . bsum32 pairs mp) * dmin*dy.
inline __m512 q45k_accumulate(__m512 acc, __m512i isum, const Q45KScales& p, const int32_t* mp,
                              float dy_scalar) {
  __m512i msum = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k)
    msum = _mm512_dpwssd_epi32(msum, p.min_pairs[k], _mm512_set1_epi32(mp[k]));
  const __m512 dy = _mm512_set1_ps(dy_scalar);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(p.d, dy), acc);
  return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(p.dmin, dy), acc);
}

// The panel of a row group's nsb super-blocks; load4(o, out) gives the four transposed words at
// byte o of the rows (load4x16 on raw rows, four loads from a packed copy).
template <bool kFifthBit, typename Load4>
void q45k_decode(Load4&& load4, int64_t nsb, Q45KPanel* panel) {
  constexpr size_t kBytes = kFifthBit ? 176 : 144;
  constexpr size_t kQs = kFifthBit ? 48 : 16;
  for (int64_t i = 0; i < nsb; ++i) {
    Q45KPanel& p = panel[i];
    const size_t o = static_cast<size_t>(i) * kBytes;
    __m512i head[4];
    load4(o, head);
    q45k_scales(head, p.s);
    [[maybe_unused]] __m512i qh[8];
    if constexpr (kFifthBit) {
      load4(o + 16, qh);
      load4(o + 32, qh + 4);
    }
    for (int j = 0; j < 4; ++j) {  // 64 elements: sub-blocks 2j (low nibbles) and 2j+1 (high)
      __m512i raw[8];
      load4(o + kQs + 32 * j, raw);
      load4(o + kQs + 32 * j + 16, raw + 4);
      q45k_codes<kFifthBit>(raw, qh, j, p.codes[2 * j], p.codes[2 * j + 1]);
    }
  }
}

// prefetch(i) as super-block i is computed: the next row group's bytes of it (or nothing)
template <int kNb, typename Prefetch>
void q45k_compute(const GemmTile& t, const Q45KPanel* panel, int64_t r0, int64_t b0, __mmask16 mask,
                  const int32_t* pairs, Prefetch&& prefetch) {
  const int64_t nsb = t.cols / 256;
  const ActQ8_K* act[kNb];
  __m512 acc[kNb];
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) {
    act[b] = reinterpret_cast<const ActQ8_K*>(t.a + (b0 + b) * t.a_stride);
    acc[b] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < nsb; ++i) {
    prefetch(i);
    const Q45KPanel& p = panel[i];
    __m512i isum[kNb];
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) isum[b] = _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
      BOLTRT_UNROLL
      for (int b = 0; b < kNb; ++b)
        isum[b] = q45k_sub_block(isum[b], p.codes[s], p.s.scale[s], act[b][i].qs + 32 * s);
    }
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b)
      acc[b] = q45k_accumulate(acc[b], isum[b], p.s, pairs + ((b0 + b) * nsb + i) * 4, act[b][i].d);
  }
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) store_rows(t, b0 + b, r0, mask, acc[b]);
}

template <bool kFifthBit>
void gemm_q45k(const GemmTile& t) {
  thread_local std::vector<int32_t> pairs;
  q8k_bsum32_pairs(t, pairs);
  const int64_t nsb = t.cols / 256;
  Q45KPanel* panel = panel_buffer<Q45KPanel>(static_cast<size_t>(nsb));
  for_groups(
      t,
      [&](const RowGroup& g) {
        q45k_decode<kFifthBit>([&](size_t o, __m512i* out) { load4x16(g, o, out); }, nsb, panel);
      },
      [&](auto nb, int64_t r0, int64_t b0, __mmask16 mask, const RowGroup* pf) {
        constexpr size_t kBytes = kFifthBit ? 176 : 144;
        q45k_compute<decltype(nb)::value>(t, panel, r0, b0, mask, pairs.data(), [&](int64_t i) {
          prefetch_block<kBytes>(pf, static_cast<size_t>(i) * kBytes);
        });
      });
}

// ---- Q6_K -----------------------------------------------------------------------------------
// Unsigned codes u = q6 + 32, int8 scales per 16-element group g:
// dot = d*dy * (sum_g sc_g * (u . q8)_g - 32 * sum_g sc_g * bsums[g]).

// Per activation row and super-block, bsums as int16 pairs (g, g+2) for g = 0,1,4,5,8,9,12,13.
void q8k_bsum16_pairs(const GemmTile& t, std::vector<int32_t>& pairs) {
  const int64_t nsb = t.cols / 256;
  pairs.resize(static_cast<size_t>(t.n_act * nsb * 8));
  for (int64_t b = 0; b < t.n_act; ++b) {
    const auto* y = reinterpret_cast<const ActQ8_K*>(t.a + b * t.a_stride);
    for (int64_t i = 0; i < nsb; ++i) {
      int32_t* p = &pairs[static_cast<size_t>((b * nsb + i) * 8)];
      for (int k = 0; k < 8; ++k) {
        const int g = 4 * (k / 2) + (k & 1);
        p[k] = static_cast<int32_t>(
            (static_cast<uint32_t>(y[i].bsums[g]) & 0xffff) |
            (static_cast<uint32_t>(static_cast<uint16_t>(y[i].bsums[g + 2])) << 16));
      }
    }
  }
}

// Per activation row and super-block, -(bsums[g] << shift) for the 16 groups: the Q6_K/Q3_K code
// offset (32 = 1 << 5, 4 = 1 << 2) times the group's activation sum, the start value of each
// group's dot product in q6k_compute.
void q8k_neg_bsum16(const GemmTile& t, int shift, std::vector<int32_t>& out) {
  const int64_t nsb = t.cols / 256;
  out.resize(static_cast<size_t>(t.n_act * nsb * 16));
  for (int64_t b = 0; b < t.n_act; ++b) {
    const auto* y = reinterpret_cast<const ActQ8_K*>(t.a + b * t.a_stride);
    for (int64_t i = 0; i < nsb; ++i) {
      for (int g = 0; g < 16; ++g)
        out[static_cast<size_t>((b * nsb + i) * 16 + g)] = -(int32_t{y[i].bsums[g]} * (1 << shift));
    }
  }
}

// Scale of group 4*dw + k (k = 0..3) from the dword dw of the 16 scale bytes, sign-extended.
inline __m512i scale_byte(__m512i dw, int k) {
  switch (k) {
    case 0:
      return _mm512_srai_epi32(_mm512_slli_epi32(dw, 24), 24);
    case 1:
      return _mm512_srai_epi32(_mm512_slli_epi32(dw, 16), 24);
    case 2:
      return _mm512_srai_epi32(_mm512_slli_epi32(dw, 8), 24);
    default:
      return _mm512_srai_epi32(dw, 24);
  }
}

// Also the panel of Q2_K and Q3_K (16-element groups too; see q23k_decode).
struct Q6KPanel {
  __m512i codes[8][8];     // [32-element chunk][word]; words 0-3 group 2c, 4-7 group 2c+1
  __m512i scale[16];       // per 16-element group
  __m512i scale_pairs[8];  // Q2_K only: the mins as pairs
  __m512 d;
  __m512 dmin;  // Q2_K only
};

void q6k_decode(const RowGroup& g, int64_t nsb, Q6KPanel* panel) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), two = _mm512_set1_epi8(0x03),
                bits45 = _mm512_set1_epi8(0x30);
  for (int64_t i = 0; i < nsb; ++i) {
    Q6KPanel& p = panel[i];
    const size_t o = static_cast<size_t>(i) * 210;
    __m512i scd[4];  // the 16 int8 scales as 4 words
    load4x16(g, o + 192, scd);
    p.d = gather_f16<true>(g, o + 208);
    for (int gi = 0; gi < 16; ++gi) p.scale[gi] = scale_byte(scd[gi / 4], gi % 4);
    for (int half = 0; half < 2; ++half) {
      __m512i ql0[8], ql1[8], qh[8];
      load8x16(g, o + 64 * half, ql0);
      load8x16(g, o + 64 * half + 32, ql1);
      load8x16(g, o + 128 + 32 * half, qh);
      for (int q = 0; q < 8; ++q) {
        p.codes[4 * half + 0][q] = _mm512_or_si512(
            _mm512_and_si512(ql0[q], low4), _mm512_slli_epi32(_mm512_and_si512(qh[q], two), 4));
        p.codes[4 * half + 1][q] = _mm512_or_si512(
            _mm512_and_si512(ql1[q], low4),
            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh[q], 2), two), 4));
        p.codes[4 * half + 2][q] = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi32(ql0[q], 4), low4), _mm512_and_si512(qh[q], bits45));
        p.codes[4 * half + 3][q] =
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(ql1[q], 4), low4),
                            _mm512_and_si512(_mm512_srli_epi32(qh[q], 2), bits45));
      }
    }
  }
}

// kShift >= 0: the codes' offset (Q6_K's -32, kShift 5; Q3_K's -4, kShift 2) enters each group's
// dot product as its start value sums[g] = -(bsums_g << kShift) (q8k_neg_bsum16), so the integer
// total sum_g S_g * ((u . q8)_g - (bsums_g << kShift)) needs no vpdpwssd/vpmulld of its own.
// kShift < 0 (Q2_K): sums are the bsum pairs for the mins' term sum_g scale_pairs_g * bsums_g,
// scaled by dmin*dy.
template <int kNb, size_t kBlockBytes, int kShift = 5>
void q6k_compute(const GemmTile& t, const Q6KPanel* panel, int64_t r0, int64_t b0, __mmask16 mask,
                 const int32_t* sums, const RowGroup* pf) {
  const int64_t nsb = t.cols / 256;
  const ActQ8_K* act[kNb];
  __m512 acc[kNb];
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) {
    act[b] = reinterpret_cast<const ActQ8_K*>(t.a + (b0 + b) * t.a_stride);
    acc[b] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < nsb; ++i) {
    prefetch_block<kBlockBytes>(pf, static_cast<size_t>(i) * kBlockBytes);
    const Q6KPanel& p = panel[i];
    __m512i isum[kNb];
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) isum[b] = _mm512_setzero_si512();
    for (int c = 0; c < 8; ++c) {
      BOLTRT_UNROLL
      for (int b = 0; b < kNb; ++b) {
        const int8_t* qy = act[b][i].qs + 32 * c;
        __m512i pa = _mm512_setzero_si512(), pb = _mm512_setzero_si512();
        if constexpr (kShift >= 0) {
          const int32_t* start = sums + ((b0 + b) * nsb + i) * 16 + 2 * c;
          pa = _mm512_set1_epi32(start[0]);
          pb = _mm512_set1_epi32(start[1]);
        }
        for (int q = 0; q < 4; ++q) {
          pa = dpbusd_bcast(pa, p.codes[c][q], qy + 4 * q);
          pb = dpbusd_bcast(pb, p.codes[c][q + 4], qy + 16 + 4 * q);
        }
        isum[b] =
            _mm512_add_epi32(isum[b], _mm512_add_epi32(_mm512_mullo_epi32(pa, p.scale[2 * c]),
                                                       _mm512_mullo_epi32(pb, p.scale[2 * c + 1])));
      }
    }
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) {
      const __m512 dy = _mm512_set1_ps(act[b][i].d);
      acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[b]), _mm512_mul_ps(p.d, dy), acc[b]);
      if constexpr (kShift < 0) {
        const int32_t* bp = sums + ((b0 + b) * nsb + i) * 8;
        __m512i off = _mm512_setzero_si512();
        for (int k = 0; k < 8; ++k)
          off = _mm512_dpwssd_epi32(off, p.scale_pairs[k], _mm512_set1_epi32(bp[k]));
        acc[b] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(off), _mm512_mul_ps(p.dmin, dy), acc[b]);
      }
    }
  }
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) store_rows(t, b0 + b, r0, mask, acc[b]);
}

void gemm_q6k(const GemmTile& t) {
  thread_local std::vector<int32_t> start;
  q8k_neg_bsum16(t, 5, start);
  const int64_t nsb = t.cols / 256;
  Q6KPanel* panel = panel_buffer<Q6KPanel>(static_cast<size_t>(nsb));
  for_groups(
      t, [&](const RowGroup& g) { q6k_decode(g, nsb, panel); },
      [&](auto nb, int64_t r0, int64_t b0, __mmask16 mask, const RowGroup* pf) {
        q6k_compute<decltype(nb)::value, 210>(t, panel, r0, b0, mask, start.data(), pf);
      });
}

// ---- Q2_K / Q3_K ----------------------------------------------------------------------------
// 2-bit codes (Q3_K: plus the hmask bit as bit 2) in the Q6_K panel layout: chunk 4c + j
// (elements 128c + 32j + l) takes bits 2j..2j+1 of qs[32c + l] (quant-formats.md §5.2, §5.3).
//   Q2_K: scale S_g = scales[g] & 15, min m_g = scales[g] >> 4;
//         dot = d*dy * sum_g S_g (u . q8)_g - dmin*dy * sum_g m_g bsums_g
//   Q3_K: S_g = 6-bit code - 32, u = q2 + 4 * hbit;
//         dot = d*dy * (sum_g S_g (u . q8)_g - 4 * sum_g S_g bsums_g)

template <bool kQ3>
void q23k_decode(const RowGroup& g, int64_t nsb, Q6KPanel* panel) {
  constexpr size_t kBytes = kQ3 ? 110 : 84;
  constexpr size_t kQs = kQ3 ? 32 : 16;
  const __m512i three = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1),
                byte = _mm512_set1_epi32(0xff);
  for (int64_t i = 0; i < nsb; ++i) {
    Q6KPanel& p = panel[i];
    const size_t o = static_cast<size_t>(i) * kBytes;
    __m512i scd[4];  // word k: the (unsigned) scale codes of groups 4k..4k+3
    if constexpr (kQ3) {
      __m512i w[4];  // bytes 92..107: words 1-3 are the 12 packed scale bytes
      load4x16(g, o + 92, w);
      const __m512i m4 = _mm512_set1_epi32(0x0f0f0f0f), m2 = _mm512_set1_epi32(0x03030303);
      for (int k = 0; k < 4; ++k) {
        const __m512i low = _mm512_and_si512(k < 2 ? w[1 + k] : _mm512_srli_epi32(w[k - 1], 4), m4);
        const __m512i high =
            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w[3], 2 * k), m2), 4);
        scd[k] = _mm512_or_si512(low, high);
      }
      p.d = gather_f16<true>(g, o + 108);
      p.dmin = _mm512_setzero_ps();
      for (int gi = 0; gi < 16; ++gi) {
        p.scale[gi] =
            _mm512_sub_epi32(_mm512_and_si512(_mm512_srli_epi32(scd[gi / 4], 8 * (gi % 4)), byte),
                             _mm512_set1_epi32(32));
      }
    } else {
      load4x16(g, o, scd);
      const __m512i dm = gather32(g, o + 80);
      p.d = f16_lo(dm);
      p.dmin = f16_hi(dm);
      const __m512i nib = _mm512_set1_epi32(0x0f);
      for (int gi = 0; gi < 16; ++gi)
        p.scale[gi] = _mm512_and_si512(_mm512_srli_epi32(scd[gi / 4], 8 * (gi % 4)), nib);
      // mins (high nibbles) of groups (4k, 4k+2) and (4k+1, 4k+3) as int16 pairs
      const __m512i nib16 = _mm512_set1_epi32(0x000f000f);
      for (int k = 0; k < 4; ++k) {
        p.scale_pairs[2 * k] = _mm512_and_si512(_mm512_srli_epi32(scd[k], 4), nib16);
        p.scale_pairs[2 * k + 1] = _mm512_and_si512(_mm512_srli_epi32(scd[k], 12), nib16);
      }
    }
    [[maybe_unused]] __m512i hm[8];
    if constexpr (kQ3) {
      load4x16(g, o, hm);
      load4x16(g, o + 16, hm + 4);
    }
    for (int c = 0; c < 2; ++c) {
      __m512i raw[8];
      load4x16(g, o + kQs + 32 * c, raw);
      load4x16(g, o + kQs + 32 * c + 16, raw + 4);
      for (int j = 0; j < 4; ++j) {
        for (int q = 0; q < 8; ++q) {
          __m512i u = _mm512_and_si512(_mm512_srli_epi32(raw[q], 2 * j), three);
          if constexpr (kQ3) {
            u = _mm512_or_si512(
                u,
                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hm[q], 4 * c + j), one), 2));
          }
          p.codes[4 * c + j][q] = u;
        }
      }
    }
  }
}

template <bool kQ3>
void gemm_q23k(const GemmTile& t) {
  thread_local std::vector<int32_t> sums;
  if constexpr (kQ3) {
    q8k_neg_bsum16(t, 2, sums);
  } else {
    q8k_bsum16_pairs(t, sums);
  }
  const int64_t nsb = t.cols / 256;
  Q6KPanel* panel = panel_buffer<Q6KPanel>(static_cast<size_t>(nsb));
  for_groups(
      t, [&](const RowGroup& g) { q23k_decode<kQ3>(g, nsb, panel); },
      [&](auto nb, int64_t r0, int64_t b0, __mmask16 mask, const RowGroup* pf) {
        q6k_compute<decltype(nb)::value, kQ3 ? 110 : 84, kQ3 ? 2 : -1>(t, panel, r0, b0, mask,
                                                                       sums.data(), pf);
      });
}

// ---- IQ4_XS ---------------------------------------------------------------------------------
// Codebook values + 128 per 32-element sub-block with signed scale ls - 32:
// dot = d*dy * sum_ib (ls_ib - 32) * ((K+128) . q8 - 128 * bsum32_ib).

struct IQ4XSPanel {
  __m512i codes[8][8];
  __m512i scale[8];
  __m512 d;
};

void iq4xs_decode(const RowGroup& g, int64_t nsb, IQ4XSPanel* panel) {
  const __m512i lut = lut16_plus128(kIQ4NLValues);
  for (int64_t i = 0; i < nsb; ++i) {
    IQ4XSPanel& p = panel[i];
    const size_t o = static_cast<size_t>(i) * 136;
    __m512i head[4];  // d | scales_h << 16, scales_l, (qs)
    load4x16(g, o, head);
    p.d = f16_lo(head[0]);
    const __m512i sh = _mm512_srli_epi32(head[0], 16);
    const __m512i sl = head[1];
    for (int ib = 0; ib < 8; ++ib) {
      const __m512i ls = _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi32(sl, 4 * ib), _mm512_set1_epi32(0x0f)),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(sh, 2 * ib), _mm512_set1_epi32(3)),
                            4));
      p.scale[ib] = _mm512_sub_epi32(ls, _mm512_set1_epi32(32));
      __m512i raw[4];
      load4x16(g, o + 8 + 16 * ib, raw);
      for (int q = 0; q < 4; ++q) {
        p.codes[ib][q] = _mm512_shuffle_epi8(lut, nibble_lo(raw[q]));
        p.codes[ib][q + 4] = _mm512_shuffle_epi8(lut, nibble_hi(raw[q]));
      }
    }
  }
}

template <int kNb>
void iq4xs_compute(const GemmTile& t, const IQ4XSPanel* panel, int64_t r0, int64_t b0,
                   __mmask16 mask, const int32_t* start, const RowGroup* pf) {
  const int64_t nsb = t.cols / 256;
  const ActQ8_K* act[kNb];
  __m512 acc[kNb];
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) {
    act[b] = reinterpret_cast<const ActQ8_K*>(t.a + (b0 + b) * t.a_stride);
    acc[b] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < nsb; ++i) {
    prefetch_block<136>(pf, static_cast<size_t>(i) * 136);
    const IQ4XSPanel& p = panel[i];
    __m512i isum[kNb];
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) isum[b] = _mm512_setzero_si512();
    for (int ib = 0; ib < 8; ++ib) {
      BOLTRT_UNROLL
      for (int b = 0; b < kNb; ++b) {
        const int8_t* qy = act[b][i].qs + 32 * ib;
        __m512i dot = _mm512_set1_epi32(start[((b0 + b) * nsb + i) * 8 + ib]);
        for (int q = 0; q < 8; ++q) dot = dpbusd_bcast(dot, p.codes[ib][q], qy + 4 * q);
        isum[b] = _mm512_add_epi32(isum[b], _mm512_mullo_epi32(dot, p.scale[ib]));
      }
    }
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) {
      acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[b]),
                               _mm512_mul_ps(p.d, _mm512_set1_ps(act[b][i].d)), acc[b]);
    }
  }
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) store_rows(t, b0 + b, r0, mask, acc[b]);
}

void gemm_iq4xs(const GemmTile& t) {
  thread_local std::vector<int32_t> start;  // -128 * bsum32: the +128 code offset
  const int64_t nsb = t.cols / 256;
  start.resize(static_cast<size_t>(t.n_act * nsb * 8));
  for (int64_t b = 0; b < t.n_act; ++b) {
    const auto* y = reinterpret_cast<const ActQ8_K*>(t.a + b * t.a_stride);
    for (int64_t i = 0; i < nsb; ++i) {
      for (int k = 0; k < 8; ++k) {
        start[static_cast<size_t>((b * nsb + i) * 8 + k)] =
            -128 * (y[i].bsums[2 * k] + y[i].bsums[2 * k + 1]);
      }
    }
  }
  IQ4XSPanel* panel = panel_buffer<IQ4XSPanel>(static_cast<size_t>(nsb));
  for_groups(
      t, [&](const RowGroup& g) { iq4xs_decode(g, nsb, panel); },
      [&](auto nb, int64_t r0, int64_t b0, __mmask16 mask, const RowGroup* pf) {
        iq4xs_compute<decltype(nb)::value>(t, panel, r0, b0, mask, start.data(), pf);
      });
}

// ---- F32 / F16 / BF16 ------------------------------------------------------------------------
// The x86 float kernel of the AVX-512 build (matmul_x86_kernels.h, gemm_float) at every batch
// size: one weight row against up to 4 activation rows, each activation row with its own 4
// accumulators in the same order, so every row of a batch has the bits of a one-token call
// (batch invariance). A 16-row lane kernel (one row per lane, one FMA chain per row) was 2-3x
// faster on prompts but summed in another order than the row kernel that decode needs.

// Batch invariance: where gemv_avx512.cpp has a kernel for the type it computes the lane
// kernel's arithmetic per row, and small batches go to it; the other types take the lane kernel
// at every batch size (the x86 row kernels sum in another order).
template <GemmFn kLanes, GgmlType kType>
void lanes_or_rows(const GemmTile& t) {
  static const GemmFn rows = avx512_gemv(kType);
  static const int64_t row_max = rows ? avx512_gemv_max_batch(kType) : 0;
  (t.n_act > row_max ? kLanes : rows)(t);
}

}  // namespace

namespace boltrt::cpu {

// The row kernels (gemv_avx512.cpp, or matmul_x86_kernels.h with VNNI) give every activation row
// the arithmetic of a batch-1 call, for any number of activation rows.
int64_t avx512_row_max_batch(GgmlType type) {
  return matmul_supported(type) ? std::numeric_limits<int64_t>::max() : 0;
}

GemmFn avx512_gemm(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
      return x86_gemm(type);
    case GgmlType::Q4_0:
      return &lanes_or_rows<&gemm_lanes32<LaneQ4_0, false>, GgmlType::Q4_0>;
    case GgmlType::Q5_0:
      return &lanes_or_rows<&gemm_lanes32<LaneQ5_0, false>, GgmlType::Q5_0>;
    case GgmlType::Q8_0:
      return &gemm_q8_0;
    case GgmlType::IQ4_NL:
      return &lanes_or_rows<&gemm_lanes32<LaneIQ4_NL, false>, GgmlType::IQ4_NL>;
    case GgmlType::MXFP4:
      return &lanes_or_rows<&gemm_lanes32<LaneMXFP4, false>, GgmlType::MXFP4>;
    case GgmlType::Q4_1:
      return &lanes_or_rows<&gemm_lanes32<LaneQ4_1, true>, GgmlType::Q4_1>;
    case GgmlType::Q5_1:
      return &lanes_or_rows<&gemm_lanes32<LaneQ5_1, true>, GgmlType::Q5_1>;
    case GgmlType::Q4_K:
      return &lanes_or_rows<&gemm_q45k<false>, GgmlType::Q4_K>;
    case GgmlType::Q5_K:
      return &lanes_or_rows<&gemm_q45k<true>, GgmlType::Q5_K>;
    case GgmlType::Q6_K:
      return &lanes_or_rows<&gemm_q6k, GgmlType::Q6_K>;
    case GgmlType::IQ4_XS:
      return &lanes_or_rows<&gemm_iq4xs, GgmlType::IQ4_XS>;
    case GgmlType::Q2_K:
      return &lanes_or_rows<&gemm_q23k<false>, GgmlType::Q2_K>;
    case GgmlType::Q3_K:
      return &lanes_or_rows<&gemm_q23k<true>, GgmlType::Q3_K>;
    default:
      return x86_gemm(type);
  }
}

// Matrices packed by LanePacks (matmul_internal.h): block i's panel is a few aligned loads and,
// for the 4-bit types, their low and high nibbles (and Q5_0's fifth bits): the lane decoders'
// codes without their transposes, and the lane kernel's arithmetic on them, so packed and raw
// matrices give the same bits. Decode reads each 16-row group as one sequential stream (the
// hardware prefetchers follow it) with 8 vpdpbusd per block, where the row kernels
// (gemv_avx512.cpp) shuffled each row's blocks into place.
//
// Q5_0 also prefetches 2 KB ahead in the stream: one thread, bench_matmul --cpu-time, 10240->2560
// 1,084-1,263 -> 805-966 us, 2560->10240 867-929 -> 715-723 (its heavier decode keeps fewer
// loads in flight); Q4_0 and Q8_0 were within the noise with it (1 or 4 KB alike) and go without.
template <GgmlType kType>
struct PackedBlocks {
  static constexpr size_t kCodes = lane_pack_code_bytes(kType);
  static constexpr size_t kPrefetchBytes = kType == GgmlType::Q5_0 ? 2048 : 0;
  const uint8_t* group;
  LegacyPanel operator()(int64_t i) const {
    const uint8_t* pair = group + static_cast<size_t>(i / 2) * lane_pack_pair_bytes(kType);
    const uint8_t* codes = pair + static_cast<size_t>(i % 2) * kCodes;
    if (kPrefetchBytes > 0 && i % 2 == 0) {
      // the lines of the pair kPrefetchBytes ahead (asm: GCC deletes _mm_prefetch loops)
      for (size_t o = 0; o < lane_pack_pair_bytes(kType); o += 64)
        __asm__ volatile("prefetcht0 %0" : : "m"(pair[kPrefetchBytes + o]));
    }
    LegacyPanel p;
    if constexpr (kType == GgmlType::Q8_0) {
      for (int q = 0; q < 8; ++q) p.w[q] = _mm512_load_si512(codes + 64 * q);
    } else {
      __m512i raw[4];
      for (int q = 0; q < 4; ++q) raw[q] = _mm512_load_si512(codes + 64 * q);
      if constexpr (kType == GgmlType::Q5_0) {
        q5_codes(raw, _mm512_load_si512(codes + 4 * 64), p.w);
      } else {
        for (int q = 0; q < 4; ++q) {
          p.w[q] = nibble_lo(raw[q]);
          p.w[q + 4] = nibble_hi(raw[q]);
        }
      }
    }
    p.d = _mm512_cvtph_ps(_mm256_load_si256(
        reinterpret_cast<const __m256i*>(pair + 2 * kCodes + static_cast<size_t>(i % 2) * 32)));
    p.m = _mm512_setzero_ps();
    return p;
  }
};

template <typename Lane, GgmlType kType>
void gemm_packed(const GemmTile& t) {
  thread_local ActBlockTerms terms;
  act_block_terms<false>(t, Lane::kOffset, terms);
  const size_t group_bytes = lane_pack_group_bytes(kType, t.cols);
  for (int64_t r0 = 0; r0 < t.n_rows; r0 += 16) {
    const int64_t n = std::min<int64_t>(16, t.n_rows - r0);
    const auto mask = static_cast<__mmask16>((1u << n) - 1);
    const PackedBlocks<kType> blocks{t.lanes + static_cast<size_t>(r0 / 16) * group_bytes};
    for (int64_t b0 = 0; b0 < t.n_act; b0 += 8) {
      dispatch_nb(std::min<int64_t>(8, t.n_act - b0), [&](auto nb) {
        lanes32_compute<Lane, false, decltype(nb)::value>(t, blocks, r0, b0, mask, terms, nullptr);
      });
    }
  }
}

// Q4_K / Q5_K packed: each super-block of the 16 rows is its bytes as transposed words (word w
// lane r = bytes 4w .. 4w + 3 of row r's block, matmul_internal.h), so the words load4x16 builds
// with 16 loads and 20 shuffles are one aligned load; the codes are decoded a sub-block pair at a
// time next to their dot products (the raw path decodes a whole row group into a panel first).
// The same int32 sums and the same float steps as q45k_compute: the same bits.
template <int kNb, bool kFifthBit>
void q45k_packed_compute(const GemmTile& t, const uint8_t* group, int64_t r0, int64_t b0,
                         __mmask16 mask, const int32_t* pairs) {
  constexpr size_t kWords = (kFifthBit ? 176 : 144) / 4;
  constexpr size_t kQsWord = kFifthBit ? 12 : 4;  // Q5_K: words 4..11 are its qh
  const int64_t nsb = t.cols / 256;
  const ActQ8_K* act[kNb];
  __m512 acc[kNb];
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) {
    act[b] = reinterpret_cast<const ActQ8_K*>(t.a + (b0 + b) * t.a_stride);
    acc[b] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < nsb; ++i) {
    const uint8_t* sb = group + static_cast<size_t>(i) * kWords * 64;
    // Super-block i + 2 of the stream into L1 (past the group's end it is the next group's;
    // past the matrix a prefetch does nothing). The hardware prefetchers alone kept this loop,
    // which computes at ~70 GB/s from the caches, at 72-80 % of a one-thread streaming read on
    // Zen 5; 1, 1.5 and 3 super-blocks ahead were within a few % of 2.
    for (size_t o = 0; o < kWords * 64; o += 64)
      __asm__ volatile("prefetcht0 %0" : : "m"(sb[2 * kWords * 64 + o]));
    auto word = [&](size_t w) { return _mm512_load_si512(sb + 64 * w); };
    __m512i head[4];
    for (int w = 0; w < 4; ++w) head[w] = word(static_cast<size_t>(w));
    Q45KScales p;
    q45k_scales(head, p);
    [[maybe_unused]] __m512i qh[8];
    if constexpr (kFifthBit) {
      for (int q = 0; q < 8; ++q) qh[q] = word(4 + static_cast<size_t>(q));
    }
    __m512i isum[kNb];
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b) isum[b] = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      __m512i raw[8], lo[8], hi[8];
      for (int q = 0; q < 8; ++q) raw[q] = word(kQsWord + 8 * static_cast<size_t>(j) + q);
      q45k_codes<kFifthBit>(raw, qh, j, lo, hi);
      BOLTRT_UNROLL
      for (int b = 0; b < kNb; ++b) {
        const int8_t* qy = act[b][i].qs + 64 * j;
        isum[b] = q45k_sub_block(isum[b], lo, p.scale[2 * j], qy);
        isum[b] = q45k_sub_block(isum[b], hi, p.scale[2 * j + 1], qy + 32);
      }
    }
    BOLTRT_UNROLL
    for (int b = 0; b < kNb; ++b)
      acc[b] = q45k_accumulate(acc[b], isum[b], p, pairs + ((b0 + b) * nsb + i) * 4, act[b][i].d);
  }
  BOLTRT_UNROLL
  for (int b = 0; b < kNb; ++b) store_rows(t, b0 + b, r0, mask, acc[b]);
}

// Up to kQ45KPackedDirect activation rows decode each sub-block pair next to its dot products;
// larger batches decode the group's panel once (from the packed words: no transposes) and reuse
// it for every 8 rows. One thread against the raw rows (bench_matmul --cpu-time, E4B shapes):
// Q4_K direct 1.05-1.8x at batch 1, 1.2-1.4x at 2, 1.5-2x at 4, but 0.75-0.9x at 8 and 128
// (every 8 rows decode again, and 8 rows' sums, codes and scales do not fit the registers);
// Q5_K (eight more registers of fifth bits) 2x at batch 1, 1.2x at 2, 0.85-1.05x at 4.
template <bool kFifthBit>
constexpr int64_t kQ45KPackedDirect = kFifthBit ? 2 : 4;

template <bool kFifthBit>
void gemm_q45k_packed(const GemmTile& t) {
  thread_local std::vector<int32_t> pairs;
  q8k_bsum32_pairs(t, pairs);
  const GgmlType type = kFifthBit ? GgmlType::Q5_K : GgmlType::Q4_K;
  const size_t group_bytes = lane_pack_group_bytes(type, t.cols);
  const int64_t nsb = t.cols / 256;
  constexpr size_t kSbBytes = (kFifthBit ? 176 : 144) * 16;
  const bool direct = t.n_act <= kQ45KPackedDirect<kFifthBit>;
  Q45KPanel* panel = direct ? nullptr : panel_buffer<Q45KPanel>(static_cast<size_t>(nsb));
  for (int64_t r0 = 0; r0 < t.n_rows; r0 += 16) {
    const int64_t n = std::min<int64_t>(16, t.n_rows - r0);
    const auto mask = static_cast<__mmask16>((1u << n) - 1);
    const uint8_t* group = t.lanes + static_cast<size_t>(r0 / 16) * group_bytes;
    if (!direct) {
      q45k_decode<kFifthBit>(
          [&](size_t o, __m512i* out) {
            for (size_t k = 0; k < 4; ++k) out[k] = _mm512_load_si512(group + (o / 4 + k) * 64);
          },
          nsb, panel);
    }
    // the next group's super-block i into L2 as this group's i is computed (the first 8
    // activation rows), as the raw rows' kernel does
    const uint8_t* next = r0 + 16 < t.n_rows ? group + group_bytes : nullptr;
    for (int64_t b0 = 0; b0 < t.n_act; b0 += 8) {
      const uint8_t* pf = b0 == 0 ? next : nullptr;
      dispatch_nb(std::min<int64_t>(8, t.n_act - b0), [&](auto nb) {
        constexpr int kNb = decltype(nb)::value;
        if (direct) {
          q45k_packed_compute<kNb, kFifthBit>(t, group, r0, b0, mask, pairs.data());
        } else {
          q45k_compute<kNb>(t, panel, r0, b0, mask, pairs.data(), [&](int64_t i) {
            if (pf == nullptr) return;
            const uint8_t* sb = pf + static_cast<size_t>(i) * kSbBytes;
            for (size_t o = 0; o < kSbBytes; o += 64)
              __asm__ volatile("prefetcht1 %0" : : "m"(sb[o]));
          });
        }
      });
    }
  }
}

void avx512_gemm_lane_packed(const GemmTile& t) {
  switch (t.type) {
    case GgmlType::Q4_0:
      return gemm_packed<LaneQ4_0, GgmlType::Q4_0>(t);
    case GgmlType::Q5_0:
      return gemm_packed<LaneQ5_0, GgmlType::Q5_0>(t);
    case GgmlType::Q8_0:
      return gemm_packed<LaneQ8_0, GgmlType::Q8_0>(t);
    case GgmlType::Q4_K:
      return gemm_q45k_packed<false>(t);
    case GgmlType::Q5_K:
      return gemm_q45k_packed<true>(t);
    default:
      fail("matmul: no packed lane kernel for {}", type_traits(t.type).name);
  }
}

}  // namespace boltrt::cpu
