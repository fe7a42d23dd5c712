// Gated delta rule (docs/qwen35.md §4.4, §6): the recurrence and the chunked parallel form
// against a float64 recurrence, and against each other, on random heads with realistic ranges
// (L2-normalised q and k, q scaled by 1/sqrt(dk), β in (0, 1), log-decays in [−2, 0]).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/delta_rule.h"
#include "backend/cpu/matmul.h"

namespace {

using boltrt::cpu::DeltaRuleHead;

struct HeadData {
  int64_t n, dk, dv;
  std::vector<float> q, k, v, g, beta, state0;
};

void l2_normalise(float* x, int64_t n, float scale) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
  const float inv = scale / static_cast<float>(std::sqrt(s + 1e-6));
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

HeadData make_head(int64_t n, int64_t dk, int64_t dv, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  HeadData d{n, dk, dv, {}, {}, {}, {}, {}, {}};
  d.q.resize(size_t(n * dk));
  d.k.resize(size_t(n * dk));
  d.v.resize(size_t(n * dv));
  for (auto& x : d.q) x = normal(rng);
  for (auto& x : d.k) x = normal(rng);
  for (auto& x : d.v) x = normal(rng);
  for (int64_t t = 0; t < n; ++t) {
    l2_normalise(d.q.data() + t * dk, dk, 1.0f / std::sqrt(float(dk)));
    l2_normalise(d.k.data() + t * dk, dk, 1.0f);
    d.g.push_back(-2.0f * unit(rng));
    d.beta.push_back(0.05f + 0.9f * unit(rng));
  }
  d.state0.resize(size_t(dk * dv));
  for (auto& x : d.state0) x = 0.5f * normal(rng);
  return d;
}

// float64 recurrence; returns outputs (n × dv) and leaves the final state in `state`
std::vector<double> reference(const HeadData& d, std::vector<double>& state) {
  const int64_t dk = d.dk, dv = d.dv;
  state.assign(d.state0.begin(), d.state0.end());
  std::vector<double> out(static_cast<size_t>(d.n * dv));
  std::vector<double> delta(static_cast<size_t>(dv));
  for (int64_t t = 0; t < d.n; ++t) {
    const double decay = std::exp(double(d.g[size_t(t)]));
    for (auto& s : state) s *= decay;
    for (int64_t j = 0; j < dv; ++j) {
      double sk = 0.0;
      for (int64_t i = 0; i < dk; ++i) sk += state[size_t(i * dv + j)] * d.k[size_t(t * dk + i)];
      delta[size_t(j)] = d.beta[size_t(t)] * (d.v[size_t(t * dv + j)] - sk);
    }
    for (int64_t i = 0; i < dk; ++i) {
      for (int64_t j = 0; j < dv; ++j) {
        state[size_t(i * dv + j)] += d.k[size_t(t * dk + i)] * delta[size_t(j)];
      }
    }
    for (int64_t j = 0; j < dv; ++j) {
      double o = 0.0;
      for (int64_t i = 0; i < dk; ++i) o += state[size_t(i * dv + j)] * d.q[size_t(t * dk + i)];
      out[size_t(t * dv + j)] = o;
    }
  }
  return out;
}

// The recurrence as docs/qwen35.md §4.4 writes it, in float, one pass per step (decay the
// state, Sᵀk, the rank-1 update, Sᵀq): delta_rule_recurrent fuses these into two passes and
// vectorises them, and must give exactly these bits on every SIMD level.
std::vector<float> four_pass(const HeadData& d, std::vector<float>& state) {
  const int64_t dk = d.dk, dv = d.dv;
  state = d.state0;
  std::vector<float> out(static_cast<size_t>(d.n * dv)), delta(static_cast<size_t>(dv));
  for (int64_t t = 0; t < d.n; ++t) {
    const float* k = d.k.data() + t * dk;
    const float* q = d.q.data() + t * dk;
    const float decay = std::exp(d.g[size_t(t)]);
    for (auto& s : state) s *= decay;
    for (int64_t j = 0; j < dv; ++j) {
      float sk = 0.0f;
      for (int64_t i = 0; i < dk; ++i) sk += state[size_t(i * dv + j)] * k[i];
      delta[size_t(j)] = d.beta[size_t(t)] * (d.v[size_t(t * dv + j)] - sk);
    }
    for (int64_t i = 0; i < dk; ++i) {
      for (int64_t j = 0; j < dv; ++j) state[size_t(i * dv + j)] += k[i] * delta[size_t(j)];
    }
    for (int64_t j = 0; j < dv; ++j) {
      float o = 0.0f;
      for (int64_t i = 0; i < dk; ++i) o += state[size_t(i * dv + j)] * q[i];
      out[size_t(t * dv + j)] = o;
    }
  }
  return out;
}

// runs one form; chunk 0 means the recurrence
std::vector<float> run(const HeadData& d, int64_t chunk, std::vector<float>& state) {
  state = d.state0;
  std::vector<float> out(size_t(d.n * d.dv));
  DeltaRuleHead h;
  h.n = d.n;
  h.dk = d.dk;
  h.dv = d.dv;
  h.q = d.q.data();
  h.k = d.k.data();
  h.v = d.v.data();
  h.g = d.g.data();
  h.beta = d.beta.data();
  h.q_stride = h.k_stride = d.dk;
  h.v_stride = d.dv;
  h.state = state.data();
  h.out = out.data();
  h.out_stride = d.dv;
  if (chunk == 0) {
    boltrt::cpu::delta_rule_recurrent(h);
  } else {
    boltrt::cpu::delta_rule_chunked(h, chunk);
  }
  return out;
}

// max |a − b| / (max |b| over the vector), the scale-relative error used by §6.3 / §7.3
template <typename A, typename B>
double rel_err(const std::vector<A>& a, const std::vector<B>& b) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return err / scale;
}

