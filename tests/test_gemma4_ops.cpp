// CPU ops used by the Gemma 4 forward pass, each against a float64 reference written from
// shared/docs/gemma4.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "runtime/thread_pool.h"

namespace boltrt::cpu {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = fp16_to_fp32(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_fp16(f), h) << "half 0x" << std::hex << i;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(fp16_to_fp32(fp32_to_fp16(1.0f + 1.0f / 2048.0f)), 1.0f);  // tie -> even (1.0)
  EXPECT_EQ(fp16_to_fp32(fp32_to_fp16(1.0f + 3.0f / 2048.0f)), 1.0f + 4.0f / 2048.0f);
  EXPECT_EQ(fp16_to_fp32(fp32_to_fp16(70000.0f)), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(fp32_to_fp16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_fp32(fp32_to_fp16(std::ldexp(1.0f, -26))), 0.0f);
  EXPECT_EQ(fp16_to_fp32(fp32_to_fp16(65504.0f)), 65504.0f);
}

TEST(Fp16, RowConversionsEqualScalar) {
  std::vector<uint16_t> halves(65536);
  for (uint32_t i = 0; i < 65536; ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> floats(65536);
  fp16_to_fp32_row(halves.data(), floats.data(), 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    const float want = fp16_to_fp32(halves[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(floats[i]));
    } else {
      EXPECT_EQ(floats[i], want) << i;
    }
  }
  auto x = random_vector(1003, 11, 300.0f);  // odd length: SIMD body + scalar tail
  x[0] = 1e-7f;
  x[1] = -70000.0f;
  x[2] = 1.0f + 1.0f / 2048.0f;
  std::vector<uint16_t> h(x.size());
  fp32_to_fp16_row(x.data(), h.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(h[i], fp32_to_fp16(x[i])) << x[i];
}

// SwiGLU of DFlash drafts: silu(g) * u against double precision, over the range where exp
// under- and overflows (|g| up to 100) and on an odd length (vector body + scalar tail).
TEST(SiluMul, MatchesFloat64) {
  auto g = random_vector(1003, 31, 100.0f);
  auto u = random_vector(1003, 32, 2.0f);
  g[0] = 0.0f, g[1] = -87.5f, g[2] = 88.5f, g[3] = 1e-30f;
  std::vector<float> out(g.size());
  silu_mul(g.data(), u.data(), out.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i];
    const double want = x / (1.0 + std::exp(-x)) * u[i];
    EXPECT_NEAR(out[i], want, 1e-6 * std::fabs(want) + 1e-30) << i << " g " << g[i];
  }
  // in place, as the draft runs it
  std::vector<float> in_place = g;
  silu_mul(in_place.data(), u.data(), in_place.data(), static_cast<int64_t>(g.size()));
  EXPECT_EQ(in_place, out);
}

TEST(Argmax, FirstMaximumLikeMaxElement) {
  for (const size_t n : {1, 7, 8, 9, 1920}) {
    auto x = random_vector(n, static_cast<uint32_t>(n), 5.0f);
    EXPECT_EQ(argmax(x.data(), static_cast<int64_t>(n)),
              std::max_element(x.begin(), x.end()) - x.begin());
    if (n > 8) {  // ties: the first one wins, wherever it sits in the vector lanes
      x[n - 1] = x[3] = x[n / 2] = 100.0f;
      EXPECT_EQ(argmax(x.data(), static_cast<int64_t>(n)), 3);
    }
  }
  const std::vector<float> negative = {-5.0f, -1.0f, -3.0f, -1.0f};
  EXPECT_EQ(argmax(negative.data(), 4), 1);
}

TEST(RmsNorm, MatchesFloat64) {
  for (int64_t n : {1, 7, 256, 2560}) {
    auto x = random_vector(static_cast<size_t>(n), 1, 3.0f);
    auto w = random_vector(static_cast<size_t>(n), 2);
    std::vector<float> y(x.size());
    rms_norm(x.data(), w.data(), n, 1e-6f, y.data());
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(y[i], x[i] * inv * w[i], 1e-5 * (1 + std::fabs(x[i] * inv * w[i])));
    }
    rms_norm(x.data(), nullptr, n, 1e-6f, y.data());  // weightless
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(y[i], x[i] * inv, 1e-5 * (1 + std::fabs(x[i] * inv)));
  }
}

// NEOX RoPE with gemma4's proportional factors: 64 of 256 pairs rotate, denominator 512.
TEST(Rope, ProportionalPartialRotationMatchesFloat64) {
  const int64_t hd = 512, n_rot = 512, heads = 3;
  std::vector<float> factors(256, 1e30f);
  std::fill(factors.begin(), factors.begin() + 64, 1.0f);
  for (int64_t pos : {0, 1, 17, 95, 4000}) {
    auto x = random_vector(static_cast<size_t>(hd * heads), 3);
    auto y = x;
    std::vector<float> c(256), s(256);
    rope_angles(pos, n_rot, 1e6f, factors.data(), c.data(), s.data());
    rope_neox(y.data(), heads, hd, n_rot, c.data(), s.data());
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < 256; ++i) {
        const double a = x[h * hd + i], b = x[h * hd + i + 256];
        const double theta = i < 64 ? pos * std::pow(1e6, -2.0 * i / 512.0) : 0.0;
        const double r0 = a * std::cos(theta) - b * std::sin(theta);
        const double r1 = a * std::sin(theta) + b * std::cos(theta);
        // float angles lose ~pos * 2^-24 radians
        const double tol = 1e-5 + 4e-7 * pos;
        EXPECT_NEAR(y[h * hd + i], r0, tol * (1 + std::fabs(a) + std::fabs(b)));
        EXPECT_NEAR(y[h * hd + i + 256], r1, tol * (1 + std::fabs(a) + std::fabs(b)));
        if (i >= 64) {
          EXPECT_EQ(y[h * hd + i], x[h * hd + i]);
          EXPECT_EQ(y[h * hd + i + 256], x[h * hd + i + 256]);
        }
      }
    }
  }
}

