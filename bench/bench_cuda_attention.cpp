// CUDA decode attention (kernels/attention_decode.cu) at Gemma 4 E4B shapes over an F16 KV
// cache: microseconds per call, GB/s of K/V bytes read and the fraction of the device's peak.
// One query token, 8 query heads over 2 KV heads; window layers (head 256, 512 keys) and full
// layers (head 512) at growing context lengths. Then prefill (flash) attention
// (kernels/attention_prefill.cu): a 512-token chunk at the start of the context and after
// 3584 tokens, per layer kind.
//   bench_cuda_attention [iterations]
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_bench.h"
#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#include "ops.cuh"
#endif

int main([[maybe_unused]] int argc, [[maybe_unused]] char** argv) {
#if !defined(BOLTRT_HAVE_CUDA)
  return boltrt::bench::report_built_without_cuda("bench_cuda_attention");
#else
  using namespace boltrt;
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 200;
  const auto device = bench::bench_device("bench_cuda_attention");
  if (!device) return 0;
  fmt::print(
      "| layer | head dim | keys | splits | us/call | GB/s | % of peak |\n"
      "|---|---|---|---|---|---|---|\n");
  struct Case {
    const char* kind;
    int64_t head_dim, window, context;
  };
  const Case cases[] = {{"window", 256, 512, 4096},
                        {"full", 512, 0, 1024},
                        {"full", 512, 0, 4096},
                        {"full", 512, 0, 32768},
                        {"window", 256, 512, 32768}};
  const int64_t n_head = 8, n_head_kv = 2;
  for (const Case& c : cases) {
    const int64_t cells = c.window > 0 ? c.window + 63 : c.context;
    const size_t row = static_cast<size_t>(n_head_kv * c.head_dim);
    std::vector<uint16_t> kv(static_cast<size_t>(cells) * row, 0x3c00);  // 1.0 in f16
    std::vector<float> q(static_cast<size_t>(n_head * c.head_dim), 0.01f);
    cuda::DeviceBuffer dk(kv.size() * 2), dv(kv.size() * 2), dq(q.size() * 4), dout(q.size() * 4);
    dk.upload(kv.data(), kv.size() * 2);
    dv.upload(kv.data(), kv.size() * 2);
    dq.upload(q.data(), q.size() * 4);
    const int64_t pos = c.context - 1;
    const int64_t keys = c.window > 0 ? c.window : c.context;
    const int n_split = kernels::attention_split_count(keys, 1, n_head);
    cuda::DeviceBuffer partials(std::max<size_t>(
        4, kernels::attention_partials_floats(1, n_head, c.head_dim, n_split) * 4));
    auto call = [&] {
      if (kernels::launch_attention_decode(
              static_cast<const float*>(dq.data()), static_cast<const uint16_t*>(dk.data()),
              static_cast<const uint16_t*>(dv.data()), 1, pos, cells, n_head, n_head_kv, c.head_dim,
              c.window, 1.0f, 0.0f, n_split, static_cast<float*>(partials.data()),
              static_cast<float*>(dout.data()), nullptr) != cudaSuccess) {
        fmt::print("launch failed\n");
        std::exit(1);
      }
    };
    for (int i = 0; i < 10; ++i) call();
    cuda::timer_start();
    for (int i = 0; i < iterations; ++i) call();
    const double us = cuda::timer_stop_ms() * 1e3 / iterations;
    const double bytes = 2.0 * static_cast<double>(keys) * static_cast<double>(row) * 2.0;
    const double gbs = bytes / (us * 1e-6) / 1e9;
    fmt::print("| {} | {} | {} | {} | {:.1f} | {:.0f} | {:.0f}% |\n", c.kind, c.head_dim, keys,
               n_split, us, gbs, 100.0 * gbs / device->peak_bandwidth_gbs);
  }
  fmt::print(
      "\n| prefill layer | head dim | tokens | pos0 | us/call |\n"
      "|---|---|---|---|---|\n");
  const Case prefill[] = {{"window", 256, 512, 0},
                          {"full", 512, 0, 0},
                          {"window", 256, 512, 3584},
                          {"full", 512, 0, 3584}};
  const int64_t chunk = 512;
  for (const Case& c : prefill) {
    const int64_t end = c.context + chunk;
    const int64_t cells = c.window > 0 ? std::min(end, c.window - 1 + chunk) : end;
    const size_t row = static_cast<size_t>(n_head_kv * c.head_dim);
    std::vector<uint16_t> kv(static_cast<size_t>(cells) * row, 0x3c00);
    std::vector<float> q(static_cast<size_t>(chunk * n_head * c.head_dim), 0.01f);
    cuda::DeviceBuffer dk(kv.size() * 2), dv(kv.size() * 2), dq(q.size() * 4), dout(q.size() * 4);
    dk.upload(kv.data(), kv.size() * 2);
    dv.upload(kv.data(), kv.size() * 2);
    dq.upload(q.data(), q.size() * 4);
    auto call = [&] {
      if (kernels::launch_attention_prefill(
              static_cast<const float*>(dq.data()), static_cast<const uint16_t*>(dk.data()),
              static_cast<const uint16_t*>(dv.data()), chunk, c.context, cells, n_head, n_head_kv,
              c.head_dim, c.window, 1.0f, 0.0f, static_cast<float*>(dout.data()),
              nullptr) != cudaSuccess) {
        fmt::print("launch failed\n");
        std::exit(1);
      }
    };
    for (int i = 0; i < 3; ++i) call();
    const int reps = std::max(1, iterations / 10);
    cuda::timer_start();
    for (int i = 0; i < reps; ++i) call();
    const double us = cuda::timer_stop_ms() * 1e3 / reps;
    fmt::print("| {} | {} | {} | {} | {:.1f} |\n", c.kind, c.head_dim, chunk, c.context, us);
  }
  return 0;
#endif
}
