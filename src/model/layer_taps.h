// Optional capture of hidden states during a forward pass (DFlash KV injection,
// shared/docs/dflash.md A4), for every architecture: for every token of a forward batch (not
// only the rows producing logits), the residual stream at the *input* of each listed layer (id
// k: after layer k-1 finished; k == n_layer: the output of the last layer, before the final
// norm). out is [n_tokens][layers.size()][D], rows in batch order, taps in `layers` order.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>

#include "util/error.h"

namespace boltrt {

struct LayerTaps {
  std::span<const int32_t> layers;
  float* out = nullptr;

  // One clear error for a layer id outside [0, n_layer] or taps without an output.
  void check(int64_t n_layer) const {
    for (int32_t k : layers) {
      if (k < 0 || k > n_layer) fail("forward: tap layer {} outside [0, {}]", k, n_layer);
    }
    if (!layers.empty() && out == nullptr) fail("forward: taps without an output");
  }
  // Copies the residual stream h [n][D] into every slot that asks for the input of layer k.
  void capture(int64_t k, const float* h, int64_t n, int64_t D) const {
    const auto n_taps = static_cast<int64_t>(layers.size());
    for (int64_t i = 0; i < n_taps; ++i) {
      if (layers[static_cast<size_t>(i)] != k) continue;
      for (int64_t t = 0; t < n; ++t) {
        std::memcpy(out + (t * n_taps + i) * D, h + t * D, static_cast<size_t>(D) * sizeof(float));
      }
    }
  }
};

}  // namespace boltrt
