// Cost of a speculative verify step on the CPU (issue 8): one target forward over b tokens with
// the logits of every token, of the last one, or lazily of the first rows (Generator verifies
// a draft of b-1 tokens with decode_verify and reads rows until the first rejection) against
// one plain decode step (b = 1, last-token logits). Decode is bound by reading the weights, so a
// verify batch of draft_max + 1 tokens should cost little more than one token; the ratio bounds the
// speed-up a draft can give (tokens per step / cost per step).
//
//   bench_verify [--synth e4b|tiny|...] [--layers N] [--type q4_k_m|f32|...] [-t THREADS]
//                [--ctx N] [--max-batch B] [-r REPS] [--model FILE] [--draft DFLASH.gguf]
//
// For each b = 1..B prints ms per step (median of REPS steps, each at position --ctx after a
// prefill, rolled back after the step) and the ratio to b = 1. With --draft, also the cost of a
// DFlash proposal of n = 1..B-1 tokens at the same position (the draft's context holds the
// prompt's taps), and of injecting one round's accepted rows into its context.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "generate/speculative.h"
#include "model/dflash.h"
#include "model/gemma4.h"
#include "model/gemma4_session.h"
#include "model/gemma4_synth.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace {

using namespace boltrt;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds of `reps` runs after a warm-up one; `after` (untimed) follows each run.
template <typename Run, typename After>
double median_ms(int reps, Run&& run, After&& after) {
  run();
  after();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    after();
  }
  return median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "e4b", type = "q4_k_m", model_path, draft_path;
  int64_t layers = 0, ctx = 256, max_batch = 8;
  int threads = 1, reps = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "bench_verify: {} needs a value\n", a);
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--synth")
      preset = next();
    else if (a == "--layers")
      layers = std::stoll(next());
    else if (a == "--type")
      type = next();
    else if (a == "--model")
      model_path = next();
    else if (a == "--draft")
      draft_path = next();
    else if (a == "-t")
      threads = std::stoi(next());
    else if (a == "--ctx")
      ctx = std::stoll(next());
    else if (a == "--max-batch")
      max_batch = std::stoll(next());
    else if (a == "-r")
      reps = std::stoi(next());
    else {
      fmt::print(stderr, "bench_verify: unknown argument {}\n", a);
      return 1;
    }
  }
  try {
    std::string dir;
    if (model_path.empty()) {
      dir = (std::filesystem::temp_directory_path() / "boltrt_bench_verify").string();
      std::filesystem::create_directories(dir);
      model_path = dir + "/target.gguf";
      model::Gemma4SynthOptions so;
      so.type = type;
      so.threads = threads;
      model::write_gemma4_synth(model::gemma4_preset(preset, layers), so, model_path);
    }
    auto target = Gemma4Model::load(model_path);
    const Gemma4Config& config = target->config();
    ThreadPool pool(threads);
    SessionOptions sopt;
    sopt.n_ctx = ctx + max_batch + 1;
    sopt.n_batch = 64;
    Gemma4Session session(*target, sopt, &pool);
    std::vector<int32_t> prompt(static_cast<size_t>(ctx));
    for (int64_t i = 0; i < ctx; ++i)
      prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % config.n_vocab);
    std::unique_ptr<DFlashDraft> draft;
    std::unique_ptr<DFlashDrafter> drafter;
    if (!draft_path.empty()) {
      draft = DFlashDraft::load(draft_path, *target);
      drafter = std::make_unique<DFlashDrafter>(*draft, &pool);
      session.set_tap_layers(drafter->tap_layers());
    }
    session.decode(prompt);
    if (drafter) drafter->add_context(prompt, session.taps().data());

    fmt::print("{} {} ({} layers, D {}, vocab {}), {} threads, verify at position {}\n",
               model_path.substr(model_path.find_last_of('/') + 1), dir.empty() ? "" : type,
               config.n_layer, config.n_embd, config.n_vocab, threads, ctx);
    fmt::print("| tokens per step | logits of | ms per step | x one-token step |\n");
    fmt::print("|---:|:---|---:|---:|\n");
    // head_rows < 0: decode() with every row's logits; 0: decode() with the last row's;
    // > 0: decode_verify() and the lazy head of the first head_rows rows (what the generator
    // does when the first head_rows - 1 drafts are accepted).
    auto time_step = [&](const std::vector<int32_t>& step, int64_t head_rows) {
      auto run = [&] {
        if (head_rows < 0) {
          session.decode(step, true);
        } else if (head_rows == 0) {
          session.decode(step, false);
        } else {
          session.decode_verify(step);
          for (int64_t j = 0; j < head_rows; ++j) session.verify_row(j);
        }
      };
      return median_ms(reps, run, [&] { session.rollback(ctx); });
    };
    double one = 0;
    for (int64_t b = 1; b <= max_batch; ++b) {
      std::vector<int32_t> step(static_cast<size_t>(b));
      for (int64_t i = 0; i < b; ++i) step[static_cast<size_t>(i)] = static_cast<int32_t>(5 + i);
      // b = 1 is the plain decode step; b > 1 a verify step: every row's logits (all at once),
      // the last row's only (the share of the output head), and the lazy head of the first
      // row only (first draft rejected) and of half the rows.
      const std::pair<int64_t, std::string> kinds[] = {
          {-1, "all rows"},
          {0, "last row"},
          {1, "lazy, row 0"},
          {(b + 1) / 2, fmt::format("lazy, rows 0..{}", (b + 1) / 2 - 1)}};
      for (const auto& [head_rows, name] : kinds) {
        if (b == 1 && head_rows != 0) continue;
        if (name.starts_with("lazy, rows") && head_rows <= 1) continue;
        const double m = time_step(step, head_rows);
        if (b == 1) one = m;
        fmt::print("| {} | {} | {:.3f} | {:.2f} |\n", b, name, m, m / one);
      }
    }
    if (drafter) {
      // one proposal of n tokens after the prompt (the drafter's context is left as it was)
      auto time_ms = [&](auto&& run) { return median_ms(reps, run, [] {}); };
      fmt::print("\n| draft tokens | ms per proposal | x one-token step |\n|---:|---:|---:|\n");
      std::vector<int32_t> out(static_cast<size_t>(max_batch));
      for (int64_t n = 1; n < max_batch && n <= drafter->max_draft(); ++n) {
        const double m = time_ms([&] { drafter->propose(5, n, out.data()); });
        fmt::print("| {} | {:.3f} | {:.2f} |\n", n, m, m / one);
      }
      // a round's accepted rows into the draft context: inject, then roll back
      const int64_t rows = std::min<int64_t>(max_batch, ctx);
      const std::span<const int32_t> tail(prompt.data() + ctx - rows, static_cast<size_t>(rows));
      const float* tail_taps =
          session.taps().data() +
          (ctx - rows) * static_cast<int64_t>(drafter->tap_layers().size()) * config.n_embd;
      const double m = time_ms([&] {
        drafter->rollback(ctx - rows);
        drafter->add_context(tail, tail_taps);
        drafter->kv();  // the lazy injection runs now
      });
      fmt::print("| inject {} rows | {:.3f} | {:.2f} |\n", rows, m, m / one);
    }
    if (!dir.empty()) std::filesystem::remove_all(dir);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_verify: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
