// validate_row(): the checks of ggml_validate_row_data (quant-formats.md §9).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quantize.h"
#include "quant/validate.h"

namespace boltrt {
namespace {

std::vector<uint8_t> quantized(GgmlType type, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = std::sin(0.1f * static_cast<float>(i));
  std::vector<uint8_t> q(row_size(type, n) + 4);
  quantize_row(type, x.data(), q.data(), n);
  q.resize(row_size(type, n));
  return q;
}

void put_half(std::vector<uint8_t>& q, size_t offset, uint16_t h) {
  std::memcpy(&q[offset], &h, 2);
}

TEST(ValidateRow, AcceptsQuantizerOutput) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                     GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4, GgmlType::F16,
                     GgmlType::BF16, GgmlType::F32}) {
    const auto q = quantized(t, 512);
    EXPECT_EQ(validate_row(t, q.data(), 512), std::nullopt) << type_traits(t).name;
  }
}

TEST(ValidateRow, RejectsNonFiniteScales) {
  struct Case {
    GgmlType type;
    size_t offset;  // of the field within the second block
    const char* field;
  } cases[] = {
      {GgmlType::Q4_0, 0, "d"},    {GgmlType::Q4_1, 2, "m"},     {GgmlType::Q5_1, 0, "d"},
      {GgmlType::Q8_0, 0, "d"},    {GgmlType::Q2_K, 82, "dmin"}, {GgmlType::Q3_K, 108, "d"},
      {GgmlType::Q4_K, 2, "dmin"}, {GgmlType::Q5_K, 0, "d"},     {GgmlType::Q6_K, 208, "d"},
      {GgmlType::IQ4_XS, 0, "d"},  {GgmlType::IQ4_NL, 0, "d"},
  };
  for (const Case& c : cases) {
    for (uint16_t bad : {uint16_t{0x7C00}, uint16_t{0xFC00}, uint16_t{0x7E00}}) {
      auto q = quantized(c.type, 512);
      put_half(q, type_traits(c.type).type_size + c.offset, bad);
      const auto why = validate_row(c.type, q.data(), 512);
      ASSERT_TRUE(why.has_value()) << type_traits(c.type).name;
      EXPECT_EQ(*why,
                std::string("block 1: scale ") + c.field + (bad == 0x7E00 ? " is NaN" : " is inf"))
          << type_traits(c.type).name;
    }
  }
  auto mx = quantized(GgmlType::MXFP4, 64);
  mx[17] = 0xFF;
  EXPECT_EQ(validate_row(GgmlType::MXFP4, mx.data(), 64), "block 1: E8M0 scale is 0xFF (NaN)");
}

TEST(ValidateRow, RejectsNonFiniteFloats) {
  std::vector<float> f(8, 1.0f);
  f[5] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(validate_row(GgmlType::F32, f.data(), 8), "element 5: f32 inf");
  f[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(validate_row(GgmlType::F32, f.data(), 8), "element 5: f32 NaN");
  std::vector<uint16_t> h(8, 0x3C00);
  h[3] = 0x7C01;
  EXPECT_EQ(validate_row(GgmlType::F16, h.data(), 8), "element 3: f16 NaN");
  h[3] = 0x7F80;  // a finite f16, but bf16 inf
  EXPECT_EQ(validate_row(GgmlType::F16, h.data(), 8), "element 3: f16 NaN");
  EXPECT_EQ(validate_row(GgmlType::BF16, h.data(), 8), "element 3: bf16 inf");
  EXPECT_TRUE(validate_row(GgmlType::Q4_K, h.data(), 100).has_value());  // bad length
}

}  // namespace
}  // namespace boltrt
