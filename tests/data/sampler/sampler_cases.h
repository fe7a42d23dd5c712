// Sampler golden cases shared by the golden maker (make_sampler_goldens.cpp, linked against
// libllama) and tests/test_sampler.cpp. Logits are generated, not stored: both sides compute the
// same floats from a counter-based hash, so the goldens are just the chosen token ids.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace sampler_cases {

struct Case {
  const char* name;
  int n_vocab;
  uint32_t seed;
  float temperature;
  int top_k;
  float top_p;
  float min_p;
  int penalty_last_n;
  float repeat_penalty;
  float frequency_penalty;
  float presence_penalty;
  int min_keep;
  float logit_scale;    // spread of the logits (small = flat distribution)
  float logit_quantum;  // > 0: round logits to multiples of this (creates ties)
};

inline constexpr int kSteps = 64;        // tokens sampled per case
inline constexpr int kPromptTokens = 8;  // tokens accepted before the first draw

// clang-format off
inline const Case kCases[] = {
  // name                 vocab   seed   temp  top_k top_p  min_p  last_n rep   freq  pres  keep scale quantum
  {"default_chain",       32000,  42,    0.8f, 40,   0.95f, 0.05f, 64,    1.0f, 0.0f, 0.0f, 0,   3.0f, 0.0f},
  {"greedy",              32000,  7,     0.0f, 40,   0.95f, 0.05f, 64,    1.0f, 0.0f, 0.0f, 0,   3.0f, 0.0f},
  {"pure_dist",           2000,   1234,  1.0f, 0,    1.0f,  0.0f,  64,    1.0f, 0.0f, 0.0f, 0,   1.5f, 0.0f},
  {"top_p_large_flat",    4096,   99,    1.0f, 0,    0.9f,  0.0f,  64,    1.0f, 0.0f, 0.0f, 0,   0.3f, 0.0f},
  {"top_p_large_peaked",  4096,   5,     0.7f, 0,    0.9f,  0.0f,  64,    1.0f, 0.0f, 0.0f, 0,   4.0f, 0.0f},
  {"top_p_small",         1000,   2024,  1.0f, 0,    0.5f,  0.0f,  64,    1.0f, 0.0f, 0.0f, 0,   2.0f, 0.0f},
  {"min_p_unsorted",      5000,   77,    1.2f, 0,    1.0f,  0.1f,  64,    1.0f, 0.0f, 0.0f, 0,   2.0f, 0.0f},
  {"penalties",           300,    31337, 0.9f, 40,   0.95f, 0.05f, 16,    1.3f, 0.2f, 0.3f, 0,   0.8f, 0.0f},
  {"top_k_bucketed",      20000,  8,     1.5f, 200,  0.98f, 0.01f, 64,    1.0f, 0.0f, 0.0f, 0,   2.5f, 0.0f},
  {"ties",                3000,   11,    1.0f, 40,   0.95f, 0.05f, 64,    1.1f, 0.0f, 0.0f, 0,   2.0f, 0.5f},
  {"greedy_ties_gemma",   262144, 3,     0.0f, 40,   0.95f, 0.05f, 64,    1.0f, 0.0f, 0.0f, 0,   3.0f, 0.25f},
  {"gemma_vocab_default", 262144, 12345, 1.0f, 64,   0.95f, 0.0f,  64,    1.0f, 0.0f, 0.0f, 0,   3.0f, 0.0f},
  {"min_keep",            1500,   4,     1.0f, 0,    0.1f,  0.5f,  64,    1.0f, 0.0f, 0.0f, 5,   4.0f, 0.0f},
};
// clang-format on

inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from 24 bits, exactly representable in float.
inline float unit(uint64_t h) {
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

// Logits of `step` for case `c`: a sum of three uniforms (bell-shaped), scaled, and rounded to
// `logit_quantum` when asked. Only exactly representable float operations are used, so every
// compiler produces the same values.
inline std::vector<float> logits(const Case& c, int case_index, int step) {
  std::vector<float> out(static_cast<size_t>(c.n_vocab));
  for (int i = 0; i < c.n_vocab; ++i) {
    const uint64_t key = (static_cast<uint64_t>(case_index) << 56) ^
                         (static_cast<uint64_t>(step) << 32) ^ static_cast<uint64_t>(i);
    const uint64_t h1 = mix64(key);
    const uint64_t h2 = mix64(h1);
    const uint64_t h3 = mix64(h2);
    float v = (unit(h1) + unit(h2) + unit(h3) - 1.5f) * c.logit_scale;
    if (c.logit_quantum > 0.0f) v = std::round(v / c.logit_quantum) * c.logit_quantum;
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

// The prompt tokens fed to accept() before sampling (so penalties have a history).
inline int prompt_token(const Case& c, int case_index, int i) {
  return static_cast<int>(
      mix64(0xABCDull + static_cast<uint64_t>(case_index) * 131 + static_cast<uint64_t>(i)) %
      static_cast<uint64_t>(c.n_vocab < 50 ? c.n_vocab : 50));
}

}  // namespace sampler_cases
