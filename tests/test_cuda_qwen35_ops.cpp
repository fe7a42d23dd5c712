// The Qwen3.5 kernels of kernels/ (causal conv1d + SiLU, head L2 norms, GDN gates, the delta
// rule, SiLU / sigmoid gating, the q/gate split, the residual add) against the CPU backend's
// references on awkward shapes: several calls carrying the state, key heads shared by several
// value heads, widths that are not multiples of 32. Skips with the reason without CUDA or a
// usable device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/causal_conv1d.h"
#include "backend/cpu/delta_rule.h"
#include "backend/cpu/gdn_gates.h"
#include "backend/cpu/ops.h"
#include "support/cuda_buffers.h"
#include "support/cuda_skip.h"
#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#include "ops.cuh"
#endif

namespace boltrt {
namespace {

class CudaQwen35Ops : public ::testing::Test {
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

[[maybe_unused]] void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                                   float rel, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * std::fabs(want[i]) + 1e-6f) << what << " at " << i;
  }
}

#if defined(BOLTRT_HAVE_CUDA)

using test::from_device;
using test::to_device;

float* f32(const cuda::DeviceBuffer& b) {
  return static_cast<float*>(b.data());
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

TEST_F(CudaQwen35Ops, CausalConv1dSiluCarriesTheWindowAcrossCalls) {
  for (int64_t kc : {1, 2, 4}) {
    const int64_t C = 300;  // not a multiple of the block
    auto w = random_vector(static_cast<size_t>(C * kc), 1, 0.5f);
    std::vector<float> state_cpu(static_cast<size_t>(C * (kc - 1)), 0.0f);
    auto dw = to_device(w);
    auto dstate = to_device(std::vector<float>(std::max<size_t>(1, state_cpu.size()), 0.0f));
    for (int64_t n : {5, 1, 3}) {  // calls of different lengths carry the window
      auto m = random_vector(static_cast<size_t>(n * C), static_cast<uint32_t>(10 + n));
      std::vector<float> want(m.size());
      cpu::causal_conv1d(n, kc, 0, C, m.data(), C, w.data(), state_cpu.data(), want.data(), C);
      for (float& x : want) x = silu(x);
      auto dm = to_device(m), du = to_device(std::vector<float>(m.size(), 0.0f));
      ASSERT_EQ(kernels::launch_causal_conv1d_silu(f32(dm), n, C, kc, f32(dw), f32(dstate), f32(du),
                                                   nullptr),
                cudaSuccess);
      expect_close(from_device<float>(du, m.size()), want, 2e-6f, "conv output");
      if (kc > 1) {
        expect_close(from_device<float>(dstate, state_cpu.size()), state_cpu, 0.0f, "window");
      }
    }
  }
  EXPECT_EQ(
      kernels::launch_causal_conv1d_silu(nullptr, 1, 1, 65, nullptr, nullptr, nullptr, nullptr),
      cudaErrorInvalidValue);
}

TEST_F(CudaQwen35Ops, L2NormHeadsTouchesOnlyTheHeadRows) {
  const int64_t n_tokens = 3, heads = 4, n = 48, stride = heads * n + 20;
  auto x = random_vector(static_cast<size_t>(n_tokens * stride), 2, 2.0f);
  x[5] = 0.0f;  // a row is not all zero, but a zero entry is fine
  std::vector<float> want = x;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      float* row = want.data() + t * stride + h * n;
      cpu::l2_norm(row, n, 1e-6f, row);
    }
  }
  auto dx = to_device(x);
  ASSERT_EQ(kernels::launch_l2_norm_heads(f32(dx), n_tokens, heads, n, stride, 1e-6f, nullptr),
            cudaSuccess);
  expect_close(from_device<float>(dx, x.size()), want, 2e-6f, "l2 norm");
}

TEST_F(CudaQwen35Ops, GdnGatesMatchCpuAcrossSoftplusBranch) {
  const int64_t n_tokens = 5, heads = 7;
  auto alpha = random_vector(static_cast<size_t>(n_tokens * heads), 3, 12.0f);  // some > 20
  auto beta_in = random_vector(alpha.size(), 4, 3.0f);
  auto dt_bias = random_vector(static_cast<size_t>(heads), 5);
  auto a = random_vector(static_cast<size_t>(heads), 6);
  for (float& v : a) v = -std::exp(v);
  std::vector<float> gamma(alpha.size()), beta(alpha.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    cpu::gdn_gates(alpha.data() + t * heads, beta_in.data() + t * heads, dt_bias.data(), a.data(),
                   heads, gamma.data() + t * heads, beta.data() + t * heads);
  }
  auto da = to_device(alpha), db = to_device(beta_in), dd = to_device(dt_bias), dssm = to_device(a);
  auto dg = to_device(std::vector<float>(alpha.size())),
       dbeta = to_device(std::vector<float>(alpha.size()));
  ASSERT_EQ(kernels::launch_gdn_gates(f32(da), f32(db), f32(dd), f32(dssm), n_tokens, heads,
                                      f32(dg), f32(dbeta), nullptr),
            cudaSuccess);
  expect_close(from_device<float>(dg, gamma.size()), gamma, 2e-6f, "gamma");
  expect_close(from_device<float>(dbeta, beta.size()), beta, 2e-6f, "beta");
}

