// boltrt::Error — the one exception type boltrt throws for bad input and failed resources.
#pragma once
#include <stdexcept>
#include <string>

namespace boltrt {

/// Thrown by every boltrt function that cannot do what was asked: a missing or malformed model
/// file, an unknown option value, a prompt longer than the context, an unusable request.
/// what() is a single line naming the thing that is wrong (file, field, tensor, byte offset),
/// e.g. "model.gguf: tensor 'blk.3.attn_q.weight' has shape [2560, 2048], expected [2560, 4096]".
/// A Model or Session that threw can still be used.
class Error : public std::runtime_error {
 public:
  /// Wraps a one-line message.
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace boltrt
