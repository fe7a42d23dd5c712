// Matmul throughput at Gemma 4 E4B shapes, next to a streaming-read probe run in the same
// process, so each batch-1 figure is also a fraction of this machine's read bandwidth.
//
//   bench_matmul [threads=physical cores] [--quick] [--types q4_0,q4_K,...] [--simd
//   scalar|avx2|avx512] [--batch1] [--batches 1,2,4,8,16] [--cpu-time]
//   [--shape 10240->2560] [--no-pack] [--hot]
// --batch1: decode's batch 1 only; --batches: the batch sizes to time, default 1,8,128;
// --cpu-time: time by the thread's CPU time, 1 thread only; --no-pack: the raw rows, without the
// copies LanePacks makes at load; --hot: one weight copy, read again by every call, so a matrix
// that fits the caches is timed from them: the kernel's compute limit, to set against its
// figure from memory.
//
// Batch 1 is reported as GB/s of weight bytes read (decode is bandwidth bound) and as a
// percentage of a plain streaming read of the same weight buffers, timed the same way (best of
// N calls); batches 8 and 128 as GMAC/s. Timings are the best of N calls: the machine is shared.
// Weights are replicated into enough copies (>= 256 MiB in all) that successive calls miss the 32
// MiB L3, as decode does when it walks through all layers.
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "../tests/matmul_test_util.h"
#include "backend/cpu/matmul.h"
#include "runtime/thread_pool.h"

using namespace boltrt;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// With --cpu-time (1 thread only) kernels are timed by this thread's CPU time, which leaves out
// the time the thread was not scheduled: stable figures on a shared, overloaded machine.
bool g_cpu_time = false;

double now_seconds() {
  if (g_cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Sum of 64-bit words [b, e) with AVX2 loads, 4 independent accumulators.
#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t read_words(const uint64_t* p, int64_t b, int64_t e) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = b;
  for (; i + 16 <= e; i += 16) {
    a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  uint64_t s = static_cast<uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
  for (; i < e; ++i) s ^= p[i];
  return s;
}
#else
uint64_t read_words(const uint64_t* p, int64_t b, int64_t e) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = b;
  for (; i + 4 <= e; i += 4) s0 ^= p[i], s1 ^= p[i + 1], s2 ^= p[i + 2], s3 ^= p[i + 3];
  for (; i < e; ++i) s0 ^= p[i];
  return s0 ^ s1 ^ s2 ^ s3;
}
#endif

// Streaming read of a 512 MiB buffer split over the pool's threads; best of 20 passes, in GB/s
// (best, like the matmul timings, so both see the machine's quiet moments).
double measure_read_bandwidth(ThreadPool& pool) {
  const size_t bytes = size_t{512} << 20;
  std::vector<uint64_t> buffer(bytes / 8);
  pool.parallel_for(static_cast<int64_t>(buffer.size()), 4096, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i)
      buffer[static_cast<size_t>(i)] = static_cast<uint64_t>(i) * 2654435761u;
  });
  std::vector<uint64_t> sinks(64);
  double best = 0.0;
  for (int pass = 0; pass < 20; ++pass) {
    const auto t0 = Clock::now();
    pool.parallel_for(static_cast<int64_t>(buffer.size()), 4096, [&](int64_t b, int64_t e, int t) {
      sinks[static_cast<size_t>(t)] += read_words(buffer.data(), b, e);
    });
    best = std::max(best, static_cast<double>(bytes) / seconds_since(t0) / 1e9);
  }
  if (sinks[0] == 42) std::printf(" ");
  return best;
}

#if defined(__x86_64__)
// int8 multiply-accumulate peak of one core: 24 independent chains of 512-bit vpdpbusd
// (64 MACs each). Returns MACs per second of this thread.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) double vnni_peak_one_thread(
    int64_t iterations) {
  constexpr int kChains = 24;
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  __asm__ volatile("" : "+v"(a), "+v"(b));
  const double t0 = now_seconds();
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  const double t = now_seconds() - t0;
  __m512i sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, sum);
  if (lanes[0] == 42) std::printf(" ");
  return static_cast<double>(iterations) * kChains * 64 / t;
}
#endif

