// boltrt bench -m FILE [-p 512] [-n 128] [-t N] [-d 0] [-r 5] [-o md|json] [--kv-type f16]
// Prompt processing (ppN: N random tokens in micro-batches) and generation (tgN: N single-token
// decodes) throughput, measured and printed the way llama-bench does: one warm-up run, then -r
// repetitions, "avg ± stddev" tokens/s. With a depth -d D the cache first holds a D-token random
// prompt (untimed, computed once per thread count and depth; each repetition rolls back to it)
// and the row is named "pp512 @ d4096". -p, -n, -t and -d take comma lists; every combination
// is a row, in llama-bench's order (threads, then depth, then the pp rows, then the tg rows).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "command.h"
#include "device_options.h"
#include "gguf/gguf.h"
#include "model/model_description.h"
#include "model/registry.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt::cli {
namespace {

struct BenchArgs {
  std::string model;
  std::string n_prompt = "512";  // comma lists, parsed by int_list
  std::string n_gen = "128";
  std::string threads = "0";  // 0: default_threads()
  std::string depth = "0";
  int reps = 5;
  int batch = 512;
  std::string output = "md";
  bool json = false;
  std::string kv_type = "f16";
  std::string device = "auto";
};

struct Result {
  std::string test;
  int threads = 0, depth = 0, n_prompt = 0, n_gen = 0;
  std::vector<double> seconds;
  std::vector<double> rates() const {
    std::vector<double> r;
    for (double s : seconds) r.push_back((n_prompt + n_gen) / s);
    return r;
  }
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}
double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

// "512,1024" -> {512, 1024}; each value an integer >= min (one error line otherwise).
std::vector<int> int_list(const std::string& option, const std::string& text, int min) {
  std::vector<int> values;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? comma : comma - at);
    size_t used = 0;
    long value = -1;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < min || value > (1 << 30)) {
      fail("bench: {} '{}' is not a comma list of integers >= {}", option, text, min);
    }
    values.push_back(static_cast<int>(value));
    if (comma == std::string::npos) return values;
    at = comma + 1;
  }
}

// The rows of a run: for every thread count and depth, a ppN row per prompt size and a tgN row
// per generation length (sizes 0 skipped), as llama-bench orders its instances.
std::vector<Result> plan_rows(const std::vector<int>& threads, const std::vector<int>& depths,
                              const std::vector<int>& prompts, const std::vector<int>& gens) {
  std::vector<Result> rows;
  for (int t : threads) {
    for (int d : depths) {
      const std::string at = d > 0 ? " @ d" + std::to_string(d) : "";
      for (int p : prompts) {
        if (p > 0) rows.push_back({"pp" + std::to_string(p) + at, t, d, p, 0, {}});
      }
      for (int n : gens) {
        if (n > 0) rows.push_back({"tg" + std::to_string(n) + at, t, d, 0, n, {}});
      }
    }
  }
  return rows;
}

