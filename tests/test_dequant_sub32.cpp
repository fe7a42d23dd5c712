// The CUDA GEMV unpacks weights with Sub32<Block>::dequantize and, for its coalesced split, with
// WarpDecode<Block>::decode (both BOLTRT_HD). This CPU test proves that exact code: every
// 32-element sub-block of a row equals the matching slice of dequantize_row, and every lane's
// kPer elements from WarpDecode equal the Sub32 values, bit for bit, for random rows of each type
// the kernel supports.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "backend/cuda/gemv_decode.h"
#include "backend/cuda/sub32_float.h"
#include "quant/dequant_sub32.h"
#include "quant/dequantize.h"
#include "quant/fp16.h"
#include "quant/quantize.h"

namespace boltrt {
namespace {

// WarpDecode<Block> against Sub32<Block> on a row of `cols` values stored as `row`.
template <typename Block>
void check_warp_decode(const std::vector<uint8_t>& row, int64_t cols, std::string_view name) {
  constexpr int kPer = WarpDecode<Block>::kPer;
  static_assert(32 % kPer == 0);
  for (int64_t e0 = 0; e0 < cols; e0 += kPer) {
    float sub[32], lane[kPer];
    Sub32<Block>::dequantize(row.data(), e0 / 32, sub);
    WarpDecode<Block>::decode(row.data(), e0, lane);
    ASSERT_EQ(0, std::memcmp(lane, sub + e0 % 32, sizeof lane))
        << name << " cols " << cols << " element " << e0;
  }
}

template <typename Block>
void check_type(GgmlType type) {
  std::mt19937 rng(1234 + static_cast<int>(type));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t cols : {256, 2560}) {
    std::vector<float> x(static_cast<size_t>(cols));
    for (float& v : x) v = normal(rng) * (rng() % 7 == 0 ? 10.0f : 1.0f);
    std::vector<uint8_t> row(row_size(type, cols));
    quantize_row(type, x.data(), row.data(), cols);
    std::vector<float> whole(static_cast<size_t>(cols));
    dequantize_row(type, row.data(), whole.data(), cols);
    for (int64_t s = 0; s < cols / 32; ++s) {
      float sub[32];
      Sub32<Block>::dequantize(row.data(), s, sub);
      ASSERT_EQ(0, std::memcmp(sub, whole.data() + 32 * s, sizeof sub))
          << type_traits(type).name << " cols " << cols << " sub-block " << s;
    }
    if constexpr (WarpDecode<Block>::kSupported) {
      check_warp_decode<Block>(row, cols, type_traits(type).name);
    }
  }
}

TEST(WarpDecode, FloatTypesEqualSub32) {
  std::mt19937 rng(99);
  const int64_t cols = 320;
  std::vector<uint8_t> f32(4 * cols), f16(2 * cols), bf16(2 * cols);
  for (int64_t e = 0; e < cols; ++e) {
    const float v = std::normal_distribution<float>(0.0f, 3.0f)(rng);
    std::memcpy(f32.data() + 4 * e, &v, 4);
    // every 16-bit pattern class: random bits, so subnormals, infinities and NaNs occur too
    const auto h = static_cast<uint16_t>(rng()), b = static_cast<uint16_t>(rng());
    std::memcpy(f16.data() + 2 * e, &h, 2);
    std::memcpy(bf16.data() + 2 * e, &b, 2);
  }
  check_warp_decode<BlockF32x32>(f32, cols, "f32");
  check_warp_decode<BlockF16x32>(f16, cols, "f16");
  check_warp_decode<BlockBF16x32>(bf16, cols, "bf16");
}

TEST(DequantSub32, Q4_0) {
  check_type<BlockQ4_0>(GgmlType::Q4_0);
}
TEST(DequantSub32, Q8_0) {
  check_type<BlockQ8_0>(GgmlType::Q8_0);
}
TEST(DequantSub32, Q4_K) {
  check_type<BlockQ4_K>(GgmlType::Q4_K);
}
TEST(DequantSub32, Q5_K) {
  check_type<BlockQ5_K>(GgmlType::Q5_K);
}
TEST(DequantSub32, Q6_K) {
  check_type<BlockQ6_K>(GgmlType::Q6_K);
}

}  // namespace
}  // namespace boltrt
