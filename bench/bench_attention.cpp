// CPU attention (cpu::AttentionAccumulator, the kernel behind every Gemma 4 / Qwen3.5 attention
// layer) at Gemma 4 E4B shapes: 8 query heads over 2 KV heads, head_dim 512 (full layers) or
// 256 (sliding, window 512), keys and values read in place from an f16 cache as a model does.
//
//   bench_attention [threads=2] [--depths 0,4096,16384] [--kv f16|f32|q8_0|q4_0] [-r REPS]
//                   [--simd scalar|avx2|avx512]
//
// For each depth: a 512-token prefill chunk at that depth (the micro-batch of a long prompt)
// and a one-token decode step after it, full and sliding layers. Reports ms per call (best of
// REPS) and GFLOP/s, counting 4 flops per (query head, visible key, dimension): the q.k dot
// product and the weighted sum of values. Attention at depth is compute bound on the CPU, so
// GFLOP/s against the machine's fma peak is the figure to watch.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "quant/fp16.h"
#include "runtime/thread_pool.h"

using namespace boltrt;

namespace {

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t j = s.find(',', i);
    out.push_back(std::stoll(s.substr(i, j - i)));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

// n rows of `width` values in `format` (q8_0 / q4_0: random codes and scales)
std::vector<uint8_t> random_rows(cpu::KvFormat format, int64_t n, int64_t width, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t row = cpu::kv_format_bytes(format, width);
  std::vector<uint8_t> out(row * static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    uint8_t* p = out.data() + static_cast<size_t>(r) * row;
    if (format == cpu::KvFormat::F32 || format == cpu::KvFormat::F16) {
      for (int64_t i = 0; i < width; ++i) {
        const float x = normal(rng);
        if (format == cpu::KvFormat::F32) {
          std::memcpy(p + 4 * i, &x, 4);
        } else {
          const uint16_t h = fp32_to_fp16(x);
          std::memcpy(p + 2 * i, &h, 2);
        }
      }
    } else {
      for (size_t b = 0; b < row; ++b) p[b] = static_cast<uint8_t>(rng());
      const size_t block = format == cpu::KvFormat::Q8_0 ? 34 : 18;
      for (size_t b = 0; b < row; b += block) {
        const uint16_t d = fp32_to_fp16(0.01f + 0.01f * static_cast<float>(rng() % 8));
        std::memcpy(p + b, &d, 2);
      }
    }
  }
  return out;
}

struct Shape {
  const char* name;
  int64_t head_dim, window;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  std::vector<int64_t> depths = {0, 4096, 16384};
  cpu::KvFormat format = cpu::KvFormat::F16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--depths" && i + 1 < argc) {
      depths = parse_list(argv[++i]);
    } else if (a == "-r" && i + 1 < argc) {
      reps = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--kv" && i + 1 < argc) {
      const std::string f = argv[++i];
      format = f == "f32"    ? cpu::KvFormat::F32
               : f == "q8_0" ? cpu::KvFormat::Q8_0
               : f == "q4_0" ? cpu::KvFormat::Q4_0
                             : cpu::KvFormat::F16;
    } else if (a == "--simd" && i + 1 < argc) {
      const std::string s = argv[++i];
      set_simd_level(s == "scalar" ? SimdLevel::Scalar
                     : s == "avx2" ? SimdLevel::Avx2
                                   : SimdLevel::Avx512);
    } else if (!a.empty() && a[0] != '-') {
      threads = std::max(1, std::stoi(a));
    } else {
      fmt::print(stderr,
                 "usage: bench_attention [threads] [--depths 0,4096] [--kv f16|f32|q8_0|q4_0] "
                 "[-r REPS] [--simd scalar|avx2|avx512]\n");
      return 2;
    }
  }
  ThreadPool pool(threads);
  const int64_t n_head = 8, n_head_kv = 2, chunk = 512;
  const Shape shapes[] = {{"full", 512, 0}, {"sliding", 256, 512}};
  fmt::print("threads {}  simd {}  kv {}  (8 query heads / 2 KV heads, best of {})\n", threads,
             simd_level_name(simd_level()),
             format == cpu::KvFormat::F32    ? "f32"
             : format == cpu::KvFormat::F16  ? "f16"
             : format == cpu::KvFormat::Q8_0 ? "q8_0"
                                             : "q4_0",
             reps);
  fmt::print("| layer | depth | step | ms | GFLOP/s |\n|---|---:|---|---:|---:|\n");
  for (const Shape& shape : shapes) {
    const int64_t hd = shape.head_dim;
    const int64_t max_kv = *std::max_element(depths.begin(), depths.end()) + chunk;
    const auto k = random_rows(format, max_kv, n_head_kv * hd, 1);
    const auto v = random_rows(format, max_kv, n_head_kv * hd, 2);
    std::vector<float> q(static_cast<size_t>(chunk * n_head * hd)), out(q.size());
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& x : q) x = normal(rng);
    cpu::KvRows kr, vr;
    kr.format = vr.format = format;
    kr.row_bytes = vr.row_bytes = cpu::kv_format_bytes(format, n_head_kv * hd);
    kr.rows[0] = k.data();
    vr.rows[0] = v.data();
    const float scale = 1.0f;
    for (const int64_t depth : depths) {
      for (const int64_t n_tokens : {chunk, int64_t{1}}) {
        // prefill: tokens depth .. depth + 511 over keys 0 .. depth + 511; decode: the token at
        // depth + 512 over the keys before it (the chunk's included)
        const int64_t q_pos0 = n_tokens == 1 ? depth + chunk - 1 : depth;
        const int64_t n_kv = depth + chunk;
        int64_t pairs = 0;  // visible (token, key) pairs
        for (int64_t t = 0; t < n_tokens; ++t) {
          const int64_t pos = q_pos0 + t;
          const int64_t first = shape.window > 0 ? std::max<int64_t>(0, pos - shape.window + 1) : 0;
          pairs += pos + 1 - first;
        }
        double best = 1e30;
        for (int r = 0; r < reps; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          cpu::AttentionAccumulator acc;
          acc.begin(n_tokens, n_head, hd);
          acc.add(q.data(), q_pos0, kr, vr, n_kv, 0, n_head_kv, shape.window, scale, &pool);
          acc.finish(out.data());
          best = std::min(
              best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        const double flops = 4.0 * static_cast<double>(pairs * n_head * hd);
        fmt::print("| {} | {} | {} | {:.3f} | {:.1f} |\n", shape.name, depth,
                   n_tokens == 1 ? "decode" : "prefill 512", best * 1e3, flops / best * 1e-9);
      }
    }
  }
  return 0;
}
