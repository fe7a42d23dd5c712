// Every Gemma 4 decode kernel of kernels/ against the CPU backend's reference (backend/cpu/ops.h)
// on awkward shapes. Without CUDA in the build, or without a usable device, every test SKIPS and
// says why (a skip is not a pass; CI has no GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/ops.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "support/cuda_buffers.h"
#include "support/cuda_skip.h"
#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemma4_math.h"
#include "ops.cuh"
#endif

namespace boltrt {
namespace {

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override { BOLTRT_SKIP_WITHOUT_CUDA_DEVICE(); }
};

[[maybe_unused]] std::vector<float> random_vector(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

#if defined(BOLTRT_HAVE_CUDA)

using test::from_device;
using test::to_device;

float* f32(const cuda::DeviceBuffer& b) {
  return static_cast<float*>(b.data());
}

TEST_F(CudaOps, RmsNormMatchesCpu) {
  for (int64_t n : {64, 256, 2560, 1000, 5000}) {  // every register-row size and the loop
    for (bool weighted : {true, false}) {
      const int64_t rows = 7;
      auto x = random_vector(static_cast<size_t>(rows * n), 1, 3.0f);
      auto w = random_vector(static_cast<size_t>(n), 2);
      auto h = random_vector(static_cast<size_t>(rows * n), 3);
      auto dx = to_device(x), dw = to_device(w), dy = to_device(x), dh = to_device(h);
      ASSERT_EQ(kernels::launch_rms_norm(f32(dx), weighted ? f32(dw) : nullptr, rows, n, 1e-6f,
                                         f32(dy), nullptr),
                cudaSuccess);
      ASSERT_EQ(kernels::launch_rms_norm_add(f32(dx), weighted ? f32(dw) : nullptr, rows, n, 1e-6f,
                                             f32(dh), nullptr),
                cudaSuccess);
      const auto y = from_device<float>(dy, x.size());
      const auto h_out = from_device<float>(dh, x.size());
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> ref(static_cast<size_t>(n));
        cpu::rms_norm(x.data() + r * n, weighted ? w.data() : nullptr, n, 1e-6f, ref.data());
        for (int64_t i = 0; i < n; ++i) {
          const float e = ref[static_cast<size_t>(i)];
          ASSERT_NEAR(y[static_cast<size_t>(r * n + i)], e, 2e-6f * std::fabs(e) + 1e-6f)
              << "n " << n << " row " << r << " i " << i;
          const float he = h[static_cast<size_t>(r * n + i)] + e;
          // relative to the terms, not the sum (h and the norm may cancel)
          const float terms = std::fabs(h[static_cast<size_t>(r * n + i)]) + std::fabs(e);
          ASSERT_NEAR(h_out[static_cast<size_t>(r * n + i)], he, 2e-6f * terms + 1e-6f);
        }
      }
    }
  }
}

TEST_F(CudaOps, RopeNeoxMatchesCpuIncludingPartialRotationAndFreqFactors) {
  struct Case {
    int64_t head_dim, n_rot, n_heads;
    float base;
    bool factors;
  };
  for (const Case& c : {Case{256, 256, 8, 1e4f, false}, Case{512, 512, 2, 1e6f, true},
                        Case{256, 128, 3, 1e6f, false}, Case{64, 64, 4, 1e4f, false}}) {
    for (int64_t pos0 : {0, 1000, 131000}) {
      const int64_t n_tokens = 3, half = c.n_rot / 2;
      auto x = random_vector(static_cast<size_t>(n_tokens * c.n_heads * c.head_dim), 5);
      // Gemma 4 rope_freqs: the first quarter of the pairs rotate, the rest barely move
      std::vector<float> ff(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i) ff[static_cast<size_t>(i)] = i < half / 4 ? 1.0f : 1e30f;
      auto dx = to_device(x), dff = to_device(ff);
      const float theta_scale = std::pow(c.base, -2.0f / static_cast<float>(c.n_rot));
      ASSERT_EQ(kernels::launch_rope_neox(f32(dx), n_tokens, c.n_heads, c.head_dim, c.n_rot, pos0,
                                          theta_scale, c.factors ? f32(dff) : nullptr, nullptr),
                cudaSuccess);
      const auto y = from_device<float>(dx, x.size());
      std::vector<float> cs(static_cast<size_t>(half)), sn(cs.size());
      for (int64_t t = 0; t < n_tokens; ++t) {
        cpu::rope_angles(pos0 + t, c.n_rot, c.base, c.factors ? ff.data() : nullptr, cs.data(),
                         sn.data());
        cpu::rope_neox(x.data() + t * c.n_heads * c.head_dim, c.n_heads, c.head_dim, c.n_rot,
                       cs.data(), sn.data());
      }
      for (size_t i = 0; i < x.size(); ++i) {
        // identical angles; device sincosf is within 2 ulp of the host's
        ASSERT_NEAR(y[i], x[i], 1e-5f)
            << "head_dim " << c.head_dim << " n_rot " << c.n_rot << " pos0 " << pos0 << " at " << i;
      }
    }
  }
}

TEST_F(CudaOps, GeluMulMatchesCpuWithStridedGate) {
  const int64_t rows = 3, n = 1000, stride = 2600;  // PLE: a slice of a longer row
  auto x = random_vector(static_cast<size_t>(rows * n), 7, 3.0f);
  auto y = random_vector(static_cast<size_t>(rows * stride), 8);
  auto dx = to_device(x), dy = to_device(y), dout = to_device(x);
  ASSERT_EQ(kernels::launch_gelu_mul(f32(dx), f32(dy) + 100, stride, rows, n, f32(dout), nullptr),
            cudaSuccess);
  ASSERT_EQ(kernels::launch_gelu_mul(f32(dx), f32(dy) + 100, stride, rows, n, f32(dx), nullptr),
            cudaSuccess);  // in place
  const auto out = from_device<float>(dout, x.size());
  const auto in_place = from_device<float>(dx, x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const float e = cpu::gelu_exact(x[static_cast<size_t>(r * n + i)]) *
                      y[static_cast<size_t>(r * stride + 100 + i)];
      ASSERT_NEAR(out[static_cast<size_t>(r * n + i)], e, 1e-5f * std::fabs(e) + 1e-6f);
      ASSERT_EQ(in_place[static_cast<size_t>(r * n + i)], out[static_cast<size_t>(r * n + i)]);
    }
  }
}

