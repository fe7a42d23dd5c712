// Hand-checked cases from quant-formats.md: the worked examples, the all-zero byte signatures
// (§9), ramp errors (§11.1), and rejection of inputs the reference has no defined result for.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/fp16.h"
#include "quant/quantize.h"
#include "quant/unpack.h"
#include "util/error.h"

namespace boltrt {
namespace {

const GgmlType kQuantized[] = {GgmlType::Q4_0,   GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q8_0,   GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                               GgmlType::Q5_K,   GgmlType::Q6_K, GgmlType::Q8_K, GgmlType::IQ4_NL,
                               GgmlType::IQ4_XS, GgmlType::MXFP4};

std::vector<uint8_t> quantize(GgmlType type, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_size(type, static_cast<int64_t>(x.size())) + 4);
  // Q8_K needs 4-byte alignment; vector storage is suitably aligned.
  quantize_row(type, x.data(), q.data(), static_cast<int64_t>(x.size()));
  q.resize(q.size() - 4);
  return q;
}

TEST(QuantWorkedExamples, Q4KScalePackingAndValues) {
  // §5.1: sc = [10,20,30,40,50,60,5,63], m = [1,2,3,4,33,17,48,0].
  BlockQ4_K b{};
  const uint8_t packed[12] = {0xCA, 0xD4, 0x1E, 0xE8, 0x81, 0x42,
                              0xC3, 0x04, 0x12, 0x1C, 0x05, 0x0F};
  std::memcpy(b.scales, packed, 12);
  const int sc[8] = {10, 20, 30, 40, 50, 60, 5, 63}, mn[8] = {1, 2, 3, 4, 33, 17, 48, 0};
  for (int j = 0; j < 8; ++j) {
    int s, m;
    k4_scale_min(j, b.scales, s, m);
    EXPECT_EQ(s, sc[j]) << j;
    EXPECT_EQ(m, mn[j]) << j;
  }
  b.d = 0x2800;
  b.dmin = 0x2400;
  b.qs[8] = 0xA7;
  b.qs[104] = 0x3B;
  float y[256];
  dequantize_row(GgmlType::Q4_K, &b, y, 256);
  EXPECT_EQ(y[8], 2.171875f);
  EXPECT_EQ(y[40], 6.21875f);
  EXPECT_EQ(y[200], 0.96875f);
  EXPECT_EQ(y[232], 5.90625f);
}

TEST(QuantWorkedExamples, Q4_0AndQ6KLayouts) {
  // §3: max-|x| element -1.0 gives d = 0.125 stored as 00 30; 0.3 -> 0.25, 0.9 -> 0.875.
  std::vector<float> x(32, 0.0f);
  x[0] = -1.0f;
  x[1] = 0.3f;
  x[17] = 0.9f;
  const auto q = quantize(GgmlType::Q4_0, x);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x30);
  float y[32];
  dequantize_row(GgmlType::Q4_0, q.data(), y, 32);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 0.25f);
  EXPECT_EQ(y[17], 0.875f);
  // §5.6: element 100 lives in the high nibble of ql[36], bits 6-7 of qh[4], scales[6].
  BlockQ6_K b{};
  b.d = 0x3C00;  // 1.0
  for (auto& s : b.scales) s = 1;
  for (auto& v : b.ql) v = 0x00;
  for (auto& v : b.qh) v = 0xAA;  // every high pair = 2, so codes are 32 (value 0)
  b.ql[36] = 0x50;                // element 100: low nibble 5
  b.qh[4] = 0xEA;                 // element 100: high pair 3
  b.scales[6] = 3;
  float z[256];
  dequantize_row(GgmlType::Q6_K, &b, z, 256);
  for (int e = 0; e < 256; ++e) {
    // Elements 4, 36 and 68 share ql/qh bytes with element 100 and must stay at code 32.
    EXPECT_EQ(z[e], e == 100 ? 3.0f * (53 - 32) : 0.0f) << e;
  }
}

TEST(QuantEdgeCases, AllZeroBlockSignatures) {
  const std::vector<float> zeros(256, 0.0f);
  auto q = quantize(GgmlType::Q4_0, zeros);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x80);  // -0.0
  for (int i = 2; i < 18; ++i) EXPECT_EQ(q[i], 0x88);
  q = quantize(GgmlType::Q5_0, zeros);
  EXPECT_EQ(q[1], 0x80);
  for (int i = 2; i < 6; ++i) EXPECT_EQ(q[i], 0xFF);
  for (int i = 6; i < 22; ++i) EXPECT_EQ(q[i], 0x00);
  for (GgmlType t :
       {GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
        GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4, GgmlType::Q8_K}) {
    q = quantize(t, zeros);
    for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(q[i], 0) << type_traits(t).name << " " << i;
  }
  q = quantize(GgmlType::IQ4_XS, zeros);
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x80);
  EXPECT_EQ(q[2], 0xAA);
  EXPECT_EQ(q[3], 0xAA);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(q[i], 0x00);
  for (int i = 8; i < 136; ++i) EXPECT_EQ(q[i], 0x88);
  q = quantize(GgmlType::IQ4_NL, zeros);  // ggml_quantize_chunk's deterministic variant
  EXPECT_EQ(q[0], 0x00);
  EXPECT_EQ(q[1], 0x00);
  for (int i = 2; i < 18; ++i) EXPECT_EQ(q[i], 0x88);
  for (GgmlType t : kQuantized) {  // and everything decodes to +-0
    q = quantize(t, zeros);
    std::vector<float> y(256);
    dequantize_row(t, q.data(), y.data(), 256);
    for (float v : y) ASSERT_EQ(v, 0.0f) << type_traits(t).name;
  }
}

