#include "runtime/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "backend/cpu/ops.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "util/error.h"

namespace boltrt {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F16:
      return "f16";
    case KvType::F32:
      return "f32";
    case KvType::Q8_0:
      return "q8_0";
    case KvType::Q4_0:
      return "q4_0";
  }
  return "?";
}

const char* kv_type_names() {
  return "f16, f32, q8_0, q4_0";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  if (name == "f16" || name == "F16") return KvType::F16;
  if (name == "f32" || name == "F32") return KvType::F32;
  if (name == "q8_0" || name == "Q8_0") return KvType::Q8_0;
  if (name == "q4_0" || name == "Q4_0") return KvType::Q4_0;
  return std::nullopt;
}

KvCache::KvCache(std::vector<KvLayerSpec> layers, int64_t n_ctx, int64_t max_batch, KvType type)
    : n_ctx_(n_ctx), max_batch_(max_batch), type_(type) {
  if (n_ctx <= 0 || max_batch <= 0)
    fail("KV cache: n_ctx {} and batch {} must be > 0", n_ctx, max_batch);
  layers_.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    Layer& l = layers_[i];
    l.spec = layers[i];
    if (l.spec.source >= 0) {
      if (static_cast<size_t>(l.spec.source) >= i ||
          layers[static_cast<size_t>(l.spec.source)].source >= 0) {
        fail("KV cache: layer {} shares the cache of layer {}, which does not own one", i,
             l.spec.source);
      }
      continue;
    }
    if (l.spec.row_size <= 0) fail("KV cache: layer {} has row size {}", i, l.spec.row_size);
    switch (type) {
      case KvType::F32:
        l.row_bytes = static_cast<size_t>(l.spec.row_size) * 4;
        break;
      case KvType::F16:
        l.row_bytes = static_cast<size_t>(l.spec.row_size) * 2;
        break;
      case KvType::Q8_0:
      case KvType::Q4_0:  // blocks of 32 values: 34 bytes (q8_0) or 18 (q4_0)
        if (l.spec.row_size % 32 != 0) {
          fail("KV cache: {} needs rows of a multiple of 32 values, layer {} has {}",
               kv_type_name(type), i, l.spec.row_size);
        }
        l.row_bytes = static_cast<size_t>(l.spec.row_size / 32) * (type == KvType::Q8_0 ? 34 : 18);
        break;
    }
    l.cells = l.spec.window > 0 ? std::min(n_ctx, l.spec.window - 1 + max_batch) : n_ctx;
    l.k.resize(l.row_bytes * static_cast<size_t>(l.cells));
    l.v.resize(l.row_bytes * static_cast<size_t>(l.cells));
    if (l.spec.window > 0) l.cell_pos.assign(static_cast<size_t>(l.cells), -1);
  }
}

size_t KvCache::bytes() const {
  size_t total = 0;
  for (const Layer& l : layers_) total += l.k.size() + l.v.size();
  return total;
}

int32_t KvCache::storage_layer(int32_t layer) const {
  const Layer& l = layers_.at(static_cast<size_t>(layer));
  return l.spec.source >= 0 ? l.spec.source : layer;
}

int64_t KvCache::cells(int32_t layer) const {
  return layers_.at(static_cast<size_t>(storage_layer(layer))).cells;
}

void KvCache::store_row(const float* src, uint8_t* dst, int64_t n) const {
  switch (type_) {
    case KvType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case KvType::F16: {
      cpu::fp32_to_fp16_row(src, reinterpret_cast<uint16_t*>(dst), n);
      break;
    }
    case KvType::Q8_0:
      quantize_row(GgmlType::Q8_0, src, dst, n);
      break;
    case KvType::Q4_0:
      quantize_row(GgmlType::Q4_0, src, dst, n);
      break;
  }
}

void KvCache::load_row(const uint8_t* src, float* dst, int64_t n) const {
  switch (type_) {
    case KvType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      break;
    case KvType::F16: {
      cpu::fp16_to_fp32_row(reinterpret_cast<const uint16_t*>(src), dst, n);
      break;
    }
    case KvType::Q8_0:
      dequantize_row(GgmlType::Q8_0, src, dst, n);
      break;
    case KvType::Q4_0:
      dequantize_row(GgmlType::Q4_0, src, dst, n);
      break;
  }
}

void KvCache::write(int32_t layer, int64_t pos, const float* k, const float* v) {
  Layer& l = layers_.at(static_cast<size_t>(layer));
  if (l.spec.source >= 0) fail("KV cache: layer {} is shared and cannot be written", layer);
  if (pos < 0 || pos >= n_ctx_)
    fail("KV cache: position {} outside the context of {}", pos, n_ctx_);
  const int64_t cell = pos % l.cells;
  const size_t offset = static_cast<size_t>(cell) * l.row_bytes;
  store_row(k, l.k.data() + offset, l.spec.row_size);
  store_row(v, l.v.data() + offset, l.spec.row_size);
  if (!l.cell_pos.empty()) l.cell_pos[static_cast<size_t>(cell)] = pos;
}

void KvCache::check_held(int32_t layer, const Layer& l, int64_t pos_begin, int64_t pos_end) const {
  for (int64_t pos = pos_begin; pos < pos_end; ++pos) {
    if (pos < 0 || pos >= n_ctx_ ||
        (!l.cell_pos.empty() && l.cell_pos[static_cast<size_t>(pos % l.cells)] != pos)) {
      fail("KV cache: layer {} no longer holds position {}", layer, pos);
    }
  }
}

