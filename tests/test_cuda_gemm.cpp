// Tensor-core prefill GEMM (kernels/gemm_quant_mma.cu) on awkward shapes: partial weight-row
// tiles (rows not a multiple of 128), partial token tiles (n not a multiple of 64), k tails (an
// odd number of 32-element sub-blocks), for every weight type the kernel reads.
//   - bit-level reference: float64 sums of the f16-rounded dequantized weights (dequantize_row)
//     times the f16-rounded activations: the kernel's own inputs, so only fp32 accumulation
//     order separates them;
//   - the CPU backend's matmul (which quantizes activations to Q8): relative RMS difference.
// Without CUDA (not compiled in, or no usable device) every test SKIPS and says why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "quant/dequantize.h"
#include "quant/fp16.h"
#include "quant/quantize.h"
#include "support/cuda_skip.h"
#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/cublas_linear.h"
#include "backend/cuda/cuda_backend.h"
#include "gemm_quant.cuh"
#endif

namespace boltrt {
namespace {

class CudaGemm : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override { BOLTRT_SKIP_WITHOUT_CUDA_DEVICE(); }
};

[[maybe_unused]] float round_f16(float v) {
  return fp16_to_fp32(fp32_to_fp16(v));
}

TEST_P(CudaGemm, MatchesF16ReferenceAndCpuMatmul) {
#if defined(BOLTRT_HAVE_CUDA)
  const GgmlType type = GetParam();
  const int64_t block = type_traits(type).block_size;
  const int64_t unit = block < 32 ? 32 : block;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t rows : {1, 129, 300}) {
    for (int64_t blocks : {1, 3, 9}) {
      const int64_t cols = unit * blocks;
      for (int64_t n : {9, 65, 200}) {
        const size_t stride = row_size(type, cols);
        std::vector<uint8_t> w(stride * static_cast<size_t>(rows));
        std::vector<float> row(static_cast<size_t>(cols)), deq(static_cast<size_t>(rows * cols));
        for (int64_t r = 0; r < rows; ++r) {
          for (float& v : row) v = normal(rng);
          quantize_row(type, row.data(), w.data() + r * stride, cols);
          dequantize_row(type, w.data() + r * stride, deq.data() + r * cols, cols);
        }
        std::vector<float> x(static_cast<size_t>(n * cols));
        for (float& v : x) v = normal(rng);

        cuda::DeviceBuffer dw(w.size()), dx(x.size() * 4), dy(static_cast<size_t>(n * rows) * 4);
        dw.upload(w.data(), w.size());
        dx.upload(x.data(), x.size() * 4);
        ASSERT_EQ(kernels::launch_gemm_quant(static_cast<uint32_t>(type), dw.data(), rows, cols,
                                             stride, static_cast<const float*>(dx.data()), n,
                                             static_cast<float*>(dy.data()), nullptr),
                  cudaSuccess);
        cuda::synchronize();
        std::vector<float> y(static_cast<size_t>(n * rows));
        dy.download(y.data(), y.size() * 4);

        std::vector<float> cpu_y(y.size());
        WeightView view{type, w.data(), rows, cols, stride};
        matmul(view, x.data(), n, cpu_y.data(), nullptr);

        double diff2 = 0, ref2 = 0;
        for (int64_t b = 0; b < n; ++b) {
          for (int64_t r = 0; r < rows; ++r) {
            double exact = 0, magnitude = 0;
            for (int64_t k = 0; k < cols; ++k) {
              const double p = double(round_f16(deq[r * cols + k])) * round_f16(x[b * cols + k]);
              exact += p;
              magnitude += std::fabs(p);
            }
            const float got = y[b * rows + r];
            // exact f16 x f16 products summed in fp32 in another order (tensor cores may also
            // truncate the alignment of partial sums): a few ulps of sum|p| per output
            ASSERT_NEAR(got, exact, 5e-5 * magnitude + 1e-6)
                << type_traits(type).name << " rows " << rows << " cols " << cols << " n " << n
                << " at (" << b << ", " << r << ")";
            const double d = double(got) - cpu_y[b * rows + r];
            diff2 += d * d;
            ref2 += double(cpu_y[b * rows + r]) * cpu_y[b * rows + r];
          }
        }
        // The CPU quantizes activations to 8 bits per block (relative RMS error ~0.7% on N(0,1)
        // rows); a wrong tile or fragment index would be ~100%.
        EXPECT_LE(std::sqrt(diff2 / ref2), 2e-2)
            << type_traits(type).name << " rows " << rows << " cols " << cols << " n " << n;
      }
    }
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGemm,
                         ::testing::Values(GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K,
                                           GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F32,
                                           GgmlType::F16, GgmlType::BF16),
                         [](const auto& info) {
                           return std::string(type_traits(info.param).name);
                         });

// The cuBLAS path for F16/BF16 matrices (prefill batches): float64 sums of the weights times
// the activations rounded to the weights' type (its own inputs; only fp32 accumulation order
// separates them), padded row strides (a sub-matrix view), and against unrounded f32
// activations within the rounding of the activations.
class CudaCublas : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override { BOLTRT_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_P(CudaCublas, MatchesFloat64ReferenceOnRoundedActivations) {
#if defined(BOLTRT_HAVE_CUDA)
  const GgmlType type = GetParam();
  const bool bf16 = type == GgmlType::BF16;
  auto round_to = [&](float v) {
    return bf16 ? bf16_to_fp32(fp32_to_bf16(v)) : fp16_to_fp32(fp32_to_fp16(v));
  };
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  cuda::CublasLinear blas;
  for (int64_t rows : {1, 129, 300}) {
    for (int64_t cols : {64, 256, 2816}) {
      for (int64_t pad : {0, 32}) {  // row_stride = (cols + pad) elements
        for (int64_t n : {9, 65}) {
          const size_t stride = static_cast<size_t>(cols + pad) * 2;
          std::vector<uint8_t> w(stride * static_cast<size_t>(rows), 0xFF);  // pad: NaN bits
          std::vector<float> wf(static_cast<size_t>(rows * cols));
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols; ++c) {
              const float v = normal(rng);
              const uint16_t h = bf16 ? fp32_to_bf16(v) : fp32_to_fp16(v);
              std::memcpy(w.data() + static_cast<size_t>(r) * stride + 2 * c, &h, 2);
              wf[static_cast<size_t>(r * cols + c)] = bf16 ? bf16_to_fp32(h) : fp16_to_fp32(h);
            }
          }
          std::vector<float> x(static_cast<size_t>(n * cols));
          for (float& v : x) v = normal(rng);
          cuda::DeviceBuffer dw(w.size()), dx(x.size() * 4), dy(static_cast<size_t>(n * rows) * 4),
              scratch(cuda::CublasLinear::scratch_bytes(n, cols));
          dw.upload(w.data(), w.size());
          dx.upload(x.data(), x.size() * 4);
          blas.run(type, dw.data(), rows, cols, stride, static_cast<const float*>(dx.data()), n,
                   static_cast<float*>(dy.data()), scratch.data(), nullptr);
          cuda::synchronize();
          std::vector<float> y(static_cast<size_t>(n * rows));
          dy.download(y.data(), y.size() * 4);
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              double exact = 0, magnitude = 0, unrounded = 0;
              for (int64_t c = 0; c < cols; ++c) {
                const double wv = wf[static_cast<size_t>(r * cols + c)];
                const float xv = x[static_cast<size_t>(t * cols + c)];
                exact += wv * round_to(xv);
                unrounded += wv * xv;
                magnitude += std::fabs(wv * xv);
              }
              const float got = y[static_cast<size_t>(t * rows + r)];
              ASSERT_NEAR(got, exact, 1e-5 * magnitude + 1e-6)
                  << type_traits(type).name << " rows " << rows << " cols " << cols << " pad "
                  << pad << " n " << n << " at (" << t << ", " << r << ")";
              // activation rounding: relative 2^-11 (f16) or 2^-8 (bf16) per product
              ASSERT_NEAR(got, unrounded, (bf16 ? 4e-3 : 5e-4) * magnitude + 1e-6);
            }
          }
        }
      }
    }
  }
  EXPECT_FALSE(cuda::CublasLinear::supports(GgmlType::Q4_K));
#endif
}

INSTANTIATE_TEST_SUITE_P(Types, CudaCublas, ::testing::Values(GgmlType::F16, GgmlType::BF16),
                         [](const auto& info) {
                           return std::string(type_traits(info.param).name);
                         });

TEST(CudaGemmArgs, RejectsColumnsThatAreNotWholeSubBlocks) {
#if !defined(BOLTRT_HAVE_CUDA)
  GTEST_SKIP() << "built without CUDA (configure with -DBOLTRT_CUDA=ON)";
#else
  EXPECT_EQ(kernels::launch_gemm_quant(static_cast<uint32_t>(GgmlType::F32), nullptr, 4, 48, 192,
                                       nullptr, 16, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kernels::launch_gemm_quant(static_cast<uint32_t>(GgmlType::Q5_0), nullptr, 4, 64, 44,
                                       nullptr, 16, nullptr, nullptr),
            cudaErrorInvalidValue);  // no Sub32 unpacker
  EXPECT_TRUE(kernels::gemm_quant_supported(static_cast<uint32_t>(GgmlType::Q4_K)));
#endif
}

}  // namespace
}  // namespace boltrt
