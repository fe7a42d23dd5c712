#include "model/synth_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gguf/gguf_writer.h"
#include "quant/fp16.h"
#include "quant/quant_mix.h"
#include "quant/quantize.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt::model {

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float Rng::uniform() {
  return static_cast<float>(next() >> 40) * 0x1p-24f;
}

float Rng::normal() {
  // Sum of four U[0,1): mean 2, variance 1/3. Every partial sum is exact in float.
  float s = uniform() + uniform() + uniform() + uniform();
  return (s - 2.0f) * 1.7320508f;
}

uint64_t tensor_stream_seed(uint64_t seed, std::string_view tensor_name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : tensor_name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  uint64_t x = seed ^ h;
  return splitmix64(x);
}

namespace {
uint64_t row_seed(uint64_t tensor_seed, int64_t row) {
  uint64_t x = tensor_seed + 0x632be59bd9b4e019ull * static_cast<uint64_t>(row + 1);
  return splitmix64(x);
}
}  // namespace

void draw_row(const WeightInit& init, uint64_t tensor_seed, int64_t row, float* out, int64_t n) {
  if (init.kind == WeightInit::Kind::RopeFreqs) {
    for (int64_t i = 0; i < n; ++i) out[i] = i < init.rotating ? 1.0f : 1e30f;
    return;
  }
  Rng rng(row_seed(tensor_seed, row));
  const float mean = static_cast<float>(init.mean), sd = static_cast<float>(init.stddev);
  for (int64_t i = 0; i < n; ++i) out[i] = mean + sd * rng.normal();
}

namespace {

void random_bytes(Rng& rng, uint8_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng.next();
    std::memcpy(dst + i, &v, 8);
  }
  if (i < n) {
    uint64_t v = rng.next();
    std::memcpy(dst + i, &v, n - i);
  }
}

void put_f16(uint8_t* dst, float v) {
  uint16_t h = fp32_to_fp16(v);
  std::memcpy(dst, &h, 2);
}

// RMS of the integer factor each block type multiplies by its f16 scale when every code and
// sub-scale is uniformly random (see the comments per type); the scale is sd / rms.
//   Q8_0: q in -127..127                                 -> sqrt((255^2-1)/12)       = 73.6
//   Q4_0: q - 8, q in 1..15                              -> sqrt((15^2-1)/12)        = 4.32
//   Q4_K: sc*q - 7.5*m (dmin = 7.5 d centres the block), sc, m in 0..63, q in 0..15 -> 258
//   Q6_K: s*(q - 32), s int8, q in 0..63                 -> 73.9 * 18.48             = 1366
void random_block_row(GgmlType type, Rng& rng, float sd, uint8_t* dst, int64_t n) {
  switch (type) {
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < n / 32; ++b, dst += 34) {
        put_f16(dst, sd / 73.6f);
        for (int i = 0; i < 32; i += 8) {
          uint64_t r = rng.next();
          for (int k = 0; k < 8; ++k) {
            // -127..127: symmetric, so the block has no mean bias (bias 1/256 from modulo).
            int q = static_cast<int>((r >> (8 * k)) & 0xff) % 255 - 127;
            dst[2 + i + k] = static_cast<uint8_t>(static_cast<int8_t>(q));
          }
        }
      }
      return;
    case GgmlType::Q4_0:
      for (int64_t b = 0; b < n / 32; ++b, dst += 18) {
        put_f16(dst, sd / 4.32f);
        for (int i = 0; i < 16; i += 4) {
          uint64_t r = rng.next();
          for (int k = 0; k < 4; ++k) {
            // Codes 1..15 (value -7..7, symmetric around the offset 8), one random byte each
            // (modulo bias 1/256).
            uint32_t lo = static_cast<uint32_t>((r >> (16 * k)) & 0xff) % 15 + 1;
            uint32_t hi = static_cast<uint32_t>((r >> (16 * k + 8)) & 0xff) % 15 + 1;
            dst[2 + i + k] = static_cast<uint8_t>(lo | (hi << 4));
          }
        }
      }
      return;
    case GgmlType::Q4_K:
      for (int64_t b = 0; b < n / 256; ++b, dst += 144) {
        put_f16(dst, sd / 258.0f);
        put_f16(dst + 2, 7.5f * sd / 258.0f);
        random_bytes(rng, dst + 4, 140);
      }
      return;
    case GgmlType::Q6_K:
      for (int64_t b = 0; b < n / 256; ++b, dst += 210) {
        random_bytes(rng, dst, 208);
        put_f16(dst + 208, sd / 1366.0f);
      }
      return;
    default:
      fail("synth: no random-block generator for type {}", type_traits(type).name);
  }
}

void encode_row(GgmlType type, const WeightInit& init, uint64_t tensor_seed, int64_t row, int64_t n,
                bool random_blocks, uint8_t* dst, std::vector<float>& scratch) {
  if (type == GgmlType::F32) {
    draw_row(init, tensor_seed, row, reinterpret_cast<float*>(dst), n);
    return;
  }
  if (type == GgmlType::F16 || type == GgmlType::BF16) {
    scratch.resize(static_cast<size_t>(n));
    draw_row(init, tensor_seed, row, scratch.data(), n);
    auto* out = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = type == GgmlType::F16 ? fp32_to_fp16(scratch[i]) : fp32_to_bf16(scratch[i]);
      std::memcpy(out + i, &h, 2);
    }
    return;
  }
  const bool has_generator = type == GgmlType::Q8_0 || type == GgmlType::Q4_0 ||
                             type == GgmlType::Q4_K || type == GgmlType::Q6_K;
  if (!random_blocks || !has_generator) {
    scratch.resize(static_cast<size_t>(n));
    draw_row(init, tensor_seed, row, scratch.data(), n);
    quantize_row(type, scratch.data(), dst, n);
    return;
  }
  Rng rng(row_seed(tensor_seed, row));
  random_block_row(type, rng, static_cast<float>(init.stddev), dst, n);
}

}  // namespace

