// boltrt quantize IN.gguf OUT.gguf TYPE [-t N]: llama-quantize's job (same tensor type mix,
// same bytes), with a progress bar when stderr is a terminal.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "command.h"
#include "quant/quant_mix.h"
#include "quant/quantize_model.h"
#include "util/error.h"

namespace {

struct QuantizeArgs {
  std::string in, out, type;
  int threads = 0;
  bool allow_requantize = false;
  std::string imatrix;
};

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
