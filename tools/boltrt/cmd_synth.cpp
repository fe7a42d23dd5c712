// boltrt synth: write a synthetic (random-weight, deterministic) Gemma 4 or Qwen3.5 GGUF.
#include <fmt/format.h>

#include "command.h"
#include "model/gemma4_synth.h"
#include "model/qwen35_synth.h"
#include "util/error.h"

namespace {

struct SynthArgs {
  std::string arch = "gemma4";
  std::string preset = "tiny";
  int64_t nextn = 0;
  int64_t interval = 0;
  std::string type = "f32";
  uint64_t seed = 1;
  int64_t layers = 0;
  int64_t ctx = 0;
  std::string vocab_from;
  std::string out;
  bool untied = false;
  bool tied = false;
  bool split_experts = false;
  bool no_ple = false;
  bool kv_on_shared = false;
  int threads = 0;
  bool random_blocks = false;
  bool quantize_rows = false;
  bool zero_weights = false;
};

void write_qwen35(const SynthArgs& args) {
  auto config = boltrt::model::qwen35_preset(args.preset, args.layers);
  if (args.ctx > 0) config.context_length = args.ctx;
  if (args.untied) config.tied_output = false;
  if (args.tied) config.tied_output = true;
  if (args.nextn > 0) config.n_nextn = args.nextn;
  if (args.interval > 0) config.full_attention_interval = args.interval;
  if (args.split_experts || args.no_ple || args.kv_on_shared || !args.vocab_from.empty())
    boltrt::fail("--split-experts, --no-ple, --kv-on-shared and --vocab-from are gemma4 options");
  boltrt::model::Qwen35SynthOptions options;
  options.type = args.type;
  options.seed = args.seed;
  if (args.random_blocks) options.random_blocks = 1;
  if (args.quantize_rows) options.random_blocks = 0;
  options.zero_weights = args.zero_weights;
  options.threads = args.threads > 0 ? args.threads : boltrt::cli::default_threads();
  auto stats = boltrt::model::write_qwen35_synth(config, options, args.out);
  fmt::print(
      "wrote {}: qwen35 {} ({} layers + {} MTP, {} type), {} tensors, {:.3f} B params, {:.1f} "
      "MiB\n",
      args.out, args.preset, config.n_layer, config.n_nextn, args.type, stats.n_tensors,
      static_cast<double>(stats.n_params) / 1e9, static_cast<double>(stats.file_bytes) / (1 << 20));
}

void setup(CLI::App& sub) {
  auto args = std::make_shared<SynthArgs>();
  std::string presets, qwen_presets;
  for (const auto& p : boltrt::model::gemma4_preset_names())
    presets += (presets.empty() ? "" : ", ") + p;
  for (const auto& p : boltrt::model::qwen35_preset_names())
    qwen_presets += (qwen_presets.empty() ? "" : ", ") + p;
  sub.add_option("--arch", args->arch, "Architecture: gemma4 or qwen35")->capture_default_str();
  sub.add_option("--preset", args->preset,
                 "Model shape: gemma4 " + presets + "; qwen35 " + qwen_presets)
      ->capture_default_str();
  sub.add_option("--nextn", args->nextn, "qwen35: MTP blocks to append (present, unused)");
  sub.add_option("--interval", args->interval, "qwen35: full_attention_interval");
  sub.add_option("--type", args->type,
                 "Weights: f32 f16 bf16 q8_0 q4_0 q4_k q6_k (every matrix that type), or a "
                 "llama-quantize mix: q4_k_m q4_k_s q5_k_m q5_k_s q4_1 q5_0 q5_1")
      ->capture_default_str();
  sub.add_option("--seed", args->seed, "Random seed")->capture_default_str();
  sub.add_option("--layers", args->layers, "Override the layer count (pattern rebuilt)");
  sub.add_option("--ctx", args->ctx, "Override <arch>.context_length");
  sub.add_option("--vocab-from", args->vocab_from, "Copy the tokenizer from this GGUF");
  sub.add_flag("--untied", args->untied, "Write a separate output.weight");
  sub.add_flag("--tied", args->tied, "No output.weight (tie to token_embd)");
  sub.add_flag("--split-experts", args->split_experts,
               "ffn_gate_exps + ffn_up_exps instead of merged");
  sub.add_flag("--no-ple", args->no_ple, "Disable per-layer embeddings");
  sub.add_flag("--kv-on-shared", args->kv_on_shared,
               "Also write (unused) attn_k/attn_v on the shared-KV layers");
  sub.add_flag("--random-blocks", args->random_blocks,
               "Quantized types: random codes with sane scales (default above 300M params)");
  sub.add_flag("--zero-weights", args->zero_weights,
               "All tensor bytes zero, written sparse: full-size layouts for memory planning");
  sub.add_flag("--quantize-rows", args->quantize_rows,
               "Quantized types: quantize the float draws (default up to 300M params)");
  sub.add_option("-t,--threads", args->threads, "Threads (output does not depend on it)");
  sub.add_option("-o,--output", args->out, "Output GGUF path")->required();
  sub.callback([args] {
    if (args->arch == "qwen35") {
      write_qwen35(*args);
      return;
    }
    if (args->arch != "gemma4") boltrt::fail("unknown --arch '{}' (gemma4 or qwen35)", args->arch);
    auto config = boltrt::model::gemma4_preset(args->preset, args->layers);
    if (args->ctx > 0) config.context_length = args->ctx;
    if (args->untied) config.tied_output = false;
    if (args->tied) config.tied_output = true;
    if (args->split_experts) config.split_experts = true;
    if (args->no_ple) config.n_embd_per_layer = 0;
    if (args->kv_on_shared) config.kv_on_shared_layers = true;
    boltrt::model::Gemma4SynthOptions options;
    options.type = args->type;
    options.seed = args->seed;
    options.vocab_from = args->vocab_from;
    if (args->random_blocks) options.random_blocks = 1;
    if (args->quantize_rows) options.random_blocks = 0;
    options.zero_weights = args->zero_weights;
    options.threads = args->threads > 0 ? args->threads : boltrt::cli::default_threads();
    auto stats = boltrt::model::write_gemma4_synth(config, options, args->out);
    fmt::print(
        "wrote {}: gemma4 {} ({} layers, {} type), {} tensors, {:.3f} B params, {:.1f} MiB\n",
        args->out, args->preset, config.n_layer, args->type, stats.n_tensors,
        static_cast<double>(stats.n_params) / 1e9,
        static_cast<double>(stats.file_bytes) / (1 << 20));
  });
}

}  // namespace

BOLTRT_COMMAND(synth, "Write a synthetic random-weight Gemma 4 or Qwen3.5 GGUF", setup);
