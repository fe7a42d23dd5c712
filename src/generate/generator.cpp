#include "generate/generator.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <unordered_set>

#include "generate/suppress_tokens.h"
#include "generate/text_stream.h"
#include "util/error.h"

namespace boltrt {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

bool cancelled(const GenerationOptions& options) {
  return options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed);
}

}  // namespace

std::string_view to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEndOfGeneration:
      return "eog";
    case FinishReason::kStopString:
      return "stop";
    case FinishReason::kMaxTokens:
      return "length";
    case FinishReason::kContextFull:
      return "context_full";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

Generator::Generator(LanguageModel& model, GenerationVocab vocab, const SamplerConfig& sampling)
    : model_(model), vocab_(std::move(vocab)), sampler_(sampling) {
  if (!vocab_.piece) fail("generator: the vocabulary has no piece function");
  for (const auto* list : {&vocab_.end_of_generation, &vocab_.suppressed}) {
    for (int32_t id : *list) {
      if (id < 0 || id >= model_.n_vocab()) {
        fail("generator: special token {} is outside the vocabulary of {}", id, model_.n_vocab());
      }
    }
  }
  model_.reset();
}

void Generator::reset() {
  model_.reset();
  cached_.clear();
  sampler_.reset();
}

// Brings the cache to `prompt` and returns the logits of its last token: reuses the longest
// prefix already cached (always re-running at least the last token, whose logits are needed),
// rolls back the rest and decodes the remainder in batches. Returns an empty span when
// cancelled.
std::span<const float> Generator::prefill(std::span<const int32_t> prompt,
                                          const GenerationOptions& options,
                                          GenerationStats& stats) {
  size_t reuse = 0;
  if (model_.n_past() == static_cast<int64_t>(cached_.size())) {
    while (reuse < cached_.size() && reuse + 1 < prompt.size() && cached_[reuse] == prompt[reuse]) {
      ++reuse;
    }
  }
  try {
    model_.rollback(static_cast<int64_t>(reuse));
  } catch (const Error&) {
    // Some caches cannot go back far (a sliding-window ring keeps only its window): start over.
    reuse = 0;
    model_.rollback(0);
  }
  cached_.resize(reuse);

  std::span<const float> logits;
  const size_t batch = static_cast<size_t>(options.batch_size);
  for (size_t start = reuse; start < prompt.size(); start += batch) {
    if (cancelled(options)) return {};
    const auto chunk = prompt.subspan(start, std::min(batch, prompt.size() - start));
    logits = model_.decode(chunk);
    cached_.insert(cached_.end(), chunk.begin(), chunk.end());
    stats.n_prompt_evaluated += static_cast<int64_t>(chunk.size());
  }
  if (logits.size() != static_cast<size_t>(model_.n_vocab())) {
    fail("generator: the model returned {} logits for a vocabulary of {}", logits.size(),
         model_.n_vocab());
  }
  return logits;
}

std::vector<int32_t> fit_prompt(std::span<const int32_t> prompt_in, int64_t n_vocab, int64_t n_ctx,
                                const GenerationOptions& options, GenerationStats& stats) {
  if (prompt_in.empty()) fail("generate: the prompt is empty (no tokens)");
  if (options.batch_size <= 0) fail("generate: batch size {} must be positive", options.batch_size);
  for (int32_t id : prompt_in) {
    if (id < 0 || id >= n_vocab)
      fail("generate: prompt token {} is outside the vocabulary of {}", id, n_vocab);
  }
  // The prompt must leave room for at least one generated token.
  std::vector<int32_t> prompt(prompt_in.begin(), prompt_in.end());
  if (static_cast<int64_t>(prompt.size()) >= n_ctx) {
    if (options.overflow == ContextOverflow::kError) {
      fail(
          "the prompt is {} tokens but the context holds {} (one more is needed to generate); "
          "use a larger context or truncation",
          prompt.size(), n_ctx);
    }
    const int64_t reserve = options.max_tokens > 0 ? std::min(options.max_tokens, n_ctx / 2)
                                                   : std::max<int64_t>(1, n_ctx / 4);
    const int64_t budget = std::max<int64_t>(1, n_ctx - reserve);
    const int64_t keep = std::clamp<int64_t>(options.keep_first, 0, budget - 1);
    const int64_t drop = static_cast<int64_t>(prompt.size()) - budget;
    prompt.erase(prompt.begin() + keep, prompt.begin() + keep + drop);
    stats.n_truncated = drop;
  }
  stats.n_prompt_tokens = static_cast<int64_t>(prompt.size());
  return prompt;
}