struct Shape {
  int64_t n, dk, dv, chunk;
};

class DeltaRule : public ::testing::TestWithParam<Shape> {};

TEST_P(DeltaRule, RecurrenceAndChunkedMatchFloat64AndEachOther) {
  const Shape s = GetParam();
  const HeadData d = make_head(s.n, s.dk, s.dv, uint32_t(s.n * 131 + s.dk * 7 + s.chunk));
  std::vector<double> ref_state;
  const std::vector<double> ref = reference(d, ref_state);
  std::vector<float> rec_state, chk_state;
  const std::vector<float> rec = run(d, 0, rec_state);
  const std::vector<float> chk = run(d, s.chunk, chk_state);
  EXPECT_LT(rel_err(rec, ref), 1e-5);
  EXPECT_LT(rel_err(rec_state, ref_state), 1e-5);
  EXPECT_LT(rel_err(chk, ref), 1e-5);
  EXPECT_LT(rel_err(chk_state, ref_state), 1e-5);
  EXPECT_LT(rel_err(chk, rec), 1e-5);
  EXPECT_GT(rel_err(chk, ref), 0.0);  // both ran: the F32 forms are not bit-equal to float64
  // the same bits at every SIMD level this CPU has
  std::vector<float> plain_state;
  const std::vector<float> plain = four_pass(d, plain_state);
  const boltrt::SimdLevel best = boltrt::simd_level();
  for (const boltrt::SimdLevel level : {boltrt::SimdLevel::Scalar, boltrt::SimdLevel::Avx2,
                                        boltrt::SimdLevel::Avx512, boltrt::SimdLevel::Neon}) {
    boltrt::set_simd_level(level);
    SCOPED_TRACE(boltrt::simd_level_name(boltrt::simd_level()));
    std::vector<float> level_state;
    EXPECT_EQ(run(d, 0, level_state), plain);
    EXPECT_EQ(level_state, plain_state);
  }
  boltrt::set_simd_level(best);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeltaRule,
                         ::testing::Values(Shape{1, 8, 8, 64}, Shape{7, 16, 16, 4},
                                           Shape{150, 32, 32, 64}, Shape{130, 16, 24, 64},
                                           Shape{64, 128, 128, 64}, Shape{65, 128, 128, 64},
                                           Shape{40, 16, 16, 1}));

// Splitting a prefill into calls (e.g. prompt, then a decode step) must give what one call gives:
// the state carries everything. Recurrence in pieces is bit-equal to one call.
TEST(DeltaRule, StateCarriesAcrossCalls) {
  const HeadData d = make_head(33, 16, 16, 5);
  std::vector<float> whole_state;
  const std::vector<float> whole = run(d, 0, whole_state);
  std::vector<float> state = d.state0, out(size_t(d.n * d.dv));
  for (int64_t t0 = 0; t0 < d.n; t0 += 10) {
    DeltaRuleHead h;
    h.n = std::min<int64_t>(10, d.n - t0);
    h.dk = d.dk;
    h.dv = d.dv;
    h.q = d.q.data() + t0 * d.dk;
    h.k = d.k.data() + t0 * d.dk;
    h.v = d.v.data() + t0 * d.dv;
    h.g = d.g.data() + t0;
    h.beta = d.beta.data() + t0;
    h.q_stride = h.k_stride = d.dk;
    h.v_stride = d.dv;
    h.state = state.data();
    h.out = out.data() + t0 * d.dv;
    h.out_stride = d.dv;
    boltrt::cpu::delta_rule_recurrent(h);
  }
  EXPECT_EQ(out, whole);
  EXPECT_EQ(state, whole_state);
}

}  // namespace