TEST(Rope, PartialNRotLeavesTailUntouched) {
  const int64_t hd = 8, n_rot = 4;
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, y = x;
  std::vector<float> c(2), s(2);
  rope_angles(3, n_rot, 10000.0f, nullptr, c.data(), s.data());
  rope_neox(y.data(), 1, hd, n_rot, c.data(), s.data());
  // pairs (0,2) and (1,3); theta_0 = 3, theta_1 = 3 * 10000^(-1/2)
  const double t0 = 3.0, t1 = 3.0 / 100.0;
  EXPECT_NEAR(y[0], 1 * std::cos(t0) - 3 * std::sin(t0), 1e-6);
  EXPECT_NEAR(y[2], 1 * std::sin(t0) + 3 * std::cos(t0), 1e-6);
  EXPECT_NEAR(y[1], 2 * std::cos(t1) - 4 * std::sin(t1), 1e-6);
  EXPECT_NEAR(y[3], 2 * std::sin(t1) + 4 * std::cos(t1), 1e-6);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(y[i], x[i]);
}

TEST(Gelu, TableMatchesTanhApproximation) {
  for (double x = -12.0; x <= 12.0; x += 0.01) {
    const double exact =
        0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    // input and output rounded to f16: 2^-11 relative each, plus slope * input rounding
    EXPECT_NEAR(gelu(static_cast<float>(x)), exact, 2e-3 * (1 + std::fabs(exact))) << x;
    EXPECT_NEAR(gelu_exact(static_cast<float>(x)), exact, 1e-6 * (1 + std::fabs(exact))) << x;
  }
  // on f16-representable inputs the table is the f16 rounding of the f32 formula
  for (float x : {-3.5f, -0.125f, 0.0f, 0.5f, 1.0f, 2.25f, 9.5f}) {
    EXPECT_EQ(gelu(x), fp16_to_fp32(fp32_to_fp16(gelu_exact(x))));
  }
  EXPECT_EQ(gelu(-10.5f), 0.0f);
  EXPECT_EQ(gelu(10.5f), 10.5f);
  std::vector<float> g = {1.0f, -2.0f, 12.0f}, u = {2.0f, 3.0f, 0.5f}, out(3);
  geglu(g.data(), u.data(), out.data(), 3);
  EXPECT_EQ(out[0], gelu(1.0f) * 2.0f);
  EXPECT_EQ(out[1], gelu(-2.0f) * 3.0f);
  EXPECT_EQ(out[2], 6.0f);
  // long rows go through the chunked path: element-wise equal to gelu()
  auto big = random_vector(1000, 12, 4.0f), ups = random_vector(1000, 13);
  std::vector<float> res(1000, 0.0f);
  geglu(big.data(), ups.data(), res.data(), 1000);
  for (size_t i = 0; i < big.size(); ++i) EXPECT_EQ(res[i], gelu(big[i]) * ups[i]);
  gelu_inplace(big.data(), 1000);
  for (size_t i = 0; i < big.size(); ++i) EXPECT_EQ(big[i] * ups[i], res[i]);
}

