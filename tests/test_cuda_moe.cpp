// The mixture-of-experts kernels (kernels/moe_route.cu, gemv_experts.cu, moe_group.cu,
// moe_combine.cu) against CPU references: routing against cpu::route_top_k (26B-A4B: 128
// experts, top 8), the expert GEMV over stacked quantized experts against float64 dot products
// of the dequantized rows (shared and per-pair inputs, per-expert scales, the second half of a
// merged gate_up stack), grouping the pairs by expert (a permutation; the GEMV unchanged by
// it), the weighted combination against a direct sum. Skips without a device
// (tests/support/cuda_skip.h).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/ops.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "support/cuda_buffers.h"
#include "support/cuda_skip.h"
#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#include "gemv_quant.cuh"
#include "ops.cuh"
#endif

namespace boltrt {
namespace {

class CudaMoe : public ::testing::Test {
 protected:
  void SetUp() override { BOLTRT_SKIP_WITHOUT_CUDA_DEVICE(); }
};

#if defined(BOLTRT_HAVE_CUDA)

std::vector<float> random_vector(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

using test::from_device;
using test::to_device;

#endif

TEST_F(CudaMoe, RouteMatchesCpuRouteTopK) {
#if defined(BOLTRT_HAVE_CUDA)
  struct Shape {
    int n_expert, k;
  };
  for (Shape shape : {Shape{128, 8}, Shape{8, 2}, Shape{8, 8}}) {
    const int64_t n = 300;  // several thread blocks of 64 tokens
    auto logits = random_vector(static_cast<size_t>(n * shape.n_expert), 7, 3.0f);
    for (int64_t i = 0; i < 4 * shape.n_expert; ++i) {  // tied rows: ties to the lower index
      logits[static_cast<size_t>(i)] = std::round(logits[static_cast<size_t>(i)]);
    }
    auto dl = to_device(logits);
    cuda::DeviceBuffer ds(static_cast<size_t>(n * shape.k) * 4), dw(ds.size());
    ASSERT_EQ(kernels::launch_moe_route(static_cast<const float*>(dl.data()), n, shape.n_expert,
                                        shape.k, static_cast<int32_t*>(ds.data()),
                                        static_cast<float*>(dw.data()), nullptr),
              cudaSuccess);
    const auto sel = from_device<int32_t>(ds, static_cast<size_t>(n * shape.k));
    const auto w = from_device<float>(dw, static_cast<size_t>(n * shape.k));
    std::vector<int32_t> want_e(static_cast<size_t>(shape.k));
    std::vector<float> want_w(want_e.size());
    for (int64_t t = 0; t < n; ++t) {
      cpu::route_top_k(logits.data() + t * shape.n_expert, shape.n_expert, shape.k, want_e.data(),
                       want_w.data());
      for (int j = 0; j < shape.k; ++j) {
        const size_t i = static_cast<size_t>(t * shape.k + j);
        // expf on the device may differ from the host's in the last ulp
        ASSERT_EQ(sel[i], want_e[static_cast<size_t>(j)]) << "token " << t << " pick " << j;
        ASSERT_NEAR(w[i], want_w[static_cast<size_t>(j)], 1e-6f) << "token " << t << " pick " << j;
      }
    }
  }
  EXPECT_EQ(kernels::launch_moe_route(nullptr, 1, 4, 5, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
#endif
}

TEST_F(CudaMoe, ExpertGemvMatchesFloat64Reference) {
#if defined(BOLTRT_HAVE_CUDA)
  std::mt19937 rng(3);
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_0,
                        GgmlType::F16, GgmlType::F32}) {
    const int64_t n_expert = 6, rows = 2 * 37, cols = 256, n_tokens = 5;
    const int k = 3;
    const size_t stride = row_size(type, cols);
    const size_t expert_stride = stride * static_cast<size_t>(rows);
    std::vector<uint8_t> w(expert_stride * static_cast<size_t>(n_expert));
    std::vector<float> deq(static_cast<size_t>(n_expert * rows * cols));
    auto values = random_vector(deq.size(), 11);
    for (int64_t r = 0; r < n_expert * rows; ++r) {
      quantize_row(type, values.data() + r * cols, w.data() + static_cast<size_t>(r) * stride,
                   cols);
      dequantize_row(type, w.data() + static_cast<size_t>(r) * stride, deq.data() + r * cols, cols);
    }
    std::vector<int32_t> selected(static_cast<size_t>(n_tokens * k));
    for (int32_t& e : selected) e = static_cast<int32_t>(rng() % n_expert);
    selected[0] = static_cast<int32_t>(n_expert - 1);  // the last expert's slice
    auto scale = random_vector(static_cast<size_t>(n_expert), 13);
    auto dw = to_device(w);
    auto dsel = to_device(selected);
    auto dscale = to_device(scale);
    // shared input (one row per token, x_pairs_per_row = k) and per-pair input (1)
    for (int per_row : {k, 1}) {
      for (bool scaled : {false, true}) {
        for (int64_t row0 : {int64_t{0}, rows / 2}) {  // the up half of a merged stack
          const int64_t n_rows = rows - row0;
          const int64_t pairs = n_tokens * k;
          auto x = random_vector(static_cast<size_t>(pairs / per_row * cols), 17);
          auto dx = to_device(x);
          cuda::DeviceBuffer dy(static_cast<size_t>(pairs * n_rows) * 4);
          ASSERT_EQ(kernels::launch_gemv_experts(
                        static_cast<uint32_t>(type),
                        static_cast<const uint8_t*>(dw.data()) + static_cast<size_t>(row0) * stride,
                        n_rows, cols, stride, expert_stride, static_cast<int32_t*>(dsel.data()),
                        pairs, static_cast<float*>(dx.data()), per_row,
                        scaled ? static_cast<float*>(dscale.data()) : nullptr,
                        static_cast<float*>(dy.data()), nullptr),
                    cudaSuccess);
          const auto y = from_device<float>(dy, static_cast<size_t>(pairs * n_rows));
          for (int64_t p = 0; p < pairs; ++p) {
            const int32_t e = selected[static_cast<size_t>(p)];
            for (int64_t r = 0; r < n_rows; ++r) {
              double exact = 0, magnitude = 0;
              const float* wr = deq.data() + (e * rows + row0 + r) * cols;
              const float* xr = x.data() + (p / per_row) * cols;
              for (int64_t c = 0; c < cols; ++c) {
                exact += double(wr[c]) * xr[c];
                magnitude += std::fabs(double(wr[c]) * xr[c]);
              }
              const double s = scaled ? scale[static_cast<size_t>(e)] : 1.0;
              ASSERT_NEAR(y[static_cast<size_t>(p * n_rows + r)], exact * s,
                          (1e-5 * magnitude + 1e-6) * std::fabs(s))
                  << type_traits(type).name << " pair " << p << " row " << r << " per_row "
                  << per_row << " row0 " << row0;
            }
          }
        }
      }
    }
  }
#endif
}

// Grouping the pairs by expert: a permutation, experts ascending; the expert GEMV visiting the
// pairs in that order writes bit-identical rows (each pair's row is computed the same way).
TEST_F(CudaMoe, GroupOrdersThePairsByExpertWithoutChangingTheGemv) {
#if defined(BOLTRT_HAVE_CUDA)
  std::mt19937 rng(29);
  for (int n_expert : {8, 128}) {
    for (int64_t pairs : {int64_t{1}, int64_t{16}, int64_t{4096}}) {
      std::vector<int32_t> selected(static_cast<size_t>(pairs));
      for (int32_t& e : selected) e = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_expert));
      auto dsel = to_device(selected);
      cuda::DeviceBuffer dorder(static_cast<size_t>(pairs) * 4);
      ASSERT_EQ(kernels::launch_moe_group(static_cast<int32_t*>(dsel.data()), pairs, n_expert,
                                          static_cast<int32_t*>(dorder.data()), nullptr),
                cudaSuccess);
      const auto order = from_device<int32_t>(dorder, static_cast<size_t>(pairs));
      std::vector<int> seen(static_cast<size_t>(pairs), 0);
      for (size_t i = 0; i < order.size(); ++i) {
        ASSERT_GE(order[i], 0);
        ASSERT_LT(order[i], pairs);
        ++seen[static_cast<size_t>(order[i])];
        if (i > 0) {
          ASSERT_LE(selected[static_cast<size_t>(order[i - 1])],
                    selected[static_cast<size_t>(order[i])])
              << "position " << i;
        }
      }
      for (int count : seen) ASSERT_EQ(count, 1);

      const int64_t rows = 64, cols = 128;
      const GgmlType type = GgmlType::Q8_0;
      const size_t stride = row_size(type, cols);
      std::vector<uint8_t> w(stride * static_cast<size_t>(rows * n_expert));
      auto values = random_vector(static_cast<size_t>(rows * n_expert * cols), 31);
      for (int64_t r = 0; r < rows * n_expert; ++r) {
        quantize_row(type, values.data() + r * cols, w.data() + static_cast<size_t>(r) * stride,
                     cols);
      }
      auto x = random_vector(static_cast<size_t>(pairs * cols), 37);
      auto dw = to_device(w), dx = to_device(x);
      cuda::DeviceBuffer plain(static_cast<size_t>(pairs * rows) * 4), grouped(plain.size());
      for (bool use_order : {false, true}) {
        ASSERT_EQ(kernels::launch_gemv_experts(
                      static_cast<uint32_t>(type), dw.data(), rows, cols, stride,
                      stride * static_cast<size_t>(rows), static_cast<int32_t*>(dsel.data()), pairs,
                      static_cast<float*>(dx.data()), 1, nullptr,
                      static_cast<float*>((use_order ? grouped : plain).data()), nullptr,
                      use_order ? static_cast<int32_t*>(dorder.data()) : nullptr),
                  cudaSuccess);
      }
      const auto a = from_device<float>(plain, static_cast<size_t>(pairs * rows));
      const auto b = from_device<float>(grouped, static_cast<size_t>(pairs * rows));
      ASSERT_EQ(a, b) << n_expert << " experts, " << pairs << " pairs";
    }
  }
#endif
}

TEST_F(CudaMoe, CombineIsTheWeightedSumOfTheSlots) {
#if defined(BOLTRT_HAVE_CUDA)
  const int64_t n_tokens = 9, n = 2816;
  const int k = 8;
  auto y = random_vector(static_cast<size_t>(n_tokens * k * n), 19);
  auto w = random_vector(static_cast<size_t>(n_tokens * k), 23);
  auto dy = to_device(y), dw = to_device(w);
  cuda::DeviceBuffer dout(static_cast<size_t>(n_tokens * n) * 4);
  ASSERT_EQ(
      kernels::launch_moe_combine(static_cast<float*>(dy.data()), static_cast<float*>(dw.data()),
                                  n_tokens, k, n, static_cast<float*>(dout.data()), nullptr),
      cudaSuccess);
  const auto out = from_device<float>(dout, static_cast<size_t>(n_tokens * n));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0, magnitude = 0;
      for (int j = 0; j < k; ++j) {
        const double term =
            double(y[static_cast<size_t>((t * k + j) * n + i)]) * w[static_cast<size_t>(t * k + j)];
        sum += term;
        magnitude += std::fabs(term);
      }
      ASSERT_NEAR(out[static_cast<size_t>(t * n + i)], sum, 1e-6 * magnitude + 1e-7)
          << t << " " << i;
    }
  }
#endif
}

}  // namespace
}  // namespace boltrt
