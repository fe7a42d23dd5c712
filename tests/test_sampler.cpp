// Sampler: token-for-token equality with libllama's default chain (goldens from
// tests/data/sampler/make_sampler_goldens.cpp) and chi-square tests of the distributions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "data/sampler/sampler_cases.h"
#include "generate/sampler.h"
#include "support/paths.h"
#include "util/error.h"

namespace boltrt {
namespace {

std::map<std::string, std::vector<int32_t>> read_goldens() {
  std::ifstream in(test::source_dir() + "/tests/data/sampler/goldens.txt");
  EXPECT_TRUE(in.good()) << "missing tests/data/sampler/goldens.txt";
  std::map<std::string, std::vector<int32_t>> goldens;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    std::istringstream ids(line.substr(colon + 1));
    std::vector<int32_t>& tokens = goldens[line.substr(0, colon)];
    for (int32_t id; ids >> id;) tokens.push_back(id);
  }
  return goldens;
}

SamplerConfig config_of(const sampler_cases::Case& c) {
  SamplerConfig config;
  config.seed = c.seed;
  config.temperature = c.temperature;
  config.top_k = c.top_k;
  config.top_p = c.top_p;
  config.min_p = c.min_p;
  config.penalty_last_n = c.penalty_last_n;
  config.repeat_penalty = c.repeat_penalty;
  config.frequency_penalty = c.frequency_penalty;
  config.presence_penalty = c.presence_penalty;
  config.min_keep = static_cast<size_t>(c.min_keep);
  return config;
}

TEST(Sampler, MatchesLibllamaChainTokenForToken) {
  const auto goldens = read_goldens();
  int case_index = 0;
  int checked = 0;
  for (const auto& c : sampler_cases::kCases) {
    SCOPED_TRACE(c.name);
    const auto golden = goldens.find(c.name);
    ASSERT_NE(golden, goldens.end()) << "no golden for case " << c.name;
    ASSERT_EQ(golden->second.size(), static_cast<size_t>(sampler_cases::kSteps));
    Sampler sampler(config_of(c));
    for (int i = 0; i < sampler_cases::kPromptTokens; ++i) {
      sampler.accept(sampler_cases::prompt_token(c, case_index, i));
    }
    for (int step = 0; step < sampler_cases::kSteps; ++step) {
      const auto logits = sampler_cases::logits(c, case_index, step);
      const int32_t token = sampler.sample(logits);
      ASSERT_EQ(token, golden->second[static_cast<size_t>(step)]) << "step " << step;
      sampler.accept(token);
      ++checked;
    }
    ++case_index;
  }
  EXPECT_EQ(checked, static_cast<int>(std::size(sampler_cases::kCases)) * sampler_cases::kSteps);
}

// Draws `n` tokens from fixed logits (no history) and returns the counts per token.
std::vector<int> histogram(const SamplerConfig& config, const std::vector<float>& logits, int n,
                           const std::vector<int32_t>& history = {}) {
  Sampler sampler(config);
  for (int32_t t : history) sampler.accept(t);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(sampler.sample(logits))];
  return counts;
}

std::vector<double> softmax(const std::vector<double>& logits) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(logits[i] - max);
  for (double& v : p) v /= sum;
  return p;
}

// Pearson chi-square over tokens with expected probability > 0; tokens with probability 0
// must never be drawn. 0.001 critical values of chi-square for df = 1..9.
void expect_distribution(const std::vector<int>& counts, const std::vector<double>& expected) {
  static const double kCritical[] = {0,     10.83, 13.82, 16.27, 18.47,
                                     20.52, 22.46, 24.32, 26.12, 27.88};
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double chi2 = 0.0;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0 but was drawn";
      continue;
    }
    const double e = n * expected[i];
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  ASSERT_GE(cells, 2);
  ASSERT_LE(cells, 10);
  EXPECT_LT(chi2, kCritical[cells - 1])
      << "chi-square " << chi2 << " with " << cells - 1 << " degrees of freedom";
}

const std::vector<float> kLogits = {1.0f, 2.5f, -0.5f, 0.3f, 2.0f, -1.2f, 1.7f, 0.0f};