TEST_F(CudaOps, EmbedRowsMatchesDequantizeRow) {
  const int64_t rows = 10, cols = 512;
  const std::vector<int32_t> tokens = {3, 0, 9, 3, 7};
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                        GgmlType::Q6_K, GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    const size_t stride = row_size(type, cols);
    std::vector<uint8_t> table(stride * rows);
    for (int64_t r = 0; r < rows; ++r) {
      auto v = random_vector(static_cast<size_t>(cols), 20 + static_cast<uint32_t>(r));
      quantize_row(type, v.data(), table.data() + r * stride, cols);
    }
    auto dt = to_device(table), dtok = to_device(tokens);
    cuda::DeviceBuffer dout(tokens.size() * cols * 4);
    ASSERT_EQ(
        kernels::launch_embed_rows(static_cast<uint32_t>(type), dt.data(), stride, cols,
                                   static_cast<const int32_t*>(dtok.data()),
                                   static_cast<int64_t>(tokens.size()), 1.5f, f32(dout), nullptr),
        cudaSuccess);
    const auto out = from_device<float>(dout, tokens.size() * cols);
    std::vector<float> ref(static_cast<size_t>(cols));
    for (size_t t = 0; t < tokens.size(); ++t) {
      dequantize_row(type, table.data() + static_cast<size_t>(tokens[t]) * stride, ref.data(),
                     cols);
      for (int64_t i = 0; i < cols; ++i) {
        const float e = ref[static_cast<size_t>(i)] * 1.5f;
        // the device may fuse d * q - m into one FMA: an ulp of d * q (values ~N(0, 1))
        ASSERT_NEAR(out[t * cols + static_cast<size_t>(i)], e, 1e-6f * std::fabs(e) + 1e-6f)
            << type_traits(type).name << " token " << t << " at " << i;
      }
    }
  }
}

