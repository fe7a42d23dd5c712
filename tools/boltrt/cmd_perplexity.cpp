// boltrt perplexity -m FILE -f TEXT [-c 512] [-b 2048] [-t N] [--kv-type f16] [--chunks N]
// llama-perplexity's default method (see src/runtime/perplexity.h) and output: the running
// estimate after every window on one line, "[1]12.3456,[2]11.9876,...", then
// "Final estimate: PPL = X +/- Y". Progress and settings go to stderr.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "command.h"
#include "gguf/gguf.h"
#include "model/registry.h"
#include "runtime/perplexity.h"
#include "runtime/thread_pool.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt::cli {
namespace {

struct PerplexityArgs {
  std::string model;
  std::string text_file;
  int64_t n_ctx = 512;
  int64_t n_batch = 2048;
  int threads = 0;
  std::string kv_type = "f16";
  int64_t n_chunks = -1;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("-f: cannot open '{}'", path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("-f: error reading '{}'", path);
  return text;
}

void run(const PerplexityArgs& args) {
  const auto kv_type = kv_type_from_name(args.kv_type);
  if (!kv_type) fail("--kv-type: '{}' is not one of {}", args.kv_type, kv_type_names());
  if (args.n_ctx < 4) fail("-c: context {} is too small (need at least 4)", args.n_ctx);
  if (args.n_batch < 1) fail("-b: batch size {} must be positive", args.n_batch);
  // llama-perplexity requires the batch to be below the context or a whole number of windows.
  if (args.n_batch >= args.n_ctx && args.n_batch % args.n_ctx != 0) {
    fail("-b: batch size {} must be less than the context {} or a multiple of it", args.n_batch,
         args.n_ctx);
  }
  const std::string text = read_text(args.text_file);
  // Any architecture from the registry, in CPU sessions.
  const std::unique_ptr<LoadedModel> model = load_model(gguf::File::open(args.model));
  const auto tokenizer = text::Tokenizer::from_gguf(model->file());
  // common_tokenize(ctx, text, add_special=true, parse_special=false), as llama-perplexity does.
  const std::vector<text::TokenId> tokens = tokenizer->encode(text, true, false);
  const int32_t bos = tokenizer->add_bos() ? tokenizer->bos() : -1;

  const int threads = args.threads > 0 ? args.threads : default_threads();
  ThreadPool pool(threads);
  PerplexityOptions options;
  options.n_ctx = args.n_ctx;
  options.n_batch = args.n_batch;
  options.n_chunks = args.n_chunks;
  SessionOptions session_options;
  session_options.n_ctx = args.n_ctx;
  session_options.n_batch = std::min(args.n_batch, args.n_ctx);
  session_options.kv_type = *kv_type;
  const int64_t n_chunk_max = static_cast<int64_t>(tokens.size()) / args.n_ctx;
  const int64_t n_chunk =
      args.n_chunks < 0 ? n_chunk_max : std::min<int64_t>(args.n_chunks, n_chunk_max);
  fmt::print(stderr,
             "perplexity: {} tokens; calculating perplexity over {} chunks, n_ctx={}, "
             "batch_size={}, threads={}, kv={}\n",
             tokens.size(), n_chunk, args.n_ctx, session_options.n_batch, threads,
             kv_type_name(*kv_type));
  const auto result = compute_perplexity(
      tokens, bos, options,
      [&]() -> std::unique_ptr<LanguageModel> {
        return model->new_session(session_options, &pool);
      },
      [](int64_t window, double running) {
        fmt::print("[{}]{:.4f},", window + 1, running);
        std::fflush(stdout);
      });
  fmt::print("\n");
  if (result.ppl_error > 0) {
    fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f}\n", result.ppl, result.ppl_error);
  } else {
    fmt::print("Final estimate: PPL = {:.4f} (the log-probabilities have no spread)\n", result.ppl);
  }
}

void setup(CLI::App& sub) {
  auto args = std::make_shared<PerplexityArgs>();
  sub.add_option("-m,--model", args->model, "GGUF model file")->required();
  sub.add_option("-f,--file", args->text_file, "text file to score")->required();
  sub.add_option("-c,--ctx-size", args->n_ctx, "tokens per window")->capture_default_str();
  sub.add_option("-b,--batch-size", args->n_batch, "tokens per decode call (capped at -c)")
      ->capture_default_str();
  sub.add_option("-t,--threads", args->threads, "threads (default: physical cores)");
  sub.add_option("--kv-type,--cache-type-k,--cache-type-v", args->kv_type,
                 "KV cache type: f16 (default), f32, q8_0, q4_0 (K and V share one type)")
      ->capture_default_str()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub.add_option("--chunks", args->n_chunks, "windows to score (-1: all)")->capture_default_str();
  sub.callback([args] { run(*args); });
}

}  // namespace

BOLTRT_COMMAND(perplexity, "Perplexity of a text, as llama-perplexity computes it", setup);

}  // namespace boltrt::cli