struct Shape {
  const char* name;
  int64_t cols, rows;  // in -> out
};

}  // namespace

int main(int argc, char** argv) {
  int threads = physical_core_count();
  bool quick = false;
  bool batch1_only = false;
  bool no_pack = false;  // --no-pack: the raw rows only, as before LanePacks packed Q4_0
  std::vector<int64_t> batches = {1, 8, 128};
  bool hot = false;        // --hot: one weight copy (from the caches where it fits)
  std::string only_shape;  // --shape 10240->2560: time this shape only
  std::vector<GgmlType> types = {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--batch1") {
      batch1_only = true;
    } else if (arg == "--batches" && i + 1 < argc) {
      batches.clear();
      const std::string list = argv[++i];
      size_t pos = 0;
      while (pos < list.size()) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        batches.push_back(std::max<int64_t>(1, std::atoll(list.substr(pos, comma - pos).c_str())));
        pos = comma + 1;
      }
    } else if (arg == "--shape" && i + 1 < argc) {
      only_shape = argv[++i];
    } else if (arg == "--no-pack") {
      no_pack = true;
    } else if (arg == "--hot") {
      hot = true;
    } else if (arg == "--cpu-time") {
      g_cpu_time = true;
    } else if (arg == "--simd" && i + 1 < argc) {
      const std::string v = argv[++i];
      set_simd_level(v == "scalar" ? SimdLevel::Scalar
                     : v == "avx2" ? SimdLevel::Avx2
                                   : SimdLevel::Avx512);
    } else if (arg == "--types" && i + 1 < argc) {
      types.clear();
      std::string list = argv[++i];
      size_t pos = 0;
      while (pos <= list.size()) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        const std::string name = list.substr(pos, comma - pos);
        for (uint32_t id = 0; id < 40; ++id) {
          const auto t = static_cast<GgmlType>(id);
          if (test::matmul_block_bytes(t) == 0) continue;
          static const char* names[40] = {
              "f32",    "f16",  "q4_0", "q4_1",   "",     "", "q5_0", "q5_1", "q8_0", "",
              "q2_K",   "q3_K", "q4_K", "q5_K",   "q6_K", "", "",     "",     "",     "",
              "iq4_nl", "",     "",     "iq4_xs", "",     "", "",     "",     "",     "",
              "bf16",   "",     "",     "",       "",     "", "",     "",     "",     "mxfp4"};
          if (name == names[id]) types.push_back(t);
        }
        pos = comma + 1;
      }
    } else {
      threads = std::max(1, std::atoi(arg.c_str()));
    }
  }
  if (g_cpu_time && threads != 1) {
    std::fprintf(stderr, "--cpu-time needs 1 thread\n");
    return 1;
  }
  ThreadPool pool(threads);
  const double bandwidth = measure_read_bandwidth(pool);
  std::printf("threads %d, simd %s, sustained streaming read (512 MiB) %.1f GB/s\n", threads,
              simd_level_name(simd_level()), bandwidth);
  std::printf(
      "%%bw = batch-1 GB/s / best streaming read of the same weight copies by the same threads\n");

  {
    // Cost of one parallel op with no work: what each of decode's ~300 matmuls pays to use the
    // pool.
    const std::function<void(int)> nothing = [](int) {};
    for (int i = 0; i < 1000; ++i) pool.run(nothing);
    const auto t0 = Clock::now();
    for (int i = 0; i < 20000; ++i) pool.run(nothing);
    std::printf("thread pool: empty parallel op %.2f us\n", seconds_since(t0) / 20000 * 1e6);
  }

#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512vnni")) {
    std::vector<double> per_thread(static_cast<size_t>(threads));
    pool.run(
        [&](int t) { per_thread[static_cast<size_t>(t)] = vnni_peak_one_thread(50'000'000 / 24); });
    double total = 0.0;
    for (double v : per_thread) total += v;
    std::printf("int8 peak (512-bit vpdpbusd, measured): %.0f GMAC/s over %d threads\n",
                total / 1e9, threads);
  }
