// CUDA decode GEMV against a float64 reference computed on the CPU from dequantize_row.
// Without CUDA (not compiled in, or no usable device) every test SKIPS and says why: a skip is
// not a pass, and CI machines have no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "support/cuda_skip.h"
#include "util/error.h"
#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

namespace boltrt {
namespace {

class CudaGemv : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override { BOLTRT_SKIP_WITHOUT_CUDA_DEVICE(); }
};

TEST_P(CudaGemv, MatchesFloat64Reference) {
#if defined(BOLTRT_HAVE_CUDA)
  const GgmlType type = GetParam();
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t rows : {1, 7, 33, 255}) {
    for (int64_t cols : {256, 2560}) {
      for (int batch : {1, 3, 8}) {
        const size_t stride = row_size(type, cols);
        std::vector<uint8_t> w(stride * static_cast<size_t>(rows));
        std::vector<float> row(static_cast<size_t>(cols)), deq(static_cast<size_t>(rows * cols));
        for (int64_t r = 0; r < rows; ++r) {
          for (float& v : row) v = normal(rng);
          quantize_row(type, row.data(), w.data() + r * stride, cols);
          dequantize_row(type, w.data() + r * stride, deq.data() + r * cols, cols);
        }
        std::vector<float> x(static_cast<size_t>(batch * cols));
        for (float& v : x) v = normal(rng);

        cuda::DeviceBuffer dw(w.size()), dx(x.size() * 4),
            dy(static_cast<size_t>(batch * rows) * 4);
        dw.upload(w.data(), w.size());
        dx.upload(x.data(), x.size() * 4);
        cuda::gemv(type, dw.data(), rows, cols, stride, static_cast<const float*>(dx.data()), batch,
                   static_cast<float*>(dy.data()));
        cuda::synchronize();
        std::vector<float> y(static_cast<size_t>(batch * rows));
        dy.download(y.data(), y.size() * 4);

        for (int b = 0; b < batch; ++b) {
          for (int64_t r = 0; r < rows; ++r) {
            double exact = 0, magnitude = 0;
            for (int64_t k = 0; k < cols; ++k) {
              const double p = double(deq[r * cols + k]) * x[b * cols + k];
              exact += p;
              magnitude += std::fabs(p);
            }
            // fp32 accumulation of `cols` products in a different order than float64:
            // error bounded by ~cols * 2^-24 * sum|p|; 1e-5 relative to sum|p| is generous.
            ASSERT_NEAR(y[b * rows + r], exact, 1e-5 * magnitude + 1e-6)
                << type_traits(type).name << " rows " << rows << " cols " << cols << " batch "
                << batch << " at (" << b << ", " << r << ")";
          }
        }
      }
    }
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGemv,
                         ::testing::Values(GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K,
                                           GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F32,
                                           GgmlType::F16, GgmlType::BF16),
                         [](const auto& info) {
                           return std::string(type_traits(info.param).name);
                         });

TEST(CudaDevice, OutOfMemoryIsOneClearError) {
  BOLTRT_SKIP_WITHOUT_CUDA_DEVICE();
#if defined(BOLTRT_HAVE_CUDA)
  try {
    cuda::DeviceBuffer huge(size_t{1} << 50);  // 1 PiB
    FAIL() << "allocating 1 PiB succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory"), std::string::npos) << e.what();
  }
#endif
}

}  // namespace
}  // namespace boltrt
