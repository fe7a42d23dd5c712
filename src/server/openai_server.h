// OpenAiServer — the OpenAI-compatible endpoints of `boltrt serve` over a Scheduler:
//
//   GET  /                        a chat page (chat_page.h), no key needed to load it
//   GET  /health, /v1/health      {"status":"ok"} (no key needed; 503 while shutting down)
//   GET  /v1/models[/ID]          the one served model
//   GET  /metrics                 Prometheus text (requests, tokens, queue, slots, latencies)
//   POST /v1/chat/completions     chat; stream=true answers Server-Sent Events
//   POST /v1/completions          raw prompt (no template; special-token text in it is parsed,
//                                 as llama-server does, since the caller writes the format)
//
// Streaming follows what the official clients parse (shared/docs/openai-server.md §4): a first
// chunk with the role, reasoning_content / content deltas, tool-call deltas (index, id, type
// and name first, then argument fragments that only ever append), a last chunk with
// finish_reason, a usage chunk when stream_options.include_usage, then `data: [DONE]`.
//
// `n` > 1: each choice is its own job (a sequence in its own slot, batched with everything
// else); the choices are admitted together or not at all, one slot or queue place each (429
// when the free slots and queue places are fewer than n, 400 when n exceeds --parallel plus
// --max-queue), and wait in the FIFO queue side by side. Choice i samples with choice_seed().
// Streams interleave the choices' chunks, each with its `index` and its own finish_reason;
// usage counts the prompt once and sums the completions. Only choice 0's reply is pre-filled
// as history for the next turn.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "generate/reasoning.h"
#include "generate/sampler.h"
#include "server/http.h"
#include "server/openai_request.h"
#include "server/scheduler.h"

namespace boltrt::server {

struct OpenAiOptions {
  std::string model_id = "boltrt";
  std::string api_key;        // "" accepts any request
  SamplerConfig sampling;     // defaults for fields a request leaves out
  int64_t max_tokens = -1;    // default limit (-1: until the end or the context)
  ReasoningConfig reasoning;  // defaults (mode, budgets, closing message)
  int sse_ping_ms = 15'000;   // ": ping" comment after this much silence on a stream
  int retry_after_s = 1;      // Retry-After of a 429 (queue full)
};

class OpenAiServer {
 public:
  OpenAiServer(Scheduler& scheduler, OpenAiOptions options);
  void handle(const HttpRequest& request, HttpResponder& response);
  // New generation requests are answered 503 from now on.
  void begin_shutdown() { shutting_down_ = true; }

 private:
  bool authorized(const HttpRequest& request) const;
  void completion(const HttpRequest& request, HttpResponder& response, bool chat);
  // job.grammar from the request's response_format or forcing tool_choice; ApiError (400)
  // naming the field when it cannot be compiled.
  void set_constraint(const ServeRequest& r, Job& job) const;
  std::string metrics() const;

  Scheduler& scheduler_;
  OpenAiOptions options_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> http_requests_{0};
  std::atomic<uint64_t> rejected_full_{0}, client_errors_{0}, disconnects_{0};
  int64_t created_;
};

// The sampler seed of choice `index` of a request with `seed` (`n` > 1): choice 0 keeps it,
// choice i > 0 gets (seed + i * 0x9E3779B9) mod 0xFFFFFFFF, so the same request gives the same
// choices and a request with n = 1 the same text as choice 0 of a larger n. A random seed
// (kRandomSeed) stays random: every choice draws its own.
uint32_t choice_seed(uint32_t seed, int index);

// Compares in time that depends only on the length of `expected` (no early exit, no length
// oracle beyond that).
bool constant_time_equal(std::string_view expected, std::string_view given);

}  // namespace boltrt::server
