// boltrt logits -m FILE --ids 2,17,99 [-t N] [--kv-type f32|f16|q8_0|q4_0] [-b N] [--device D]
//               [--digits N]
// Prints one line per position, "pos argmax v0 v1 ... v(n_vocab-1)" with %.6g values: the
// layout of shared/tools/llama-ref/llama_logits, so the two outputs can be diffed directly.
// --digits 9 prints every float exactly (9 significant digits round-trip a float), for tools
// that must see the bits the sampler saw.
// The KV cache defaults to F32 here, as llama_logits' does (F16 on a CUDA device, which keeps
// F16 or Q8_0 caches).
#include <cstdio>
#include <string>
#include <vector>

#include "backend/device.h"
#include "command.h"
#include "device_options.h"
#include "generate/gguf_text_model.h"
#include "util/error.h"

namespace boltrt::cli {
namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 0 || v > INT32_MAX) {
      fail("--ids: '{}' is not a token id", item);
    }
    ids.push_back(static_cast<int32_t>(v));
    at = comma + 1;
  }
  return ids;
}

struct LogitsArgs {
  std::string model;
  std::string ids;
  int threads = 1;
  std::string kv_type;  // empty: f32 on the CPU, f16 on CUDA
  int64_t batch = 512;
  std::string device = "auto";
  int digits = 6;  // significant digits per value
};

void run(const LogitsArgs& args) {
  const std::vector<int32_t> ids = parse_ids(args.ids);
  if (args.digits < 1 || args.digits > 9) fail("--digits {}: must be 1 to 9", args.digits);
  TextModelOptions options;
  options.path = args.model;
  options.threads = std::max(1, args.threads);
  options.n_ctx = static_cast<int64_t>(ids.size());
  options.n_batch = args.batch;
  options.device = args.device;
  options.kv_type = !args.kv_type.empty()                                 ? args.kv_type
                    : resolve_device(args.device) == ComputeDevice::kCuda ? "f16"
                                                                          : "f32";
  const std::unique_ptr<TextModel> text = load_text_model(options);
  LanguageModel* session = &text->model();
  const auto logits = session->decode(ids, /*all_logits=*/true);
  const int64_t V = session->n_vocab();
  std::string line;
  char number[32];
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* row = logits.data() + i * static_cast<size_t>(V);
    int64_t argmax = 0;
    for (int64_t v = 1; v < V; ++v) {
      if (row[v] > row[argmax]) argmax = v;
    }
    line = std::to_string(i) + " " + std::to_string(argmax);
    for (int64_t v = 0; v < V; ++v) {
      std::snprintf(number, sizeof number, " %.*g", args.digits, static_cast<double>(row[v]));
      line += number;
    }
    line += '\n';
    std::fputs(line.c_str(), stdout);
  }
}

void setup(CLI::App& sub) {
  auto args = std::make_shared<LogitsArgs>();
  sub.add_option("-m,--model", args->model, "GGUF model file")->required();
  sub.add_option("-p,--ids,--tokens", args->ids, "comma-separated token ids")->required();
  sub.add_option("-t,--threads", args->threads, "threads")->capture_default_str();
  sub.add_option(
         "--kv-type,--cache-type-k,--cache-type-v", args->kv_type,
         "KV cache type: f32 (default here; f16 with --device cuda), f16, q8_0, q4_0 (K and V "
         "share one type)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub.add_option("-b,--batch", args->batch, "prompt micro-batch size")->capture_default_str();
  sub.add_option("--digits", args->digits,
                 "significant digits per value (9: exact floats; llama_logits prints 6)")
      ->capture_default_str();
  add_device_option(sub, &args->device);
  sub.callback([args] { run(*args); });
}

}  // namespace

BOLTRT_COMMAND(logits, "Print per-position logits for token ids (llama_logits format)", setup);

}  // namespace boltrt::cli