TEST_F(CudaQwen35Ops, DeltaRuleMatchesCpuRecurrenceOverCalls) {
  struct Case {
    int64_t hk, hv, dk;
  };
  for (const Case& c : {Case{2, 4, 32}, Case{1, 3, 40}, Case{2, 2, 128}}) {
    const int64_t dv = c.dk, C = 2 * c.hk * c.dk + c.hv * dv + 8;  // padded token stride
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    std::vector<float> state(static_cast<size_t>(c.hv * c.dk * dv), 0.0f);
    auto dstate = to_device(state);
    for (int64_t n : {6, 1, 9}) {
      auto u = random_vector(static_cast<size_t>(n * C), static_cast<uint32_t>(20 + n), 0.3f);
      for (int64_t t = 0; t < n; ++t) {  // q and k heads L2-normalised, as the layer feeds them
        for (int64_t g = 0; g < 2 * c.hk; ++g) {
          float* row = u.data() + t * C + g * c.dk;
          cpu::l2_norm(row, c.dk, 1e-6f, row);
        }
      }
      auto g = random_vector(static_cast<size_t>(n * c.hv), static_cast<uint32_t>(30 + n), 0.5f);
      for (float& v : g) v = -std::fabs(v);
      auto beta = random_vector(g.size(), static_cast<uint32_t>(40 + n));
      for (float& v : beta) v = 1.0f / (1.0f + std::exp(-v));
      std::vector<float> want(static_cast<size_t>(n * c.hv * dv));
      for (int64_t hv = 0; hv < c.hv; ++hv) {
        // the CPU layer's gates are head-major; gather this head's
        std::vector<float> gh(static_cast<size_t>(n)), bh(static_cast<size_t>(n));
        for (int64_t t = 0; t < n; ++t) {
          gh[static_cast<size_t>(t)] = g[static_cast<size_t>(t * c.hv + hv)];
          bh[static_cast<size_t>(t)] = beta[static_cast<size_t>(t * c.hv + hv)];
        }
        const int64_t key = hv % c.hk;
        cpu::DeltaRuleHead h;
        h.n = n;
        h.dk = c.dk;
        h.dv = dv;
        h.q = u.data() + key * c.dk;
        h.k = u.data() + c.hk * c.dk + key * c.dk;
        h.v = u.data() + 2 * c.hk * c.dk + hv * dv;
        h.q_stride = h.k_stride = h.v_stride = C;
        h.g = gh.data();
        h.beta = bh.data();
        h.state = state.data() + hv * c.dk * dv;
        h.out = want.data() + hv * dv;
        h.out_stride = c.hv * dv;
        cpu::delta_rule_recurrent(h);
      }
      for (float& v : want) v *= scale;
      auto du = to_device(u), dg = to_device(g), db = to_device(beta);
      auto dout = to_device(std::vector<float>(want.size()));
      ASSERT_EQ(kernels::launch_delta_rule(f32(du), n, C, 0, c.hk * c.dk, 2 * c.hk * c.dk, c.hk,
                                           c.hv, c.dk, dv, f32(dg), f32(db), scale, f32(dstate),
                                           f32(dout), nullptr),
                cudaSuccess);
      // f32 sums of dk terms in the same order; only fused multiply-adds differ
      const auto got = from_device<float>(dout, want.size());
      const auto got_state = from_device<float>(dstate, state.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-4f) << "dk " << c.dk << " n " << n << " out " << i;
      }
      for (size_t i = 0; i < state.size(); ++i) {
        ASSERT_NEAR(got_state[i], state[i], 1e-4f) << "dk " << c.dk << " state " << i;
      }
    }
  }
}

TEST_F(CudaQwen35Ops, GatingSplitAndAddMatchCpu) {
  const int64_t n = 1000;
  auto gate = random_vector(static_cast<size_t>(n), 7, 4.0f);
  auto x = random_vector(static_cast<size_t>(n), 8);
  std::vector<float> silu_want(static_cast<size_t>(n));
  cpu::silu_mul(gate.data(), x.data(), silu_want.data(), n);
  std::vector<float> sig_want = x, add_want = x;
  for (int64_t i = 0; i < n; ++i) {
    const auto s = static_cast<size_t>(i);
    sig_want[s] *= 1.0f / (1.0f + std::exp(-gate[s]));
    add_want[s] += gate[s];
  }
  auto dg = to_device(gate), dx = to_device(x), dout = to_device(x), dadd = to_device(x);
  ASSERT_EQ(kernels::launch_silu_mul(f32(dg), f32(dx), n, f32(dout), nullptr), cudaSuccess);
  expect_close(from_device<float>(dout, x.size()), silu_want, 2e-6f, "silu_mul");
  ASSERT_EQ(kernels::launch_sigmoid_mul(f32(dg), n, f32(dx), nullptr), cudaSuccess);
  expect_close(from_device<float>(dx, x.size()), sig_want, 2e-6f, "sigmoid_mul");
  ASSERT_EQ(kernels::launch_add(f32(dg), n, f32(dadd), nullptr), cudaSuccess);
  expect_close(from_device<float>(dadd, x.size()), add_want, 0.0f, "add");

  const int64_t rows = 6, half = 72;
  auto qg = random_vector(static_cast<size_t>(rows * 2 * half), 9);
  auto dqg = to_device(qg), da = to_device(std::vector<float>(static_cast<size_t>(rows * half))),
       db = to_device(std::vector<float>(static_cast<size_t>(rows * half)));
  ASSERT_EQ(kernels::launch_split_halves(f32(dqg), rows, half, f32(da), f32(db), nullptr),
            cudaSuccess);
  const auto a = from_device<float>(da, static_cast<size_t>(rows * half));
  const auto b = from_device<float>(db, static_cast<size_t>(rows * half));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      ASSERT_EQ(a[static_cast<size_t>(r * half + i)], qg[static_cast<size_t>(r * 2 * half + i)]);
      ASSERT_EQ(b[static_cast<size_t>(r * half + i)],
                qg[static_cast<size_t>(r * 2 * half + half + i)]);
    }
  }
}

#endif

}  // namespace
}  // namespace boltrt
