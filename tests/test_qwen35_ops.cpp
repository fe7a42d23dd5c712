// Qwen3.5 GDN ops other than the delta rule (docs/qwen35.md §4.4): the causal conv1d with its
// carried window, the gated RMSNorm, L2Norm, the decay and write gates and IMROPE angles, against
// float64 references written from the formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/causal_conv1d.h"
#include "backend/cpu/gated_rms_norm.h"
#include "backend/cpu/gdn_gates.h"
#include "backend/cpu/imrope.h"
#include "backend/cpu/ops.h"

namespace {

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

// float64 conv over the whole history (zeros before token 0)
double conv_ref(const std::vector<float>& m, const std::vector<float>& w, int64_t C, int64_t kc,
                int64_t t, int64_t c) {
  double acc = 0.0;
  for (int64_t j = 0; j < kc; ++j) {
    const int64_t src = t - (kc - 1) + j;
    if (src >= 0) acc += double(w[size_t(c * kc + j)]) * m[size_t(src * C + c)];
  }
  return acc;
}

// The same tokens fed as one call, as single-token decode steps, and in uneven pieces shorter
// than the window give the same bits, and match the float64 convolution.
TEST(CausalConv1d, MatchesReferenceAndIsSplitInvariant) {
  const int64_t C = 12, kc = 4, n = 11;
  const std::vector<float> m = random_vec(size_t(n * C), 1);
  const std::vector<float> w = random_vec(size_t(C * kc), 2);

  std::vector<float> state_all(size_t(C * (kc - 1)), 0.0f), y_all(size_t(n * C));
  boltrt::cpu::causal_conv1d(n, kc, 0, C, m.data(), C, w.data(), state_all.data(), y_all.data(), C);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      EXPECT_NEAR(y_all[size_t(t * C + c)], conv_ref(m, w, C, kc, t, c), 1e-5) << t << "," << c;
    }
  }
  for (int64_t c = 0; c < C; ++c) {  // the window is the last kc−1 inputs, oldest first
    for (int64_t j = 0; j < kc - 1; ++j) {
      EXPECT_EQ(state_all[size_t(c * (kc - 1) + j)], m[size_t((n - (kc - 1) + j) * C + c)]);
    }
  }

  for (const std::vector<int64_t>& pieces :
       {std::vector<int64_t>(size_t(n), 1), std::vector<int64_t>{2, 1, 5, 3}}) {
    std::vector<float> state(size_t(C * (kc - 1)), 0.0f), y(size_t(n * C));
    int64_t t0 = 0;
    for (const int64_t len : pieces) {
      // two channel ranges, as two threads would split them
      boltrt::cpu::causal_conv1d(len, kc, 0, 5, m.data() + t0 * C, C, w.data(), state.data(),
                                 y.data() + t0 * C, C);
      boltrt::cpu::causal_conv1d(len, kc, 5, C, m.data() + t0 * C, C, w.data(), state.data(),
                                 y.data() + t0 * C, C);
      t0 += len;
    }
    EXPECT_EQ(y, y_all);
    EXPECT_EQ(state, state_all);
  }
}

TEST(GatedRmsNorm, MatchesFormula) {
  const int64_t d = 32;
  const float eps = 1e-6f;
  for (const float amp : {1.0f, 1e-3f}) {  // 1e-3: mean(o²) ~ ε, where ε must be applied as is
    std::vector<float> o = random_vec(size_t(d), 3);
    for (auto& x : o) x *= amp;
    const std::vector<float> z = random_vec(size_t(d), 4);
    const std::vector<float> w = random_vec(size_t(d), 5);
    std::vector<float> y(static_cast<size_t>(d));
    boltrt::cpu::gated_rms_norm(o.data(), z.data(), w.data(), d, eps, y.data());
    double ss = 0.0;
    for (const float x : o) ss += double(x) * x;
    const double inv = 1.0 / std::sqrt(ss / double(d) + double(eps));
    for (int64_t i = 0; i < d; ++i) {
      const double zi = z[size_t(i)];
      const double ref = o[size_t(i)] * inv * w[size_t(i)] * zi / (1.0 + std::exp(-zi));
      EXPECT_NEAR(y[size_t(i)], ref, 1e-5 * (1.0 + std::fabs(ref))) << amp << " " << i;
    }
  }
}