SamplerConfig plain(uint32_t seed) {
  SamplerConfig config;
  config.seed = seed;
  config.temperature = 1.0f;
  config.top_k = 0;
  config.top_p = 1.0f;
  config.min_p = 0.0f;
  return config;
}

std::vector<double> as_double(const std::vector<float>& v, double scale = 1.0) {
  std::vector<double> out;
  for (float x : v) out.push_back(x * scale);
  return out;
}

TEST(SamplerDistribution, TemperatureOnly) {
  SamplerConfig config = plain(1);
  config.temperature = 0.7f;
  expect_distribution(histogram(config, kLogits, 40000), softmax(as_double(kLogits, 1 / 0.7)));
}

TEST(SamplerDistribution, TopK) {
  SamplerConfig config = plain(2);
  config.top_k = 3;  // tokens 1 (2.5), 4 (2.0), 6 (1.7)
  std::vector<double> masked(kLogits.size(), -INFINITY);
  for (int i : {1, 4, 6}) masked[static_cast<size_t>(i)] = kLogits[static_cast<size_t>(i)];
  expect_distribution(histogram(config, kLogits, 40000), softmax(masked));
}

TEST(SamplerDistribution, TopP) {
  SamplerConfig config = plain(3);
  config.top_p = 0.8f;
  // Keep the smallest descending prefix whose probability reaches 0.8.
  const auto p = softmax(as_double(kLogits));
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  std::vector<double> masked(p.size(), -INFINITY);
  double mass = 0.0;
  for (size_t i : order) {
    masked[i] = kLogits[i];
    mass += p[i];
    if (mass >= 0.8) break;
  }
  expect_distribution(histogram(config, kLogits, 40000), softmax(masked));
}

TEST(SamplerDistribution, MinP) {
  SamplerConfig config = plain(4);
  config.min_p = 0.3f;  // keep p >= 0.3 * p_max: logit >= 2.5 + ln 0.3 = 1.296
  std::vector<double> masked(kLogits.size(), -INFINITY);
  for (size_t i = 0; i < kLogits.size(); ++i) {
    if (kLogits[i] >= 2.5 + std::log(0.3)) masked[i] = kLogits[i];
  }
  expect_distribution(histogram(config, kLogits, 40000), softmax(masked));
}

TEST(SamplerDistribution, Penalties) {
  SamplerConfig config = plain(5);
  config.repeat_penalty = 1.5f;
  config.frequency_penalty = 0.25f;
  config.presence_penalty = 0.5f;
  config.penalty_last_n = 3;
  // History 4, 4, 2, 1: the window of 3 holds 4, 2, 1 (the first 4 fell out).
  std::vector<double> expected = as_double(kLogits);
  expected[4] = 2.0 / 1.5 - 0.25 - 0.5;
  expected[2] = -0.5 * 1.5 - 0.25 - 0.5;
  expected[1] = 2.5 / 1.5 - 0.25 - 0.5;
  expect_distribution(histogram(config, kLogits, 40000, {4, 4, 2, 1}), softmax(expected));
}

TEST(SamplerDistribution, DefaultChain) {
  SamplerConfig config;  // top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
  config.seed = 6;
  // top-p 0.95 over softmax(logits): compute the kept set, then min-p, then temperature.
  const auto p = softmax(as_double(kLogits));
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  std::vector<double> masked(p.size(), -INFINITY);
  double mass = 0.0;
  for (size_t i : order) {
    if (kLogits[i] < 2.5 + std::log(0.05)) break;
    masked[i] = kLogits[i] / 0.8;
    mass += p[i];
    if (mass >= 0.95) break;
  }
  expect_distribution(histogram(config, kLogits, 40000), softmax(masked));
}

// logit_bias is added to the raw logits before the penalties (libllama's common sampler puts its
// logit-bias stage ahead of the configured chain): with repeat penalty 2 a biased, penalised
// token gets (logit + bias) / 2, not logit / 2 + bias.
TEST(SamplerDistribution, LogitBiasBeforePenalties) {
  SamplerConfig config = plain(11);
  config.repeat_penalty = 2.0f;
  config.penalty_last_n = 4;
  config.logit_bias = {{4, 1.0f}, {0, -0.75f}, {0, -0.25f}, {99, 50.0f}};  // 99: not in vocab
  std::vector<double> expected = as_double(kLogits);
  expected[4] = (2.0 + 1.0) / 2.0;  // biased, then penalised (seen once)
  expected[0] = 1.0 - 0.75 - 0.25;  // two entries for one token add up
  expect_distribution(histogram(config, kLogits, 40000, {4}), softmax(expected));
}

