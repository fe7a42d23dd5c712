#include "generate/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace boltrt {
namespace {

bool by_logit_descending(const TokenCandidate& a, const TokenCandidate& b) {
  return a.logit > b.logit;
}

// Bucketed top-n selection, as libllama does it for lists longer than 128: logits are binned
// into 128 equal buckets over [-10, 10] (values outside go to the end buckets), whole buckets
// are taken from the top until they hold at least n candidates, each fully taken bucket is
// sorted and the last one partially sorted. `out` receives every candidate of the taken
// buckets (at least n), the first n of them in descending order. Within a bucket candidates
// keep their input order before sorting, so ties come out exactly as in libllama.
void bucketed_top_n(const TokenCandidate* in, size_t count, size_t n,
                    std::vector<TokenCandidate>& out) {
  constexpr int kBuckets = 128;
  constexpr float kLow = -10.0f;
  constexpr float kHigh = 10.0f;
  constexpr float kScale = kBuckets / (kHigh - kLow);
  constexpr float kOffset = -kLow * kScale;

  std::vector<int> bucket_of(count);
  std::vector<size_t> bucket_size(kBuckets, 0);
  for (size_t i = 0; i < count; ++i) {
    const float position = kScale * in[i].logit + kOffset;
    int bucket = 0;
    if (position >= static_cast<float>(kBuckets - 1)) {
      bucket = kBuckets - 1;
    } else if (position > 0.0f) {  // also maps NaN and -inf to bucket 0
      bucket = static_cast<int>(position);
    }
    bucket_of[i] = bucket;
    ++bucket_size[bucket];
  }

  // Lowest bucket that still has to be taken.
  int lowest = kBuckets - 1;
  size_t taken = 0;
  for (; lowest >= 0; --lowest) {
    taken += bucket_size[lowest];
    if (taken >= n) break;
  }
  lowest = std::max(lowest, 0);

  // Output offset of each taken bucket: highest bucket first.
  std::vector<size_t> write_at(kBuckets, 0);
  size_t offset = 0;
  for (int b = kBuckets - 1; b >= lowest; --b) {
    write_at[b] = offset;
    offset += bucket_size[b];
  }
  out.resize(offset);
  for (size_t i = 0; i < count; ++i) {
    const int b = bucket_of[i];
    if (b >= lowest) out[write_at[b]++] = in[i];
  }

  TokenCandidate* bucket_begin = out.data();
  size_t done = 0;
  for (int b = kBuckets - 1; b > lowest; --b) {
    std::sort(bucket_begin, bucket_begin + bucket_size[b], by_logit_descending);
    bucket_begin += bucket_size[b];
    done += bucket_size[b];
  }
  std::partial_sort(bucket_begin, bucket_begin + (n - done), bucket_begin + bucket_size[lowest],
                    by_logit_descending);
}

// Keeps the n highest candidates of data[0..size) at the front in descending order.
void sort_top_n_in_place(TokenCandidate* data, size_t size, size_t n,
                         std::vector<TokenCandidate>& scratch) {
  if (n <= 128) {
    std::partial_sort(data, data + n, data + size, by_logit_descending);
    return;
  }
  bucketed_top_n(data, size, n, scratch);
  std::copy(scratch.data(), scratch.data() + n, data);
}

uint32_t resolve_seed(uint32_t seed) {
  if (seed != kRandomSeed) return seed;
  std::random_device device;
  if (device.entropy() == 0) {
    return static_cast<uint32_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }
  return device();
}

}  // namespace

void SamplerConfig::validate() const {
  if (!std::isfinite(temperature)) fail("sampler: temperature {} is not finite", temperature);
  if (!std::isfinite(top_p)) fail("sampler: top-p {} is not finite", top_p);
  if (!std::isfinite(min_p)) fail("sampler: min-p {} is not finite", min_p);
  if (!std::isfinite(repeat_penalty) || repeat_penalty <= 0.0f ||
      !std::isfinite(1.0f / repeat_penalty)) {
    fail("sampler: repeat penalty {} must be finite and greater than 0", repeat_penalty);
  }
  if (!std::isfinite(frequency_penalty)) {
    fail("sampler: frequency penalty {} is not finite", frequency_penalty);
  }
  if (!std::isfinite(presence_penalty)) {
    fail("sampler: presence penalty {} is not finite", presence_penalty);
  }
  if (penalty_last_n < 0) fail("sampler: penalty window {} is negative", penalty_last_n);
  for (const LogitBias& b : logit_bias) {
    // -infinity bans a token; +infinity or NaN would poison the softmax.
    if (std::isnan(b.bias) || b.bias == std::numeric_limits<float>::infinity())
      fail("sampler: logit bias {} of token {} must be finite or -infinity", b.bias, b.token);
  }
}

