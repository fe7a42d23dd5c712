// Perplexity of a model over a token stream, by llama-perplexity's default method:
//   - the text is tokenized once (with BOS when the vocabulary adds one);
//   - the tokens are cut into n_chunk = n_tokens / n_ctx windows of n_ctx tokens (the tail is
//     dropped); each window runs in a fresh KV cache with its first token replaced by BOS;
//   - only the second half is scored: the logits at positions first = n_ctx/2 .. n_ctx-2
//     predict tokens first+1 .. n_ctx-1 (n_ctx - first - 1 tokens per window);
//   - after each window the running estimate exp(sum nll / count) is reported;
//   - the final estimate is exp(mean nll) +/- ppl * sqrt(var(nll) / (count-1)).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtime/language_model.h"

namespace boltrt {

struct PerplexityOptions {
  int64_t n_ctx = 512;     // tokens per window (llama-perplexity's -c default)
  int64_t n_batch = 2048;  // tokens per decode call (capped at n_ctx)
  int64_t n_chunks = -1;   // windows to score; -1 = all that fit
};

struct PerplexityResult {
  std::vector<double> running_ppl;  // the estimate after window 1, 2, ... (what "[i]x," prints)
  double ppl = 0;                   // final estimate
  double ppl_error = 0;             // its +/- (0 when the variance is not positive)
  int64_t n_tokens = 0;             // tokens in the whole text
  int64_t n_scored = 0;             // tokens whose log-probability was summed
};

// Makes a LanguageModel with an empty KV cache that holds at least n_ctx positions.
using SequenceFactory = std::function<std::unique_ptr<LanguageModel>()>;

// `tokens`: the whole tokenized text (BOS already prepended when the vocabulary wants one);
// `bos`: the id written over each window's first token, or a negative value for none.
// on_window(i, running_ppl) is called after window i (0-based) is scored.
// Throws boltrt::Error when the text has fewer than 2 * n_ctx tokens or the options are invalid.
PerplexityResult compute_perplexity(std::span<const int32_t> tokens, int32_t bos,
                                    const PerplexityOptions& options,
                                    const SequenceFactory& new_sequence,
                                    const std::function<void(int64_t, double)>& on_window = {});

// -log softmax(logits)[target] as llama-perplexity computes it (float max and differences,
// double sum of expf, double log).
double negative_log_likelihood(std::span<const float> logits, int32_t target);

}  // namespace boltrt
