#include "server/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "util/error.h"

namespace boltrt::server {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

const std::vector<double> kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                            1,     2.5,  5,     10,   30,  60,   120};
const std::vector<double> kTokenBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                          0.1,   0.25,   0.5,   1,    2.5};

}  // namespace

// A TokenController around the request's own controllers (grammar, reasoning), or none, that
// records the raw distribution of every committed token (before any mask). `reasoning` (may be
// null), the reasoning controller somewhere in that chain, tells thought tokens from content.
// Only for plain decoding: the speculative loop walks drafted tokens through clones, whose
// records go nowhere.
class LogprobRecorder : public TokenController {
 public:
  using Sink = std::function<void(TokenLogprob)>;
  LogprobRecorder(TokenController* inner, const ReasoningController* reasoning, int top, Sink sink)
      : inner_(inner), reasoning_(reasoning), top_(top), sink_(std::move(sink)) {}
  void set_context_size(int64_t n_ctx) override {
    if (inner_) inner_->set_context_size(n_ctx);
  }
  void begin(std::span<const int32_t> prompt) override {
    if (inner_) inner_->begin(prompt);
  }
  int32_t before_sample(std::span<float> logits) override {
    record(logits);  // before the inner controller masks anything: the model's own numbers
    return inner_ ? inner_->before_sample(logits) : -1;
  }
  void on_commit(int32_t token, bool forced) override {
    auto answering = [&] {
      return reasoning_ == nullptr ||
             reasoning_->state() == ReasoningController::State::kAnswering ||
             reasoning_->state() == ReasoningController::State::kOff;
    };
    TokenLogprob entry;
    entry.token = token;
    entry.content = answering();
    if (inner_) inner_->on_commit(token, forced);
    entry.content = entry.content && answering();
    if (token >= 0 && static_cast<size_t>(token) < log_softmax_.size())
      entry.logprob = log_softmax_[static_cast<size_t>(token)];
    entry.top = top_list_;
    if (sink_) sink_(std::move(entry));
  }
  bool must_continue() const override { return inner_ && inner_->must_continue(); }
  std::vector<int32_t> forced_run() const override {
    return inner_ ? inner_->forced_run() : std::vector<int32_t>{};
  }
  std::unique_ptr<TokenController> clone() const override {
    // Clones exist only under speculative decoding, which the server does not combine with
    // logprobs; a clone records nothing.
    auto copy = std::make_unique<LogprobRecorder>(nullptr, nullptr, top_, nullptr);
    if (inner_) {
      copy->owned_ = inner_->clone();
      copy->inner_ = copy->owned_.get();
    }
    return copy;
  }

 private:
  void record(std::span<const float> logits) {
    float max = -std::numeric_limits<float>::infinity();
    for (float x : logits) max = std::max(max, x);
    double sum = 0;
    for (float x : logits) sum += std::isfinite(x) ? std::exp(static_cast<double>(x - max)) : 0.0;
    const float log_z = max + static_cast<float>(std::log(sum));
    log_softmax_.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) log_softmax_[i] = logits[i] - log_z;
    top_list_.clear();
    if (top_ <= 0) return;
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    const size_t n = std::min(ids.size(), static_cast<size_t>(top_));
    auto better = [&](int32_t a, int32_t b) {
      const float la = log_softmax_[static_cast<size_t>(a)],
                  lb = log_softmax_[static_cast<size_t>(b)];
      return la > lb || (la == lb && a < b);
    };
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), better);
    for (size_t i = 0; i < n; ++i)
      top_list_.emplace_back(ids[i], log_softmax_[static_cast<size_t>(ids[i])]);
  }

  TokenController* inner_;
  const ReasoningController* reasoning_;
  int top_;
  Sink sink_;
  std::vector<float> log_softmax_;
  std::vector<std::pair<int32_t, float>> top_list_;
  std::unique_ptr<TokenController> owned_;  // a clone's copy of the inner controller
};

uint64_t Job::wait_for_update(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex);
  changed.wait_for(lock, timeout, [&] { return version != seen; });
  return version;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::lock_guard lock(mutex_);
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                       bounds_.begin());
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string Histogram::exposition(const std::string& name, const std::string& help) const {
  std::lock_guard lock(mutex_);
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  cumulative += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
  return out;
}