TEST(L2Norm, UnitLengthAndEpsFloor) {
  std::vector<float> x = random_vec(40, 6), y(40);
  boltrt::cpu::l2_norm(x.data(), 40, 1e-6f, y.data());
  double ss = 0.0;
  for (const float v : y) ss += double(v) * v;
  EXPECT_NEAR(ss, 1.0, 1e-6);
  const std::vector<float> tiny(8, 1e-9f);  // ‖x‖ < ε: divided by ε, not by ‖x‖
  std::vector<float> t(8);
  boltrt::cpu::l2_norm(tiny.data(), 8, 1e-6f, t.data());
  EXPECT_FLOAT_EQ(t[0], 1e-3f);
}

TEST(GdnGates, SoftplusDecayAndSigmoid) {
  const std::vector<float> a{-30.0f, -1.0f, 0.5f, 19.0f, 25.0f};
  const std::vector<float> b{-2.0f, 0.0f, 1.0f, 3.0f, -0.5f};
  const std::vector<float> bias{0.0f, 0.25f, -0.5f, 0.5f, 0.0f};
  const std::vector<float> A{-1.0f, -0.5f, -2.0f, -0.1f, -1.5f};
  std::vector<float> gamma(5), beta(5);
  boltrt::cpu::gdn_gates(a.data(), b.data(), bias.data(), A.data(), 5, gamma.data(), beta.data());
  for (size_t h = 0; h < 5; ++h) {
    const double x = double(a[h]) + bias[h];
    const double sp = x > 20.0 ? x : std::log1p(std::exp(x));
    EXPECT_NEAR(gamma[h], sp * A[h], 1e-6 * (1.0 + std::fabs(sp * A[h]))) << h;
    EXPECT_LE(gamma[h], 0.0f);
    EXPECT_NEAR(beta[h], 1.0 / (1.0 + std::exp(-double(b[h]))), 1e-7) << h;
  }
  EXPECT_EQ(gamma[4], 25.0f * -1.5f);  // above the cut softplus is the identity
}

// Released sections [11, 11, 10, 0] with n_rot 64 cover every pair: plain NEOX angles, bit for
// bit. Sections [3, 2, 1, 2] leave pairs with i mod 8 in {5, 7} unrotated (§4.3, verified
// against llama.cpp by the spec's author).
TEST(Imrope, TextAnglesBySection) {
  const int64_t n_rot = 64, half = n_rot / 2, pos = 37;
  const auto n = static_cast<size_t>(half);
  std::vector<float> c_ref(n), s_ref(n), c(n), s(n);
  boltrt::cpu::rope_angles(pos, n_rot, 1e7f, nullptr, c_ref.data(), s_ref.data());

  boltrt::cpu::imrope_text_angles(pos, n_rot, 1e7f, {11, 11, 10, 0}, c.data(), s.data());
  EXPECT_EQ(c, c_ref);
  EXPECT_EQ(s, s_ref);

  boltrt::cpu::imrope_text_angles(pos, n_rot, 1e7f, {3, 2, 1, 2}, c.data(), s.data());
  for (int64_t i = 0; i < half; ++i) {
    const bool unrotated = i % 8 == 5 || i % 8 == 7;
    EXPECT_EQ(c[size_t(i)], unrotated ? 1.0f : c_ref[size_t(i)]) << i;
    EXPECT_EQ(s[size_t(i)], unrotated ? 0.0f : s_ref[size_t(i)]) << i;
  }
}

}  // namespace
