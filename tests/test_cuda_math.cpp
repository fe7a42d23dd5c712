// The scalar math the CUDA kernels run (backend/cuda/gemma4_math.h, backend/cuda/sub32_float.h),
// checked on the CPU against the CPU backend's references. Runs without a GPU and without CUDA
// in the build: these headers are plain C++ there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cuda/gemma4_math.h"
#include "backend/cuda/sub32_float.h"
#include "quant/dequantize.h"
#include "quant/fp16.h"
#include "quant/ggml_type.h"
#include "quant/quantize.h"

namespace boltrt {
namespace {

TEST(CudaMath, GeluTanhIsTheCpuReference) {
  for (float x = -12.0f; x <= 12.0f; x += 0.0137f) {
    EXPECT_FLOAT_EQ(cuda::gelu_tanh(x), cpu::gelu_exact(x)) << x;
  }
  EXPECT_FLOAT_EQ(cuda::gelu_tanh(0.0f), 0.0f);
  EXPECT_NEAR(cuda::gelu_tanh(1.0f), 0.841192f, 1e-6f);  // 0.5 (1 + tanh(0.79788 * 1.044715))
  EXPECT_NEAR(cuda::gelu_tanh(-3.0f), -0.003637f, 1e-6f);
}

TEST(CudaMath, SoftcapIsTheCpuReference) {
  std::vector<float> x;
  for (float v = -200.0f; v <= 200.0f; v += 0.71f) x.push_back(v);
  std::vector<float> expected = x;
  cpu::softcap(expected.data(), static_cast<int64_t>(expected.size()), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_FLOAT_EQ(cuda::softcap(x[i], 30.0f), expected[i]) << x[i];
  }
  EXPECT_NEAR(cuda::softcap(30.0f, 30.0f), 30.0f * std::tanh(1.0f), 1e-5f);
}

// Angles are built exactly like cpu::rope_angles (same multiplications in the same order), so
// cos/sin computed from them are bit-identical on the CPU.
TEST(CudaMath, RopeAnglesAreBitIdenticalToTheCpu) {
  std::vector<float> freq_factors(256);
  for (size_t i = 0; i < freq_factors.size(); ++i) freq_factors[i] = i < 32 ? 1.0f : 1e30f;
  for (int64_t n_rot : {64, 128, 256, 512}) {
    for (float base : {1e4f, 1e6f}) {
      for (bool with_factors : {false, true}) {
        const float* ff = with_factors ? freq_factors.data() : nullptr;
        const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
        std::vector<float> c(static_cast<size_t>(n_rot / 2)), s(c.size());
        for (int64_t pos : {0, 1, 7, 511, 4095, 131071}) {
          cpu::rope_angles(pos, n_rot, base, ff, c.data(), s.data());
          for (int i = 0; i < n_rot / 2; ++i) {
            const float angle = cuda::rope_angle(pos, i, theta_scale, ff);
            ASSERT_EQ(std::cos(angle), c[static_cast<size_t>(i)])
                << "n_rot " << n_rot << " pos " << pos << " i " << i;
            ASSERT_EQ(std::sin(angle), s[static_cast<size_t>(i)]);
          }
        }
      }
    }
  }
}

TEST(CudaMath, RopeRotateMatchesRopeNeoxWithPartialRotation) {
  const int64_t head_dim = 512, n_rot = 128, half = n_rot / 2;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(2 * head_dim));
  for (float& v : x) v = normal(rng);
  std::vector<float> expected = x, c(static_cast<size_t>(half)), s(c.size());
  cpu::rope_angles(1234, n_rot, 1e6f, nullptr, c.data(), s.data());
  cpu::rope_neox(expected.data(), 2, head_dim, n_rot, c.data(), s.data());
  const float theta_scale = std::pow(1e6f, -2.0f / static_cast<float>(n_rot));
  for (int64_t h = 0; h < 2; ++h) {
    float* v = x.data() + h * head_dim;
    for (int i = 0; i < half; ++i) {
      const float angle = cuda::rope_angle(1234, i, theta_scale, nullptr);
      cuda::rope_rotate(v[i], v[i + half], std::cos(angle), std::sin(angle));
    }
  }
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], expected[i]) << i;
  // dims past n_rot are untouched by both
  EXPECT_EQ(x[200], expected[200]);
}