Scheduler::Scheduler(batch::BatchEngine& engine, SchedulerOptions options)
    : engine_(engine),
      options_(options),
      batcher_(engine.model()),
      ttft_(kLatencyBounds),
      e2e_(kLatencyBounds),
      queue_time_(kLatencyBounds),
      inter_token_(kTokenBounds) {
  if (options_.parallel < 1) fail("--parallel must be at least 1");
  if (options_.parallel > engine.model().n_slots())
    fail("--parallel {} exceeds the model's {} sequences", options_.parallel,
         engine.model().n_slots());
  if (options_.max_queue < 0) fail("--max-queue must not be negative");
  for (int i = 0; i < options_.parallel; ++i) {
    auto slot = std::make_unique<Slot>();
    slot->model = batcher_.slot_model(i);
    slot->generator = std::make_unique<Generator>(*slot->model, engine.vocab(), SamplerConfig{});
    slot->drafter = engine.new_drafter();
    if (slot->drafter) slot->generator->set_drafter(slot->drafter.get(), options_.speculative);
    slots_.push_back(std::move(slot));
  }
  for (int i = 0; i < options_.parallel; ++i)
    slots_[static_cast<size_t>(i)]->thread = std::thread([this, i] { worker(i); });
}

Scheduler::~Scheduler() {
  stop();
  for (auto& slot : slots_)
    if (slot->thread.joinable()) slot->thread.join();
}

bool Scheduler::submit(const std::shared_ptr<Job>& job) {
  return submit_all({job});
}

bool Scheduler::submit_all(const std::vector<std::shared_ptr<Job>>& jobs) {
  std::lock_guard lock(mutex_);
  if (stopping_) return false;
  const auto free_slots = std::count_if(slots_.begin(), slots_.end(),
                                        [](const auto& s) { return !s->busy && !s->job; });
  // Places: free slots (after the jobs already queued took theirs) plus free queue places.
  const int64_t waiting = static_cast<int64_t>(queue_.size());
  const int64_t places =
      std::max<int64_t>(0, free_slots - waiting) +
      std::max<int64_t>(0, options_.max_queue - std::max<int64_t>(0, waiting - free_slots));
  if (static_cast<int64_t>(jobs.size()) > places) return false;
  const auto now = Clock::now();
  for (const auto& job : jobs) {
    job->submitted = now;
    queue_.push_back(job);
  }
  dispatch();
  return true;
}

bool Scheduler::withdraw(const std::shared_ptr<Job>& job) {
  job->cancel = true;
  std::lock_guard lock(mutex_);
  auto it = std::find(queue_.begin(), queue_.end(), job);
  if (it == queue_.end()) return false;
  queue_.erase(it);
  idle_.notify_all();
  return true;
}

void Scheduler::warm(int slot_index, uint64_t epoch, std::vector<int32_t> tokens) {
  if (!options_.prefix_cache || tokens.empty()) return;
  std::lock_guard lock(mutex_);
  if (stopping_ || !queue_.empty()) return;
  Slot& slot = *slots_.at(static_cast<size_t>(slot_index));
  if (slot.busy || slot.epoch != epoch) return;
  const size_t shared = common_prefix(slot.cached, tokens);
  if (shared >= tokens.size()) return;  // already there
  auto job = std::make_shared<Job>();
  job->prompt = std::move(tokens);
  job->options.max_tokens = 0;  // prefill only
  job->use_controller = false;
  job->sampling.temperature = 0;
  job->submitted = Clock::now();
  slot.busy = true;
  slot.warming = true;
  slot.job = std::move(job);
  work_.notify_all();
}

void Scheduler::dispatch() {
  while (!queue_.empty()) {
    std::shared_ptr<Job> job = queue_.front();
    Slot* best = nullptr;
    size_t best_prefix = 0;
    size_t warming_prefix = 0;  // the most a warming slot will share once it is done
    for (auto& slot : slots_) {
      if (slot->busy) {
        if (slot->warming && options_.prefix_cache)
          warming_prefix = std::max(warming_prefix, common_prefix(slot->job->prompt, job->prompt));
        continue;
      }
      const size_t prefix = options_.prefix_cache ? common_prefix(slot->cached, job->prompt) : 0;
      // The longest shared prefix; among equals the slot whose cache is worth least.
      if (best == nullptr || prefix > best_prefix ||
          (prefix == best_prefix && slot->cached.size() < best->cached.size())) {
        best = slot.get();
        best_prefix = prefix;
      }
    }
    if (best == nullptr) return;
    if (warming_prefix > best_prefix) return;  // its slot is nearly ready: worth the wait
    queue_.pop_front();
    best->busy = true;
    job->slot_epoch = ++best->epoch;
    best->job = std::move(job);
    work_.notify_all();
  }
}

