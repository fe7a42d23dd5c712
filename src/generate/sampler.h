// Sampler — picks the next token from a row of logits, reproducing llama.cpp's default sampler
// chain (common_sampler with the default sampler order) token for token:
//
//   logit bias (added to the raw logits) -> penalties (repeat / frequency / presence over the
//   last N accepted tokens) -> top-k -> top-p -> min-p -> temperature -> dist (mt19937 draw)
//
// "The same tokens" needs more than the same maths: the order of the candidate list after each
// stage decides which token a given random number lands on, so every stage keeps, sorts and
// truncates candidates exactly as libllama does (including its bucketed partial sort for large
// lists) and the random stream is std::mt19937 seeded with the seed, one uniform double per draw.
// temp <= 0 is greedy (every candidate but the first maximum is masked; a draw is still made).
//
// The sampler is a value type: copy it to snapshot its state (penalty history and RNG), which is
// what speculative decoding and the reasoning controller need to try tokens and roll back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

namespace boltrt {

// llama.cpp's LLAMA_DEFAULT_SEED: "pick a random seed".
inline constexpr uint32_t kRandomSeed = 0xFFFFFFFFu;

// A constant added to one token's logit before the rest of the chain (OpenAI's and llama.cpp's
// logit_bias): -100 all but bans the token, +100 all but forces it, -infinity bans it.
struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;
};

struct SamplerConfig {
  uint32_t seed = kRandomSeed;
  float temperature = 0.8f;     // <= 0: greedy
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  int32_t penalty_last_n = 64;  // how many recent tokens the penalties look at (0: off)
  float repeat_penalty = 1.0f;  // 1: off
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  size_t min_keep = 0;  // top-p / min-p keep at least this many candidates
  // Added to the logits first, each entry on its own (two entries for one token add up);
  // tokens outside the vocabulary are ignored, as libllama does.
  std::vector<LogitBias> logit_bias;

  // Throws boltrt::Error naming the bad field (non-finite values, repeat_penalty <= 0, ...).
  void validate() const;
};

// One candidate token: its id, its (transformed) logit and, once computed, its probability.
struct TokenCandidate {
  int32_t id;
  float logit;
  float p;
};

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& config);

  const SamplerConfig& config() const { return config_; }
  // The seed actually used (a random one when config().seed == kRandomSeed).
  uint32_t seed() const { return seed_; }

  // Runs the chain over `logits` (n_vocab floats) and returns the chosen token. Does not record
  // it: call accept() with the token that is finally committed.
  int32_t sample(std::span<const float> logits);

  // Records a token in the penalty history (prompt tokens too, as llama.cpp does).
  void accept(int32_t token);

  // Forgets the penalty history (the random stream continues).
  void clear_history();

  // Forgets the penalty history and reseeds the RNG (a new random seed when seed was random).
  void reset();

  // The candidates left after the last sample(), in chain order, with their final
  // probabilities; for tests and diagnostics.
  std::span<const TokenCandidate> last_candidates() const { return {candidates_.data(), size_}; }

 private:
  void apply_penalties();
  void apply_top_k();
  void apply_top_p();
  void apply_min_p();
  void apply_temperature();
  size_t draw();
  // The logits with logit_bias added (a copy in biased_), or `logits` when there is none.
  std::span<const float> biased(std::span<const float> logits);

  SamplerConfig config_;
  uint32_t seed_ = 0;
  std::mt19937 rng_;

  // Penalty history: the last penalty_last_n accepted tokens and how often each occurs there.
  std::deque<int32_t> history_;
  std::unordered_map<int32_t, int> history_count_;

  // Working candidate list: the first size_ entries are live; sorted_ says they are in
  // descending logit order.
  std::vector<TokenCandidate> candidates_;
  std::vector<TokenCandidate> scratch_;
  std::vector<float> biased_;
  size_t size_ = 0;
  bool sorted_ = false;
};

}  // namespace boltrt
