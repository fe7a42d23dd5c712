// boltrt matmul against libggml's CPU mul_mat (llama.cpp v0.4.0 as built in ~/.cache/llama-ref,
// GGML_NATIVE=ON, OpenMP) on the same weights and activations: time per call for both and the
// largest difference between their outputs relative to max |y|. Not built by CMake. Build from
// the repository root after building boltrt_core in build/matmul:
//
//   R=$HOME/.cache/llama-ref
//   g++ -O2 -std=c++20 -Isrc -Itests -I$R/src/ggml/include bench/ggml_matmul_compare.cpp
//       build/matmul/libboltrt_core.a -L$R/build/bin -lggml -lggml-base -lggml-cpu -lfmt
//       -lpthread -Wl,-rpath,$R/build/bin -o build/matmul/ggml_matmul_compare    (one line)
//   build/matmul/ggml_matmul_compare q4_K 2560 10240 1 2      # type cols rows batch threads
//
// ggml here multiplies plain tensors (ggml_graph_compute), so its CPU_REPACK layouts,
// which llama.cpp uses for model weights, are not involved.
#include <ggml-cpu.h>
#include <ggml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "matmul_test_util.h"
#include "runtime/thread_pool.h"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s TYPE COLS ROWS BATCH THREADS\n", argv[0]);
    return 1;
  }
  const auto type = boltrt::type_from_name(argv[1]);
  if (!type) {
    std::fprintf(stderr, "unknown type %s\n", argv[1]);
    return 1;
  }
  const int64_t cols = std::atoll(argv[2]), rows = std::atoll(argv[3]), batch = std::atoll(argv[4]);
  const int threads = std::atoi(argv[5]);
  const size_t row_bytes = boltrt::row_size(*type, cols);
  const size_t matrix_bytes = row_bytes * static_cast<size_t>(rows);
  const int copies = static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / matrix_bytes + 1));

  ggml_cpu_init();
  ggml_init_params params{};
  params.mem_size = matrix_bytes * static_cast<size_t>(copies) +
                    static_cast<size_t>((cols + rows) * batch * 4) * static_cast<size_t>(copies) +
                    (size_t{64} << 20);
  params.no_alloc = false;
  ggml_context* ctx = ggml_init(params);

  std::vector<std::vector<uint8_t>> weights;
  const auto x = boltrt::test::random_activations(cols * batch, 7);
  std::vector<ggml_cgraph*> graphs;
  std::vector<ggml_tensor*> outputs;
  for (int c = 0; c < copies; ++c) {
    weights.push_back(
        boltrt::test::random_weights(*type, rows, cols, static_cast<uint32_t>(c + 1)));
    ggml_tensor* w = ggml_new_tensor_2d(ctx, static_cast<ggml_type>(*type), cols, rows);
    std::memcpy(w->data, weights.back().data(), matrix_bytes);
    ggml_tensor* a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, batch);
    std::memcpy(a->data, x.data(), x.size() * 4);
    ggml_tensor* y = ggml_mul_mat(ctx, w, a);
    ggml_cgraph* gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    graphs.push_back(gf);
    outputs.push_back(y);
  }

  // One work buffer (activation conversion) for every graph, as ggml_graph_compute_with_ctx
  // would allocate a new one in ctx on each call.
  std::vector<ggml_cplan> plans;
  std::vector<uint8_t> work;
  for (ggml_cgraph* gf : graphs) {
    plans.push_back(ggml_graph_plan(gf, threads, nullptr));
    work.resize(std::max(work.size(), plans.back().work_size));
  }
  for (ggml_cplan& plan : plans) plan.work_data = work.data();

  boltrt::ThreadPool pool(threads);
  std::vector<float> ours(static_cast<size_t>(rows * batch));
  const int iters =
      static_cast<int>(std::clamp(4e9 / (static_cast<double>(rows) * cols * batch), 5.0, 200.0));
  double best_ggml = 1e30, best_ours = 1e30;
  using Clock = std::chrono::steady_clock;
  for (int it = 0; it < iters; ++it) {
    const int c = it % copies;
    auto t0 = Clock::now();
    ggml_graph_compute(graphs[static_cast<size_t>(c)], &plans[static_cast<size_t>(c)]);
    best_ggml = std::min(best_ggml, std::chrono::duration<double>(Clock::now() - t0).count());
    const boltrt::WeightView wv{*type, weights[static_cast<size_t>(c)].data(), rows, cols,
                                row_bytes};
    t0 = Clock::now();
    boltrt::matmul(wv, x.data(), batch, ours.data(), &pool);
    best_ours = std::min(best_ours, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  // Outputs of the last copy.
  const boltrt::WeightView wv{*type, weights[static_cast<size_t>((iters - 1) % copies)].data(),
                              rows, cols, row_bytes};
  boltrt::matmul(wv, x.data(), batch, ours.data(), &pool);
  const auto* ref =
      static_cast<const float*>(outputs[static_cast<size_t>((iters - 1) % copies)]->data);
  double max_abs = 0.0, max_diff = 0.0;
  size_t identical = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(ref[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(ref[i]) - ours[i]));
    identical += ref[i] == ours[i];
  }
  const double macs =
      static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(batch);
  std::printf(
      "%-6s %6lld->%-7lld batch %4lld threads %d | ggml %9.1f us %7.2f GB/s %7.1f GMAC/s | boltrt "
      "(%s) %9.1f us "
      "%7.2f GB/s %7.1f GMAC/s | max|diff|/max|y| %.2e, identical %.1f%%\n",
      argv[1], static_cast<long long>(cols), static_cast<long long>(rows),
      static_cast<long long>(batch), threads, best_ggml * 1e6, matrix_bytes / best_ggml / 1e9,
      macs / best_ggml / 1e9, boltrt::simd_level_name(boltrt::simd_level()), best_ours * 1e6,
      matrix_bytes / best_ours / 1e9, macs / best_ours / 1e9, max_diff / max_abs,
      100.0 * static_cast<double>(identical) / ours.size());
  ggml_free(ctx);
  return 0;
}
