// fp16 / bf16 / E8M0 conversions against independent float64 references and the IEEE rules
// of quant-formats.md §0 (the goldens test compares the same functions with ggml itself).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "quant/fp16.h"

namespace boltrt {
namespace {

// Exact value of an fp16 bit pattern, computed in double.
double fp16_value(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  double v = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  if (exponent == 31) v = mantissa ? NAN : INFINITY;
  return sign ? -v : v;
}

TEST(Fp16, EveryHalfDecodesExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const double expected = fp16_value(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      // Quiet NaN with the payload kept in the top mantissa bits.
      EXPECT_EQ(float_bits(f), (h & 0x8000u) << 16 | 0x7FC00000u | (h & 0x3FFu) << 13) << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), expected) << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
    }
  }
}

// fp32 -> fp16 must pick the nearest half, ties to even mantissa, overflow to inf at 65520.
void expect_nearest(float x) {
  const uint16_t h = fp32_to_fp16(x);
  const double v = fp16_value(h);
  ASSERT_EQ(std::signbit(v), std::signbit(x)) << x;
  if (std::fabs(x) >= 65520.0f) {
    ASSERT_EQ(h & 0x7FFF, 0x7C00) << x;
    return;
  }
  const double err = std::fabs(v - x);
  for (int step : {-1, 1}) {
    const int neighbour = (h & 0x7FFF) + step;
    if (neighbour < 0 || neighbour > 0x7BFF) continue;
    const double other = std::fabs(fp16_value(static_cast<uint16_t>(neighbour)) - std::fabs(x));
    ASSERT_LE(err, other) << x;
    if (err == other) {
      ASSERT_EQ(h & 1, 0) << "tie must go to even: " << x;
    }
  }
}

TEST(Fp16, EncodeRoundsToNearestEven) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns restricted to the fp16 range and just beyond.
    const uint32_t u = (rng() & 0x8FFFFFFFu) | (static_cast<uint32_t>(rng() % 48 + 95) << 23);
    expect_nearest(float_from_bits(u));
  }
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every tie between neighbouring halves
    const double mid =
        (fp16_value(static_cast<uint16_t>(h)) + fp16_value(static_cast<uint16_t>(h + 1))) / 2;
    expect_nearest(static_cast<float>(mid));
    expect_nearest(std::nextafter(static_cast<float>(mid), 0.0f));
    expect_nearest(std::nextafter(static_cast<float>(mid), INFINITY));
  }
}

TEST(Fp16, SpecialValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24
  EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 * 2^-24 ties to even 2
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  // NaN: canonical quiet NaN keeping only the sign.
  EXPECT_EQ(fp32_to_fp16(float_from_bits(0x7FC12345u)), 0x7E00);
  EXPECT_EQ(fp32_to_fp16(float_from_bits(0xFF800001u)), 0xFE00);
}

TEST(Bf16, RoundsToNearestEvenAndQuietsNaN) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(float_from_bits(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(fp32_to_bf16(float_from_bits(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(fp32_to_bf16(float_from_bits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(fp32_to_bf16(float_from_bits(0x00008000u)), 0x0000);  // subnormal tie -> even
  EXPECT_EQ(fp32_to_bf16(float_from_bits(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to inf
  EXPECT_EQ(fp32_to_bf16(float_from_bits(0x7F800001u)), 0x7FC0);  // signalling NaN -> quiet
  EXPECT_EQ(fp32_to_bf16(float_from_bits(0xFFA12345u)), 0xFFE1);
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(float_bits(bf16_to_fp32(static_cast<uint16_t>(h))), h << 16);
  }
}

TEST(E8M0, ScalesArePowersOfTwo) {
  EXPECT_EQ(e8m0_to_fp32(127), 1.0f);
  EXPECT_EQ(e8m0_to_fp32(128), 2.0f);
  EXPECT_EQ(e8m0_to_fp32(0), std::ldexp(1.0f, -127));  // fp32 subnormal
  EXPECT_EQ(e8m0_to_fp32(254), std::ldexp(1.0f, 127));
  for (int e = 0; e < 255; ++e) {
    EXPECT_EQ(e8m0_to_fp32_half(static_cast<uint8_t>(e)), std::ldexp(1.0f, e - 128)) << e;
    EXPECT_EQ(e8m0_to_fp32(static_cast<uint8_t>(e)), std::ldexp(1.0f, e - 127)) << e;
  }
}

}  // namespace
}  // namespace boltrt
