// DFlash block-diffusion draft models (general.architecture = "dflash", shared/docs/dflash.md
// A2/A3) as llama.cpp v0.4.0 writes and reads them.
//
// A draft has no embedding table or LM head of its own (unless the file ships them): it embeds
// block tokens with its target's token_embd and decodes with the target's output head. It is
// conditioned on the target through "KV injection": the target hidden states at the tapped layers
// are concatenated per token (n_taps * D), projected by fc and RMS-normalised (hidden norm) into
// one context row per token, which every draft layer turns into extra K/V rows.
//
// dflash.cpp holds, in this order:
//   1. DFlashConfig::from_gguf   metadata -> hyper-parameters
//   2. DFlashDraft (constructor)  tensor binding (views into the mmapped file) + target checks
//   3. inject / draft / forward   the forward pass, straight-line
// Shapes in comments are in ggml order [ne0, ne1]: a matrix [in, out] maps in -> out.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "model/gemma4.h"

namespace boltrt {

namespace gguf {
class File;
}
class ThreadPool;

struct DFlashConfig {
  int64_t n_embd = 0;     // D (equals the target's hidden size)
  int64_t n_layer = 0;    // draft layers
  int64_t n_ff = 0;       // SwiGLU width
  int64_t n_head = 0;     // query heads
  int64_t n_head_kv = 0;  // KV heads
  int64_t head_dim = 0;   // attention.key_length (default D / n_head)
  int64_t n_rot = 0;      // rope.dimension_count (default head_dim), NEOX rotation
  float rope_base = 10000.0f;
  float rms_eps = 1e-6f;
  int64_t block_size = 16;  // B: the block is [last token, mask x (B-1)]
  int32_t mask_token = -1;  // tokenizer.ggml.mask_token_id (or the older dflash.mask_token_id)
  // Tapped target layers as stored: llama.cpp taps the *input* of target layer k, i.e. the output
  // of layer k-1 (HF target_layer_ids + 1). Never 0.
  std::vector<int32_t> target_layers;
  int64_t n_vocab_draft = 0;  // rows of the output head (target vocabulary unless d2t)
  // dflash.embedding_scale as written by the converter. llama.cpp v0.4.0 does not apply it
  // (the draft embeds with the raw target table); neither do we (see dflash.md A2 step 2).
  float embedding_scale_key = 0.0f;

  int64_t n_taps() const { return static_cast<int64_t>(target_layers.size()); }

  // Reads and checks the dflash.* keys; throws boltrt::Error naming the file and key.
  static DFlashConfig from_gguf(const gguf::File& file);
};

struct DFlashLayer {
  const float* attn_norm = nullptr;    // [D]      input_layernorm
  Matrix attn_q;                       // [D, H*hd]
  Matrix attn_k, attn_v;               // [D, Hkv*hd]
  Matrix attn_output;                  // [H*hd, D]
  const float* attn_q_norm = nullptr;  // [hd]     QK-norm
  const float* attn_k_norm = nullptr;  // [hd]
  const float* ffn_norm = nullptr;     // [D]      post_attention_layernorm
  Matrix ffn_gate, ffn_up;             // [D, n_ff]
  Matrix ffn_down;                     // [n_ff, D]
};

// The draft's cache of injected context rows: per layer, K (normed, roped) and V of every context
// token given to inject(), in order. Block rows are never stored.
struct DFlashKv {
  int64_t n_rows = 0;
  int64_t pos_end = 0;                // position after the last injected row
  std::vector<std::vector<float>> k;  // [layer][row][Hkv*hd]
  std::vector<std::vector<float>> v;  // [layer][row][Hkv*hd]
  // Drops rows >= n (rollback after verification).
  void truncate(int64_t n);
};

// Scratch memory of draft calls, reused between them (one per drafter).
struct DFlashScratch {
  std::vector<float> h, a, o, q, attn, gate, up, logits;
};

class Qwen35Model;

// What a draft reads from its target model: its sizes, its file (for token_embd when the draft
// ships none) and its output head. Made from any target architecture (Gemma 4, Qwen3.5:
// llama.cpp's dflash drafts Qwen3-style backbones for both); the model must outlive the draft.
struct DFlashTarget {
  int64_t n_embd = 0, n_layer = 0, n_vocab = 0;
  const gguf::File* target_file = nullptr;
  Matrix head;                             // the target's output head (its packed copy included)
  DFlashTarget(const Gemma4Model& model);  // NOLINT(google-explicit-constructor): a view
  DFlashTarget(const Qwen35Model& model);  // NOLINT(google-explicit-constructor)
  const gguf::File& file() const { return *target_file; }
  const Matrix& output() const { return head; }
};

class DFlashDraft {
 public:
  // Opens and maps the draft and checks it against the target it will run with.
  static std::unique_ptr<DFlashDraft> load(const std::string& path, const DFlashTarget& target);
  DFlashDraft(std::unique_ptr<gguf::File> file, const DFlashTarget& target);
  ~DFlashDraft();