TEST_F(CudaOps, PleMixMatchesCpuSteps) {
  const int64_t rows = 6, P = 256;
  auto proj = random_vector(static_cast<size_t>(rows * P), 30, 40.0f);
  auto tok = random_vector(static_cast<size_t>(rows * P), 31);
  auto w = random_vector(static_cast<size_t>(P), 32);
  auto dp = to_device(proj), dt = to_device(tok), dw = to_device(w);
  const float ps = 1.0f / std::sqrt(2560.0f), ts = std::sqrt(256.0f), mix = 1.0f / std::sqrt(2.0f);
  ASSERT_EQ(
      kernels::launch_ple_mix(f32(dp), f32(dt), f32(dw), rows, P, ps, ts, mix, 1e-6f, nullptr),
      cudaSuccess);
  const auto out = from_device<float>(dp, proj.size());
  for (float& v : proj) v *= ps;  // the CPU's steps (Gemma4Model::forward §5.2)
  for (int64_t r = 0; r < rows; ++r)
    cpu::rms_norm(proj.data() + r * P, w.data(), P, 1e-6f, proj.data() + r * P);
  for (size_t i = 0; i < proj.size(); ++i) {
    const float e = (proj[i] + tok[i] * ts) * mix;
    const float terms = (std::fabs(proj[i]) + std::fabs(tok[i] * ts)) * mix;  // they may cancel
    ASSERT_NEAR(out[i], e, 2e-6f * terms + 1e-6f) << i;
  }
}

TEST_F(CudaOps, SoftcapAndScaleMatchCpu) {
  auto x = random_vector(100003, 40, 50.0f);
  auto dx = to_device(x), ds = to_device(x);
  ASSERT_EQ(kernels::launch_softcap(f32(dx), static_cast<int64_t>(x.size()), 30.0f, nullptr),
            cudaSuccess);
  ASSERT_EQ(kernels::launch_scale(f32(ds), static_cast<int64_t>(x.size()), 0.37f, nullptr),
            cudaSuccess);
  const auto capped = from_device<float>(dx, x.size());
  const auto scaled = from_device<float>(ds, x.size());
  std::vector<float> ref = x;
  cpu::softcap(ref.data(), static_cast<int64_t>(ref.size()), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(capped[i], ref[i], 2e-6f * std::fabs(ref[i]) + 1e-6f) << x[i];
    ASSERT_EQ(scaled[i], x[i] * 0.37f);
  }
}

TEST_F(CudaOps, KvStoreRoundsToF16IntoRingCells) {
  const int64_t row = 96, cells = 5, n = 4, pos0 = 7;  // positions 7..10 -> cells 2, 3, 4, 0
  auto k = random_vector(static_cast<size_t>(n * row), 50);
  auto v = random_vector(static_cast<size_t>(n * row), 51);
  std::vector<uint16_t> init(static_cast<size_t>(cells * row), 0x7777);
  auto dk = to_device(k), dv = to_device(v), kc = to_device(init), vc = to_device(init);
  ASSERT_EQ(kernels::launch_kv_store(f32(dk), f32(dv), n, row, pos0, cells,
                                     static_cast<uint16_t*>(kc.data()),
                                     static_cast<uint16_t*>(vc.data()), nullptr),
            cudaSuccess);
  const auto kout = from_device<uint16_t>(kc, init.size());
  const auto vout = from_device<uint16_t>(vc, init.size());
  for (int64_t t = 0; t < n; ++t) {
    const int64_t cell = (pos0 + t) % cells;
    for (int64_t i = 0; i < row; ++i) {
      ASSERT_EQ(kout[static_cast<size_t>(cell * row + i)],
                cpu::fp32_to_fp16(k[static_cast<size_t>(t * row + i)]));
      ASSERT_EQ(vout[static_cast<size_t>(cell * row + i)],
                cpu::fp32_to_fp16(v[static_cast<size_t>(t * row + i)]));
    }
  }
  for (int64_t i = 0; i < row; ++i) ASSERT_EQ(kout[static_cast<size_t>(1 * row + i)], 0x7777);
}

