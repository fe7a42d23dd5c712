#include "generate/generator.h"

#include <algorithm>
#include <chrono>
#include <ctime>
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

// CPU time of the calling thread: what a round costs, unlike wall time not inflated when the
// OS runs something else (shared machines), for the adaptive draft length's comparisons.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
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
  if (drafter_ != nullptr) drafter_->reset();
  sampler_.reset();
}

void Generator::set_drafter(BlockDrafter* drafter, const SpeculativeOptions& options) {
  if (drafter == nullptr) {
    model_.set_tap_layers({});
    drafter_ = nullptr;
    speculative_ = SpeculativeOptions();
    return;
  }
  SpeculativeOptions o = options;
  const int64_t limit = drafter->max_draft();
  if (o.draft_max < 0 || o.draft_max > limit) o.draft_max = limit;
  if (o.draft_max < 0) o.draft_max = 0;
  o.draft_min = std::clamp<int64_t>(o.draft_min, 1, std::max<int64_t>(1, limit));
  o.draft_min = std::min(o.draft_min, std::max<int64_t>(1, o.draft_max));
  model_.set_tap_layers(drafter->tap_layers());
  drafter_ = drafter;
  speculative_ = o;
  policy_.reset(o);
  // The drafter's context must mirror cached_: the next prefill re-runs what it lacks.
  drafter_->reset();
}