// Streaming softmax in any split of the keys, merged, equals the direct softmax.
TEST(CudaMath, OnlineSoftmaxSplitsAndMergesExactly) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> scores(1000), values(1000);
  for (float& v : scores) v = normal(rng);
  for (float& v : values) v = normal(rng);
  double max = -1e30, denominator = 0, numerator = 0;
  for (float s : scores) max = std::max(max, double(s));
  for (size_t j = 0; j < scores.size(); ++j) {
    denominator += std::exp(scores[j] - max);
    numerator += std::exp(scores[j] - max) * values[j];
  }
  const double expected = numerator / denominator;
  for (int n_split : {1, 2, 7, 64}) {
    cuda::SoftmaxState merged;
    float merged_acc = 0.0f;
    const size_t per = (scores.size() + n_split - 1) / static_cast<size_t>(n_split);
    for (int split = 0; split < n_split; ++split) {
      cuda::SoftmaxState state;
      float acc = 0.0f;
      for (size_t j = split * per; j < std::min(scores.size(), (split + 1) * per); ++j) {
        float p;
        const float correction = state.add(scores[j], &p);
        acc = acc * correction + p * values[j];
      }
      float self_factor, other_factor;
      merged.merge(state, &self_factor, &other_factor);
      merged_acc = merged_acc * self_factor + acc * other_factor;
    }
    EXPECT_NEAR(merged_acc / merged.l, expected, 1e-5 * std::abs(expected) + 1e-6) << n_split;
    EXPECT_FLOAT_EQ(merged.m, static_cast<float>(max));
  }
  // tile-wise: rescale to each tile's maximum, then add the tile's weights (flash attention)
  for (size_t tile : {1, 5, 16, 1000}) {
    cuda::SoftmaxState state;
    float acc = 0.0f;
    for (size_t j0 = 0; j0 < scores.size(); j0 += tile) {
      const size_t j1 = std::min(scores.size(), j0 + tile);
      float tile_max = -INFINITY;
      for (size_t j = j0; j < j1; ++j) tile_max = std::max(tile_max, scores[j]);
      acc *= state.rescale(tile_max);
      for (size_t j = j0; j < j1; ++j) {
        const float p = std::exp(scores[j] - state.m);
        state.l += p;
        acc += p * values[j];
      }
    }
    EXPECT_NEAR(acc / state.l, expected, 1e-5 * std::abs(expected) + 1e-6) << tile;
    EXPECT_FLOAT_EQ(state.m, static_cast<float>(max));
  }
  // an empty state merges as nothing
  cuda::SoftmaxState empty, one;
  float p;
  one.add(2.0f, &p);
  float a, b;
  one.merge(empty, &a, &b);
  EXPECT_EQ(b, 0.0f);
  EXPECT_EQ(a, 1.0f);
  EXPECT_EQ(one.l, 1.0f);
}

// A prefill attention block stages exactly the union of its rows' visible keys.
TEST(CudaMath, PrefillBlockKeysAreTheUnionOfItsRows) {
  for (int64_t group : {1, 3, 4, 8}) {
    for (int64_t window : {0, 1, 5, 32, 512}) {
      for (int64_t pos0 : {0, 7, 600}) {
        const int64_t n_tokens = 37, n_rows = n_tokens * group;
        for (int64_t rows : {8, 16}) {
          for (int64_t r0 = 0; r0 < n_rows; r0 += rows) {
            int64_t first = INT64_MAX, last = -1;
            for (int64_t r = r0; r < std::min(n_rows, r0 + rows); ++r) {
              const int64_t pos = pos0 + r / group;
              first = std::min(first, cuda::first_visible_key(pos, window));
              last = std::max(last, pos);
            }
            const cuda::KeyRange keys =
                cuda::prefill_block_keys(r0, rows, n_rows, group, pos0, window);
            ASSERT_EQ(keys.first, first) << group << " " << window << " " << pos0 << " " << r0;
            ASSERT_EQ(keys.last, last) << group << " " << window << " " << pos0 << " " << r0;
          }
        }
      }
    }
  }
}

TEST(CudaMath, VisibleKeysFollowTheSlidingWindow) {
  EXPECT_EQ(cuda::first_visible_key(100, 0), 0);     // full attention
  EXPECT_EQ(cuda::first_visible_key(100, 512), 0);   // window not yet full
  EXPECT_EQ(cuda::first_visible_key(600, 512), 89);  // 600 - 512 + 1: window includes itself
  EXPECT_EQ(cuda::first_visible_key(7, 8), 0);
  EXPECT_EQ(cuda::first_visible_key(8, 8), 1);
}