GenerationResult Generator::generate(std::span<const int32_t> prompt_in,
                                     const GenerationOptions& options) {
  const auto t_start = Clock::now();
  const int64_t n_vocab = model_.n_vocab();
  const int64_t n_ctx = model_.n_ctx();
  GenerationResult result;
  GenerationStats& stats = result.stats;
  const std::vector<int32_t> prompt = fit_prompt(prompt_in, n_vocab, n_ctx, options, stats);

  sampler_.clear_history();
  for (int32_t id : prompt) sampler_.accept(id);
  TokenController* controller = options.controller;
  if (controller != nullptr) controller->begin(prompt);

  std::span<const float> logits = prefill(prompt, options, stats);
  const auto t_prompt_done = Clock::now();
  stats.prompt_ms = ms_between(t_start, t_prompt_done);
  if (stats.prompt_ms > 0) {
    stats.prompt_tokens_per_second = stats.n_prompt_evaluated * 1000.0 / stats.prompt_ms;
  }

  const std::unordered_set<int32_t> end_tokens(vocab_.end_of_generation.begin(),
                                               vocab_.end_of_generation.end());
  const bool edit_logits =
      controller != nullptr || options.ignore_end_of_generation || !vocab_.suppressed.empty();
  TextStream stream(options.stop_strings);
  auto emit = [&](const std::string& text) {
    if (!text.empty() && options.on_text) options.on_text(text);
  };

  Clock::time_point t_first{}, t_last{};
  std::optional<FinishReason> finish;
  if (logits.empty()) finish = FinishReason::kCancelled;
  if (!finish && options.max_tokens == 0) finish = FinishReason::kMaxTokens;
  while (!finish) {
    if (cancelled(options)) {
      finish = FinishReason::kCancelled;
      break;
    }
    // Choose the next token.
    std::span<const float> row = logits;
    int32_t token = -1;
    if (edit_logits) {
      logits_copy_.assign(logits.begin(), logits.end());
      apply_suppress_tokens(logits_copy_, vocab_.suppressed);
      if (options.ignore_end_of_generation) {
        apply_suppress_tokens(logits_copy_, vocab_.end_of_generation);
      }
      if (controller != nullptr) token = controller->before_sample(logits_copy_);
      row = logits_copy_;
    }
    const bool forced = token >= 0;
    if (forced && token >= n_vocab)
      fail("generate: the controller forced token {} outside the vocabulary", token);
    if (!forced) token = sampler_.sample(row);
    sampler_.accept(token);
    if (controller != nullptr) controller->on_commit(token, forced);

    const auto now = Clock::now();
    if (result.tokens.empty()) {
      t_first = now;
      stats.ttft_ms = ms_between(t_start, now);
    }
    t_last = now;
    result.tokens.push_back(token);

    const bool end_of_generation = end_tokens.contains(token);
    const std::string piece = end_of_generation ? std::string() : vocab_.piece(token);
    bool keep_going = true;
    if (options.on_token) {
      keep_going =
          options.on_token({token, forced, piece, static_cast<int64_t>(result.tokens.size()) - 1});
    }
    if (end_of_generation) {
      finish = FinishReason::kEndOfGeneration;
      break;
    }
    emit(stream.push(piece));
    if (stream.stopped()) {
      finish = FinishReason::kStopString;
      break;
    }
    if (!keep_going) {
      finish = FinishReason::kCancelled;
      break;
    }
    const bool controller_busy = controller != nullptr && controller->must_continue();
    if (options.max_tokens >= 0 &&
        static_cast<int64_t>(result.tokens.size()) >= options.max_tokens && !controller_busy) {
      finish = FinishReason::kMaxTokens;
      break;
    }
    if (model_.n_past() + 1 > n_ctx) {
      finish = FinishReason::kContextFull;
      break;
    }
    if (cancelled(options)) {
      finish = FinishReason::kCancelled;
      break;
    }
    logits = model_.decode(std::span<const int32_t>(&token, 1));
    cached_.push_back(token);
  }

  emit(stream.finish());
  result.text = stream.text();
  result.stop_string = stream.matched_stop();
  result.finish_reason = *finish;
  stats.n_tokens = static_cast<int64_t>(result.tokens.size());
  if (stats.n_tokens > 1) {
    stats.generation_ms = ms_between(t_first, t_last);
    if (stats.generation_ms > 0)
      stats.tokens_per_second = (stats.n_tokens - 1) * 1000.0 / stats.generation_ms;
  }
  return result;
}

}  // namespace boltrt
