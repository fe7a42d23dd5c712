// boltrt synth-draft: write a synthetic (random-weight, deterministic) DFlash draft GGUF that
// fits a given target of any architecture with drafts (hidden size, vocabulary, layer count,
// tokenizer copied from it).
#include <fmt/format.h>

#include "command.h"
#include "gguf/gguf.h"
#include "model/dflash_synth.h"
#include "model/registry.h"
#include "util/error.h"

namespace {

struct SynthDraftArgs {
  std::string target;
  std::string out;
  std::string type = "f32";
  boltrt::model::DFlashSynthOptions options;
};

void setup(CLI::App& sub) {
  auto args = std::make_shared<SynthDraftArgs>();
  auto& o = args->options;
  sub.add_option("--dflash-for", args->target,
                 "Target model GGUF the draft must fit (any architecture that takes drafts)")
      ->required();
  sub.add_option("--layers", o.n_layer, "Draft layers")->capture_default_str();
  sub.add_option("--heads", o.n_head, "Query heads")->capture_default_str();
  sub.add_option("--kv-heads", o.n_head_kv, "KV heads")->capture_default_str();
  sub.add_option("--head-dim", o.head_dim, "Head size")->capture_default_str();
  sub.add_option("--ff", o.n_ff, "SwiGLU width")->capture_default_str();
  sub.add_option("--block-size", o.block_size, "Block size B")->capture_default_str();
  sub.add_option("--taps", o.target_layer_ids,
                 "Tapped target layers, HF ids (layer outputs; stored +1)");
  sub.add_option("--mask-token", o.mask_token, "Mask token id (default: the last token)");
  sub.add_option("--draft-vocab", o.n_vocab_draft,
                 "Reduced draft vocabulary (own head + d2t); 0: the target's");
  sub.add_option("--type", args->type,
                 "Matrix type (f32, f16, bf16, q8_0, q4_0, q4_K, q6_K, ...); norms stay f32")
      ->capture_default_str();
  sub.add_option("--seed", o.seed, "Random seed")->capture_default_str();
  sub.add_option("-o,--output", args->out, "Output GGUF path")->required();
  sub.callback([args] {
    auto target = boltrt::load_model(boltrt::gguf::File::open(args->target));
    const boltrt::LoadedModel::DraftShape shape = target->draft_shape();
    boltrt::model::DFlashSynthOptions options = args->options;
    const auto type = boltrt::type_from_name(args->type);
    if (!type) boltrt::fail("synth-draft: unknown matrix type '{}'", args->type);
    options.matrix_type = *type;
    options.tokenizer_from = &target->file();
    boltrt::model::write_dflash_synth(
        {shape.n_embd, shape.n_layer, shape.n_vocab, target->n_ctx_train()}, options, args->out);
    fmt::print("wrote {} (dflash draft for {})\n", args->out, args->target);
  });
}

}  // namespace

// Registered by hand: BOLTRT_COMMAND derives the name from an identifier, which cannot hold '-'.
static ::boltrt::cli::CommandRegistrar boltrt_command_synth_draft(
    "synth-draft", "Write a synthetic DFlash draft GGUF for a target model", setup);
