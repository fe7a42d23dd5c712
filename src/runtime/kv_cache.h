// KV cache for one sequence of a model with full-attention, sliding-window and KV-sharing layers.
//
// Per layer:
//   full layer     keeps every position [0, n_ctx): cell = position
//   window layer   keeps a ring of  window - 1 + max_batch  cells: cell = position % cells. That
//                  holds the window of the oldest query of a micro-batch of up to max_batch tokens
//                  plus the micro-batch itself, so memory does not grow with the context
//   shared layer   allocates nothing and reads the cache of its source layer
// Rows are n_head_kv * head_dim values stored as F16 (default), F32, Q8_0 or Q4_0 (the ggml
// blocks of 32 values: 34 and 18 bytes) and handed out as f32. K and V are stored separately.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "backend/cpu/ops.h"

namespace boltrt {

enum class KvType { F16, F32, Q8_0, Q4_0 };
const char* kv_type_name(KvType t);
std::optional<KvType> kv_type_from_name(std::string_view name);  // "f16", "f32", "q8_0", "q4_0"
// "f16, f32, q8_0, q4_0": the accepted names, for error messages and help texts
const char* kv_type_names();

struct KvLayerSpec {
  int64_t row_size = 0;  // n_head_kv * head_dim (0 for shared layers)
  int64_t window = 0;    // > 0: sliding-window layer keeping a ring
  int32_t source = -1;   // >= 0: shared layer reading this layer's cache
};

class KvCache {
 public:
  // max_batch: the most positions one forward call adds (the prefill micro-batch size).
  KvCache(std::vector<KvLayerSpec> layers, int64_t n_ctx, int64_t max_batch, KvType type);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t max_batch() const { return max_batch_; }
  KvType type() const { return type_; }
  size_t bytes() const;  // memory held by all layers

  // The layer whose storage `layer` uses (itself unless shared).
  int32_t storage_layer(int32_t layer) const;
  // Cells a layer's storage has (n_ctx for full layers, the ring size for window layers).
  int64_t cells(int32_t layer) const;

  // Stores one position's K and V rows (row_size f32 each) for an owning layer.
  void write(int32_t layer, int64_t pos, const float* k, const float* v);
  // Reads positions [pos_begin, pos_end) of a layer (or its source) as f32 rows into k and v
  // ([pos_end - pos_begin][row_size]). Throws if any of them is no longer held.
  void read(int32_t layer, int64_t pos_begin, int64_t pos_end, float* k, float* v) const;
  // The same positions in place, in the cache's format, for cpu::AttentionAccumulator::add: row
  // j at position pos_begin + j (a window layer's ring may wrap once). Valid until the next
  // write. Throws as read() does.
  struct View {
    cpu::KvRows k, v;
  };
  View view(int32_t layer, int64_t pos_begin, int64_t pos_end) const;

  // Positions [0, n) hold valid data. Session bookkeeping: call after each forward.
  int64_t n_past() const { return n_past_; }
  void set_n_past(int64_t n);
  // Forgets positions >= n. Throws boltrt::Error when a ring no longer holds the window that
  // position n needs (rolling back further than max_batch tokens).
  void rollback(int64_t n);

  // Makes this cache hold positions [0, n) of `other` (same layout and type; n <= other's
  // n_past and n_ctx()). Window layers copy what `other` still holds of their window.
  void copy_prefix(const KvCache& other, int64_t n);

  // Oldest position a window layer still holds (0 for full layers).
  int64_t oldest_held(int32_t layer) const;

 private:
  struct Layer {
    KvLayerSpec spec;
    int64_t cells = 0;
    size_t row_bytes = 0;
    std::vector<uint8_t> k, v;
    std::vector<int64_t> cell_pos;  // window layers: the position each cell holds (-1: none)
  };
  void store_row(const float* src, uint8_t* dst, int64_t n) const;
  // n floats (a whole number of rows) from the cell bytes at src
  void load_row(const uint8_t* src, float* dst, int64_t n) const;
  void check_held(int32_t layer, const Layer& l, int64_t pos_begin, int64_t pos_end) const;

  std::vector<Layer> layers_;
  int64_t n_ctx_;
  int64_t max_batch_;
  KvType type_;
  int64_t n_past_ = 0;
};

}  // namespace boltrt
