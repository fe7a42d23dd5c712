// CUDA mixture-of-experts matmuls at the 26B-A4B shape (128 experts, top 8, D 2816, expert width
// 704; gate/up Q4_K, down Q8_0 since 704 is no multiple of the 256-value K-quant block, as
// the quantizer's fallback does): the expert GEMVs of one layer (gate and up halves of the merged
// [E][2F][D] stack, then down [E][D][F]) for a decode step (8 pairs: the bytes of the 8 selected
// experts, GB/s and % of peak) and for a 512-token prefill chunk (4096 pairs) visiting the pairs in
// token order and grouped by expert (moe_group). Routing is random and uniform, like a trained
// router on average.
//   bench_cuda_moe [iterations]
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
#include "gemv_quant.cuh"
#include "ops.cuh"
#endif

int main([[maybe_unused]] int argc, [[maybe_unused]] char** argv) {
#if !defined(BOLTRT_HAVE_CUDA)
  return boltrt::bench::report_built_without_cuda("bench_cuda_moe");
#else
  using namespace boltrt;
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 50;
  const auto device = bench::bench_device("bench_cuda_moe");
  if (!device) return 0;
  const int64_t E = 128, K = 8, D = 2816, F = 704;
  const GgmlType type = GgmlType::Q4_K, down_type = GgmlType::Q8_0;
  const size_t gu_stride = row_size(type, D), down_stride = row_size(down_type, F);
  const size_t gu_expert = gu_stride * static_cast<size_t>(2 * F);
  const size_t down_expert = down_stride * static_cast<size_t>(D);
  // weights: 64 quantized rows repeated (the values do not matter for the timing)
  auto fill = [](GgmlType t, size_t stride, int64_t cols, int64_t rows) {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<uint8_t> host(stride * static_cast<size_t>(rows));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < std::min<int64_t>(rows, 64); ++r) {
      for (float& v : row) v = normal(rng);
      quantize_row(t, row.data(), host.data() + static_cast<size_t>(r) * stride, cols);
    }
    for (int64_t r = 64; r < rows; ++r) {
      std::copy_n(host.data() + static_cast<size_t>(r % 64) * stride, stride,
                  host.data() + static_cast<size_t>(r) * stride);
    }
    return host;
  };
  const auto gu_host = fill(type, gu_stride, D, 2 * F * E);
  const auto down_host = fill(down_type, down_stride, F, D * E);
  cuda::DeviceBuffer gu(gu_host.size()), down(down_host.size());
  gu.upload(gu_host.data(), gu_host.size());
  down.upload(down_host.data(), down_host.size());
  fmt::print("experts {:.0f} MiB per layer\n",
             static_cast<double>(gu_host.size() + down_host.size()) / (1 << 20));
  fmt::print(
      "| step | pairs | order | us/layer | GB/s of selected experts | % of peak |\n"
      "|---|---|---|---|---|---|\n");

  for (int64_t n : {int64_t{1}, int64_t{512}}) {
    const int64_t pairs = n * K;
    std::mt19937 rng(11);
    std::vector<int32_t> selected(static_cast<size_t>(pairs));
    for (int64_t t = 0; t < n; ++t) {  // K distinct experts per token
      std::vector<int32_t> all(static_cast<size_t>(E));
      for (int32_t e = 0; e < E; ++e) all[static_cast<size_t>(e)] = e;
      std::shuffle(all.begin(), all.end(), rng);
      std::copy_n(all.begin(), K, selected.begin() + t * K);
    }
    std::vector<float> x(static_cast<size_t>(n * D), 0.5f);
    cuda::DeviceBuffer dsel(selected.size() * 4), dorder(selected.size() * 4), dx(x.size() * 4),
        dg(static_cast<size_t>(pairs * F) * 4), du(dg.size()),
        dy(static_cast<size_t>(pairs * D) * 4);
    dsel.upload(selected.data(), selected.size() * 4);
    dx.upload(x.data(), x.size() * 4);
    auto* sel = static_cast<const int32_t*>(dsel.data());
    auto* order = static_cast<int32_t*>(dorder.data());
    for (bool grouped : {false, true}) {
      if (n == 1 && grouped) continue;
      auto layer = [&] {
        if (grouped) kernels::launch_moe_group(sel, pairs, static_cast<int>(E), order, nullptr);
        const int32_t* o = grouped ? order : nullptr;
        kernels::launch_gemv_experts(static_cast<uint32_t>(type), gu.data(), F, D, gu_stride,
                                     gu_expert, sel, pairs, static_cast<float*>(dx.data()),
                                     static_cast<int>(K), nullptr, static_cast<float*>(dg.data()),
                                     nullptr, o);
        kernels::launch_gemv_experts(
            static_cast<uint32_t>(type), static_cast<const uint8_t*>(gu.data()) + F * gu_stride, F,
            D, gu_stride, gu_expert, sel, pairs, static_cast<float*>(dx.data()),
            static_cast<int>(K), nullptr, static_cast<float*>(du.data()), nullptr, o);
        kernels::launch_gemv_experts(static_cast<uint32_t>(down_type), down.data(), D, F,
                                     down_stride, down_expert, sel, pairs,
                                     static_cast<float*>(dg.data()), 1, nullptr,
                                     static_cast<float*>(dy.data()), nullptr, o);
      };
      layer();  // warm-up
      cuda::synchronize();
      cuda::timer_start();
      for (int i = 0; i < iterations; ++i) layer();
      const double us = cuda::timer_stop_ms() * 1000.0 / iterations;
      // bytes of the distinct experts this step selects
      std::vector<bool> used(static_cast<size_t>(E), false);
      for (int32_t e : selected) used[static_cast<size_t>(e)] = true;
      const double bytes = static_cast<double>(std::count(used.begin(), used.end(), true)) *
                           static_cast<double>(gu_expert + down_expert);
      const double gbs = bytes / (us * 1e-6) / 1e9;
      fmt::print("| {} | {} | {} | {:.1f} | {:.0f} | {:.0f}% |\n",
                 n == 1 ? "decode" : "prefill 512", pairs, grouped ? "by expert" : "by token", us,
                 gbs, 100.0 * gbs / device->peak_bandwidth_gbs);
    }
  }
  return 0;
#endif
}
