// KV cache: storage types, the sliding-window ring, shared layers, rollback limits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/ops.h"
#include "runtime/kv_cache.h"
#include "runtime/thread_pool.h"
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

// Attention over the cache's rows in place (view(): f16 / q8_0 / q4_0 read by the kernels,
// a ring that wraps) gives the bits of attention over the same rows converted by read().
TEST(KvCache, AttentionOverTheViewEqualsAttentionOverReadRows) {
  const int64_t head_dim = 64, n_head_kv = 2, n_head = 4, row = n_head_kv * head_dim;
  const int64_t window = 40, n_tokens = 3, q_pos0 = 98;
  // layer 0 full, layer 1 a window ring of 40 - 1 + 8 = 47 cells, holding 59..100 across its end
  const std::vector<KvLayerSpec> specs = {{row, 0, -1}, {row, window, -1}};
  std::vector<float> q(static_cast<size_t>(n_tokens * n_head * head_dim));
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::cos(0.3f * static_cast<float>(i));
  ThreadPool pool(2);
  for (KvType type : {KvType::F32, KvType::F16, KvType::Q8_0, KvType::Q4_0}) {
    KvCache kv(specs, 200, 8, type);
    for (int64_t p = 0; p <= q_pos0 + n_tokens - 1; ++p) {
      for (int32_t l : {0, 1}) {
        auto k = row_for(p, row, static_cast<float>(l));
        auto v = row_for(p, row, static_cast<float>(l) + 10.0f);
        kv.write(l, p, k.data(), v.data());
      }
    }
    for (int32_t layer : {0, 1}) {
      const int64_t w = layer == 1 ? window : 0;
      const int64_t begin = layer == 1 ? q_pos0 - window + 1 : 0, end = q_pos0 + n_tokens;
      const KvCache::View view = kv.view(layer, begin, end);
      if (layer == 1) {
        EXPECT_LT(view.k.split, end - begin) << "the ring should wrap";
      }
      std::vector<float> k(static_cast<size_t>((end - begin) * row)), v(k.size());
      kv.read(layer, begin, end, k.data(), v.data());
      for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
        cpu::AttentionAccumulator in_place, converted;
        std::vector<float> want(q.size()), got(q.size());
        converted.begin(n_tokens, n_head, head_dim);
        converted.add(q.data(), q_pos0, k.data(), v.data(), end - begin, begin, n_head_kv, w,
                      0.125f, threads);
        converted.finish(want.data());
        in_place.begin(n_tokens, n_head, head_dim);
        in_place.add(q.data(), q_pos0, view.k, view.v, end - begin, begin, n_head_kv, w, 0.125f,
                     threads);
        in_place.finish(got.data());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << kv_type_name(type) << " layer " << layer << (threads ? " 2 threads" : "");
        // and each token alone (its heads in one kernel call, not grouped with other tokens)
        const int64_t q_row = n_head * head_dim;
        for (int64_t t = 0; t < n_tokens; ++t) {
          cpu::AttentionAccumulator one;
          std::vector<float> alone(static_cast<size_t>(q_row));
          one.begin(1, n_head, head_dim);
          one.add(q.data() + t * q_row, q_pos0 + t, view.k, view.v, end - begin, begin, n_head_kv,
                  w, 0.125f, threads);
          one.finish(alone.data());
          EXPECT_EQ(std::memcmp(alone.data(), got.data() + t * q_row, alone.size() * sizeof(float)),
                    0)
              << kv_type_name(type) << " layer " << layer << " token " << t;
        }
      }
    }
  }
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
