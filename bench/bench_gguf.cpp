// GGUF reader and synthetic-model writer speed:
//   1. parsing a 10^5-tensor file and a Gemma 4 vocabulary (the real one when
//      tests/data/vocab/ggml-vocab-gemma-4.gguf exists: 262,144 tokens, ~515k merges);
//   2. generating the E4B shape in Q4_0 (random blocks, ~4 GB) into /dev/null, per thread count.
//   bench_gguf [threads...]
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/gemma4_synth.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename F>
double best_of(int runs, F&& f) {
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace boltrt;
  {
    gguf::Writer w;
    static const float one = 1.0f;
    for (int i = 0; i < 100000; ++i) {
      w.add_tensor_data(fmt::format("blk.{}.t", i), GgmlType::F32, std::vector<int64_t>{1}, &one);
    }
    auto bytes = w.write_to_memory();
    double s = best_of(5, [&] { gguf::File::parse(bytes, "many.gguf"); });
    fmt::print("parse 100000 tensor records ({:.1f} MiB): {:.1f} ms\n", bytes.size() / 1048576.0,
               s * 1e3);
  }
  // Run from the repository root (or give BOLTRT_VOCAB).
  const char* env = std::getenv("BOLTRT_VOCAB");
  const std::string vocab = env ? env : "tests/data/vocab/ggml-vocab-gemma-4.gguf";
  if (std::filesystem::exists(vocab)) {
    double s = best_of(5, [&] { gguf::File::open(vocab); });
    fmt::print("open+parse {} ({:.1f} MiB): {:.1f} ms\n", vocab,
               std::filesystem::file_size(vocab) / 1048576.0, s * 1e3);
  } else {
    fmt::print("skipping the real vocabulary: {} is missing (tools/fetch-test-data.sh)\n", vocab);
  }

  std::vector<int> threads;
  for (int i = 1; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, 2};
  for (int t : threads) {
    model::Gemma4SynthOptions o;
    o.type = "q4_0";
    o.threads = t;
    auto plan = model::plan_gemma4_synth(model::gemma4_preset("e4b"), o);
    auto t0 = std::chrono::steady_clock::now();
    model::write_gemma4_synth(model::gemma4_preset("e4b"), o, "/dev/null");
    double s = seconds_since(t0);
    fmt::print("synth e4b q4_0 ({:.2f} GiB) to /dev/null, {} threads: {:.2f} s, {:.2f} GiB/s\n",
               plan.file_bytes / 1073741824.0, t, s, plan.file_bytes / 1073741824.0 / s);
  }
  return 0;
}