TEST(Softcap, MatchesFloat64) {
  std::vector<float> x = {-100.0f, -30.0f, -1.0f, 0.0f, 0.5f, 29.0f, 1000.0f};
  auto y = x;
  softcap(y.data(), static_cast<int64_t>(y.size()), 30.0f);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], 30.0 * std::tanh(x[i] / 30.0), 1e-5);
}

// The soft-cap (a double-precision tanh, 4 at a time with AVX2, else std::tanh in double)
// against tanh in double rounded to float: within one float ulp everywhere and exact nearly
// everywhere (libm's float tanhf, which llama.cpp calls, is 1 ulp off on ~5 % of these), over
// every 997th float of [-1000, 1000] (the logits' range and then some), at every row length
// 1..17 (the padded tail), with inf and NaN.
TEST(Softcap, TanhInDoubleRoundedToFloat) {
  const float cap = 30.0f;
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x447a0000u; bits += 997) {  // 0 .. 1000
    float f;
    std::memcpy(&f, &bits, sizeof f);
    x.push_back(f);
    x.push_back(-f);
  }
  auto y = x;
  softcap(y.data(), static_cast<int64_t>(y.size()), cap);
  int64_t inexact = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float t = static_cast<float>(std::tanh(static_cast<double>(x[i] * (1.0f / cap))));
    const float want = t * cap;
    if (y[i] == want) continue;
    ++inexact;
    ASSERT_LE(std::fabs(y[i] - want), std::fabs(std::nextafter(want, 0.0f) - want) * 1.01f)
        << "x = " << x[i];
  }
  EXPECT_LE(inexact, static_cast<int64_t>(x.size() / 10000)) << "of " << x.size();
  for (int64_t n = 1; n <= 17; ++n) {
    std::vector<float> row(static_cast<size_t>(n)), one(1);
    for (int64_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = 3.7f * static_cast<float>(i) - 20;
    auto capped = row;
    softcap(capped.data(), n, cap);
    for (int64_t i = 0; i < n; ++i) {
      one[0] = row[static_cast<size_t>(i)];
      softcap(one.data(), 1, cap);
      EXPECT_EQ(capped[static_cast<size_t>(i)], one[0]) << "element " << i << " of " << n;
    }
  }
  std::vector<float> special = {std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN(),
                                0.0f,
                                -0.0f,
                                1e-30f};
  softcap(special.data(), static_cast<int64_t>(special.size()), cap);
  EXPECT_EQ(special[0], cap);
  EXPECT_EQ(special[1], -cap);
  EXPECT_TRUE(std::isnan(special[2]));
  EXPECT_EQ(special[3], 0.0f);
  EXPECT_TRUE(std::signbit(special[4]));
  EXPECT_FLOAT_EQ(special[5], 1e-30f);
}

TEST(Routing, SoftmaxTopKRenormalised) {
  const int64_t E = 16, K = 4;
  auto logits = random_vector(E, 5, 2.0f);
  std::vector<int32_t> sel(K);
  std::vector<float> w(K);
  route_top_k(logits.data(), E, K, sel.data(), w.data());
  std::vector<double> p(E);
  double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
  for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(logits[e] - mx);
  for (double& v : p) v /= sum;
  std::vector<int32_t> order(E);
  for (int32_t e = 0; e < E; ++e) order[e] = e;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  double top = 0;
  for (int64_t i = 0; i < K; ++i) top += p[order[i]];
  double wsum = 0;
  for (int64_t i = 0; i < K; ++i) {
    EXPECT_EQ(sel[i], order[i]);
    EXPECT_NEAR(w[i], p[order[i]] / top, 1e-6);
    wsum += w[i];
  }
  EXPECT_NEAR(wsum, 1.0, 1e-6);
}

