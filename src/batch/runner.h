// The `boltrt batch` job: read a JSON Lines file of requests, run them through a BatchEngine
// with up to `parallel` sequences in flight, and append one result line per request to the
// output as soon as it finishes. See result_file.h for the durability rules and request.h for
// the input format.
//
// Output line (one per request, in completion order):
//   {"id": ..., "text": "...", "reasoning": "...", "content": "...", "tool_calls": [...],
//    "finish_reason": "eog|stop|length|context_full|cancelled",
//    "tokens": {"prompt": P, "completion": N, "reasoning": R},
//    "timings": {"ttft_ms", "prompt_ms", "generation_ms", "total_ms", "tokens_per_second"},
//    "seed": S,
//    "draft": {"drafted", "accepted", "steps", "acceptance_rate", "mean_accepted"}  (--draft)}
// Errors file line: {"line": L, "id": ... (when known), "error": "..."}.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "batch/engine.h"
#include "generate/drafter.h"
#include "generate/sampler.h"

namespace boltrt::batch {

struct BatchOptions {
  std::string input;
  std::string output;
  std::string errors;  // "" -> output + ".errors.jsonl"
  bool resume = false;
  bool overwrite = false;  // start over even when the output exists
  int parallel = 1;
  int shard_index = 0, shard_count = 1;  // run only lines with (line - 1) % count == index
  SamplerConfig sampling;                // defaults for fields a request leaves out
  int64_t max_tokens = -1;
  // Defaults for requests: mode and budget (a request's "reasoning" / "reasoning_budget" win),
  // closing message and answer reserve. max_tokens is set per request.
  ReasoningConfig reasoning;
  SpeculativeOptions speculative;             // draft lengths when the engine has a draft
  bool progress = false;                      // draw a progress bar on stderr
  const std::atomic<bool>* cancel = nullptr;  // set to stop (e.g. Ctrl-C): in-flight jobs dropped
  int64_t fail_after_bytes = -1;              // test hook: simulate a full disk
};

struct BatchSummary {
  int64_t requests = 0;      // valid requests for this shard
  int64_t already_done = 0;  // found in the output by --resume
  int64_t completed = 0;     // written by this run
  int64_t failed = 0;        // valid lines that failed at run time (in the errors file)
  int64_t malformed = 0;     // lines rejected while reading (in the errors file)
  int64_t generated_tokens = 0;
  SpeculativeStats draft;       // over the results written by this run (--draft)
  int64_t truncated_bytes = 0;  // partial last line cut off by --resume
  double seconds = 0;
  bool cancelled = false;
};

// Runs the job. Throws boltrt::Error for unusable arguments or files and when writing a result
// fails (the disk is full, ...): everything written before stays valid for --resume.
BatchSummary run_batch(BatchEngine& engine, const BatchOptions& options);

// Parses "I/N" (0 <= I < N) into options; also used for SLURM/Kubernetes variables.
void parse_shard(const std::string& text, BatchOptions& options);

}  // namespace boltrt::batch
