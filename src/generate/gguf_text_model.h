// Loads a GGUF file as a TextModel: the model (CPU backend), its tokenizer, its chat template
// and its sampling defaults (general.sampling.*).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "generate/text_model.h"

namespace boltrt {

struct TextModelOptions {
  std::string path;
  int threads = 0;              // 0: the number of physical cores
  int64_t n_ctx = 4096;         // capped by the model's training context; 0 = the training context
  std::string kv_type = "f16";  // f16 | f32 | q8_0
  int64_t n_batch = 0;          // prompt micro-batch size; 0: the session's default
  // where the model runs: auto | cpu | cuda (backend/device.h)
  std::string device = "auto";
  // Called while tensors load, with the fraction done (0..1).
  std::function<void(float)> on_progress;
};

std::unique_ptr<TextModel> load_text_model(const TextModelOptions& options);

}  // namespace boltrt
