#include "generate/speculative.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <unordered_set>

#include "generate/text_stream.h"
#include "runtime/thread_pool.h"
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

// ---------------------------------------------------------------------------------------------
// DFlashDrafter
// ---------------------------------------------------------------------------------------------

DFlashDrafter::DFlashDrafter(const DFlashDraft& draft, ThreadPool* pool)
    : draft_(draft), pool_(pool) {}

void DFlashDrafter::add_context(std::span<const int32_t> tokens, const float* taps) {
  if (tokens.empty()) return;
  draft_.inject(taps, static_cast<int64_t>(tokens.size()), kv_, pool_);
}

void DFlashDrafter::propose(int32_t last, int64_t n, int32_t* out) {
  if (n <= 0) return;
  if (n > max_draft())
    fail("dflash: {} draft tokens exceed the block size - 1 = {}", n, max_draft());
  const int64_t V = draft_.target().config().n_vocab;
  block_.assign(static_cast<size_t>(n + 1), draft_.config().mask_token);
  block_[0] = last;
  logits_.resize(static_cast<size_t>(n * V));
  draft_.draft(block_.data(), n + 1, kv_, logits_.data(), pool_);
  for (int64_t i = 0; i < n; ++i) {  // slot i+1 predicts the token at its own position
    const float* row = logits_.data() + i * V;
    out[i] = static_cast<int32_t>(std::max_element(row, row + V) - row);
  }
}

// ---------------------------------------------------------------------------------------------
// SpeculativeGenerator
// ---------------------------------------------------------------------------------------------

SpeculativeGenerator::SpeculativeGenerator(Gemma4Session& target, BlockDrafter& drafter,
                                           GenerationVocab vocab, const SamplerConfig& sampling,
                                           const SpeculativeOptions& options)
    : target_(target),
      drafter_(drafter),
      vocab_(std::move(vocab)),
      sampler_(sampling),
      options_(options) {
  if (!vocab_.piece) fail("speculative: the vocabulary has no piece function");
  for (const auto* list : {&vocab_.end_of_generation, &vocab_.suppressed}) {
    for (int32_t id : *list) {
      if (id < 0 || id >= target_.n_vocab()) {
        fail("speculative: special token {} is outside the vocabulary of {}", id,
             target_.n_vocab());
      }
    }
  }
  const int64_t limit = drafter_.max_draft();
  if (options_.draft_max < 0 || options_.draft_max > limit) options_.draft_max = limit;
  if (options_.draft_max < 0) options_.draft_max = 0;
  options_.draft_min = std::clamp<int64_t>(options_.draft_min, 1, std::max<int64_t>(1, limit));
  options_.draft_min = std::min(options_.draft_min, std::max<int64_t>(1, options_.draft_max));
  // A verify batch of draft_max + 1 tokens is rolled back by up to draft_max tokens: the
  // sliding-window rings hold max_batch extra cells, so that must cover the batch.
  if (target_.kv_cache().max_batch() < options_.draft_max + 1) {
    fail("speculative: the target's batch size {} is below draft length + 1 = {}",
         target_.kv_cache().max_batch(), options_.draft_max + 1);
  }
  target_.set_tap_layers(drafter_.tap_layers());
}