// float64 attention: causal + window, GQA, scale.
void reference_attention(const std::vector<float>& q, int64_t n_tokens, int64_t q_pos0,
                         const std::vector<float>& k, const std::vector<float>& v, int64_t n_kv,
                         int64_t kv_pos0, int64_t H, int64_t Hkv, int64_t hd, int64_t window,
                         double scale, std::vector<double>& out) {
  out.assign(static_cast<size_t>(n_tokens * H * hd), 0.0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t p = q_pos0 + t;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / Hkv);
      std::vector<double> s;
      std::vector<int64_t> idx;
      for (int64_t j = 0; j < n_kv; ++j) {
        const int64_t pk = kv_pos0 + j;
        if (pk > p || (window > 0 && p - pk >= window)) continue;
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d)
          dot += double(q[(t * H + h) * hd + d]) * k[(j * Hkv + g) * hd + d];
        s.push_back(dot * scale);
        idx.push_back(j);
      }
      if (s.empty()) continue;
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += x = std::exp(x - mx);
      for (size_t i = 0; i < s.size(); ++i) {
        for (int64_t d = 0; d < hd; ++d) {
          out[(t * H + h) * hd + d] += s[i] / sum * v[(idx[i] * Hkv + g) * hd + d];
        }
      }
    }
  }
}

TEST(Attention, CausalWindowGqaMatchesFloat64) {
  ThreadPool pool(3);
  struct Case {
    int64_t n_tokens, q_pos0, n_kv, kv_pos0, H, Hkv, hd, window;
  };
  for (const Case& c : {Case{1, 40, 41, 0, 4, 2, 16, 0}, Case{7, 10, 17, 0, 4, 1, 32, 0},
                        Case{9, 30, 16, 23, 8, 2, 16, 8}, Case{5, 3, 8, 0, 2, 2, 8, 4},
                        Case{33, 0, 33, 0, 4, 4, 8, 5}}) {
    auto q = random_vector(static_cast<size_t>(c.n_tokens * c.H * c.hd), 7);
    auto k = random_vector(static_cast<size_t>(c.n_kv * c.Hkv * c.hd), 8);
    auto v = random_vector(static_cast<size_t>(c.n_kv * c.Hkv * c.hd), 9);
    std::vector<float> out(q.size());
    std::vector<double> ref;
    reference_attention(q, c.n_tokens, c.q_pos0, k, v, c.n_kv, c.kv_pos0, c.H, c.Hkv, c.hd,
                        c.window, 1.0, ref);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      attention(q.data(), c.n_tokens, c.q_pos0, k.data(), v.data(), c.n_kv, c.kv_pos0, c.H, c.Hkv,
                c.hd, c.window, 1.0f, out.data(), p);
      for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 2e-5) << i;
    }
  }
}

TEST(Attention, ChunkedKeysEqualOnePass) {
  const int64_t n_tokens = 6, q_pos0 = 50, n_kv = 56, H = 4, Hkv = 2, hd = 32;
  auto q = random_vector(static_cast<size_t>(n_tokens * H * hd), 21, 2.0f);
  auto k = random_vector(static_cast<size_t>(n_kv * Hkv * hd), 22, 2.0f);
  auto v = random_vector(static_cast<size_t>(n_kv * Hkv * hd), 23);
  for (int64_t window : {0, 20}) {
    std::vector<double> ref;
    reference_attention(q, n_tokens, q_pos0, k, v, n_kv, 0, H, Hkv, hd, window, 1.0, ref);
    // chunks [40, 56), [0, 17), [17, 40): out of order, one of them invisible to the window
    AttentionAccumulator acc;
    acc.begin(n_tokens, H, hd);
    for (auto [b, e] : {std::pair<int64_t, int64_t>{40, 56}, {0, 17}, {17, 40}}) {
      acc.add(q.data(), q_pos0, k.data() + b * Hkv * hd, v.data() + b * Hkv * hd, e - b, b, Hkv,
              window, 1.0f, nullptr);
    }
    std::vector<float> out(q.size());
    acc.finish(out.data());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 2e-5) << i;
  }
}