void write_weight_rows(GgmlType type, const WeightInit& init, uint64_t tensor_seed, int64_t ne0,
                       int64_t rows, bool random_blocks, ThreadPool* pool, gguf::TensorSink& sink) {
  if (init.kind == WeightInit::Kind::RopeFreqs && type != GgmlType::F32) {
    fail("synth: rope_freqs must be f32");
  }
  const size_t row_bytes = row_size(type, ne0);
  if (row_bytes == 0 || rows == 0) return;
  const int64_t batch = std::max<int64_t>(1, static_cast<int64_t>((size_t{16} << 20) / row_bytes));
  std::vector<uint8_t> buffer(static_cast<size_t>(std::min(batch, rows)) * row_bytes);
  for (int64_t r0 = 0; r0 < rows; r0 += batch) {
    const int64_t nr = std::min(batch, rows - r0);
    auto work = [&](int64_t b, int64_t e, int) {
      std::vector<float> scratch;
      for (int64_t r = b; r < e; ++r) {
        encode_row(type, init, tensor_seed, r0 + r, ne0, random_blocks,
                   buffer.data() + r * row_bytes, scratch);
      }
    };
    if (pool && nr > 1) {
      pool->parallel_for(nr, 1, work);
    } else {
      work(0, nr, 0);
    }
    sink.write(buffer.data(), static_cast<size_t>(nr) * row_bytes);
  }
}

namespace {
constexpr std::string_view kUniformTypes[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"};
}  // namespace

bool synth_uniform_type(std::string_view t) {
  return std::find(std::begin(kUniformTypes), std::end(kUniformTypes), t) !=
         std::end(kUniformTypes);
}

uint32_t synth_file_type(std::string_view t) {
  if (t == "f32") return 0;
  if (t == "f16") return 1;
  if (t == "bf16") return 32;
  if (t == "q8_0") return 7;
  if (t == "q4_0") return 2;
  if (t == "q4_k") return 14;  // every matrix Q4_K: closest llama ftype is Q4_K_S
  if (t == "q6_k") return 18;
  if (auto f = file_type_from_name(t); f && *f != FileType::F32) return static_cast<uint32_t>(*f);
  fail(
      "synth: unknown weight type '{}' (f32 f16 bf16 q8_0 q4_0 q4_k q6_k, or a llama-quantize "
      "type: {})",
      t, file_type_names());
}

GgmlType synth_matrix_type(std::string_view file_type, int64_t ne0) {
  GgmlType t = GgmlType::F32;
  if (file_type == "f16") t = GgmlType::F16;
  if (file_type == "bf16") t = GgmlType::BF16;
  if (file_type == "q8_0") t = GgmlType::Q8_0;
  if (file_type == "q4_0") t = GgmlType::Q4_0;
  if (file_type == "q6_k") t = GgmlType::Q6_K;
  if (file_type == "q4_k") t = GgmlType::Q4_K;
  if (ne0 % type_traits(t).block_size != 0) t = ne0 % 32 == 0 ? GgmlType::Q8_0 : GgmlType::F16;
  return t;
}

uint64_t synth_tensor_bytes(const SynthTensor& s) {
  int64_t rows = 1;
  for (size_t d = 1; d < s.ne.size(); ++d) rows *= s.ne[d];
  const TypeTraits& t = type_traits(s.type);
  return static_cast<uint64_t>(rows) * static_cast<uint64_t>(s.ne[0] / t.block_size) * t.type_size;
}

void apply_synth_quant_mix(std::vector<SynthTensor>& tensors, std::string_view arch,
                           int64_t n_layer, int64_t n_expert, std::string_view type) {
  ModelDesc model;
  model.arch = std::string(arch);
  model.n_layer = n_layer;
  model.n_expert = n_expert;
  for (const SynthTensor& s : tensors) {
    TensorDesc d;
    d.name = s.name;
    d.type = GgmlType::F32;
    for (size_t i = 0; i < s.ne.size(); ++i) d.ne[i] = s.ne[i];
    model.tensors.push_back(std::move(d));
  }
  for (const TensorPlan& p : plan_quantization(model, *file_type_from_name(type))) {
    tensors[p.index].type = p.quantizable ? p.target : GgmlType::F32;
  }
}

void add_synth_tensors(gguf::Writer& w, const std::vector<SynthTensor>& tensors, uint64_t seed,
                       bool random_blocks, bool zero_weights,
                       const std::unique_ptr<ThreadPool>& pool) {
  for (const SynthTensor& s : tensors) {
    const uint64_t tensor_seed = tensor_stream_seed(seed, s.name);
    if (zero_weights) {
      w.add_tensor(s.name, s.type, s.ne, [bytes = synth_tensor_bytes(s)](gguf::TensorSink& sink) {
        static const std::vector<uint8_t> zeros(size_t{1} << 20, 0);
        for (uint64_t done = 0; done < bytes;) {
          const size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), bytes - done));
          sink.write(zeros.data(), n);
          done += n;
        }
      });
      continue;
    }
    w.add_tensor(s.name, s.type, s.ne,
                 [s, tensor_seed, random_blocks, &pool](gguf::TensorSink& sink) {
                   int64_t rows = 1;
                   for (size_t d = 1; d < s.ne.size(); ++d) rows *= s.ne[d];
                   write_weight_rows(s.type, s.init, tensor_seed, s.ne[0], rows, random_blocks,
                                     pool.get(), sink);
                 });
  }
}

}  // namespace boltrt::model
