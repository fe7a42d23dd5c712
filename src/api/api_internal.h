// Glue between the public API (include/boltrt/boltrt.h) and the engine: a public Model is a
// ModelBackend plus the lock that serialises forward passes when the backend needs it.
//
// Include order matters in a file that sees both sides: the public types live in the inline
// namespace boltrt::api, so an engine header parsed AFTER <boltrt/boltrt.h> would find two
// `FinishReason`s in namespace boltrt. Engine headers come first (hence clang-format off), and
// code after this header names engine types that share a public name through aliases.
#pragma once
// clang-format off
#include <memory>
#include <mutex>

#include "api/model_backend.h"
#include "generate/generator.h"
#include "generate/grammar_controller.h"
#include "generate/reasoning.h"
#include "generate/reply_splitter.h"
#include "generate/speculative.h"
#include "generate/text_model.h"
#include "generate/text_stream.h"
#include "runtime/kv_cache.h"
#include "util/error.h"

namespace boltrt::engine {
using FinishReason = ::boltrt::FinishReason;
}  // namespace boltrt::engine

#include <boltrt/boltrt.h>
// clang-format on

namespace boltrt {
inline namespace api {

struct Model::Impl {
  std::shared_ptr<ModelBackend> backend;
  std::string architecture;
  std::mutex decode_mutex;  // taken around decode/rollback unless backend->concurrent_decode()
  SpeculativeOptions speculative;  // for sessions of a backend with a draft
};

// A public Model over any backend (tests wrap the fake backend with it).
std::shared_ptr<const Model> wrap_model_backend(std::shared_ptr<ModelBackend> backend,
                                                const SpeculativeOptions& speculative = {});

}  // namespace api
}  // namespace boltrt