KvCache::View KvCache::view(int32_t layer, int64_t pos_begin, int64_t pos_end) const {
  const Layer& l = layers_.at(static_cast<size_t>(storage_layer(layer)));
  check_held(layer, l, pos_begin, pos_end);
  cpu::KvFormat format = cpu::KvFormat::F16;
  switch (type_) {
    case KvType::F16:
      break;
    case KvType::F32:
      format = cpu::KvFormat::F32;
      break;
    case KvType::Q8_0:
      format = cpu::KvFormat::Q8_0;
      break;
    case KvType::Q4_0:
      format = cpu::KvFormat::Q4_0;
      break;
  }
  View view;
  for (auto [rows, data] : {std::pair{&view.k, l.k.data()}, std::pair{&view.v, l.v.data()}}) {
    rows->format = format;
    rows->row_bytes = l.row_bytes;
    if (pos_end <= pos_begin) continue;
    // positions run through consecutive cells up to the end of a ring, then from cell 0
    const int64_t cell = pos_begin % l.cells;
    rows->rows[0] = data + static_cast<size_t>(cell) * l.row_bytes;
    rows->rows[1] = data;
    if (cell + (pos_end - pos_begin) > l.cells) rows->split = l.cells - cell;
  }
  return view;
}

void KvCache::read(int32_t layer, int64_t pos_begin, int64_t pos_end, float* k, float* v) const {
  const Layer& l = layers_.at(static_cast<size_t>(storage_layer(layer)));
  const int64_t n = l.spec.row_size;
  check_held(layer, l, pos_begin, pos_end);
  // Consecutive positions sit in consecutive cells up to the end of a ring: at most two runs,
  // each converted by one call (a row at a time cost a call per position and layer, ~10 % of a
  // small model's decode step at a few hundred positions). The conversion is exact either way.
  for (int64_t pos = pos_begin; pos < pos_end;) {
    const int64_t cell = pos % l.cells;
    const int64_t run = std::min(pos_end - pos, l.cells - cell);
    const size_t offset = static_cast<size_t>(cell) * l.row_bytes;
    load_row(l.k.data() + offset, k + (pos - pos_begin) * n, run * n);
    load_row(l.v.data() + offset, v + (pos - pos_begin) * n, run * n);
    pos += run;
  }
}

int64_t KvCache::oldest_held(int32_t layer) const {
  const Layer& l = layers_.at(static_cast<size_t>(storage_layer(layer)));
  if (l.cell_pos.empty()) return 0;
  int64_t oldest = n_past_;
  // The held positions of a ring form one run ending at n_past - 1.
  for (int64_t pos = n_past_ - 1; pos >= 0 && pos >= n_past_ - l.cells; --pos) {
    if (l.cell_pos[static_cast<size_t>(pos % l.cells)] != pos) break;
    oldest = pos;
  }
  return oldest;
}

void KvCache::copy_prefix(const KvCache& other, int64_t n) {
  if (other.layers_.size() != layers_.size() || other.type_ != type_) {
    fail("KV cache: copy between caches of different layouts");
  }
  if (n < 0 || n > other.n_past_ || n > n_ctx_) {
    fail("KV cache: cannot copy {} positions (source holds {}, context {})", n, other.n_past_,
         n_ctx_);
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& dst = layers_[i];
    const Layer& src = other.layers_[i];
    if (dst.spec.source != src.spec.source || dst.spec.row_size != src.spec.row_size ||
        dst.spec.window != src.spec.window) {
      fail("KV cache: copy between caches of different layouts (layer {})", i);
    }
    if (dst.spec.source >= 0) continue;
    // window layers: the positions the next query (n) can see; full layers: all of [0, n)
    const int64_t begin = dst.spec.window > 0 ? std::max<int64_t>(0, n - dst.spec.window + 1) : 0;
    if (!dst.cell_pos.empty()) std::fill(dst.cell_pos.begin(), dst.cell_pos.end(), -1);
    for (int64_t pos = begin; pos < n; ++pos) {
      const int64_t s_cell = pos % src.cells;
      if (!src.cell_pos.empty() && src.cell_pos[static_cast<size_t>(s_cell)] != pos) {
        fail("KV cache: source layer {} no longer holds position {}", i, pos);
      }
      const int64_t d_cell = pos % dst.cells;
      std::memcpy(dst.k.data() + static_cast<size_t>(d_cell) * dst.row_bytes,
                  src.k.data() + static_cast<size_t>(s_cell) * src.row_bytes, dst.row_bytes);
      std::memcpy(dst.v.data() + static_cast<size_t>(d_cell) * dst.row_bytes,
                  src.v.data() + static_cast<size_t>(s_cell) * src.row_bytes, dst.row_bytes);
      if (!dst.cell_pos.empty()) dst.cell_pos[static_cast<size_t>(d_cell)] = pos;
    }
  }
  n_past_ = n;
}

void KvCache::set_n_past(int64_t n) {
  if (n < 0 || n > n_ctx_) fail("KV cache: n_past {} outside [0, {}]", n, n_ctx_);
  n_past_ = n;
}

void KvCache::rollback(int64_t n) {
  if (n < 0 || n > n_past_) fail("KV cache: cannot roll back to {} (n_past {})", n, n_past_);
  const int64_t old = n_past_;
  n_past_ = n;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    if (l.cell_pos.empty()) continue;
    // The next query (position n) needs positions [n - window + 1, n).
    const int64_t need = std::max<int64_t>(0, n - l.spec.window + 1);
    if (oldest_held(static_cast<int32_t>(i)) > need) {
      n_past_ = old;
      fail(
          "KV cache: cannot roll back {} tokens: sliding-window layer {} keeps only the last {} "
          "positions",
          old - n, i, l.cells);
    }
  }
}

}  // namespace boltrt