Sampler::Sampler(const SamplerConfig& config) : config_(config) {
  config_.validate();
  reset();
}

void Sampler::clear_history() {
  history_.clear();
  history_count_.clear();
}

void Sampler::reset() {
  clear_history();
  seed_ = resolve_seed(config_.seed);
  rng_.seed(seed_);
}

void Sampler::accept(int32_t token) {
  if (config_.penalty_last_n == 0) return;
  ++history_count_[token];
  if (history_.size() >= static_cast<size_t>(config_.penalty_last_n)) {
    const int32_t oldest = history_.front();
    history_.pop_front();
    if (--history_count_[oldest] == 0) history_count_.erase(oldest);
  }
  history_.push_back(token);
}

std::span<const float> Sampler::biased(std::span<const float> logits) {
  if (config_.logit_bias.empty()) return logits;
  biased_.assign(logits.begin(), logits.end());
  for (const LogitBias& b : config_.logit_bias) {
    if (b.token >= 0 && static_cast<size_t>(b.token) < biased_.size())
      biased_[static_cast<size_t>(b.token)] += b.bias;
  }
  return biased_;
}

int32_t Sampler::sample(std::span<const float> raw_logits) {
  if (raw_logits.empty()) fail("sampler: empty logits");
  // The bias comes first in the chain (before the penalties), as in libllama's common sampler.
  const std::span<const float> logits = biased(raw_logits);
  // Greedy without penalties: the chain keeps the maximum through every stage and masks the
  // rest, so with one maximum the token is the argmax. One O(vocab) pass instead of the top-k
  // sort; ties (the chain's candidate order decides them) take the full chain.
  const bool penalties = config_.penalty_last_n != 0 &&
                         (config_.repeat_penalty != 1.0f || config_.frequency_penalty != 0.0f ||
                          config_.presence_penalty != 0.0f);
  if (config_.temperature <= 0.0f && !penalties) {
    size_t best = 0;
    bool tie = false, nan = std::isnan(logits[0]);
    for (size_t i = 1; i < logits.size(); ++i) {
      const float v = logits[i];
      if (v > logits[best]) {
        best = i;
        tie = false;
      } else if (v == logits[best]) {
        tie = true;
      } else if (!(v < logits[best])) {
        nan = true;
      }
    }
    if (!tie && !nan) {
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
      uniform(rng_);  // the chain's one draw per token
      candidates_.resize(1);
      candidates_[0] = {static_cast<int32_t>(best), logits[best], 1.0f};
      size_ = 1;
      sorted_ = true;
      return static_cast<int32_t>(best);
    }
  }
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
  }
  size_ = logits.size();
  sorted_ = false;

  apply_penalties();
  apply_top_k();
  apply_top_p();
  apply_min_p();
  apply_temperature();
  return candidates_[draw()].id;
}

// logit' = logit / r (or * r when logit <= 0) - count * frequency - presence, for every token
// seen in the window.
void Sampler::apply_penalties() {
  if (config_.penalty_last_n == 0 ||
      (config_.repeat_penalty == 1.0f && config_.frequency_penalty == 0.0f &&
       config_.presence_penalty == 0.0f)) {
    return;
  }
  // Penalties run first, while candidate i is still token i: visit the (few) tokens of the
  // window instead of looking up every candidate.
  for (const auto& [id, count] : history_count_) {
    if (id < 0 || static_cast<size_t>(id) >= size_) continue;
    float& logit = candidates_[static_cast<size_t>(id)].logit;
    if (logit <= 0.0f) {
      logit *= config_.repeat_penalty;
    } else {
      logit /= config_.repeat_penalty;
    }
    logit -= static_cast<float>(count) * config_.frequency_penalty +
             static_cast<float>(count > 0) * config_.presence_penalty;
  }
  sorted_ = false;
}

void Sampler::apply_top_k() {
  if (config_.top_k <= 0) return;
  const size_t k = std::min(static_cast<size_t>(config_.top_k), size_);
  if (!sorted_) {
    sort_top_n_in_place(candidates_.data(), size_, k, scratch_);
    sorted_ = true;
  }
  size_ = k;
}

