#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/error.h"

namespace boltrt {

double negative_log_likelihood(std::span<const float> logits, int32_t target) {
  if (logits.empty() || target < 0 || static_cast<size_t>(target) >= logits.size()) {
    fail("perplexity: token {} outside the vocabulary of {}", target, logits.size());
  }
  float max_logit = logits[0];
  for (const float v : logits) max_logit = std::max(max_logit, v);
  double sum_exp = 0.0;
  for (const float v : logits) sum_exp += std::exp(v - max_logit);
  // The difference is taken in float, then the log of the double sum is subtracted in double.
  const float centred = logits[static_cast<size_t>(target)] - max_logit;
  return -(static_cast<double>(centred) - std::log(sum_exp));
}

PerplexityResult compute_perplexity(std::span<const int32_t> tokens, int32_t bos,
                                    const PerplexityOptions& options,
                                    const SequenceFactory& new_sequence,
                                    const std::function<void(int64_t, double)>& on_window) {
  const int64_t n_ctx = options.n_ctx;
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  if (n_ctx < 4) fail("perplexity: context {} is too small (need at least 4)", n_ctx);
  if (options.n_batch < 1) fail("perplexity: batch size {} must be positive", options.n_batch);
  if (n_tokens < 2 * n_ctx) {
    fail("perplexity: the text tokenizes to only {} tokens; a context of {} needs at least {}",
         n_tokens, n_ctx, 2 * n_ctx);
  }
  const int64_t n_chunk_max = n_tokens / n_ctx;
  const int64_t n_chunk =
      options.n_chunks < 0 ? n_chunk_max : std::min(options.n_chunks, n_chunk_max);
  const int64_t n_batch = std::min(options.n_batch, n_ctx);
  const int64_t first = n_ctx / 2;

  PerplexityResult result;
  result.n_tokens = n_tokens;
  double nll = 0.0;
  double nll2 = 0.0;
  int64_t count = 0;
  std::vector<int32_t> window;
  for (int64_t chunk = 0; chunk < n_chunk; ++chunk) {
    const int64_t start = chunk * n_ctx;
    window.assign(tokens.begin() + start, tokens.begin() + start + n_ctx);
    if (bos >= 0) window[0] = bos;
    const std::unique_ptr<LanguageModel> sequence = new_sequence();
    if (sequence->n_ctx() < n_ctx) {
      fail("perplexity: context {} exceeds what the model holds ({})", n_ctx, sequence->n_ctx());
    }
    const auto n_vocab = static_cast<size_t>(sequence->n_vocab());
    for (int64_t at = 0; at < n_ctx; at += n_batch) {
      const int64_t size = std::min(n_batch, n_ctx - at);
      const std::span<const int32_t> piece(window.data() + at, static_cast<size_t>(size));
      // Pieces entirely before `first` only fill the cache; their logits are not needed.
      const bool scored = at + size > first;
      const std::span<const float> logits = sequence->decode(piece, /*all_logits=*/scored);
      if (!scored) continue;
      // Position p's logits predict the token at p + 1; the last position predicts nothing.
      for (int64_t p = std::max(at, first); p < std::min(at + size, n_ctx - 1); ++p) {
        const auto row = logits.subspan(static_cast<size_t>(p - at) * n_vocab, n_vocab);
        const double v = negative_log_likelihood(row, window[static_cast<size_t>(p + 1)]);
        nll += v;
        nll2 += v * v;
      }
    }
    count += n_ctx - first - 1;
    const double running = std::exp(nll / static_cast<double>(count));
    result.running_ppl.push_back(running);
    if (on_window) on_window(chunk, running);
  }
  const double mean = nll / static_cast<double>(count);
  result.ppl = std::exp(mean);
  const double variance = nll2 / static_cast<double>(count) - mean * mean;
  result.ppl_error =
      variance > 0 ? std::sqrt(variance / static_cast<double>(count - 1)) * result.ppl : 0.0;
  result.n_scored = count;
  return result;
}

}  // namespace boltrt