// Q8_0 KV store: the CPU cache's bytes (quantize_row Q8_0 of each row) at ring cells.
TEST_F(CudaOps, KvStoreQ8_0WritesTheCpuCacheBytesIntoRingCells) {
  const int64_t row = 256, cells = 5, n = 4, pos0 = 7;  // positions 7..10 -> cells 2, 3, 4, 0
  const size_t row_bytes = row_size(GgmlType::Q8_0, row);
  auto k = random_vector(static_cast<size_t>(n * row), 52, 3.0f);
  auto v = random_vector(static_cast<size_t>(n * row), 53);
  std::vector<uint8_t> init(static_cast<size_t>(cells) * row_bytes, 0x77);
  auto dk = to_device(k), dv = to_device(v), kc = to_device(init), vc = to_device(init);
  for (bool device_pos : {false, true}) {
    std::vector<int64_t> pos_host = {pos0};
    auto dpos = to_device(pos_host);
    ASSERT_EQ(kernels::launch_kv_store_q8_0(
                  f32(dk), f32(dv), n, row, device_pos ? -1 : pos0, cells,
                  static_cast<uint8_t*>(kc.data()), static_cast<uint8_t*>(vc.data()), nullptr,
                  device_pos ? static_cast<const int64_t*>(dpos.data()) : nullptr),
              cudaSuccess);
    const auto kout = from_device<uint8_t>(kc, init.size());
    const auto vout = from_device<uint8_t>(vc, init.size());
    std::vector<uint8_t> want(row_bytes);
    for (int64_t t = 0; t < n; ++t) {
      const size_t cell = static_cast<size_t>((pos0 + t) % cells);
      quantize_row(GgmlType::Q8_0, k.data() + t * row, want.data(), row);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), kout.begin() + cell * row_bytes)) << t;
      quantize_row(GgmlType::Q8_0, v.data() + t * row, want.data(), row);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), vout.begin() + cell * row_bytes)) << t;
    }
    for (size_t i = 0; i < row_bytes; ++i) ASSERT_EQ(kout[row_bytes + i], 0x77);  // cell 1
  }
}

// Attention over an F16 (or Q8_0) cache filled position by position (rings overwrite old
// cells), against cpu::attention on the same rounded keys/values (and a float64 reference with
// soft-cap).
struct AttentionCase {
  int64_t head_dim, n_head, n_head_kv, window, n_tokens, pos0;
  float scale, cap;
};