SpeculativeResult SpeculativeGenerator::generate(std::span<const int32_t> prompt_in,
                                                 const GenerationOptions& options) {
  const auto t_start = Clock::now();
  SpeculativeResult out;
  GenerationResult& result = out.generation;
  GenerationStats& stats = result.stats;
  SpeculativeStats& spec = out.speculative;
  const int64_t V = target_.n_vocab();
  const int64_t n_ctx = target_.n_ctx();
  const std::vector<int32_t> prompt = fit_prompt(prompt_in, V, n_ctx, options, stats);

  sampler_.clear_history();
  for (int32_t id : prompt) sampler_.accept(id);
  TokenController* controller = options.controller;
  if (controller != nullptr) controller->begin(prompt);

  // Prefill with taps; every chunk's hidden states become draft context rows.
  target_.set_tap_layers(drafter_.tap_layers());
  target_.reset();
  drafter_.reset();
  std::span<const float> rows;  // logit rows to walk, V floats each
  const size_t batch = static_cast<size_t>(options.batch_size);
  bool stopped_early = false;
  for (size_t start = 0; start < prompt.size(); start += batch) {
    if (cancelled(options)) {
      stopped_early = true;
      break;
    }
    const auto chunk =
        std::span<const int32_t>(prompt).subspan(start, std::min(batch, prompt.size() - start));
    rows = target_.decode(chunk);
    drafter_.add_context(chunk, target_.taps().data());
    stats.n_prompt_evaluated += static_cast<int64_t>(chunk.size());
  }
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
  if (stopped_early) finish = FinishReason::kCancelled;
  if (!finish && options.max_tokens == 0) finish = FinishReason::kMaxTokens;

  // One round: rows[j] (j < n_rows) is the target's prediction after verify[j], which sits at
  // position base + j; verify[1..] are the drafted tokens. The prefill is a round with one row.
  std::vector<int32_t> verify = {prompt.back()};
  int64_t base = static_cast<int64_t>(prompt.size()) - 1;
  int64_t n_rows = 1;
  int64_t n_draft = options_.adaptive ? options_.draft_min : options_.draft_max;
  int32_t token = -1;
  while (!finish) {
    int64_t used = 0;  // rows walked = verify tokens that stay committed
    for (int64_t j = 0; j < n_rows && !finish; ++j) {
      if (cancelled(options)) {
        finish = FinishReason::kCancelled;
        break;
      }
      // Choose the token exactly as Generator::generate does.
      std::span<const float> row = rows.subspan(static_cast<size_t>(j * V), static_cast<size_t>(V));
      token = -1;
      if (edit_logits) {
        logits_copy_.assign(row.begin(), row.end());
        for (int32_t id : vocab_.suppressed) {
          logits_copy_[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
        }
        if (options.ignore_end_of_generation) {
          for (int32_t id : end_tokens)
            logits_copy_[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
        }
        if (controller != nullptr) token = controller->before_sample(logits_copy_);
        row = logits_copy_;
      }
      const bool forced = token >= 0;
      if (forced && token >= V)
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
      if (stream.stopped()) {
        finish = FinishReason::kStopString;
      } else if (!keep_going) {
        finish = FinishReason::kCancelled;
      } else if (options.max_tokens >= 0 &&
                 static_cast<int64_t>(result.tokens.size()) >= options.max_tokens &&
                 !(controller != nullptr && controller->must_continue())) {
        finish = FinishReason::kMaxTokens;
      } else if (base + used + 1 > n_ctx) {  // the plain loop's n_past + 1 > n_ctx
        finish = FinishReason::kContextFull;
      } else if (cancelled(options)) {
        finish = FinishReason::kCancelled;
      }
      if (finish) break;
      // The next row is usable only if it was computed after the token just committed.
      if (j + 1 < n_rows && verify[static_cast<size_t>(j + 1)] != token) break;
    }
    // Bookkeeping of a verify round.
    const int64_t drafted = n_rows - 1;
    if (drafted > 0) {
      const int64_t accepted = std::max<int64_t>(0, used - 1);
      ++spec.n_rounds;
      spec.n_drafted += drafted;
      spec.n_accepted += accepted;
      if (options_.adaptive) {
        if (accepted == drafted) {
          n_draft = std::min(options_.draft_max, n_draft + 2);
        } else if (2 * accepted < drafted) {
          n_draft = std::max(options_.draft_min, n_draft - 1);
        }
      }
    }
    if (finish) break;
    // Keep the committed verify rows in the target; the drafter gets their taps. (The prefill
    // round's context was added chunk by chunk above.)
    const int64_t keep = base + used;
    if (target_.n_past() > keep) target_.rollback(keep);
    if (drafted > 0) {
      drafter_.add_context(std::span<const int32_t>(verify.data(), static_cast<size_t>(used)),
                           target_.taps().data());
    }

    // Next round: `token` sits at position keep and is not in the target yet.
    if (cancelled(options)) {
      finish = FinishReason::kCancelled;
      break;
    }
    int64_t k = std::min(n_draft, n_ctx - keep - 1);
    if (options.max_tokens >= 0 && !(controller != nullptr && controller->must_continue())) {
      k = std::min(k, options.max_tokens - static_cast<int64_t>(result.tokens.size()) - 1);
    }
    k = std::max<int64_t>(0, k);
    verify.assign(static_cast<size_t>(k + 1), token);
    if (k > 0) {
      if (drafter_.context_end() != keep) {
        fail("speculative: the drafter's context ends at {} but the target holds {}",
             drafter_.context_end(), keep);
      }
      drafter_.propose(token, k, verify.data() + 1);
      for (int64_t i = 1; i <= k; ++i) {
        if (verify[static_cast<size_t>(i)] < 0 || verify[static_cast<size_t>(i)] >= V) {
          fail("speculative: the drafter proposed token {} outside the vocabulary",
               verify[static_cast<size_t>(i)]);
        }
      }
    }
    base = keep;
    n_rows = k + 1;
    rows = target_.decode(verify, /*all_logits=*/true);
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
  return out;
}

// ---------------------------------------------------------------------------------------------
// DFlashGeneration
// ---------------------------------------------------------------------------------------------

DFlashGeneration::DFlashGeneration(const std::string& draft_path, LanguageModel& target,
                                   GenerationVocab vocab, const SamplerConfig& sampling,
                                   const SpeculativeOptions& options) {
  auto* session = dynamic_cast<Gemma4Session*>(&target);
  if (session == nullptr) fail("{}: DFlash drafts run with Gemma 4 targets only", draft_path);
  init(draft_path, *session, std::move(vocab), sampling, options);
}

DFlashGeneration::DFlashGeneration(const std::string& draft_path, const std::string& target_path,
                                   const SessionOptions& session, int threads,
                                   GenerationVocab vocab, const SamplerConfig& sampling,
                                   const SpeculativeOptions& options) {
  target_ = Gemma4Model::load(target_path);
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads);
  session_ = std::make_unique<Gemma4Session>(*target_, session, pool_.get());
  init(draft_path, *session_, std::move(vocab), sampling, options);
}

void DFlashGeneration::init(const std::string& draft_path, Gemma4Session& session,
                            GenerationVocab vocab, const SamplerConfig& sampling,
                            const SpeculativeOptions& options) {
  draft_ = DFlashDraft::load(draft_path, session.model());
  drafter_ = std::make_unique<DFlashDrafter>(*draft_, session.pool());
  generator_ = std::make_unique<SpeculativeGenerator>(session, *drafter_, std::move(vocab),
                                                      sampling, options);
}

DFlashGeneration::~DFlashGeneration() = default;

std::string format_speculative_stats(const SpeculativeResult& result) {
  const SpeculativeStats& s = result.speculative;
  return fmt::format(
      "draft: {}/{} accepted ({:.1f}%), mean acceptance length {:.2f} over {} rounds, {:.1f} "
      "tokens/s",
      s.n_accepted, s.n_drafted, 100.0 * s.acceptance_rate(), s.mean_acceptance_length(),
      s.n_rounds, result.generation.stats.tokens_per_second);
}

}  // namespace boltrt
