// The CUDA GEMV unpacks weights with Sub32<Block>::dequantize (BOLTRT_HD). This CPU test proves
// that exact code: every 32-element sub-block of a row equals the matching slice of
// dequantize_row, bit for bit, for random rows of each type the kernel supports.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "quant/dequant_sub32.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace boltrt {
namespace {

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
  }
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