TEST(Sampler, LogitBiasBansAndForcesTokens) {
  SamplerConfig config;
  config.temperature = 0.0f;
  config.seed = 3;
  // Greedy picks token 1 (2.5); banning it with -100 gives the runner-up, token 4 (2.0).
  config.logit_bias = {{1, -100.0f}};
  EXPECT_EQ(Sampler(config).sample(kLogits), 4);
  config.logit_bias = {{1, -std::numeric_limits<float>::infinity()}};
  EXPECT_EQ(Sampler(config).sample(kLogits), 4);
  // +100 forces the least likely token (5, -1.2) at any temperature.
  for (float temperature : {0.0f, 0.7f, 1.5f}) {
    config.temperature = temperature;
    config.logit_bias = {{5, 100.0f}};
    Sampler sampler(config);
    for (int i = 0; i < 200; ++i) ASSERT_EQ(sampler.sample(kLogits), 5) << temperature;
  }
  // Bans under the default chain (top-k, top-p, min-p): 1 and 4 never drawn.
  SamplerConfig chain;
  chain.seed = 21;
  chain.logit_bias = {{1, -100.0f}, {4, -100.0f}};
  Sampler sampler(chain);
  for (int i = 0; i < 500; ++i) {
    const int32_t t = sampler.sample(kLogits);
    ASSERT_TRUE(t != 1 && t != 4) << t;
  }
  SamplerConfig bad;
  bad.logit_bias = {{1, NAN}};
  EXPECT_THROW(Sampler{bad}, Error);
  bad.logit_bias = {{1, std::numeric_limits<float>::infinity()}};
  EXPECT_THROW(Sampler{bad}, Error);
}

TEST(Sampler, GreedyPicksFirstMaximum) {
  SamplerConfig config;
  config.temperature = 0.0f;
  config.seed = 9;
  Sampler sampler(config);
  EXPECT_EQ(sampler.sample(kLogits), 1);
  // Ties: the first maximum of the candidate list wins. Without top-k the list is in id order;
  // top-k's partial sort (the same call libllama makes) may reorder equal logits, which the
  // "ties" and "greedy_ties_gemma" goldens check against libllama itself.
  const std::vector<float> tied = {0.5f, 3.0f, 1.0f, 3.0f, 3.0f};
  config.top_k = 0;
  config.top_p = 1.0f;
  config.min_p = 0.0f;
  Sampler unsorted(config);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(unsorted.sample(tied), 1);
  const int32_t first = sampler.sample(tied);
  EXPECT_TRUE(first == 1 || first == 3 || first == 4) << first;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sampler.sample(tied), first);
}

TEST(Sampler, SameSeedSameTokensAndResetReplays) {
  SamplerConfig config = plain(77);
  Sampler a(config), b(config);
  std::vector<int32_t> first;
  for (int i = 0; i < 50; ++i) {
    const int32_t t = a.sample(kLogits);
    EXPECT_EQ(t, b.sample(kLogits));
    first.push_back(t);
  }
  a.reset();
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(kLogits), first[static_cast<size_t>(i)]);
  // A copy continues the same stream (snapshot/rollback for speculative decoding).
  Sampler copy = a;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a.sample(kLogits), copy.sample(kLogits));
}

TEST(Sampler, RejectsBadConfig) {
  SamplerConfig config;
  config.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler{config}, Error);
  config = SamplerConfig{};
  config.temperature = NAN;
  EXPECT_THROW(Sampler{config}, Error);
  config = SamplerConfig{};
  config.penalty_last_n = -2;
  EXPECT_THROW(Sampler{config}, Error);
  Sampler ok{SamplerConfig{}};
  EXPECT_THROW(ok.sample(std::span<const float>{}), Error);
}

}  // namespace
}  // namespace boltrt
