// Sampler cost per token on a 262,144-token vocabulary (Gemma 4) for the default chain, greedy
// and a chain without top-k (the unsorted top-p / min-p paths).
#include <fmt/format.h>

#include <chrono>
#include <random>
#include <vector>

#include "generate/sampler.h"

int main() {
  using boltrt::Sampler;
  using boltrt::SamplerConfig;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(262144);
  for (float& v : logits) v = normal(rng);

  struct Case {
    const char* name;
    SamplerConfig config;
  };
  SamplerConfig greedy;
  greedy.temperature = 0.0f;
  SamplerConfig no_top_k;
  no_top_k.top_k = 0;
  SamplerConfig penalties;
  penalties.repeat_penalty = 1.1f;
  for (const Case& c :
       {Case{"default (k40 p0.95 m0.05 t0.8)", SamplerConfig{}}, Case{"greedy", greedy},
        Case{"top-k off", no_top_k}, Case{"default + repeat penalty", penalties}}) {
    SamplerConfig config = c.config;
    config.seed = 42;
    Sampler sampler(config);
    for (int i = 0; i < 64; ++i) sampler.accept(i);
    const int n = 200;
    const auto start = std::chrono::steady_clock::now();
    int64_t sum = 0;
    for (int i = 0; i < n; ++i) sum += sampler.sample(logits);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count() /
        n;
    fmt::print("{:34} {:8.1f} us/token (checksum {})\n", c.name, us, sum);
  }
}
