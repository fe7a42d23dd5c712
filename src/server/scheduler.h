// Scheduler — the engine side of `boltrt serve`: N slots (sequences of one loaded model that
// share its forward passes through the batch engine's SequenceBatcher, i.e. continuous
// batching), a bounded queue of requests, and prefix caching.
//
//   connection thread                     slot worker thread (one per slot)
//   ─────────────────                     ─────────────────────────────────
//   job = make_shared<Job>(...)
//   scheduler.submit(job)   ──queue──▶    takes the job, runs Generator::generate over the
//   job->wait_for_update()  ◀─tokens──    slot's model; every committed token and text piece
//   (stream, or wait for done)            is appended to the job and the waiter is woken
//   client gone: job->cancel = true ───▶  generate() stops before its next model call
//
// The connection thread never runs model code and a worker never touches a socket, so a slow
// or vanished client cannot stall a batch step of the others.
//
// Prefix caching: a slot keeps the KV of its last request (its Generator reuses the longest
// common prefix of the cached tokens and the next prompt), and a queued job goes to the free
// slot whose cache shares the longest prefix with its prompt; the tokens reused are reported as
// cached. Whether a reused prefix gives the same bits as a fresh prefill depends on the
// backend's batch invariance (README: bit-identical for the tiny Q8_0 model at AVX-512).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "batch/engine.h"
#include "generate/generator.h"
#include "generate/grammar_controller.h"
#include "generate/reasoning.h"
#include "generate/sampler.h"

namespace boltrt::server {

// The model's log-probability of one committed token (log-softmax of its raw logits), with the
// most likely alternatives at that position.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  bool content = true;                         // outside a thought block (and not its markers)
  std::vector<std::pair<int32_t, float>> top;  // best first
};

// One request in flight: what to run, and what it produced so far (guarded by `mutex`).
struct Job {
  // ---- set before submit(), read-only afterwards
  std::vector<int32_t> prompt;
  SamplerConfig sampling;
  GenerationOptions
      options;  // max_tokens, stop strings; callbacks and cancel are set by the worker
  ReasoningConfig reasoning;  // max_tokens filled in by the worker
  bool use_controller = true;
  int top_logprobs = -1;  // >= 0: record TokenLogprob per token with that many alternatives
  // Structured output (response_format, a forcing tool_choice): the compiled grammar every
  // token is masked to (null: none), chained around the reasoning controller, so the thought
  // stays free and the constraint starts after it when `grammar_after_thought`.
  std::shared_ptr<const grammar::Grammar> grammar;
  bool grammar_after_thought = false;
  std::string grammar_trigger;  // "" or the text that switches a lazy grammar on (tools, auto)

  // ---- set by the connection thread at any time
  std::atomic<bool> cancel{false};

  // ---- progress, guarded by mutex; the worker notifies `changed` after each change
  std::mutex mutex;
  std::condition_variable changed;
  bool started = false;  // a slot took it
  bool done = false;
  int slot = -1;
  uint64_t slot_epoch = 0;             // the slot's epoch when it took this job (see warm())
  std::vector<int32_t> tokens;         // committed tokens so far
  std::vector<TokenLogprob> logprobs;  // one per token when top_logprobs >= 0
  std::string text;                    // streamed text so far (stop strings held back)
  GenerationResult result;             // when done
  int64_t reasoning_tokens = -1;       // the controller's count when done (-1: no controller)
  std::string error;                   // when done and failed: one line
  std::chrono::steady_clock::time_point submitted, first_token, finished;
  uint64_t version = 0;  // bumped at every change

  // Waits until version differs from `seen` or `timeout` passes; returns the version.
  uint64_t wait_for_update(uint64_t seen, std::chrono::milliseconds timeout);
};

// Latency histogram in the Prometheus sense (cumulative buckets, sum, count), thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // "# TYPE" and the sample lines for `name`.
  std::string exposition(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct SchedulerOptions {
  int parallel = 1;    // slots
  int max_queue = 64;  // jobs waiting for a slot; more are refused (429)
  bool prefix_cache = true;
  SpeculativeOptions speculative;
};

struct SchedulerStats {
  int slots = 0, busy = 0, queued = 0;
};

class Scheduler {
 public:
  Scheduler(batch::BatchEngine& engine, SchedulerOptions options);
  ~Scheduler();  // stop() and join

  // Queues a job; false when the queue is full (the job is not taken).
  bool submit(const std::shared_ptr<Job>& job);
  // Queues the jobs of one request (its `n` choices) together or not at all: each is one unit
  // of work, so they are taken only when every one has a free slot or a queue place (false
  // otherwise, nothing taken). They stay consecutive in the FIFO queue, so a request's choices
  // run as slots free up, before later requests and after earlier ones.
  bool submit_all(const std::vector<std::shared_ptr<Job>>& jobs);
  // The most jobs one request can ever have admitted at once: slots + queue places.
  int capacity() const { return options_.parallel + options_.max_queue; }
  // Pre-fills `tokens` (a conversation's history with the reply just given) into `slot` while
  // it is idle, so that the conversation's next turn finds them cached. Does nothing when the
  // slot is busy or requests are waiting. A queued request that shares more with the warming
  // slot than with any free one waits for it.
  // `epoch` is the finished job's slot_epoch: a slot that ran anything since keeps its cache.
  void warm(int slot, uint64_t epoch, std::vector<int32_t> tokens);
  // Drops a job that has not started (true), else sets its cancel flag (false).
  bool withdraw(const std::shared_ptr<Job>& job);
  // Cancels every job (queued ones finish at once as cancelled) and stops the workers.
  void stop();
  // Waits until no job is queued or running, at most `timeout`; true when idle.
  bool wait_idle(std::chrono::milliseconds timeout);

  SchedulerStats stats() const;
  int64_t n_ctx() const { return engine_.model().n_ctx(); }
  // Whether the slots decode speculatively (--draft); logprobs are not recorded then.
  bool speculative() const { return slots_.front()->drafter != nullptr; }
  batch::BatchEngine& engine() { return engine_; }

  // Metrics (Prometheus text), updated as jobs finish.
  std::string metrics() const;

 private:
  struct Slot {
    std::unique_ptr<LanguageModel> model;
    std::unique_ptr<Generator> generator;
    std::unique_ptr<BlockDrafter> drafter;
    std::shared_ptr<Job> job;     // assigned, not yet taken by the worker, or running
    std::vector<int32_t> cached;  // what its cache held after its last job
    bool busy = false;
    bool warming = false;  // its job is a warm() pre-fill
    uint64_t epoch = 0;    // requests it has taken
    std::thread thread;
  };
  void worker(int index);
  void run_job(Slot& slot, Job& job);
  void dispatch();  // with mutex_ held: give queued jobs to free slots

  batch::BatchEngine& engine_;
  SchedulerOptions options_;
  batch::SequenceBatcher batcher_;
  mutable std::mutex mutex_;
  std::condition_variable work_;  // a slot got a job, or stopping
  std::condition_variable idle_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::unique_ptr<Slot>> slots_;
  bool stopping_ = false;

  // Metrics
  std::atomic<uint64_t> prompt_tokens_{0}, cached_tokens_{0}, generated_tokens_{0};
  std::atomic<uint64_t> finished_{0}, cancelled_{0}, failed_{0}, warmed_tokens_{0};
  Histogram ttft_, e2e_, queue_time_, inter_token_;
};

}  // namespace boltrt::server
