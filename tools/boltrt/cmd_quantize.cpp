// boltrt quantize IN.gguf OUT.gguf TYPE [-t N] [--pure] [--output-tensor-type T]
//   [--token-embedding-type T] [--tensor-type PATTERN=T ...]: llama-quantize's job (same tensor
// type mix and overrides, same bytes), with a progress bar when stderr is a terminal.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "command.h"
#include "quant/quant_mix.h"
#include "quant/quantize.h"
#include "quant/quantize_model.h"
#include "util/error.h"

namespace {

struct QuantizeArgs {
  std::string in, out, type;
  int threads = 0;
  bool allow_requantize = false;
  std::string imatrix;
  bool pure = false;
  std::string output_tensor_type, token_embedding_type;
  std::vector<std::string> tensor_types;
};

// A ggml type name (any case) that boltrt can write as a weight tensor.
boltrt::GgmlType weight_type(const std::string& name, std::string_view option) {
  const auto type = boltrt::type_from_name(name);
  if (!type) boltrt::fail("quantize: {}: unknown type '{}'", option, name);
  // Q8_1 and Q8_K are activation formats: ggml has no weight quantizer or matmul for them.
  if (!boltrt::can_quantize(*type) || *type == boltrt::GgmlType::Q8_1 ||
      *type == boltrt::GgmlType::Q8_K) {
    boltrt::fail("quantize: {}: boltrt cannot write {} tensors", option,
                 boltrt::type_traits(*type).name);
  }
  return *type;
}

// --tensor-type PATTERN=TYPE, split at the first '='; the pattern is lowercased, as
// llama-quantize does.
std::pair<std::string, boltrt::GgmlType> tensor_type_override(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos) {
    boltrt::fail("quantize: --tensor-type '{}' is not PATTERN=TYPE", arg);
  }
  if (eq == 0) boltrt::fail("quantize: --tensor-type '{}' has an empty pattern", arg);
  if (eq + 1 == arg.size()) boltrt::fail("quantize: --tensor-type '{}' has no type", arg);
  std::string pattern = arg.substr(0, eq);
  std::transform(pattern.begin(), pattern.end(), pattern.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return {pattern, weight_type(arg.substr(eq + 1), "--tensor-type")};
}

// One status line, redrawn in place at most ~10 times a second.
class ProgressBar {
 public:
  void update(const boltrt::QuantizeProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    const bool last = p.bytes_done >= p.bytes_total;
    if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const double fraction =
        p.bytes_total ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total) : 1;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < kWidth) bar += '>' + std::string(static_cast<size_t>(kWidth - filled - 1), ' ');
    std::string name(p.name.substr(0, 40));
    fmt::print(stderr, "\r[{}] {:3.0f}% {:4}/{} {:<40} {:>6} -> {:<6}", bar, 100 * fraction,
               p.tensor + 1, p.tensor_count, name, boltrt::type_traits(p.from).name,
               boltrt::type_traits(p.to).name);
    std::fflush(stderr);
    drawn_ = true;
  }
  void finish() {
    if (drawn_) fmt::print(stderr, "\n");
  }

 private:
  std::chrono::steady_clock::time_point last_draw_{};
  bool drawn_ = false;
};

void setup(CLI::App& sub) {
  auto args = std::make_shared<QuantizeArgs>();
  sub.add_option("input", args->in, "Input GGUF (F32/F16/BF16 weights)")->required();
  sub.add_option("output", args->out, "Output GGUF")->required();
  sub.add_option("type", args->type, "File type: " + boltrt::file_type_names())->required();
  sub.add_option("-t,--threads", args->threads, "Threads (default: physical cores)");
  sub.add_flag("--allow-requantize", args->allow_requantize,
               "Also convert tensors that are already quantized");
  sub.add_option("--imatrix", args->imatrix,
                 "Importance matrix from llama-imatrix (GGUF) for the quantizers");
  sub.add_flag("--pure", args->pure,
               "No type mix: every quantized tensor gets the file type's default type");
  sub.add_option("--output-tensor-type", args->output_tensor_type,
                 "Type of output.weight (and of tied token embeddings), e.g. q8_0");
  sub.add_option("--token-embedding-type", args->token_embedding_type,
                 "Type of token_embd.weight and per_layer_token_embd.weight");
  sub.add_option("--tensor-type", args->tensor_types,
                 "PATTERN=TYPE: tensors whose name matches the regex get TYPE (first match wins; "
                 "repeatable)")
      ->allow_extra_args(false);
  sub.callback([args] {
    const auto ftype = boltrt::file_type_from_name(args->type);
    if (!ftype) {
      boltrt::fail("quantize: unknown type '{}' (supported: {})", args->type,
                   boltrt::file_type_names());
    }
    boltrt::QuantizeOptions options;
    options.ftype = *ftype;
    options.threads = args->threads > 0 ? args->threads : boltrt::cli::default_threads();
    options.allow_requantize = args->allow_requantize;
    options.imatrix_path = args->imatrix;
    options.overrides.pure = args->pure;
    if (!args->output_tensor_type.empty()) {
      options.overrides.output_type = weight_type(args->output_tensor_type, "--output-tensor-type");
    }
    if (!args->token_embedding_type.empty()) {
      options.overrides.token_embedding_type =
          weight_type(args->token_embedding_type, "--token-embedding-type");
    }
    for (const std::string& arg : args->tensor_types) {
      options.overrides.tensor_types.push_back(tensor_type_override(arg));
    }
    ProgressBar bar;
    if (isatty(fileno(stderr))) {
      options.progress = [&bar](const boltrt::QuantizeProgress& p) { bar.update(p); };
    }
    const auto start = std::chrono::steady_clock::now();
    boltrt::QuantizeSummary s;
    try {
      s = boltrt::quantize_model(args->in, args->out, options);
    } catch (...) {
      bar.finish();
      throw;
    }
    bar.finish();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double mib = 1024.0 * 1024.0;
    fmt::print(
        "wrote {}: {} ({} tensors, {} converted, {} shape fallbacks), {:.2f} MiB -> {:.2f} MiB "
        "({:.2f} bits per weight), {:.1f} s with {} threads\n",
        args->out, boltrt::file_type_name(*ftype), s.n_tensors, s.n_converted, s.n_fallback,
        static_cast<double>(s.bytes_in) / mib, static_cast<double>(s.bytes_out) / mib,
        s.n_elements ? 8.0 * static_cast<double>(s.bytes_out) / static_cast<double>(s.n_elements)
                     : 0.0,
        seconds, options.threads);
  });
}

}  // namespace

BOLTRT_COMMAND(quantize, "Quantize a GGUF model (llama-quantize's type mix, same bytes)", setup);