// n_split 0: the prefill (flash) kernel instead of the decode kernel.
void check_attention(const AttentionCase& c, int n_split,
                     kernels::KvFormat format = kernels::KvFormat::kF16) {
  const int64_t row = c.n_head_kv * c.head_dim, end = c.pos0 + c.n_tokens;
  const int64_t cells = c.window > 0 ? std::min(end, c.window - 1 + c.n_tokens) : end + 3;
  const bool q8 = format == kernels::KvFormat::kQ8_0;
  const size_t cell_bytes = q8 ? row_size(GgmlType::Q8_0, row) : static_cast<size_t>(row) * 2;
  std::vector<uint8_t> kc(static_cast<size_t>(cells) * cell_bytes), vc(kc.size());
  std::vector<float> k_all(static_cast<size_t>(end * row)), v_all(k_all.size());
  auto k_src = random_vector(k_all.size(), 60), v_src = random_vector(k_all.size(), 61);
  for (int64_t p = 0; p < end; ++p) {
    uint8_t* kd = kc.data() + static_cast<size_t>(p % cells) * cell_bytes;
    uint8_t* vd = vc.data() + static_cast<size_t>(p % cells) * cell_bytes;
    const size_t at = static_cast<size_t>(p * row);
    if (q8) {  // the CPU cache's bytes, and the values it hands back
      quantize_row(GgmlType::Q8_0, k_src.data() + at, kd, row);
      quantize_row(GgmlType::Q8_0, v_src.data() + at, vd, row);
      dequantize_row(GgmlType::Q8_0, kd, k_all.data() + at, row);
      dequantize_row(GgmlType::Q8_0, vd, v_all.data() + at, row);
      continue;
    }
    for (int64_t i = 0; i < row; ++i) {
      const uint16_t kh = cpu::fp32_to_fp16(k_src[at + i]), vh = cpu::fp32_to_fp16(v_src[at + i]);
      std::memcpy(kd + 2 * i, &kh, 2);
      std::memcpy(vd + 2 * i, &vh, 2);
      k_all[at + i] = cpu::fp16_to_fp32(kh);
      v_all[at + i] = cpu::fp16_to_fp32(vh);
    }
  }
  auto q = random_vector(static_cast<size_t>(c.n_tokens * c.n_head * c.head_dim), 62);
  auto dq = to_device(q), dk = to_device(kc), dv = to_device(vc);
  cuda::DeviceBuffer dout(q.size() * 4);
  const size_t partial_floats =
      kernels::attention_partials_floats(c.n_tokens, c.n_head, c.head_dim, n_split);
  cuda::DeviceBuffer partials(std::max<size_t>(1, partial_floats) * 4);
  if (n_split == 0) {
    ASSERT_EQ(kernels::launch_attention_prefill(f32(dq), dk.data(), dv.data(), c.n_tokens, c.pos0,
                                                cells, c.n_head, c.n_head_kv, c.head_dim, c.window,
                                                c.scale, c.cap, f32(dout), nullptr, format),
              cudaSuccess);
  } else {
    ASSERT_EQ(kernels::launch_attention_decode(f32(dq), dk.data(), dv.data(), c.n_tokens, c.pos0,
                                               cells, c.n_head, c.n_head_kv, c.head_dim, c.window,
                                               c.scale, c.cap, n_split, f32(partials), f32(dout),
                                               nullptr, nullptr, format),
              cudaSuccess);
  }
  const auto out = from_device<float>(dout, q.size());

  std::vector<float> ref(q.size());
  const int64_t first = cuda::first_visible_key(c.pos0, c.window);
  if (c.cap == 0.0f) {
    cpu::attention(q.data(), c.n_tokens, c.pos0, k_all.data() + first * row,
                   v_all.data() + first * row, end - first, first, c.n_head, c.n_head_kv,
                   c.head_dim, c.window, c.scale, ref.data(), nullptr);
  } else {
    const int64_t group = c.n_head / c.n_head_kv;
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      const int64_t pos = c.pos0 + t;
      for (int64_t h = 0; h < c.n_head; ++h) {
        const float* qh = q.data() + (t * c.n_head + h) * c.head_dim;
        std::vector<double> scores;
        double max = -1e300;
        for (int64_t j = cuda::first_visible_key(pos, c.window); j <= pos; ++j) {
          const float* kr = k_all.data() + j * row + (h / group) * c.head_dim;
          double s = 0;
          for (int64_t d = 0; d < c.head_dim; ++d) s += double(qh[d]) * kr[d];
          s = c.cap * std::tanh(s * c.scale / c.cap);
          scores.push_back(s);
          max = std::max(max, s);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max));
        for (int64_t d = 0; d < c.head_dim; ++d) {
          double acc = 0;
          int64_t idx = 0;
          for (int64_t j = cuda::first_visible_key(pos, c.window); j <= pos; ++j, ++idx) {
            acc += scores[static_cast<size_t>(idx)] *
                   v_all[static_cast<size_t>(j * row + (h / group) * c.head_dim + d)];
          }
          ref[static_cast<size_t>((t * c.n_head + h) * c.head_dim + d)] =
              static_cast<float>(acc / sum);
        }
      }
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    // values ~N(0, 1); f32 scores of up to 512 products and f32 accumulation over the keys
    ASSERT_NEAR(out[i], ref[i], 2e-4f)
        << "head_dim " << c.head_dim << " heads " << c.n_head << "/" << c.n_head_kv << " window "
        << c.window << " tokens " << c.n_tokens << " pos0 " << c.pos0 << " cap " << c.cap
        << " splits " << n_split << " q8_0 " << q8 << " at " << i;
  }
}

TEST_F(CudaOps, AttentionDecodeMatchesCpu) {
  const AttentionCase cases[] = {
      {256, 8, 2, 0, 1, 0, 1.0f / 16, 0},       // the first token
      {256, 8, 2, 512, 1, 700, 1.0f / 16, 0},   // E4B window layer, ring wrapped
      {512, 8, 2, 0, 1, 900, 1.0f / 22.6f, 0},  // E4B full layer
      {512, 8, 8, 0, 5, 37, 1.0f / 22.6f, 0},   // no GQA, a prefill micro-batch
      {256, 4, 1, 16, 6, 40, 0.0625f, 0},       // window smaller than the batch's span
      {64, 4, 2, 8, 3, 100, 1.0f, 0},           // tiny synth shapes, unscaled scores
      {128, 4, 2, 0, 2, 50, 0.125f, 50.0f},     // soft-capped scores
      {256, 2, 1, 32, 1, 200, 1.0f / 16, 20.0f},
  };
  for (const AttentionCase& c : cases) {
    for (int n_split : {1, 3, 7}) check_attention(c, n_split);
    check_attention(c, kernels::attention_split_count(c.pos0 + c.n_tokens, c.n_tokens, c.n_head));
    // Q8_0 cache (--kv-type q8_0)
    check_attention(c, 1, kernels::KvFormat::kQ8_0);
    check_attention(c, 3, kernels::KvFormat::kQ8_0);
  }
}