// Each query row gets the same bits alone as in a batch of rows (decode = speculative verify =
// prefill), with or without threads, at every head size the kernels special-case, however the
// jobs are grouped into kernel calls (up to 4 queries over the same keys).
TEST(Attention, RowsOfABatchEqualOneTokenCallsBitForBit) {
  ThreadPool pool(2);
  struct Case {
    int64_t n_tokens, q_pos0, n_kv, H, Hkv, hd, window;
  };
  for (const Case& c :
       {Case{8, 292, 300, 4, 1, 128, 0}, Case{8, 292, 300, 4, 1, 64, 128},
        Case{5, 60, 65, 8, 2, 256, 0}, Case{3, 20, 23, 4, 2, 24, 0}, Case{9, 31, 40, 4, 2, 48, 16},
        Case{16, 100, 116, 8, 1, 512, 0}, Case{4, 10, 14, 3, 3, 20, 0},
        // one head per KV head (a token alone in its kernel call, rows of several tokens
        // together in a batch) and three (a call of 2 + 1 alone, of 4 across tokens)
        Case{6, 200, 206, 2, 2, 64, 0}, Case{7, 90, 97, 6, 2, 32, 0}}) {
    auto q = random_vector(static_cast<size_t>(c.n_tokens * c.H * c.hd), 31, 2.0f);
    auto k = random_vector(static_cast<size_t>(c.n_kv * c.Hkv * c.hd), 32, 2.0f);
    auto v = random_vector(static_cast<size_t>(c.n_kv * c.Hkv * c.hd), 33);
    const int64_t row = c.H * c.hd;
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> batch(q.size());
      attention(q.data(), c.n_tokens, c.q_pos0, k.data(), v.data(), c.n_kv, 0, c.H, c.Hkv, c.hd,
                c.window, 0.125f, batch.data(), p);
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        std::vector<float> one(static_cast<size_t>(row));
        attention(q.data() + t * row, 1, c.q_pos0 + t, k.data(), v.data(), c.n_kv, 0, c.H, c.Hkv,
                  c.hd, c.window, 0.125f, one.data(), nullptr);
        ASSERT_EQ(0, std::memcmp(one.data(), batch.data() + t * row, one.size() * sizeof(float)))
            << "hd " << c.hd << " row " << t;
      }
    }
  }
}

// The AVX-512 kernels have the AVX2 kernels' arithmetic: the same bits at either level.
TEST(Attention, Avx512EqualsAvx2BitForBit) {
  const SimdLevel best = simd_level();
  if (best != SimdLevel::Avx512) GTEST_SKIP() << "no AVX-512 on this CPU: nothing to compare";
  struct Case {
    int64_t n_tokens, q_pos0, n_kv, H, Hkv, hd, window;
  };
  for (const Case& c :
       {Case{1, 299, 300, 4, 1, 128, 0}, Case{8, 292, 300, 4, 1, 128, 0},
        Case{7, 200, 207, 4, 2, 64, 128}, Case{4, 9, 13, 8, 2, 256, 0},
        Case{2, 40, 42, 8, 1, 512, 0}, Case{3, 10, 13, 2, 1, 80, 0}, Case{5, 3, 8, 2, 2, 16, 4}}) {
    auto q = random_vector(static_cast<size_t>(c.n_tokens * c.H * c.hd), 41, 2.0f);
    auto k = random_vector(static_cast<size_t>(c.n_kv * c.Hkv * c.hd), 42, 2.0f);
    auto v = random_vector(static_cast<size_t>(c.n_kv * c.Hkv * c.hd), 43);
    std::vector<float> wide(q.size()), narrow(q.size());
    attention(q.data(), c.n_tokens, c.q_pos0, k.data(), v.data(), c.n_kv, 0, c.H, c.Hkv, c.hd,
              c.window, 0.09f, wide.data(), nullptr);
    set_simd_level(SimdLevel::Avx2);
    attention(q.data(), c.n_tokens, c.q_pos0, k.data(), v.data(), c.n_kv, 0, c.H, c.Hkv, c.hd,
              c.window, 0.09f, narrow.data(), nullptr);
    set_simd_level(best);
    ASSERT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * sizeof(float)))
        << "hd " << c.hd;
  }
}

}  // namespace
}  // namespace boltrt::cpu
