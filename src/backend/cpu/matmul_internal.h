// Private interface between the matmul driver (matmul.cpp) and its per-ISA kernels.
//
// A matmul is split into tiles: weight rows [0, n_rows) of one weight matrix against activation
// rows [0, n_act) that were already converted to the weight type's activation format
// (activation_format()). Each ISA provides one tile function per weight type; the driver hands
// each thread a contiguous range of weight rows and lets the kernel tile over activations.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backend/cpu/matmul.h"
#include "quant/blocks.h"
#include "quant/ggml_type.h"

namespace boltrt::cpu {

// What the f32 activations become before the dot products (ggml's vec_dot_type). F16 and BF16
// activations are rounded to that format but kept as f32 values (exact), which the kernels can
// use without converting again for every weight row.
enum class ActFormat { F32, F16, BF16, Q8_0, Q8_1, Q8_K };

// Activation blocks. Q8_0 and Q8_1 are quantized the way ggml's x86 CPU backend does it
// (scale 127/amax, round to nearest even); Q8_K with ggml's reference quantizer.
using ActQ8_0 = BlockQ8_0;
using ActQ8_1 = BlockQ8_1;  // s = fp16(d * sum(qs)), d the fp32 scale
using ActQ8_K = BlockQ8_K;  // bsums: sums of qs over each 16-element group

// Weight format and activation format of one matmul, or nullopt-like F32 for unsupported types.
bool matmul_supported(GgmlType type);
ActFormat activation_format(GgmlType type);
size_t activation_row_bytes(ActFormat format, int64_t cols);
// Converts one activation row of n floats (n a multiple of the format's block size).
void convert_activation_row(ActFormat format, const float* x, void* dst, int64_t n);

// One tile of work: y[b * y_stride + r] = W[r] . A[b] for r < n_rows, b < n_act.
struct GemmTile {
  GgmlType type = GgmlType::F32;
  int64_t cols = 0;
  const uint8_t* w = nullptr;  // first weight row
  size_t w_stride = 0;         // bytes between weight rows
  int64_t n_rows = 0;
  const uint8_t* a = nullptr;  // first converted activation row
  size_t a_stride = 0;         // bytes between activation rows
  int64_t n_act = 0;
  float* y = nullptr;
  int64_t y_stride = 0;  // floats between output rows (one per activation row)
  // Bytes of the whole weight matrix the tile belongs to: whether it stays in the caches
  // between calls (a kernel may prefetch only what comes from memory).
  double matrix_bytes = 0;
  // The tile's first 16-row group in LanePacks' layout (lane_packable types at AVX-512), or null.
  const uint8_t* lanes = nullptr;
};

// LanePacks' layouts for the AVX-512 lane kernels, as compact as the file's blocks, 64-byte
// aligned, per 16-row group:
// - Q4_0, Q5_0, Q8_0: the 32-column blocks in pairs (2p, 2p + 1), each pair 64-byte aligned:
//   block 2p's codes (and fifth bits), block 2p + 1's, then the 16 rows' f16 scales d of 2p and
//   of 2p + 1 (32 bytes each). Codes are zmm words, word q lane r = 4 code bytes of row r:
//     Q4_0: 4 words of the file's qs bytes 4q..4q+3 (elements 4q..4q+3 in the low nibbles,
//           4q+16..4q+19 in the high ones): 256 bytes;
//     Q5_0: those 4 words, then one word of the rows' 32-bit qh: 320 bytes;
//     Q8_0: 8 words of codes 4q..4q+3 + 128 (unsigned, for vpdpbusd): 512 bytes.
//   A group of an odd number of blocks ends with a half-used pair.
// - Q4_K, Q5_K: per 256-column super-block, the file's block bytes as zmm words, word w lane r =
//   bytes 4w..4w+3 of row r's block (36 words for Q4_K, 44 for Q5_K: 2,304 / 2,816 bytes).
constexpr bool lane_packable(GgmlType type) {
  return type == GgmlType::Q4_0 || type == GgmlType::Q5_0 || type == GgmlType::Q8_0 ||
         type == GgmlType::Q4_K || type == GgmlType::Q5_K;
}
// the K-quant layout: whole blocks as transposed words
constexpr bool lane_pack_words(GgmlType type) {
  return type == GgmlType::Q4_K || type == GgmlType::Q5_K;
}
constexpr size_t lane_pack_code_bytes(GgmlType type) {
  return type == GgmlType::Q8_0 ? 512 : type == GgmlType::Q5_0 ? 320 : 256;
}
constexpr size_t lane_pack_pair_bytes(GgmlType type) {
  return 2 * (lane_pack_code_bytes(type) + 16 * 2);
}
inline size_t lane_pack_group_bytes(GgmlType type, int64_t cols) {
  if (lane_pack_words(type)) {
    return static_cast<size_t>(cols / 256) * (type == GgmlType::Q5_K ? 176 : 144) * 16;
  }
  return static_cast<size_t>((cols / 32 + 1) / 2) * lane_pack_pair_bytes(type);
}
// Tiles with GemmTile::lanes set (matmul_avx512.cpp): the lane kernel's arithmetic, on the
// packed copy, at every batch size.
void avx512_gemm_lane_packed(const GemmTile& tile);
using GemmFn = void (*)(const GemmTile& tile);

// The tile function for `type` at this level, or nullptr where the level has no kernel for it
// (the driver then falls back to a lower level).
GemmFn scalar_gemm(GgmlType type);
GemmFn avx2_gemm(GgmlType type);
GemmFn avx512_gemm(GgmlType type);
GemmFn neon_gemm(GgmlType type);          // aarch64 only
GemmFn neon_dotprod_gemm(GgmlType type);  // aarch64 only, CPUs with HWCAP_ASIMDDP

// Activation conversion of one level; every level produces convert_activation_row's bytes.
using ConvertFn = void (*)(ActFormat format, const float* x, void* dst, int64_t n);
ConvertFn activation_converter(SimdLevel level);
void neon_convert_activation_row(ActFormat format, const float* x, void* dst,
                                 int64_t n);  // aarch64 only
// AVX-512 matrix-vector kernels for small batches (gemv_avx512.cpp), or nullptr: every activation
// row gets exactly the arithmetic of the 16-row lane kernels (bit-identical results). They are
// used up to avx512_gemv_max_batch(type) activation rows; larger batches go to the lane kernels.
GemmFn avx512_gemv(GgmlType type);
int64_t avx512_gemv_max_batch(GgmlType type);
// At AVX-512, batches up to this many activation rows give every row bit for bit the result of a
// batch-1 call: every supported type at every batch size now (batch invariance), 0 otherwise.
int64_t avx512_row_max_batch(GgmlType type);
// convert_activation_row(ActFormat::Q8_K, ...) with AVX-512, bit-identical to it.
void avx512_quantize_act_q8_k(const float* x, void* dst, int64_t n);
// convert_activation_row(ActFormat::Q8_0, ...) with AVX-512, bit-identical to it.
void avx512_quantize_act_q8_0(const float* x, void* dst, int64_t n);

// The scalar reference dot product of one weight row with one converted activation row.
float scalar_vec_dot(GgmlType type, int64_t cols, const void* w_row, const void* a_row);

// Calls fn(std::integral_constant<int, nb>{}) for nb in 2..8 (anything else as 1): the SIMD
// kernels unroll over a compile-time number of activation rows.
template <typename Fn>
void dispatch_nb(int64_t nb, Fn&& fn) {
  switch (nb) {
    case 8:
      fn(std::integral_constant<int, 8>{});
      break;
    case 7:
      fn(std::integral_constant<int, 7>{});
      break;
    case 6:
      fn(std::integral_constant<int, 6>{});
      break;
    case 5:
      fn(std::integral_constant<int, 5>{});
      break;
    case 4:
      fn(std::integral_constant<int, 4>{});
      break;
    case 3:
      fn(std::integral_constant<int, 3>{});
      break;
    case 2:
      fn(std::integral_constant<int, 2>{});
      break;
    default:
      fn(std::integral_constant<int, 1>{});
      break;
  }
}

}  // namespace boltrt::cpu