TEST_F(CudaOps, AttentionPrefillMatchesCpu) {
  const AttentionCase cases[] = {
      {256, 8, 2, 0, 1, 0, 1.0f / 16, 0},        // one query, one key
      {256, 8, 2, 0, 37, 0, 1.0f / 16, 0},       // a first chunk: causal mask inside the chunk
      {256, 8, 2, 32, 70, 0, 1.0f / 16, 0},      // E4B window layer shape, window < chunk
      {256, 8, 2, 512, 64, 700, 1.0f / 16, 0},   // a later chunk over a wrapped ring
      {512, 8, 2, 0, 33, 900, 1.0f / 22.6f, 0},  // E4B full layer (hd 512) after 900 tokens
      {512, 8, 2, 0, 128, 0, 1.0f / 22.6f, 0},   // hd 512, a whole first chunk
      {512, 8, 8, 0, 5, 37, 1.0f / 22.6f, 0},    // no GQA
      {512, 4, 1, 24, 19, 50, 1.0f / 22.6f, 0},  // group 4 over one KV head, window
      {256, 4, 1, 16, 6, 40, 0.0625f, 0},        // window smaller than the batch's span
      {64, 4, 2, 8, 17, 100, 1.0f, 0},           // tiny synth shapes, unscaled scores
      {128, 6, 2, 0, 23, 50, 0.125f, 50.0f},     // soft-capped scores, group 3
      {192, 3, 3, 5, 9, 3, 0.1f, 0},             // head_dim 192, window 5
  };
  for (const AttentionCase& c : cases) {
    check_attention(c, 0);
    check_attention(c, 0, kernels::KvFormat::kQ8_0);
  }
}