  const DFlashConfig& config() const { return config_; }
  const gguf::File& file() const { return *file_; }
  const DFlashLayer& layer(int64_t i) const { return layers_.at(static_cast<size_t>(i)); }
  const DFlashTarget& target() const { return target_; }
  bool has_d2t() const { return !d2t_.empty(); }

  // Projects n_rows context rows into every layer's K/V and appends them to kv.
  //   taps: [n_rows][n_taps][D]  target hidden states at the tapped layers (config().target_layers
  //         order), token r at position kv.pos_end + r.
  void inject(const float* taps, int64_t n_rows, DFlashKv& kv, ThreadPool* pool) const;

  // Runs the block tokens[0..n_block) at positions kv.pos_end .. kv.pos_end+n_block-1 with
  // non-causal attention over [kv rows ; block rows] and writes the logits of block slots
  // 1..n_block-1 (slot i predicts the token *at* its own position): (n_block-1) rows of the
  // target's n_vocab floats. Raw output-head logits, as llama.cpp's DFlash draft produces them
  // (no soft-cap: monotone, the greedy proposals do not depend on it); with d2t, tokens outside
  // the draft vocabulary get -inf. Does not change kv.
  void draft(const int32_t* tokens, int64_t n_block, const DFlashKv& kv, float* logits,
             ThreadPool* pool) const;

  // Greedy drafting: the same block forward, writing the argmax token of each slot
  // 1..n_block-1 (the first maximum of the row draft() would write) to out[0..n_block-1).
  // The block's K/V rows are appended to kv for the call and cut off again (kv ends as it
  // started; its capacity is kept), so the context is never copied.
  void draft_greedy(const int32_t* tokens, int64_t n_block, DFlashKv& kv, DFlashScratch& ws,
                    int32_t* out, ThreadPool* pool) const;

  // Stateless convenience: inject the n_ctx context rows (positions 0..n_ctx-1) into a fresh
  // cache, then draft [last_token, mask x (n_block-1)] at positions n_ctx..
  void forward(const float* taps, int64_t n_ctx, int32_t last_token, int64_t n_block, float* logits,
               ThreadPool* pool) const;

 private:
  // The block forward up to the final norm: leaves slots 1..n-1's normed rows in ws.a
  // ([n-1][D]); kv as in draft_greedy.
  void run_block(const int32_t* tokens, int64_t n, DFlashKv& kv, DFlashScratch& ws,
                 ThreadPool* pool) const;
  int64_t c_vocab_rows() const { return config_.n_vocab_draft; }

  std::unique_ptr<gguf::File> file_;
  DFlashTarget target_;
  DFlashConfig config_;
  std::vector<std::vector<float>> converted_;  // f32 copies of non-f32 vectors
  LanePacks lane_packs_;                       // packed Q4_0 / Q5_0 / Q8_0 / Q4_K / Q5_K matrices
  Matrix fc_;                                  // [n_taps*D, D]
  const float* hidden_norm_ = nullptr;         // [D] enc.output_norm
  const float* output_norm_ = nullptr;         // [D]
  WeightView token_embd_;                      // [D, V] own or the target's
  Matrix output_;                              // [D, n_vocab_draft] own or the target's
  std::vector<int64_t> d2t_;                   // draft row -> target token (empty: identity)
  std::vector<DFlashLayer> layers_;
};

}  // namespace boltrt