// Softmax over the live candidates (unsorted order), then keep the smallest prefix of the
// descending order whose probability mass reaches top_p. Large unsorted lists first try only
// their best 256 candidates, as libllama does, and sort everything when those are not enough.
void Sampler::apply_top_p() {
  if (config_.top_p >= 1.0f) return;

  float max_logit = candidates_[0].logit;
  if (!sorted_) {
    for (size_t i = 1; i < size_; ++i) max_logit = std::max(max_logit, candidates_[i].logit);
  }
  float sum = 0.0f;
  for (size_t i = 0; i < size_; ++i) {
    const float p = std::exp(candidates_[i].logit - max_logit);
    candidates_[i].p = p;
    sum += p;
  }
  for (size_t i = 0; i < size_; ++i) candidates_[i].p /= sum;

  size_t window = size_;
  const TokenCandidate* ordered = candidates_.data();
  if (!sorted_ && size_ > 1024) {
    window = std::min<size_t>(256, size_);
    bucketed_top_n(candidates_.data(), size_, window, scratch_);
    ordered = scratch_.data();
  } else if (!sorted_) {
    sort_top_n_in_place(candidates_.data(), size_, size_, scratch_);
    sorted_ = true;
  }

  float cumulative = 0.0f;
  size_t keep = size_;
  for (size_t i = 0; i < size_; ++i) {
    cumulative += ordered[i].p;
    if (cumulative >= config_.top_p && i + 1 >= config_.min_keep) {
      keep = i + 1;
      break;
    }
    if (!sorted_ && i == window - 1) {  // the best 256 were not enough: sort them all
      window = size_;
      bucketed_top_n(candidates_.data(), size_, window, scratch_);
      ordered = scratch_.data();
    }
  }
  if (!sorted_) {
    std::copy(scratch_.data(), scratch_.data() + keep, candidates_.data());
    sorted_ = true;
  }
  size_ = keep;
}

// Keeps candidates whose probability is at least min_p times the best one's, i.e. whose logit
// is at least max + log(min_p). Unsorted lists are filtered in place (order kept).
void Sampler::apply_min_p() {
  if (config_.min_p <= 0.0f || size_ == 0) return;

  if (!sorted_) {
    float max_logit = -std::numeric_limits<float>::max();
    for (size_t i = 0; i < size_; ++i) max_logit = std::max(max_logit, candidates_[i].logit);
    const float threshold = max_logit + std::log(config_.min_p);
    size_t kept = 0;
    for (size_t i = 0; i < size_; ++i) {
      if (candidates_[i].logit >= threshold) ++kept;
    }
    if (kept > 0 && kept >= config_.min_keep) {
      size_t out = 0;
      for (size_t i = 0; i < size_; ++i) {
        if (candidates_[i].logit >= threshold) candidates_[out++] = candidates_[i];
      }
      size_ = out;
      return;
    }
    sort_top_n_in_place(candidates_.data(), size_, size_, scratch_);
    sorted_ = true;
  }

  const float threshold = candidates_[0].logit + std::log(config_.min_p);
  size_t keep = 1;  // the best candidate always stays
  for (; keep < size_; ++keep) {
    if (candidates_[keep].logit < threshold && keep >= config_.min_keep) break;
  }
  size_ = keep;
}

void Sampler::apply_temperature() {
  if (size_ == 0) return;
  if (config_.temperature > 0.0f) {
    for (size_t i = 0; i < size_; ++i) candidates_[i].logit /= config_.temperature;
    return;
  }
  // Greedy: mask everything but the first maximum.
  size_t best = 0;
  for (size_t i = 1; i < size_; ++i) {
    if (candidates_[i].logit > candidates_[best].logit) {
      candidates_[best].logit = -std::numeric_limits<float>::infinity();
      best = i;
    } else {
      candidates_[i].logit = -std::numeric_limits<float>::infinity();
    }
  }
}

// Softmax and one draw: walk the candidates in list order until the running (unnormalised)
// mass reaches u * total, u uniform in [0, 1) from the RNG.
size_t Sampler::draw() {
  if (size_ == 0) fail("sampler: no candidate token left to sample");
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  if (size_ == 1) {
    uniform(rng_);  // one draw per token keeps the random stream aligned with libllama
    candidates_[0].p = 1.0f;
    return 0;
  }
  float max_logit = candidates_[0].logit;
  if (!sorted_) {
    for (size_t i = 1; i < size_; ++i) max_logit = std::max(max_logit, candidates_[i].logit);
  }
  double total = 0.0;
  for (size_t i = 0; i < size_; ++i) {
    const float p = std::exp(candidates_[i].logit - max_logit);
    candidates_[i].p = p;
    total += p;
  }
  const double target = total * uniform(rng_);
  double running = 0.0;
  size_t chosen = size_;
  for (size_t i = 0; i < size_; ++i) {
    if (chosen == size_) {
      running += candidates_[i].p;
      if (running >= target) chosen = i;
    }
    candidates_[i].p = static_cast<float>(candidates_[i].p / total);
  }
  return chosen == size_ ? size_ - 1 : chosen;
}

}  // namespace boltrt