void Scheduler::stop() {
  std::deque<std::shared_ptr<Job>> dropped;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    dropped.swap(queue_);
    for (auto& slot : slots_)
      if (slot->job) slot->job->cancel = true;  // a warming pre-fill too
    work_.notify_all();
    idle_.notify_all();
  }
  for (auto& job : dropped) {
    std::lock_guard lock(job->mutex);
    job->done = true;
    job->error = "the server is shutting down";
    job->result.finish_reason = FinishReason::kCancelled;
    ++job->version;
    job->changed.notify_all();
  }
}

bool Scheduler::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, timeout, [&] {
    return queue_.empty() &&
           std::none_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->busy; });
  });
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats s;
  s.slots = static_cast<int>(slots_.size());
  for (const auto& slot : slots_) s.busy += slot->busy ? 1 : 0;
  s.queued = static_cast<int>(queue_.size());
  return s;
}

void Scheduler::worker(int index) {
  Slot& slot = *slots_[static_cast<size_t>(index)];
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || slot.job != nullptr; });
      if (slot.job == nullptr) return;  // stopping with nothing assigned
      job = slot.job;
    }
    const bool warming = slot.warming;
    if (warming) {
      try {
        batch::SequenceBatcher::Participation participation(batcher_);
        GenerationOptions gen = job->options;
        gen.cancel = &job->cancel;
        const GenerationResult r = slot.generator->generate(job->prompt, gen);
        warmed_tokens_ += static_cast<uint64_t>(r.stats.n_prompt_evaluated);
      } catch (const std::exception&) {
        slot.generator->reset();
      }
    } else {
      run_job(slot, *job);
    }
    {
      // The slot is free (and its cache known to dispatch) before the job is reported done: a
      // client that sends its next turn as soon as it has this answer finds the slot again.
      std::lock_guard lock(mutex_);
      slot.cached = slot.generator->cached_tokens();
      slot.job.reset();
      slot.busy = false;
      slot.warming = false;
      if (!stopping_) dispatch();
      idle_.notify_all();
    }
    {
      std::lock_guard lock(job->mutex);
      job->done = true;
      ++job->version;
    }
    job->changed.notify_all();
  }
}