// The decode graph passes the position in device memory: every kernel that reads it must give
// bit-identical results to the argument; splits beyond the keys (a graph's bucket is larger
// than the context) merge as nothing.
TEST_F(CudaOps, DevicePositionEqualsTheArgument) {
  const int64_t pos = 700, hd = 256, H = 8, Hkv = 2, cells = 1024;
  std::vector<int64_t> pos_host = {pos};
  auto dpos = to_device(pos_host);
  const auto* device_pos = static_cast<const int64_t*>(dpos.data());
  {  // rope
    auto x = random_vector(static_cast<size_t>(H * hd), 70);
    auto a = to_device(x), b = to_device(x);
    ASSERT_EQ(kernels::launch_rope_neox(f32(a), 1, H, hd, hd, pos, 0.9f, nullptr, nullptr),
              cudaSuccess);
    ASSERT_EQ(
        kernels::launch_rope_neox(f32(b), 1, H, hd, hd, 0, 0.9f, nullptr, nullptr, device_pos),
        cudaSuccess);
    EXPECT_EQ(from_device<float>(a, x.size()), from_device<float>(b, x.size()));
  }
  // caches filled at every position up to pos by the argument form, the last row also by the
  // device form into a second cache
  auto kv_src = random_vector(static_cast<size_t>(cells * Hkv * hd), 71);
  std::vector<uint16_t> kv_half(kv_src.size());
  for (size_t i = 0; i < kv_src.size(); ++i) kv_half[i] = cpu::fp32_to_fp16(kv_src[i]);
  auto kc = to_device(kv_half), vc = to_device(kv_half), kc2 = to_device(kv_half),
       vc2 = to_device(kv_half);
  auto row = random_vector(static_cast<size_t>(Hkv * hd), 72);
  auto drow = to_device(row);
  ASSERT_EQ(kernels::launch_kv_store(f32(drow), f32(drow), 1, Hkv * hd, pos, cells,
                                     static_cast<uint16_t*>(kc.data()),
                                     static_cast<uint16_t*>(vc.data()), nullptr),
            cudaSuccess);
  ASSERT_EQ(kernels::launch_kv_store(f32(drow), f32(drow), 1, Hkv * hd, 0, cells,
                                     static_cast<uint16_t*>(kc2.data()),
                                     static_cast<uint16_t*>(vc2.data()), nullptr, device_pos),
            cudaSuccess);
  EXPECT_EQ(from_device<uint16_t>(kc, kv_half.size()), from_device<uint16_t>(kc2, kv_half.size()));
  EXPECT_EQ(from_device<uint16_t>(vc, kv_half.size()), from_device<uint16_t>(vc2, kv_half.size()));
  // attention: argument vs device position, and more splits than keys vs one split
  auto q = random_vector(static_cast<size_t>(H * hd), 73);
  auto dq = to_device(q);
  cuda::DeviceBuffer partials(kernels::attention_partials_floats(1, H, hd, 64) * 4);
  auto run = [&](int64_t pos_arg, const int64_t* dev, int64_t window, int n_split) {
    cuda::DeviceBuffer out(q.size() * 4);
    EXPECT_EQ(kernels::launch_attention_decode(f32(dq), static_cast<uint16_t*>(kc.data()),
                                               static_cast<uint16_t*>(vc.data()), 1, pos_arg, cells,
                                               H, Hkv, hd, window, 1.0f / 16, 0.0f, n_split,
                                               f32(partials), f32(out), nullptr, dev),
              cudaSuccess);
    return from_device<float>(out, q.size());
  };
  for (int n_split : {1, 11, 64}) {
    EXPECT_EQ(run(pos, nullptr, 0, n_split), run(0, device_pos, 0, n_split)) << n_split;
    EXPECT_EQ(run(pos, nullptr, 32, n_split), run(0, device_pos, 32, n_split)) << n_split;
  }
  const auto one = run(pos, nullptr, 32, 1), many = run(pos, nullptr, 32, 64);  // 32 keys
  for (size_t i = 0; i < one.size(); ++i) ASSERT_NEAR(one[i], many[i], 1e-5f) << i;
}

TEST_F(CudaOps, AttentionRejectsUnsupportedShapes) {
  EXPECT_EQ(kernels::launch_attention_prefill(nullptr, nullptr, nullptr, 4, 0, 4, 8, 2, 96, 0, 1, 0,
                                              nullptr, nullptr),
            cudaErrorInvalidValue);  // head_dim not a multiple of 64
  EXPECT_EQ(kernels::launch_attention_prefill(nullptr, nullptr, nullptr, 4, 0, 4, 8, 2, 320, 0, 1,
                                              0, nullptr, nullptr),
            cudaErrorInvalidValue);  // a multiple of 64 without a prefill kernel
  for (int64_t hd : {64, 128, 192, 256, 512}) {
    EXPECT_TRUE(kernels::attention_prefill_head_dim_supported(hd)) << hd;
  }
  for (int64_t hd : {0, 96, 320, 384, 448, 576, 1024}) {
    EXPECT_FALSE(kernels::attention_prefill_head_dim_supported(hd)) << hd;
  }
  EXPECT_EQ(kernels::launch_attention_prefill(nullptr, nullptr, nullptr, 4, 0, 4, 8, 3, 256, 0, 1,
                                              0, nullptr, nullptr),
            cudaErrorInvalidValue);  // 8 heads over 3 KV heads
  EXPECT_EQ(kernels::launch_attention_decode(nullptr, nullptr, nullptr, 1, 0, 1, 8, 2, 96, 0, 1, 0,
                                             1, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);  // head_dim not a multiple of 64
  EXPECT_EQ(kernels::launch_attention_decode(nullptr, nullptr, nullptr, 1, 0, 1, 8, 3, 256, 0, 1, 0,
                                             1, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);  // 8 heads over 3 KV heads
  cudaGetLastError();
}

#endif  // BOLTRT_HAVE_CUDA

// Keeps the suite non-empty (and its skip message visible) in builds without CUDA.
TEST_F(CudaOps, DeviceIsUsable) {
  SUCCEED();
}

}  // namespace
}  // namespace boltrt
