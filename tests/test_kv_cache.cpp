// KV cache: storage types, the sliding-window ring, shared layers, rollback limits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/kv_cache.h"
#include "util/error.h"

namespace boltrt {
namespace {

std::vector<float> row_for(int64_t pos, int64_t n, float salt) {
  std::vector<float> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[i] = std::sin(0.37f * pos + 0.11f * i + salt) * 4.0f;
  return r;
}

// layer 0: full, layer 1: window 4, layer 2: shares layer 1, layer 3: shares layer 0
std::vector<KvLayerSpec> layout(int64_t row) {
  return {{row, 0, -1}, {row, 4, -1}, {0, 4, 1}, {0, 0, 0}};
}

void fill(KvCache& kv, int64_t from, int64_t to, int64_t row) {
  for (int64_t p = from; p < to; ++p) {
    for (int32_t l : {0, 1}) {
      auto k = row_for(p, row, static_cast<float>(l));
      auto v = row_for(p, row, static_cast<float>(l) + 10.0f);
      kv.write(l, p, k.data(), v.data());
    }
  }
  kv.set_n_past(to);
}

TEST(KvCache, StoresEachTypeWithinItsPrecision) {
  const int64_t row = 64;
  for (KvType type : {KvType::F32, KvType::F16, KvType::Q8_0, KvType::Q4_0}) {
    KvCache kv(layout(row), 40, 3, type);
    fill(kv, 0, 20, row);
    std::vector<float> k(static_cast<size_t>(20 * row)), v(k.size());
    kv.read(3, 0, 20, k.data(), v.data());  // shared full layer reads layer 0
    // f16: 2^-11 relative; q8_0: half a step d = amax/127 (amax <= 4) plus the f16 rounding of
    // d itself, which moves q * d by up to 127 * d * 2^-11; q4_0: d = amax / 8 and a whole
    // step (the value of the opposite sign to the largest, -8 d, is clamped to 7 d), plus the
    // f16 rounding of d times 8
    const double step = 4.0 / 127, step4 = 4.0 / 8;
    const double tol = type == KvType::F32    ? 0.0
                       : type == KvType::F16  ? 4.0 / 2048
                       : type == KvType::Q8_0 ? step * (0.5 + 127.0 / 2048) + 1e-6
                                              : step4 * (1.0 + 8.0 / 2048) + 1e-6;
    for (int64_t p = 0; p < 20; ++p) {
      auto ek = row_for(p, row, 0.0f), ev = row_for(p, row, 10.0f);
      for (int64_t i = 0; i < row; ++i) {
        ASSERT_NEAR(k[p * row + i], ek[i], tol) << kv_type_name(type) << " pos " << p;
        ASSERT_NEAR(v[p * row + i], ev[i], tol) << kv_type_name(type) << " pos " << p;
      }
    }
  }
}

TEST(KvCache, RingKeepsWindowPlusBatchAndSharedLayersOwnNothing) {
  const int64_t row = 32;
  KvCache kv(layout(row), 1000, 3, KvType::F32);
  EXPECT_EQ(kv.cells(0), 1000);
  EXPECT_EQ(kv.cells(1), 4 - 1 + 3);
  EXPECT_EQ(kv.cells(2), kv.cells(1));
  EXPECT_EQ(kv.storage_layer(2), 1);
  EXPECT_EQ(kv.storage_layer(3), 0);
  EXPECT_EQ(kv.bytes(), static_cast<size_t>((1000 + 6) * row * 4 * 2));
  fill(kv, 0, 50, row);
  std::vector<float> k(static_cast<size_t>(6 * row)), v(k.size());
  kv.read(2, 44, 50, k.data(), v.data());
  for (int64_t p = 44; p < 50; ++p) {
    auto ek = row_for(p, row, 1.0f);
    for (int64_t i = 0; i < row; ++i) ASSERT_EQ(k[(p - 44) * row + i], ek[i]);
  }
  EXPECT_EQ(kv.oldest_held(1), 44);
  EXPECT_THROW(kv.read(1, 43, 44, k.data(), v.data()), Error);
}

TEST(KvCache, MemoryOfWindowLayersDoesNotGrowWithContext) {
  KvCache small(layout(32), 1000, 8, KvType::F16), big(layout(32), 100000, 8, KvType::F16);
  EXPECT_EQ(small.cells(1), big.cells(1));
}

TEST(KvCache, RollbackWithinBatchWorksBeyondThrows) {
  const int64_t row = 32;
  KvCache kv(layout(row), 100, 3, KvType::F32);
  fill(kv, 0, 30, row);
  kv.rollback(27);  // 3 tokens: the ring still holds positions 24..26 (window of 27)
  EXPECT_EQ(kv.n_past(), 27);
  fill(kv, 27, 30, row);  // rewrite the same positions
  std::vector<float> k(static_cast<size_t>(4 * row)), v(k.size());
  kv.read(1, 26, 30, k.data(), v.data());
  EXPECT_EQ(k[0], row_for(26, row, 1.0f)[0]);
  EXPECT_THROW(kv.rollback(20), Error);  // window of 20 (17..19) was overwritten
  EXPECT_EQ(kv.n_past(), 30);            // a failed rollback changes nothing
  kv.rollback(0);                        // always possible
  EXPECT_EQ(kv.n_past(), 0);
}

TEST(KvCache, RejectsBadLayouts) {
  EXPECT_THROW(KvCache({{32, 0, -1}, {0, 0, 5}}, 10, 1, KvType::F16), Error);
  EXPECT_THROW(KvCache({{33, 0, -1}}, 10, 1, KvType::Q8_0), Error);
  EXPECT_THROW(KvCache({{48, 0, -1}}, 10, 1, KvType::Q4_0), Error);
  EXPECT_THROW(KvCache({{32, 0, -1}}, 0, 1, KvType::F16), Error);
  KvCache kv({{32, 0, -1}}, 10, 1, KvType::F16);
  std::vector<float> r(32);
  EXPECT_THROW(kv.write(0, 10, r.data(), r.data()), Error);
  EXPECT_EQ(kv_type_from_name("q8_0"), KvType::Q8_0);
  EXPECT_EQ(kv_type_from_name("q4_0"), KvType::Q4_0);
  EXPECT_STREQ(kv_type_name(KvType::Q4_0), "q4_0");
  EXPECT_FALSE(kv_type_from_name("q4_1").has_value());
}

}  // namespace
}  // namespace boltrt