void Scheduler::run_job(Slot& slot, Job& job) {
  const auto t_start = Clock::now();
  {
    std::lock_guard lock(job.mutex);
    job.started = true;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].get() == &slot) job.slot = static_cast<int>(i);
    ++job.version;
  }
  job.changed.notify_all();
  queue_time_.observe(seconds_between(job.submitted, t_start));

  GenerationResult result;
  std::string error;
  int64_t reasoning_tokens = -1;
  Clock::time_point last_token = t_start;
  try {
    SamplerConfig sampling = job.sampling;
    sampling.validate();
    if (!options_.prefix_cache) slot.generator->reset();
    slot.generator->sampler() = Sampler(sampling);
    GenerationOptions gen = job.options;
    gen.cancel = &job.cancel;
    ReasoningConfig reasoning = job.reasoning;
    reasoning.max_tokens = gen.max_tokens;
    reasoning.validate();
    // The chain: [logprob recorder ->] [grammar ->] reasoning controller.
    std::unique_ptr<ReasoningController> controller;
    if (job.use_controller) controller = engine_.controller(reasoning);
    gen.controller = controller.get();
    std::unique_ptr<GrammarController> grammar;
    if (job.grammar) {
      grammar = make_grammar_controller(job.grammar, engine_.vocab(), slot.model->n_vocab(),
                                        engine_.reasoning_markers(), job.grammar_after_thought,
                                        controller.get(), job.grammar_trigger);
      gen.controller = grammar.get();
    }
    std::unique_ptr<LogprobRecorder> recorder;
    if (job.top_logprobs >= 0) {
      if (slot.drafter) throw Error("logprobs are not recorded under speculative decoding");
      recorder = std::make_unique<LogprobRecorder>(gen.controller, controller.get(),
                                                   job.top_logprobs, [&job](TokenLogprob entry) {
                                                     std::lock_guard lock(job.mutex);
                                                     job.logprobs.push_back(std::move(entry));
                                                   });
      gen.controller = recorder.get();
    }
    gen.on_text = [&](std::string_view text) {
      {
        std::lock_guard lock(job.mutex);
        job.text.append(text);
        ++job.version;
      }
      job.changed.notify_all();
    };
    gen.on_token = [&](const TokenEvent& event) {
      const auto now = Clock::now();
      {
        std::lock_guard lock(job.mutex);
        if (job.tokens.empty()) {
          job.first_token = now;
        } else {
          inter_token_.observe(seconds_between(last_token, now));
        }
        job.tokens.push_back(event.token);
        ++job.version;
      }
      last_token = now;
      generated_tokens_.fetch_add(1, std::memory_order_relaxed);
      job.changed.notify_all();
      return !job.cancel.load();
    };
    if (job.cancel) {  // its client left while it waited for this slot
      result.finish_reason = FinishReason::kCancelled;
    } else {
      batch::SequenceBatcher::Participation participation(batcher_);
      result = slot.generator->generate(job.prompt, gen);
    }
    if (controller) reasoning_tokens = controller->reasoning_tokens();
    prompt_tokens_ += static_cast<uint64_t>(result.stats.n_prompt_tokens);
    cached_tokens_ += static_cast<uint64_t>(
        std::max<int64_t>(0, result.stats.n_prompt_tokens - result.stats.n_prompt_evaluated));
  } catch (const std::exception& e) {
    error = e.what();
    // A failed generation may leave the slot's cache part-filled: start it over next time.
    slot.generator->reset();
  }
  const auto t_end = Clock::now();
  if (!error.empty()) {
    ++failed_;
  } else if (result.finish_reason == FinishReason::kCancelled) {
    ++cancelled_;
  } else {
    ++finished_;
    e2e_.observe(seconds_between(job.submitted, t_end));
    if (!result.tokens.empty()) ttft_.observe(seconds_between(job.submitted, job.first_token));
  }
  {
    std::lock_guard lock(job.mutex);
    job.result = std::move(result);
    job.reasoning_tokens = reasoning_tokens;
    job.error = std::move(error);
    job.finished = t_end;
    ++job.version;
  }
  job.changed.notify_all();  // done is set by worker() once the slot is free
}

std::string Scheduler::metrics() const {
  const SchedulerStats s = stats();
  std::string out;
  auto gauge = [&](const char* name, const char* help, double value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, value);
  };
  auto counter = [&](const char* name, const char* help, uint64_t value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
  };
  gauge("boltrt:slots", "Sequences (--parallel).", s.slots);
  gauge("boltrt:requests_running", "Requests generating in a slot.", s.busy);
  gauge("boltrt:requests_waiting", "Requests queued for a slot.", s.queued);
  counter("boltrt:prompt_tokens_total", "Prompt tokens of finished generations.",
          prompt_tokens_.load());
  counter("boltrt:prompt_tokens_cached_total", "Prompt tokens reused from a slot's cache.",
          cached_tokens_.load());
  counter("boltrt:generation_tokens_total", "Generated tokens.", generated_tokens_.load());
  counter("boltrt:history_prefill_tokens_total",
          "Tokens of a reply pre-filled as history while its slot was idle.",
          warmed_tokens_.load());
  out +=
      "# HELP boltrt:generations_total Generations by outcome.\n"
      "# TYPE boltrt:generations_total counter\n";
  out += fmt::format("boltrt:generations_total{{outcome=\"finished\"}} {}\n", finished_.load());
  out += fmt::format("boltrt:generations_total{{outcome=\"cancelled\"}} {}\n", cancelled_.load());
  out += fmt::format("boltrt:generations_total{{outcome=\"failed\"}} {}\n", failed_.load());
  out += ttft_.exposition("boltrt:time_to_first_token_seconds",
                          "From submission to the first generated token.");
  out += inter_token_.exposition("boltrt:inter_token_latency_seconds",
                                 "Between consecutive generated tokens.");
  out += e2e_.exposition("boltrt:e2e_request_latency_seconds",
                         "From submission to the end of generation.");
  out += queue_time_.exposition("boltrt:request_queue_time_seconds",
                                "From submission until a slot took the request.");
  return out;
}

}  // namespace boltrt::server