void run(const BenchArgs& args) {
  const auto kv_type = kv_type_from_name(args.kv_type);
  if (!kv_type) fail("--kv-type: '{}' is not one of {}", args.kv_type, kv_type_names());
  const std::vector<int> prompts = int_list("-p", args.n_prompt, 0);
  const std::vector<int> gens = int_list("-n", args.n_gen, 0);
  std::vector<int> thread_counts = int_list("-t", args.threads, 0);
  const std::vector<int> depths = int_list("-d", args.depth, 0);
  if (args.reps < 1 || args.batch < 1) fail("bench: -r and -b must be >= 1");
  const bool json = args.json || args.output == "json";
  if (!json && args.output != "md") fail("-o: '{}' is not md or json", args.output);
  for (int& t : thread_counts) t = t > 0 ? t : default_threads();
  // Any architecture from the registry: CPU sessions, or sessions on the CUDA device where the
  // architecture has a CUDA runtime (--device cuda is one error where it has none).
  const std::unique_ptr<LoadedModel> model = load_model(gguf::File::open(args.model));
  LoadedModel::DeviceSessions cuda_sessions;
  if (model->on_cuda(args.device)) {
    cuda_sessions = model->cuda_sessions();
    fmt::print(stderr, "boltrt: {}\n", model->cuda_description());
  }
  const gguf::File& file = model->file();
  auto new_session = [&](const SessionOptions& options,
                         ThreadPool* pool) -> std::unique_ptr<LanguageModel> {
    if (cuda_sessions) return cuda_sessions(options);
    return model->new_session(options, pool);
  };
  std::mt19937 rng(1234);
  // Token ids drawn over the vocabulary, set up once the first session says its size.
  std::uniform_int_distribution<int32_t> token;
  auto random_tokens = [&](int n) {
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int32_t& t : tokens) t = token(rng);
    return tokens;
  };

  std::vector<Result> results = plan_rows(thread_counts, depths, prompts, gens);
  int most_prompt = 1, most_gen = 0;
  for (int p : prompts) most_prompt = std::max(most_prompt, p);
  for (int n : gens) most_gen = std::max(most_gen, n);
  // One session per (threads, depth): its depth prompt is computed once and every row of the
  // pair starts from it (rolled back to it; recomputed when a ring cannot roll back that far).
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<LanguageModel> sequence;
  int session_threads = -1, session_depth = -1;
  std::vector<int32_t> depth_prompt;
  for (Result& r : results) {
    if (r.threads != session_threads || r.depth != session_depth) {
      sequence.reset();
      if (r.threads != session_threads) pool = std::make_unique<ThreadPool>(r.threads);
      SessionOptions options;
      options.n_ctx = r.depth + most_prompt + most_gen;
      options.n_batch = args.batch;
      options.kv_type = *kv_type;
      sequence = new_session(options, pool.get());
      token =
          std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(sequence->n_vocab() - 1));
      session_threads = r.threads;
      session_depth = r.depth;
      depth_prompt = random_tokens(r.depth);
      if (!depth_prompt.empty()) sequence->decode(depth_prompt);
    }
    LanguageModel& session = *sequence;
    auto to_depth = [&] {
      try {
        session.rollback(r.depth);
      } catch (const Error&) {  // a sliding-window ring no longer holds the depth's window
        session.reset();
        if (!depth_prompt.empty()) session.decode(depth_prompt);
      }
    };
    auto once = [&](bool warmup) {
      if (r.n_prompt > 0) session.decode(random_tokens(r.n_prompt));
      const int n_gen = warmup ? std::min(r.n_gen, 1) : r.n_gen;
      for (int i = 0; i < n_gen; ++i) {
        const int32_t t = token(rng);
        session.decode(std::span<const int32_t>(&t, 1));
      }
    };
    to_depth();
    once(true);
    for (int rep = 0; rep < args.reps; ++rep) {
      to_depth();
      const auto t0 = std::chrono::steady_clock::now();
      once(false);
      r.seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }

  uint64_t bytes = 0, params = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    bytes += t.nbytes;
    params += static_cast<uint64_t>(t.n_elements());
  }
  const std::string desc = model_description(file);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Result& r : results) {
      const auto rates = r.rates();
      std::vector<double> ns;
      for (double s : r.seconds) ns.push_back(s * 1e9);
      out.push_back({{"model_filename", args.model},
                     {"model_type", desc},
                     {"model_size", bytes},
                     {"model_n_params", params},
                     {"backend", cuda_sessions ? "CUDA" : "CPU"},
                     {"n_batch", args.batch},
                     {"n_threads", r.threads},
                     {"type_k", args.kv_type},
                     {"type_v", args.kv_type},
                     {"n_prompt", r.n_prompt},
                     {"n_gen", r.n_gen},
                     {"n_depth", r.depth},
                     {"avg_ns", mean(ns)},
                     {"stddev_ns", stddev(ns)},
                     {"avg_ts", mean(rates)},
                     {"stddev_ts", stddev(rates)},
                     {"samples_ns", ns},
                     {"samples_ts", rates}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  const std::string size = bytes < (1ull << 30) ? fmt::format("{:.2f} MiB", bytes / 1048576.0)
                                                : fmt::format("{:.2f} GiB", bytes / 1073741824.0);
  const std::string n_params = params < 1000000000ull ? fmt::format("{:.2f} M", params / 1e6)
                                                      : fmt::format("{:.2f} B", params / 1e9);
  std::printf("| model | size | params | backend | threads | test | t/s |\n");
  std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
  for (const Result& r : results) {
    const auto rates = r.rates();
    std::printf("| %s | %s | %s | %s | %d | %s | %.2f ± %.2f |\n", desc.c_str(), size.c_str(),
                n_params.c_str(), cuda_sessions ? "CUDA" : "CPU", r.threads, r.test.c_str(),
                mean(rates), stddev(rates));
  }
}

void setup(CLI::App& sub) {
  auto args = std::make_shared<BenchArgs>();
  sub.add_option("-m,--model", args->model, "GGUF model file")->required();
  sub.add_option("-p,--n-prompt", args->n_prompt, "prompt tokens, a comma list (0: skip)")
      ->capture_default_str();
  sub.add_option("-n,--n-gen", args->n_gen, "generated tokens, a comma list (0: skip)")
      ->capture_default_str();
  sub.add_option("-t,--threads", args->threads, "threads, a comma list (default: physical cores)");
  sub.add_option("-d,--n-depth", args->depth,
                 "tokens already in the KV cache before each test, a comma list")
      ->capture_default_str();
  sub.add_option("-r,--repetitions", args->reps, "repetitions")
      ->capture_default_str()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub.add_option("-b,--batch-size", args->batch, "prompt micro-batch")->capture_default_str();
  sub.add_option("-o,--output", args->output, "md or json")->capture_default_str();
  sub.add_flag("--json", args->json, "same as -o json");
  add_device_option(sub, &args->device);
  sub.add_option("--kv-type,--cache-type-k,--cache-type-v", args->kv_type,
                 "KV cache type: f16, f32, q8_0, q4_0 (K and V share one type)")
      ->capture_default_str()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub.callback([args] { run(*args); });
}

}  // namespace

BOLTRT_COMMAND(bench, "Prompt and generation throughput, like llama-bench", setup);

}  // namespace boltrt::cli
