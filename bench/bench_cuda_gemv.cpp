// CUDA decode GEMV bandwidth at Gemma 4 E4B shapes: GB/s of weight bytes streamed and the
// fraction of the device's peak memory bandwidth. Each shape cycles through enough copies of
// its weights (>= 512 MiB) that they cannot sit in L2, so this measures DRAM, as decode sees it.
//   bench_cuda_gemv [iterations]
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
#endif

int main([[maybe_unused]] int argc, [[maybe_unused]] char** argv) {
#if !defined(BOLTRT_HAVE_CUDA)
  return boltrt::bench::report_built_without_cuda("bench_cuda_gemv");
#else
  using namespace boltrt;
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 200;
  const auto device = bench::bench_device("bench_cuda_gemv");
  if (!device) return 0;
  fmt::print(
      "| type | rows x cols | batch | us/call | GB/s | % of peak |\n|---|---|---|---|---|---|\n");
  struct Shape {
    int64_t rows, cols;
  };
  // E4B: attention q (2048 x 2560), FFN gate/up (10240 x 2560), FFN down (2560 x 10240),
  // tied output head slice (32768 x 2560).
  const Shape shapes[] = {{2048, 2560}, {10240, 2560}, {2560, 10240}, {32768, 2560}};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0}) {
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
      const int copies = static_cast<int>(std::max<size_t>(1, (size_t{512} << 20) / bytes));
      std::vector<cuda::DeviceBuffer> weights;
      for (int c = 0; c < copies; ++c) {
        weights.emplace_back(bytes);
        weights.back().upload(host.data(), bytes);
      }
      for (int batch : {1, 4, 8}) {
        std::vector<float> x(static_cast<size_t>(batch * s.cols), 0.5f);
        cuda::DeviceBuffer dx(x.size() * 4), dy(static_cast<size_t>(batch * s.rows) * 4);
        dx.upload(x.data(), x.size() * 4);
        auto call = [&](int i) {
          cuda::gemv(type, weights[static_cast<size_t>(i % copies)].data(), s.rows, s.cols, stride,
                     static_cast<const float*>(dx.data()), batch, static_cast<float*>(dy.data()));
        };
        for (int i = 0; i < 10; ++i) call(i);
        cuda::timer_start();
        for (int i = 0; i < iterations; ++i) call(i);
        const double us = cuda::timer_stop_ms() * 1e3 / iterations;
        const double gbs = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
        fmt::print("| {} | {} x {} | {} | {:.1f} | {:.0f} | {:.0f}% |\n", type_traits(type).name,
                   s.rows, s.cols, batch, us, gbs, 100.0 * gbs / device->peak_bandwidth_gbs);
      }
    }
  }
  return 0;
#endif
}
