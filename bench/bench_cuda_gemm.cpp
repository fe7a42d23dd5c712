// CUDA prefill GEMM (kernels/gemm_quant_mma.cu, f16 tensor cores) at Gemma 4 E4B shapes:
// microseconds per call and TFLOP/s (2 * rows * cols * tokens) for prefill chunks of 64 and 512
// tokens and a 16-row DFlash verify batch, per weight type.
//   bench_cuda_gemm [iterations]
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cuda_bench.h"
#include "quant/ggml_type.h"
#include "quant/quantize.h"
#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#include "gemm_quant.cuh"
#endif

int main([[maybe_unused]] int argc, [[maybe_unused]] char** argv) {
#if !defined(BOLTRT_HAVE_CUDA)
  return boltrt::bench::report_built_without_cuda("bench_cuda_gemm");
#else
  using namespace boltrt;
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 50;
  const auto device = bench::bench_device("bench_cuda_gemm");
  if (!device) return 0;
  fmt::print("| type | rows x cols | tokens | us/call | TFLOP/s |\n|---|---|---|---|---|\n");
  struct Shape {
    int64_t rows, cols;
  };
  // E4B: attention q (2048 x 2560), FFN gate/up (10240 x 2560), FFN down (2560 x 10240)
  const Shape shapes[] = {{2048, 2560}, {10240, 2560}, {2560, 10240}};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (const Shape& s : shapes) {
      const size_t stride = row_size(type, s.cols);
      const size_t bytes = stride * static_cast<size_t>(s.rows);
      std::vector<uint8_t> host(bytes);
      std::vector<float> row(static_cast<size_t>(s.cols));
      for (int64_t r = 0; r < std::min<int64_t>(s.rows, 64); ++r) {
        for (float& v : row) v = normal(rng);
        quantize_row(type, row.data(), host.data() + r * stride, s.cols);
      }
      for (int64_t r = 64; r < s.rows; ++r) {
        std::copy_n(host.data() + (r % 64) * stride, stride, host.data() + r * stride);
      }
      cuda::DeviceBuffer w(bytes);
      w.upload(host.data(), bytes);
      for (int64_t tokens : {16, 64, 512}) {
        std::vector<float> x(static_cast<size_t>(tokens * s.cols), 0.5f);
        cuda::DeviceBuffer dx(x.size() * 4), dy(static_cast<size_t>(tokens * s.rows) * 4);
        dx.upload(x.data(), x.size() * 4);
        auto call = [&] {
          if (kernels::launch_gemm_quant(static_cast<uint32_t>(type), w.data(), s.rows, s.cols,
                                         stride, static_cast<const float*>(dx.data()), tokens,
                                         static_cast<float*>(dy.data()), nullptr) != cudaSuccess) {
            fmt::print("launch failed\n");
            std::exit(1);
          }
        };
        for (int i = 0; i < 5; ++i) call();
        cuda::timer_start();
        for (int i = 0; i < iterations; ++i) call();
        const double us = cuda::timer_stop_ms() * 1e3 / iterations;
        const double flops = 2.0 * static_cast<double>(s.rows * s.cols * tokens);
        fmt::print("| {} | {} x {} | {} | {:.1f} | {:.1f} |\n", type_traits(type).name, s.rows,
                   s.cols, tokens, us, flops / (us * 1e-6) / 1e12);
      }
    }
  }
  return 0;
#endif
}
