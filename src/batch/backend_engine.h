// The BatchEngine of a ModelBackend: `parallel` sequences of the model, prompts built with its
// tokenizer and chat format, replies split into reasoning and content at its markers.
#pragma once
#include <memory>

#include "api/model_backend.h"
#include "batch/engine.h"

namespace boltrt::batch {

std::unique_ptr<BatchEngine> make_backend_engine(std::shared_ptr<ModelBackend> backend,
                                                 int parallel);

}  // namespace boltrt::batch