// §11.1: the worst error on a 256-element ramp stays at the level the reference reaches; a
// layout bug gives errors on the order of the whole range (256). The limits are llama.cpp's own
// worst errors on this ramp (row 10 of the golden edge set, byte-identical with ours), rounded
// up: q4_K 3.89 (1.53%), q5_K 1.73, q6_K 1.61, q3_K 10.66 (4.18%), iq4_xs 10.71 (4.20%),
// q2_K 19.09 (7.49%).
TEST(QuantEdgeCases, RampErrorsStaySmall) {
  std::vector<float> x(256);
  for (int e = 0; e < 256; ++e) x[e] = static_cast<float>(e - 128);
  const struct {
    GgmlType type;
    double max_fraction;
  } limits[] = {{GgmlType::Q4_K, 0.016}, {GgmlType::Q5_K, 0.007},   {GgmlType::Q6_K, 0.007},
                {GgmlType::Q3_K, 0.042}, {GgmlType::IQ4_XS, 0.042}, {GgmlType::Q2_K, 0.076}};
  for (const auto& l : limits) {
    const auto q = quantize(l.type, x);
    std::vector<float> y(256);
    dequantize_row(l.type, q.data(), y.data(), 256);
    double worst = 0;
    for (int e = 0; e < 256; ++e) worst = std::max(worst, std::fabs(double{y[e]} - x[e]));
    EXPECT_LE(worst, l.max_fraction * 255.0) << type_traits(l.type).name;
    std::printf("ramp %-7s worst error %.4f (%.2f%% of the range)\n",
                type_traits(l.type).name.data(), worst, 100.0 * worst / 255.0);
  }
}

TEST(QuantEdgeCases, Q8_0TiesRoundAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  const auto q = quantize(GgmlType::Q8_0, x);
  EXPECT_EQ(static_cast<int8_t>(q[2 + 1]), 3);
  EXPECT_EQ(static_cast<int8_t>(q[2 + 2]), -3);
  EXPECT_EQ(static_cast<int8_t>(q[2 + 3]), 1);
}

TEST(QuantErrors, RejectsNonFiniteInputAnywhere) {
  for (GgmlType t : kQuantized) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity()}) {
      for (int pos : {0, 31, 100, 255}) {
        std::vector<float> x(256, 0.5f);
        x[static_cast<size_t>(pos)] = bad;
        EXPECT_THROW(quantize(t, x), Error) << type_traits(t).name << " at " << pos;
      }
    }
  }
}

TEST(QuantErrors, RejectsValuesThatOverflowTheFp16Scale) {
  auto with_max = [](float v) {
    std::vector<float> x(256, 0.0f);
    x[5] = v;
    return x;
  };
  EXPECT_NO_THROW(quantize(GgmlType::Q8_0, with_max(8.0e6f)));
  EXPECT_THROW(quantize(GgmlType::Q8_0, with_max(8.4e6f)), Error);
  EXPECT_NO_THROW(quantize(GgmlType::Q4_0, with_max(5.0e5f)));
  EXPECT_THROW(quantize(GgmlType::Q4_0, with_max(-5.3e5f)), Error);
  EXPECT_THROW(quantize(GgmlType::Q4_1, with_max(-7.0e4f)), Error);
  EXPECT_THROW(quantize(GgmlType::Q4_K, with_max(3.0e38f)), Error);
  try {
    quantize(GgmlType::Q4_0, with_max(-5.3e5f));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_0"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(QuantErrors, ImportanceWeights) {
  std::vector<float> x(256), qw(256, 1.0f);
  for (int i = 0; i < 256; ++i) x[static_cast<size_t>(i)] = std::cos(0.37f * static_cast<float>(i));
  std::vector<uint8_t> a(row_size(GgmlType::Q8_0, 256)), b(a.size());
  quantize_row(GgmlType::Q8_0, x.data(), a.data(), 256);
  quantize_row(GgmlType::Q8_0, x.data(), b.data(), 256, qw.data());  // Q8_0 ignores it
  EXPECT_EQ(a, b);
  std::vector<uint8_t> q(row_size(GgmlType::Q4_K, 256));
  EXPECT_NO_THROW(quantize_row(GgmlType::Q4_K, x.data(), q.data(), 256, qw.data()));
  qw[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(quantize_row(GgmlType::Q4_K, x.data(), q.data(), 256, qw.data()), Error);
  qw[17] = -1.0f;
  EXPECT_THROW(quantize_row(GgmlType::Q4_K, x.data(), q.data(), 256, qw.data()), Error);
}

TEST(QuantErrors, RejectsBadShapesAndTypes) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> q(4096);
  EXPECT_THROW(quantize_row(GgmlType::Q4_K, x.data(), q.data(), 288), Error);
  EXPECT_THROW(quantize_row(GgmlType::Q4_0, x.data(), q.data(), 33), Error);
  EXPECT_THROW(quantize_row(GgmlType::IQ2_XXS, x.data(), q.data(), 256), Error);
  EXPECT_THROW(quantize_row(static_cast<GgmlType>(4), x.data(), q.data(), 32), Error);
  EXPECT_FALSE(can_quantize(GgmlType::TQ1_0));
  EXPECT_TRUE(can_quantize(GgmlType::Q4_K));
  std::vector<float> y(256);
  EXPECT_THROW(dequantize_row(GgmlType::IQ2_XXS, q.data(), y.data(), 256), Error);
  EXPECT_THROW(dequantize_row(GgmlType::Q6_K, q.data(), y.data(), 100), Error);
}

}  // namespace
}  // namespace boltrt