// Brings the cache to `prompt` and returns the logits of its last token: reuses the longest
// prefix already cached (always re-running at least the last token, whose logits are needed),
// rolls back the rest and decodes the remainder in batches; the drafter, when there is one, is
// rolled back alike and given the taps of every decoded chunk. Returns an empty span when
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
  if (drafter_ != nullptr) {
    reuse = std::min(reuse, static_cast<size_t>(std::max<int64_t>(0, drafter_->context_end())));
    if (!drafter_->rollback(static_cast<int64_t>(reuse))) {
      reuse = 0;
      drafter_->reset();
    }
  }
  try {
    model_.rollback(static_cast<int64_t>(reuse));
  } catch (const Error&) {
    // Some caches cannot go back far (a sliding-window ring keeps only its window): start over.
    reuse = 0;
    model_.rollback(0);
    if (drafter_ != nullptr) drafter_->reset();
  }
  cached_.resize(reuse);

  std::span<const float> logits;
  const size_t batch = static_cast<size_t>(options.batch_size);
  for (size_t start = reuse; start < prompt.size(); start += batch) {
    if (cancelled(options)) return {};
    const auto chunk = prompt.subspan(start, std::min(batch, prompt.size() - start));
    logits = model_.decode(chunk);
    if (drafter_ != nullptr) drafter_->add_context(chunk, model_.taps().data());
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
  if (controller != nullptr) {
    controller->set_context_size(n_ctx);
    controller->begin(prompt);
  }

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

  // One step: rows[j] (j < n_rows) is the model's prediction after verify_[j], which sits at
  // position base + j; verify_[0] is the last committed token, verify_[1..] the drafted ones.
  // The prefill is a step with one row.
  SpeculativeStats& spec = stats.draft;
  // Verify steps (a drafted token or more) leave their rows in the model, fetched one by one
  // with verify_row() so that rows after the first rejection never run the output head.
  std::span<const float> rows = logits;
  bool verify_rows = false;
  verify_.assign(1, prompt.back());
  int64_t base = static_cast<int64_t>(prompt.size()) - 1;
  int64_t n_rows = 1;
  bool prefill_step = true;
  int64_t forced_slots = 0;  // leading drafted slots of this step the controller forces
  int32_t token = -1;
  // Adaptive length: the time from one step's start (draft) to the next one's is charged to
  // the step's draft length (its verify, the walk over its rows and the injection).
  double t_step = 0;
  int64_t timed_length = -1;  // the draft length of the step being timed (< 0: none)
  while (!finish) {
    int64_t used = 0;  // rows walked = verify tokens that stay committed
    for (int64_t j = 0; j < n_rows; ++j) {
      if (cancelled(options)) {
        finish = FinishReason::kCancelled;
        break;
      }
      // Choose the next token.
      std::span<const float> row = verify_rows ? model_.verify_row(j)
                                               : rows.subspan(static_cast<size_t>(j * n_vocab),
                                                              static_cast<size_t>(n_vocab));
      if (row.size() != static_cast<size_t>(n_vocab)) {
        fail("generator: the model returned {} logits for a vocabulary of {}", row.size(), n_vocab);
      }
      token = -1;
      if (edit_logits) {
        logits_copy_.assign(row.begin(), row.end());
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
      used = j + 1;

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
        keep_going = options.on_token(
            {token, forced, piece, static_cast<int64_t>(result.tokens.size()) - 1});
      }
      if (end_of_generation) {
        finish = FinishReason::kEndOfGeneration;
        break;
      }
      emit(stream.push(piece));
      const bool controller_busy = controller != nullptr && controller->must_continue();
      if (stream.stopped()) {
        finish = FinishReason::kStopString;
      } else if (!keep_going) {
        finish = FinishReason::kCancelled;
      } else if (options.max_tokens >= 0 &&
                 static_cast<int64_t>(result.tokens.size()) >= options.max_tokens &&
                 !controller_busy) {
        finish = FinishReason::kMaxTokens;
      } else if (base + used + 1 > n_ctx) {  // `token` would sit at position base + used
        finish = FinishReason::kContextFull;
      } else if (cancelled(options)) {
        finish = FinishReason::kCancelled;
      }
      if (finish) break;
      // The next row was computed after the drafted token; it is usable only if that token is
      // the one just committed.
      if (j + 1 < n_rows && verify_[static_cast<size_t>(j + 1)] != token) break;
    }
    // Forced slots are not the drafter's: they count neither as drafted nor as accepted.
    const int64_t drafted = n_rows - 1 - forced_slots;
    if (drafted > 0) {
      const int64_t accepted = std::max<int64_t>(0, used - 1 - forced_slots);
      ++spec.n_rounds;
      spec.n_drafted += drafted;
      spec.n_accepted += accepted;
      // a walk cut short by the end of generation says nothing about the rest
      if (speculative_.adaptive && forced_slots == 0 && !finish) {
        policy_.observe_acceptance(drafted, accepted);
      }
    }
    // The model holds verify_[0 .. n_rows); verify_[0] and the accepted drafts stay (verify_[0]
    // was committed before this step, even when nothing was walked).
    const int64_t keep = base + std::max<int64_t>(used, 1);
    if (model_.n_past() > keep) model_.rollback(keep);
    cached_.resize(static_cast<size_t>(keep));
    // The drafter mirrors the model: it gets the kept rows' taps (the prefill step's were given
    // chunk by chunk).
    if (drafter_ != nullptr && !prefill_step) {
      drafter_->add_context(
          std::span<const int32_t>(verify_.data(), static_cast<size_t>(keep - base)),
          model_.taps().data());
    }
    prefill_step = false;
    if (finish) break;
    if (cancelled(options)) {
      finish = FinishReason::kCancelled;
      break;
    }
    const double t_now = thread_cpu_seconds();
    if (timed_length >= 0) policy_.observe_cost(timed_length, t_now - t_step);
    t_step = t_now;
    timed_length = -1;

    // Next step: `token` sits at position keep and is not in the model yet; draft k tokens
    // after it, as many as fit the context and the token limit.
    // Tokens the controller will force are known: they are verified in place of drafted
    // guesses (shared/docs/reasoning.md B9 step 5), as many as the draft length allows.
    int64_t k = 0;
    std::vector<int32_t> forced_next;
    if (drafter_ != nullptr && controller != nullptr) forced_next = controller->forced_run();
    const int64_t n_forced = std::clamp<int64_t>(static_cast<int64_t>(forced_next.size()), 0,
                                                 std::max<int64_t>(0, speculative_.draft_max));
    int64_t n_draft = -1;  // the length asked for (k may be cut by the context or the limit)
    if (drafter_ != nullptr) {
      n_draft = speculative_.adaptive ? policy_.next() : speculative_.draft_max;
      k = std::min(std::max(n_draft, n_forced), n_ctx - keep - 1);
      if (options.max_tokens >= 0 && !(controller != nullptr && controller->must_continue())) {
        k = std::min(k, options.max_tokens - static_cast<int64_t>(result.tokens.size()) - 1);
      }
      k = std::max<int64_t>(0, k);
    }
    verify_.assign(static_cast<size_t>(k + 1), token);
    forced_slots = std::min(k, n_forced);
    if (k > 0) {
      if (drafter_->context_end() != keep) {
        fail("speculative: the drafter's context ends at {} but the model holds {}",
             drafter_->context_end(), keep);
      }
      if (forced_slots < k) drafter_->propose(token, k, verify_.data() + 1);
      std::copy_n(forced_next.begin(), forced_slots, verify_.begin() + 1);
      for (int64_t i = 1; i <= k; ++i) {
        const int32_t d = verify_[static_cast<size_t>(i)];
        if (d < 0 || d >= n_vocab)
          fail("speculative: the drafter proposed token {} outside the vocabulary", d);
      }
      // A controller that constrains the output (a grammar) cuts the draft at its first token
      // that could not be committed: verifying the rest would be wasted rows.
      if (controller != nullptr && forced_slots < k) {
        const int64_t legal = controller->draft_prefix(
            std::span<const int32_t>(verify_.data() + 1, static_cast<size_t>(k)));
        k = std::clamp<int64_t>(legal, forced_slots, k);
        verify_.resize(static_cast<size_t>(k + 1));
      }
    }
    base = keep;
    n_rows = k + 1;
    verify_rows = k > 0;
    if (verify_rows) {
      model_.decode_verify(verify_);
    } else {
      rows = model_.decode(verify_);
    }
    cached_.insert(cached_.end(), verify_.begin(), verify_.end());
    if (drafter_ != nullptr && speculative_.adaptive && forced_slots == 0 && k == n_draft) {
      timed_length = k;
    }
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