template <typename Block>
void check_sub32(GgmlType type, const std::vector<uint8_t>& row, int64_t cols) {
  std::vector<float> expected(static_cast<size_t>(cols));
  dequantize_row(type, row.data(), expected.data(), cols);
  for (int64_t s = 0; s < cols / 32; ++s) {
    float y[32];
    Sub32<Block>::dequantize(row.data(), s, y);
    for (int e = 0; e < 32; ++e) ASSERT_EQ(y[e], expected[static_cast<size_t>(s * 32 + e)]);
  }
}

TEST(CudaMath, FloatSub32MatchesDequantizeRow) {
  const int64_t cols = 320;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values(static_cast<size_t>(cols));
  for (float& v : values) v = normal(rng);
  std::vector<uint8_t> f32(values.size() * 4), f16(values.size() * 2), bf16(values.size() * 2);
  std::memcpy(f32.data(), values.data(), f32.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = fp32_to_fp16(values[i]), b = fp32_to_bf16(values[i]);
    std::memcpy(f16.data() + 2 * i, &h, 2);
    std::memcpy(bf16.data() + 2 * i, &b, 2);
  }
  check_sub32<BlockF32x32>(GgmlType::F32, f32, cols);
  check_sub32<BlockF16x32>(GgmlType::F16, f16, cols);
  check_sub32<BlockBF16x32>(GgmlType::BF16, bf16, cols);
}

// MoE routing: the kernel's per-token function picks the same experts with bit-identical
// weights as cpu::route_top_k, also with ties (equal logits, ties to the lower index), k = E
// and the 26B-A4B shape (128 experts, top 8).
TEST(CudaMath, MoeRouteTopKIsTheCpuReference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  struct Shape {
    int n_expert, k;
  };
  for (Shape shape : {Shape{128, 8}, Shape{8, 2}, Shape{8, 8}, Shape{1, 1}, Shape{37, 5}}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> logits(static_cast<size_t>(shape.n_expert));
      for (float& v : logits) v = normal(rng);
      if (trial % 5 == 1) {  // ties: a few distinct values only
        for (float& v : logits) v = std::round(v / 3.0f);
      }
      if (trial % 5 == 2) std::fill(logits.begin(), logits.end(), 0.25f);              // all tied
      if (trial % 5 == 3) logits[static_cast<size_t>(trial) % logits.size()] = 80.0f;  // one-hot
      std::vector<int32_t> want_e(static_cast<size_t>(shape.k)), got_e(want_e.size(), -7);
      std::vector<float> want_w(want_e.size()), got_w(want_e.size(), -1.0f);
      cpu::route_top_k(logits.data(), shape.n_expert, shape.k, want_e.data(), want_w.data());
      cuda::moe_route_top_k(logits.data(), shape.n_expert, shape.k, got_e.data(), got_w.data());
      for (size_t j = 0; j < want_e.size(); ++j) {
        ASSERT_EQ(got_e[j], want_e[j])
            << shape.n_expert << "/" << shape.k << " trial " << trial << " pick " << j;
        ASSERT_EQ(got_w[j], want_w[j])
            << shape.n_expert << "/" << shape.k << " trial " << trial << " pick " << j;
      }
    }
  }
}

// The Q8_0 KV quantizer writes the CPU cache's bytes (quantize_row Q8_0) and q8_0_value reads
// them back as dequantize_row does, also for all-zero blocks, rounding halves and extremes.
TEST(CudaMath, Q8_0KvBlocksAreTheCpuCacheBytes) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int64_t n = 32 * 40;
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(32 + j)] = 0.0f;                  // zeros
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(64 + j)] = (j - 16) * 0.5f;       // halves
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(96 + j)] = j % 2 ? 6e4f : -6e4f;  // big
  x[128] = 1e-30f;  // tiny (f16 scale flushes)
  std::vector<uint8_t> want(row_size(GgmlType::Q8_0, n)), got(want.size(), 0xAB);
  ASSERT_EQ(want.size(), static_cast<size_t>(cuda::q8_0_row_bytes(n)));
  quantize_row(GgmlType::Q8_0, x.data(), want.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    cuda::quantize_q8_0_block(x.data() + b * 32, got.data() + b * cuda::kQ8_0Bytes);
  }
  ASSERT_EQ(got, want);
  std::vector<float> deq(static_cast<size_t>(n));
  dequantize_row(GgmlType::Q8_0, want.data(), deq.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(cuda::q8_0_value(want.data() + (i / 32) * cuda::kQ8_0Bytes, static_cast<int>(i % 32)),
              deq[static_cast<size_t>(i)])
        << i;
  }
}

}  // namespace
}  // namespace boltrt