#endif

  std::vector<Shape> shapes = {
      {"2560->2048", 2560, 2048}, {"2560->10240", 2560, 10240}, {"10240->2560", 10240, 2560}};
  if (!quick) shapes.push_back({"2560->262144", 2560, 262144});
  if (!only_shape.empty()) {
    std::erase_if(shapes, [&](const Shape& s) { return only_shape != s.name; });
  }
  std::printf("%-7s %-13s %5s %10s %9s %8s %9s\n", "type", "shape", "batch", "time_us", "GB/s",
              "%bw", "GMAC/s");
  for (const GgmlType type : types) {
    const size_t row_bytes =
        static_cast<size_t>(2560 / test::matmul_block_elems(type)) * test::matmul_block_bytes(type);
    (void)row_bytes;
    for (const Shape& s : shapes) {
      const size_t rb = static_cast<size_t>(s.cols / test::matmul_block_elems(type)) *
                        test::matmul_block_bytes(type);
      const size_t matrix_bytes = rb * static_cast<size_t>(s.rows);
      const size_t copies = hot ? 1 : std::max<size_t>(1, (size_t{256} << 20) / matrix_bytes + 1);
      std::vector<std::vector<uint8_t>> weights;
      for (size_t c = 0; c < copies; ++c)
        weights.push_back(test::random_weights(type, s.rows, s.cols, static_cast<uint32_t>(c + 1)));
      // each copy as the model binds it: with LanePacks' copy where it makes one (Q4_0, small
      // Q8_0 at AVX-512), which the matmul then reads instead of the raw rows
      LanePacks packs;
      std::vector<WeightView> views;
      for (const auto& wbytes : weights) {
        views.push_back(WeightView{type, wbytes.data(), s.rows, s.cols, rb});
        if (!no_pack) packs.pack(views.back());
      }
      // The same weight copies read by the same threads with a plain streaming loop, timed the
      // same way (best of as many calls as batch 1 makes): the bandwidth this shape could get.
      double shape_bandwidth = 0.0;
      {
        const double macs1 = static_cast<double>(s.rows) * static_cast<double>(s.cols);
        const int iters = static_cast<int>(std::clamp(2e9 / macs1, 3.0, quick ? 50.0 : 400.0));
        std::vector<uint64_t> sinks(64);
        for (int it = 0; it < iters; ++it) {
          const auto& wbytes = weights[static_cast<size_t>(it) % copies];
          const auto* words = reinterpret_cast<const uint64_t*>(wbytes.data());
          const auto n_words = static_cast<int64_t>(wbytes.size() / 8);
          const double t0 = now_seconds();
          pool.parallel_for(n_words, 512, [&](int64_t b, int64_t e, int t) {
            sinks[static_cast<size_t>(t)] += read_words(words, b, e);
          });
          shape_bandwidth = std::max(
              shape_bandwidth, static_cast<double>(matrix_bytes) / (now_seconds() - t0) / 1e9);
        }
        if (sinks[0] == 42) std::printf(" ");
      }
      for (const int64_t batch : batches) {
        if (s.rows > 100000 && batch == 128) continue;  // the head at batch 128 takes seconds
        if (batch1_only && batch != 1) continue;
        const auto x = test::random_activations(s.cols * batch, 7);
        std::vector<float> y(static_cast<size_t>(s.rows * batch));
        const double macs =
            static_cast<double>(s.rows) * static_cast<double>(s.cols) * static_cast<double>(batch);
        const int iters = static_cast<int>(std::clamp(2e9 / macs, 3.0, quick ? 50.0 : 400.0));
        std::vector<double> times;
        for (int it = 0; it < iters + 1; ++it) {
          const WeightView& w = views[static_cast<size_t>(it) % copies];
          const double t0 = now_seconds();
          matmul(w, x.data(), batch, y.data(), &pool);
          if (it > 0) times.push_back(now_seconds() - t0);
        }
        std::sort(times.begin(), times.end());
        const double t = times.front();  // best run: the machine is shared, noise only adds time
        const double gbs = static_cast<double>(matrix_bytes) / t / 1e9;
        std::printf("%-7s %-13s %5lld %10.1f %9.2f %7.1f%% %9.2f\n", test::type_name(type), s.name,
                    static_cast<long long>(batch), t * 1e6, gbs, 100.0 * gbs / shape_bandwidth,
                    macs / t / 1e9);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
