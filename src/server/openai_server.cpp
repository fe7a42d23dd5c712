#include "server/openai_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>

#include "batch/request.h"
#include "server/chat_page.h"
#include "server/openai_request.h"
#include "text/tool_grammar.h"
#include "util/error.h"

namespace boltrt::server {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kJson = "application/json";
constexpr const char* kFingerprint = "boltrt";

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The longest prefix of `s` that does not end inside a UTF-8 character.
size_t complete_utf8(std::string_view s) {
  size_t n = s.size();
  // Look back at most 3 bytes for the lead byte of an unfinished character.
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t len = 1;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
    }
    return back < len ? n - back : n;
  }
  return n;
}

// How much of a partial reply's text is final. The detokenizer's clean-up passes (llama.cpp's,
// for BPE vocabularies) drop a space before ? ! . , and around an apostrophe depending on the
// bytes after it, so more tokens may still change the end of a partial reply: a space in its
// last 3 bytes may go, and a space dropped before an apostrophe may come back (" ' " -> "'",
// then " '," with one byte more). The text before the first space or apostrophe among the last
// 3 bytes is final (checked against the passes for every text of up to 7 bytes over the
// characters they look at, cut anywhere). A stream cannot take back what it sent.
size_t settled(std::string_view s) {
  const size_t at = s.find_first_of(" '", s.size() > 3 ? s.size() - 3 : 0);
  return at == std::string_view::npos ? s.size() : at;
}

std::string finish_reason(FinishReason reason, bool tool_calls) {
  switch (reason) {
    case FinishReason::kEndOfGeneration:
    case FinishReason::kStopString:
      return tool_calls ? "tool_calls" : "stop";
    case FinishReason::kMaxTokens:
    case FinishReason::kContextFull:
      return "length";
    case FinishReason::kCancelled:
      return "stop";
  }
  return "stop";
}

// The text pieces of a reply as the client has them so far.
struct Reply {
  std::string reasoning, content;
  json tool_calls = json::array();  // [{"id", "type", "function": {"name", "arguments"}}]
};

struct Usage {
  int64_t prompt = 0, completion = 0, cached = 0, reasoning = 0;
  json to_json(bool chat) const {
    json u;
    u["prompt_tokens"] = prompt;
    u["completion_tokens"] = completion;
    u["total_tokens"] = prompt + completion;
    u["prompt_tokens_details"] = {{"cached_tokens", cached}};
    if (chat) u["completion_tokens_details"] = {{"reasoning_tokens", reasoning}};
    return u;
  }
};

// OpenAI's chat logprobs: {"content": [{token, logprob, bytes, top_logprobs}], "refusal"}
// over the content tokens (thought blocks and control tokens left out).
json chat_logprobs(const GenerationVocab& vocab, const std::vector<TokenLogprob>& entries) {
  auto item = [&](int32_t token, float logprob) {
    const std::string piece = vocab.piece(token);
    json bytes = json::array();
    for (unsigned char c : piece) bytes.push_back(c);
    return json{{"token", piece}, {"logprob", logprob}, {"bytes", bytes}};
  };
  json content = json::array();
  for (const TokenLogprob& e : entries) {
    if (!e.content || vocab.piece(e.token).empty()) continue;
    json one = item(e.token, e.logprob);
    one["top_logprobs"] = json::array();
    for (const auto& [id, lp] : e.top) one["top_logprobs"].push_back(item(id, lp));
    content.push_back(std::move(one));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

// The legacy completions shape: parallel arrays, alternatives as {piece: logprob} maps, and
// each token's byte offset in the returned text (advanced in *offset).
json completion_logprobs(const GenerationVocab& vocab, const std::vector<TokenLogprob>& entries,
                         size_t* offset) {
  json tokens = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprob& e : entries) {
    const std::string piece = vocab.piece(e.token);
    if (piece.empty()) continue;
    tokens.push_back(piece);
    logprobs.push_back(e.logprob);
    json top = json::object();
    for (const auto& [id, lp] : e.top) top[vocab.piece(id)] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(*offset);
    *offset += piece.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(logprobs)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace

uint32_t choice_seed(uint32_t seed, int index) {
  if (seed == kRandomSeed || index == 0) return seed;
  // Golden-ratio steps of the 32-bit seed space, skipping the "random" value 0xFFFFFFFF.
  const uint64_t mixed = static_cast<uint64_t>(seed) + 0x9E3779B9ull * static_cast<uint64_t>(index);
  return static_cast<uint32_t>(mixed % 0xFFFFFFFFull);
}

bool constant_time_equal(std::string_view expected, std::string_view given) {
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  const size_t n = given.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = n == 0 ? 0 : static_cast<unsigned char>(given[i % n]);
    diff |= static_cast<unsigned char>(static_cast<unsigned char>(expected[i]) ^ g);
  }
  return diff == 0 && !expected.empty();
}

OpenAiServer::OpenAiServer(Scheduler& scheduler, OpenAiOptions options)
    : scheduler_(scheduler),
      options_(std::move(options)),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

bool OpenAiServer::authorized(const HttpRequest& request) const {
  if (options_.api_key.empty()) return true;
  std::string_view given;
  if (const std::string* auth = request.header("authorization")) {
    std::string_view a = *auth;
    if (a.size() > 7 && (a.substr(0, 7) == "Bearer " || a.substr(0, 7) == "bearer "))
      given = a.substr(7);
  } else if (const std::string* key = request.header("x-api-key")) {
    given = *key;
  }
  return constant_time_equal(options_.api_key, given);
}

std::string OpenAiServer::metrics() const {
  std::string out = scheduler_.metrics();
  auto counter = [&](const char* name, const char* help, uint64_t value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
  };
  counter("boltrt:http_requests_total", "HTTP requests received.", http_requests_.load());
  counter("boltrt:requests_rejected_queue_full_total", "Generation requests answered 429.",
          rejected_full_.load());
  counter("boltrt:requests_client_errors_total", "Requests answered 4xx.", client_errors_.load());
  counter("boltrt:client_disconnects_total", "Generations cancelled by a client that left.",
          disconnects_.load());
  return out;
}

void OpenAiServer::handle(const HttpRequest& request, HttpResponder& response) {
  const uint64_t number = ++http_requests_;
  // x-request-id: the client's when it is a short token, else ours; the SDKs expose it.
  std::string request_id = fmt::format("req-{}", number);
  if (const std::string* given = request.header("x-request-id");
      given && !given->empty() && given->size() <= 128 &&
      std::all_of(given->begin(), given->end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      }))
    request_id = *given;
  response.add_header("x-request-id", request_id);
  auto send_error = [&](int status, std::string_view message, std::string_view param = "",
                        std::string_view code = "", const HttpHeaders& extra = {}) {
    if (status >= 400 && status < 500) ++client_errors_;
    response.send(status, kJson, error_body(status, message, param, code), extra);
  };
  const std::string& path = request.path;
  struct Route {
    const char* path;
    const char* method;
  };
  static const Route routes[] = {{"/", "GET"},
                                 {"/health", "GET"},
                                 {"/v1/health", "GET"},
                                 {"/v1/models", "GET"},
                                 {"/metrics", "GET"},
                                 {"/v1/chat/completions", "POST"},
                                 {"/v1/completions", "POST"}};
  const Route* route = nullptr;
  for (const Route& r : routes)
    if (path == r.path) route = &r;
  const bool model_path = path.rfind("/v1/models/", 0) == 0 && path.size() > 11;
  if (route == nullptr && !model_path) {
    send_error(404, fmt::format("no route for {}", path), "", "not_found");
    return;
  }
  const char* method = route ? route->method : "GET";
  if (request.method != method) {
    {
      send_error(405, fmt::format("{} needs {}", path, method), "", "method_not_allowed",
                 {{"Allow", method}});
      return;
    }
  }

  if (path == "/") {  // the chat page; its API calls carry the key
    response.send(200, "text/html; charset=utf-8", chat_page_html(),
                  {{"Content-Security-Policy",
                    "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'"},
                   {"X-Content-Type-Options", "nosniff"}});
    return;
  }
  if (path == "/health" || path == "/v1/health") {
    if (shutting_down_) {
      response.send(503, kJson, R"({"status":"shutting down"})");
      return;
    }
    {
      response.send(200, kJson, R"({"status":"ok"})");
      return;
    }
  }
  if (!authorized(request)) {
    send_error(401, "invalid API key (send Authorization: Bearer KEY)", "", "invalid_api_key");
    return;
  }
  if (path == "/metrics") {
    response.send(200, "text/plain; version=0.0.4; charset=utf-8", metrics());
    return;
  }
  const json model = {{"id", options_.model_id},
                      {"object", "model"},
                      {"created", created_},
                      {"owned_by", "boltrt"}};
  if (path == "/v1/models") {
    response.send(200, kJson, dump({{"object", "list"}, {"data", json::array({model})}}));
    return;
  }
  if (model_path) {
    if (path.substr(11) != options_.model_id) {
      send_error(404, fmt::format("model '{}' is not served here", path.substr(11)), "model",
                 "model_not_found");
      return;
    }
    {
      response.send(200, kJson, dump(model));
      return;
    }
  }
  if (shutting_down_) {
    send_error(503, "the server is shutting down");
    return;
  }
  try {
    completion(request, response, path == "/v1/chat/completions");
  } catch (const ApiError& e) {
    if (!response.responded()) send_error(e.status, e.what(), e.param, e.code, {});
  } catch (const std::exception& e) {
    // A bug, not the client's fault: still one JSON error, and the server goes on.
    if (!response.responded()) send_error(500, fmt::format("internal error: {}", e.what()));
  }
}

void OpenAiServer::set_constraint(const ServeRequest& r, Job& job) const {
  // Structured output: `response_format`, or the format's tool-call envelope for a forcing
  // `tool_choice` (each function's arguments constrained by its parameters schema), or for
  // `auto` the same envelope switched on lazily when the model opens a call (free text until
  // then; a response_format, when given, constrains the reply instead). Compiled
  // here, through the process-wide grammar cache, so that a schema the engine cannot compile is
  // a 400 before anything is queued; the slot builds its controller from the compiled grammar
  // (its token masks come from the engine cache too).
  OutputConstraint constraint;
  std::string param = "response_format";
  if (r.response_format.is_object()) {
    const std::string& type = r.response_format["type"].get_ref<const std::string&>();
    if (type == "json_object") {
      constraint = OutputConstraint::json_object();
    } else if (type == "json_schema") {
      // Without a schema (it is optional in OpenAI's shape) any JSON value fits.
      const json& spec = r.response_format["json_schema"];
      const auto schema = spec.find("schema");
      constraint = OutputConstraint::json_schema(
          schema == spec.end() || schema->is_null() ? std::string("{}") : schema->dump());
    }
  }
  const bool forcing =
      r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kFunction;
  const bool lazy = r.tool_choice == ToolChoice::kAuto && r.tools.is_array() && !r.tools.empty() &&
                    !constraint.active();
  if (r.chat && (forcing || lazy)) {
    if (constraint.active())
      throw ApiError(400,
                     "a 'tool_choice' that forces a call cannot be combined with a JSON "
                     "'response_format'",
                     "tool_choice");
    text::ToolChoice choice;
    if (forcing) {
      choice.kind = r.tool_choice == ToolChoice::kRequired ? text::ToolChoice::Kind::kRequired
                                                           : text::ToolChoice::Kind::kFunction;
    }
    choice.function = r.tool_choice_name;
    choice.parallel = r.parallel_tool_calls;
    text::ToolCallGrammar calls;
    try {
      calls = scheduler_.engine().tool_call_grammar(r.tools, choice);
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "tools");
    }
    if (calls.empty() && forcing)
      throw ApiError(400, "'tool_choice' needs a chat format with tool calls; this model has none",
                     "tool_choice", "unsupported_parameter");
    if (!calls.empty()) {
      constraint = OutputConstraint::lazy_grammar(std::move(calls.gbnf), std::move(calls.trigger));
      param = "tools";
    }
  }
  if (!constraint.active()) return;
  try {
    job.grammar = compile_constraint(constraint);
    job.grammar_trigger = constraint.trigger;
  } catch (const Error& e) {
    throw ApiError(400, e.what(), param);
  }
  // In a chat the model may think first (when thinking is on); the constraint starts after.
  job.grammar_after_thought = r.chat && job.reasoning.enable_thinking();
}

void OpenAiServer::completion(const HttpRequest& request, HttpResponder& response, bool chat) {
  const ServeRequest r =
      chat ? parse_chat_request(request.body) : parse_completion_request(request.body);
  batch::BatchEngine& engine = scheduler_.engine();

  batch::BatchRequest br;
  if (chat) {
    br.messages = r.messages;
    if (!r.tools.is_null() && !r.tools.empty() && r.tool_choice != ToolChoice::kNone)
      br.tools = r.tools;
  } else {
    br.prompt = r.prompt;
  }
  if (r.n > scheduler_.capacity())
    throw ApiError(400,
                   fmt::format("'n' is {}; this server runs at most {} generations at once "
                               "(--parallel plus --max-queue)",
                               r.n, scheduler_.capacity()),
                   "n");

  auto job = std::make_shared<Job>();
  job->sampling = options_.sampling;
  if (r.temperature) job->sampling.temperature = *r.temperature;
  if (r.top_p) job->sampling.top_p = *r.top_p;
  if (r.top_k) job->sampling.top_k = *r.top_k;
  if (r.min_p) job->sampling.min_p = *r.min_p;
  if (r.frequency_penalty) job->sampling.frequency_penalty = *r.frequency_penalty;
  if (r.presence_penalty) job->sampling.presence_penalty = *r.presence_penalty;
  if (r.seed) job->sampling.seed = *r.seed;
  if (!r.logit_bias.empty()) {
    try {
      batch::check_logit_bias(r.logit_bias, engine.model().n_vocab());
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "logit_bias");
    }
    job->sampling.logit_bias = r.logit_bias;
  }
  job->options.max_tokens = r.max_tokens.value_or(options_.max_tokens);
  job->options.stop_strings = r.stop;
  job->reasoning = options_.reasoning;
  if (r.reasoning != ReasoningMode::kAuto) job->reasoning.mode = r.reasoning;
  if (r.reasoning_budget) job->reasoning.budget = *r.reasoning_budget;
  if (r.reasoning_block_budget) job->reasoning.block_budget = *r.reasoning_block_budget;
  job->use_controller = chat;
  if (r.top_logprobs >= 0 && scheduler_.speculative())
    throw ApiError(400, "'logprobs' cannot be combined with speculative decoding (--draft)",
                   "logprobs", "unsupported_parameter");
  job->top_logprobs = r.top_logprobs;
  try {
    job->reasoning.validate();
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "reasoning_budget");
  }
  try {
    job->sampling.validate();
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }

  set_constraint(r, *job);

  PreparedPrompt prompt;
  try {
    prompt = engine.prepare(br, chat && job->reasoning.enable_thinking());
  } catch (const Error& e) {
    throw ApiError(400, e.what(), chat ? "messages" : "prompt");
  }
  const int64_t n_ctx = scheduler_.n_ctx();
  if (static_cast<int64_t>(prompt.tokens.size()) >= n_ctx) {
    throw ApiError(400,
                   fmt::format("the prompt is {} tokens; this server's context is {} per request",
                               prompt.tokens.size(), n_ctx),
                   chat ? "messages" : "prompt", "context_length_exceeded");
  }
  job->prompt = prompt.tokens;

  // One job per choice, each its own sequence through the slots. Choice i > 0 samples with
  // choice_seed(seed, i) when the seed is fixed (so one request gives the same bytes every
  // time), a fresh random seed otherwise; every other setting is choice 0's.
  std::vector<std::shared_ptr<Job>> jobs = {job};
  for (int i = 1; i < r.n; ++i) {
    auto copy = std::make_shared<Job>();
    copy->prompt = job->prompt;
    copy->sampling = job->sampling;
    copy->sampling.seed = choice_seed(job->sampling.seed, i);
    copy->options = job->options;
    copy->reasoning = job->reasoning;
    copy->use_controller = job->use_controller;
    copy->top_logprobs = job->top_logprobs;
    copy->grammar = job->grammar;
    copy->grammar_after_thought = job->grammar_after_thought;
    copy->grammar_trigger = job->grammar_trigger;
    jobs.push_back(std::move(copy));
  }

  if (!scheduler_.submit_all(jobs)) {
    ++rejected_full_;
    if (shutting_down_) throw ApiError(503, "the server is shutting down");
    ++client_errors_;
    response.send(
        429, kJson,
        error_body(429,
                   r.n > 1 ? fmt::format("every slot is busy and the queue has no room for {} "
                                         "choices; retry later",
                                         r.n)
                           : std::string("every slot is busy and the queue is full; retry later"),
                   "", "queue_full"),
        {{"Retry-After", std::to_string(options_.retry_after_s)}});
    return;
  }

  // However this handler ends (an answer, a vanished client, an exception), a job still
  // queued or running is cancelled: nobody would read it.
  struct CancelUnfinished {
    Scheduler& scheduler;
    const std::vector<std::shared_ptr<Job>>& jobs;
    ~CancelUnfinished() {
      for (const auto& j : jobs) {
        bool done;
        {
          std::lock_guard lock(j->mutex);
          done = j->done;
        }
        if (!done) scheduler.withdraw(j);
      }
    }
  } cancel_unfinished{scheduler_, jobs};

  const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id_++);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  size_t hold_back = 0;  // bytes a stop string could still take back
  for (const auto& s : r.stop) hold_back = std::max(hold_back, s.size() - 1);

  // The reply so far from a job's tokens (partial: no stop-string cut, nothing held back yet).
  auto snapshot = [&](size_t index, const std::vector<int32_t>& tokens,
                      const GenerationResult* final_result, int64_t* reasoning_tokens) {
    GenerationResult partial;
    if (final_result) {
      partial = *final_result;
    } else {
      partial.tokens = tokens;
      partial.finish_reason = FinishReason::kMaxTokens;
    }
    json out;
    Reply reply;
    const int64_t n = engine.split_output(br, prompt, partial, nullptr, out);
    if (reasoning_tokens) *reasoning_tokens = n;
    reply.reasoning = out.value("reasoning", "");
    reply.content = out.value("content", "");
    if (out.contains("tool_calls")) reply.tool_calls = out["tool_calls"];
    for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
      // Ids by position, so that every snapshot of a stream names a call the same way.
      json& call = reply.tool_calls[i];
      if (!call.contains("id") || !call["id"].is_string() || call["id"].get<std::string>().empty())
        call["id"] = index == 0 ? fmt::format("call_{}_{}", id, i)
                                : fmt::format("call_{}_{}_{}", id, index, i);
    }
    if (!r.parallel_tool_calls && reply.tool_calls.size() > 1) {
      json first = json::array({reply.tool_calls[0]});
      reply.tool_calls = std::move(first);
    }
    return reply;
  };
  // Usage over every choice (each job's mutex held by the caller): the prompt counted once, as
  // OpenAI does, the completion and reasoning tokens summed; cached_tokens is the least any
  // choice reused (each choice computed the prompt in its own slot).
  auto usage_of = [&](const std::vector<int64_t>& reasoning_tokens) {
    Usage u;
    u.prompt = jobs[0]->result.stats.n_prompt_tokens;
    u.cached = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Job& j = *jobs[i];
      u.completion += j.result.stats.n_tokens;
      u.cached = std::min<int64_t>(
          u.cached,
          std::max<int64_t>(0, j.result.stats.n_prompt_tokens - j.result.stats.n_prompt_evaluated));
      u.reasoning += j.reasoning_tokens >= 0 ? j.reasoning_tokens : reasoning_tokens[i];
    }
    return u;
  };

  // After the answer went out: pre-fill the conversation with choice 0's reply as history into
  // its slot, so that its next turn computes only what is new (the template renders a past
  // reply differently from the tokens generated for it, e.g. without an empty thought channel).
  // Only choice 0: a client continues with one choice, most often the first.
  const bool thinking = chat && job->reasoning.enable_thinking();
  auto warm_history = [&](const Reply& reply, int slot, FinishReason finish) {
    if (!chat || slot < 0 || finish == FinishReason::kCancelled) return;
    json message = {{"role", "assistant"}, {"content", reply.content}};
    if (!reply.tool_calls.empty()) message["tool_calls"] = reply.tool_calls;
    scheduler_.warm(slot, job->slot_epoch, engine.history_tokens(br, message, thinking));
  };

  // Returns true when the client left (every job is then cancelled and its slot freed).
  auto client_left = [&]() {
    if (!response.client_gone()) return false;
    for (const auto& j : jobs) scheduler_.withdraw(j);
    ++disconnects_;
    return true;
  };
  auto is_done = [](Job& j) {
    std::lock_guard lock(j.mutex);
    return j.done;
  };

  if (!r.stream) {
    for (const auto& j : jobs) {
      uint64_t seen = 0;
      while (!is_done(*j)) {
        seen = j->wait_for_update(seen, std::chrono::milliseconds(100));
        if (!is_done(*j) && client_left()) {
          // Nobody reads an answer now; the workers let go of the jobs at their next model call.
          response.close_after();
          response.send(499, kJson, error_body(499, "client closed the request"));
          return;
        }
      }
    }
    std::vector<std::unique_lock<std::mutex>> locks;
    for (const auto& j : jobs) locks.emplace_back(j->mutex);
    for (const auto& j : jobs)
      if (!j->error.empty()) throw ApiError(shutting_down_ ? 503 : 500, j->error);
    std::vector<int64_t> reasoning_tokens(jobs.size(), 0);
    Reply history_reply;
    json body;
    body["id"] = id;
    body["object"] = chat ? "chat.completion" : "text_completion";
    body["created"] = created;
    body["model"] = options_.model_id;
    body["system_fingerprint"] = kFingerprint;
    body["choices"] = json::array();
    for (size_t i = 0; i < jobs.size(); ++i) {
      Job& j = *jobs[i];
      if (chat) {
        const Reply reply = snapshot(i, j.tokens, &j.result, &reasoning_tokens[i]);
        if (i == 0) history_reply = reply;
        json message;
        message["role"] = "assistant";
        message["content"] =
            reply.content.empty() && !reply.tool_calls.empty() ? json() : json(reply.content);
        message["refusal"] = nullptr;
        if (!reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
        if (!reply.tool_calls.empty()) message["tool_calls"] = reply.tool_calls;
        body["choices"].push_back(
            {{"index", i},
             {"message", message},
             {"logprobs", r.top_logprobs >= 0 ? chat_logprobs(engine.vocab(), j.logprobs) : json()},
             {"finish_reason", finish_reason(j.result.finish_reason, !reply.tool_calls.empty())}});
      } else {
        size_t text_offset = r.echo ? r.prompt.size() : 0;
        body["choices"].push_back(
            {{"text", r.echo ? r.prompt + j.result.text : j.result.text},
             {"index", i},
             {"logprobs", r.top_logprobs >= 0
                              ? completion_logprobs(engine.vocab(), j.logprobs, &text_offset)
                              : json()},
             {"finish_reason", finish_reason(j.result.finish_reason, false)}});
      }
    }
    body["usage"] = usage_of(reasoning_tokens).to_json(chat);
    const int slot = job->slot;
    const FinishReason finish = job->result.finish_reason;
    locks.clear();
    response.send(200, kJson, dump(body));
    if (chat) warm_history(history_reply, slot, finish);
    return;
  }

  // ---- streaming ------------------------------------------------------------------------------
  if (!response.begin_stream(200, "text/event-stream",
                             {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}})) {
    for (const auto& j : jobs) scheduler_.withdraw(j);
    ++disconnects_;
    return;
  }
  auto last_write = Clock::now();
  bool write_failed = false;
  auto send_event = [&](const json& payload) {
    if (write_failed) return false;
    write_failed = !response.write_chunk("data: " + dump(payload) + "\n\n");
    last_write = Clock::now();
    return !write_failed;
  };
  auto chunk = [&](json choice) {
    json c;
    c["id"] = id;
    c["object"] = chat ? "chat.completion.chunk" : "text_completion";
    c["created"] = created;
    c["model"] = options_.model_id;
    c["system_fingerprint"] = kFingerprint;
    c["choices"] = choice.is_null() ? json::array() : json::array({std::move(choice)});
    if (r.include_usage) c["usage"] = nullptr;
    return c;
  };
  auto delta_chunk = [&](size_t index, json delta, json finish, json logprobs = nullptr) {
    return chunk({{"index", index},
                  {"delta", std::move(delta)},
                  {"logprobs", std::move(logprobs)},
                  {"finish_reason", std::move(finish)}});
  };
  auto text_chunk = [&](size_t index, std::string text, json finish, json logprobs = nullptr) {
    return chunk({{"text", std::move(text)},
                  {"index", index},
                  {"logprobs", std::move(logprobs)},
                  {"finish_reason", std::move(finish)}});
  };

  // What the client has of each choice: only ever appended to.
  struct ChoiceStream {
    size_t index = 0;
    Job* job = nullptr;
    uint64_t seen = 0;
    size_t tokens_seen = 0;
    Clock::time_point last_parse;
    bool finished = false;  // its finish_reason went out
    std::string sent_reasoning, sent_content, sent_text;
    std::vector<std::string> sent_args;
    // Logprobs of tokens committed since the last content chunk go with the next one.
    std::vector<TokenLogprob> pending_logprobs;
    size_t logprobs_taken = 0;
    size_t text_offset = 0;
    int64_t reasoning_tokens = 0;
  };
  constexpr auto kParseInterval = std::chrono::milliseconds(5);
  std::vector<ChoiceStream> streams(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    streams[i].index = i;
    streams[i].job = jobs[i].get();
    streams[i].last_parse = Clock::now() - kParseInterval;
    streams[i].text_offset = r.echo ? r.prompt.size() : 0;
  }
  auto take_logprobs = [&](ChoiceStream& c) -> json {
    if (r.top_logprobs < 0) return nullptr;
    json out = chat ? chat_logprobs(engine.vocab(), c.pending_logprobs)
                    : completion_logprobs(engine.vocab(), c.pending_logprobs, &c.text_offset);
    c.pending_logprobs.clear();
    return out;
  };
  auto collect_logprobs = [&](ChoiceStream& c) {  // with c.job->mutex held
    if (r.top_logprobs < 0) return;
    const auto& all = c.job->logprobs;
    c.pending_logprobs.insert(c.pending_logprobs.end(),
                              all.begin() + static_cast<std::ptrdiff_t>(c.logprobs_taken),
                              all.end());
    c.logprobs_taken = all.size();
  };
  auto emit_text = [&](ChoiceStream& c, const std::string& full, std::string& sent, const char* key,
                       bool final) {
    if (full.size() <= sent.size() || full.compare(0, sent.size(), sent) != 0) return;
    size_t end = full.size();
    if (!final) {
      end = std::min(end > hold_back ? end - hold_back : 0, settled(full));
      end = complete_utf8(std::string_view(full).substr(0, end));
    }
    if (end <= sent.size()) return;
    const std::string piece = full.substr(sent.size(), end - sent.size());
    sent = full.substr(0, end);
    const bool content = std::string_view(key) != "reasoning_content";
    if (chat) {
      send_event(
          delta_chunk(c.index, {{key, piece}}, nullptr, content ? take_logprobs(c) : json()));
    } else {
      send_event(text_chunk(c.index, piece, nullptr, take_logprobs(c)));
    }
  };
  auto emit_reply = [&](ChoiceStream& c, const Reply& now, bool final) {
    emit_text(c, now.reasoning, c.sent_reasoning, "reasoning_content", final);
    emit_text(c, now.content, c.sent_content, "content", final);
    for (size_t i = 0; i < now.tool_calls.size(); ++i) {
      const json& call = now.tool_calls[i];
      if (i >= c.sent_args.size()) {
        json first = {{"index", i},
                      {"id", call["id"]},
                      {"type", "function"},
                      {"function", {{"name", call["function"]["name"]}, {"arguments", ""}}}};
        send_event(delta_chunk(c.index, {{"tool_calls", json::array({first})}}, nullptr));
        c.sent_args.emplace_back();
      }
      const std::string args = call["function"].value("arguments", "");
      std::string& sent = c.sent_args[i];
      if (args.size() <= sent.size() || args.compare(0, sent.size(), sent) != 0) continue;
      const size_t end =
          final ? args.size() : complete_utf8(std::string_view(args).substr(0, settled(args)));
      if (end <= sent.size()) continue;
      json fragment = {{"index", i},
                       {"function", {{"arguments", args.substr(sent.size(), end - sent.size())}}}};
      sent = args.substr(0, end);
      send_event(delta_chunk(c.index, {{"tool_calls", json::array({fragment})}}, nullptr));
    }
  };
  // The end of one choice (its job done, its mutex held): the rest of its text, its finish.
  Reply history_reply;
  auto finish_choice = [&](ChoiceStream& c) {
    Job& j = *c.job;
    collect_logprobs(c);
    if (chat) {
      const Reply reply = snapshot(c.index, j.tokens, &j.result, &c.reasoning_tokens);
      if (c.index == 0) history_reply = reply;
      emit_reply(c, reply, true);
      send_event(delta_chunk(c.index, json::object(),
                             finish_reason(j.result.finish_reason, !reply.tool_calls.empty()),
                             take_logprobs(c)));
    } else {
      emit_text(c, j.result.text, c.sent_text, "text", true);
      send_event(
          text_chunk(c.index, "", finish_reason(j.result.finish_reason, false), take_logprobs(c)));
    }
    c.finished = true;
  };

  for (ChoiceStream& c : streams) {
    if (chat) {
      send_event(delta_chunk(
          c.index, {{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}, nullptr));
    } else if (r.echo) {
      send_event(text_chunk(c.index, r.prompt, nullptr));
    }
  }
  for (;;) {
    // Wait on the first unfinished choice; the others are looked at on every pass.
    ChoiceStream* waiting = nullptr;
    for (ChoiceStream& c : streams)
      if (!c.finished && waiting == nullptr) waiting = &c;
    if (waiting == nullptr) break;
    const bool any_tokens = std::any_of(streams.begin(), streams.end(),
                                        [](const ChoiceStream& c) { return c.tokens_seen > 0; });
    waiting->seen = waiting->job->wait_for_update(
        waiting->seen, std::chrono::milliseconds(any_tokens || streams.size() > 1 ? 5 : 100));
    bool failed = false;
    for (ChoiceStream& c : streams) {
      if (c.finished) continue;
      Job& j = *c.job;
      std::vector<int32_t> tokens;
      std::string text;
      std::unique_lock lock(j.mutex);
      if (j.done) {
        if (!j.error.empty()) {
          failed = true;
          continue;
        }
        finish_choice(c);
        continue;
      }
      if (chat && j.tokens.size() != c.tokens_seen) tokens = j.tokens;
      if (!chat) text = j.text;
      collect_logprobs(c);
      lock.unlock();
      if (chat && !tokens.empty() && Clock::now() - c.last_parse >= kParseInterval) {
        // Re-parsing the reply costs O(reply) per call: at most one parse per interval.
        c.last_parse = Clock::now();
        c.tokens_seen = tokens.size();
        emit_reply(c, snapshot(c.index, tokens, nullptr, nullptr), false);
      } else if (!chat) {
        emit_text(c, text, c.sent_text, "text", false);
      }
    }
    if (failed) break;
    const bool all_finished = std::all_of(streams.begin(), streams.end(),
                                          [](const ChoiceStream& c) { return c.finished; });
    if (!all_finished && (write_failed || client_left())) {
      if (write_failed) {
        for (const auto& j : jobs) scheduler_.withdraw(j);
        ++disconnects_;
      }
      response.close_after();
      return;
    }
    if (Clock::now() - last_write > std::chrono::milliseconds(options_.sse_ping_ms)) {
      write_failed = !response.write_chunk(": ping\n\n");
      last_write = Clock::now();
    }
  }

  // A failed choice: the status went out with the first chunk, so the error goes in-band and
  // the stream ends (the other choices are cancelled by cancel_unfinished).
  for (const auto& j : jobs) {
    std::string error;
    {
      std::lock_guard lock(j->mutex);
      error = j->done ? j->error : std::string();
    }
    if (!error.empty()) {
      send_event(json::parse(error_body(500, error)));
      response.end_stream();
      return;
    }
  }
  if (r.include_usage) {
    std::vector<std::unique_lock<std::mutex>> locks;
    for (const auto& j : jobs) locks.emplace_back(j->mutex);
    std::vector<int64_t> reasoning_tokens;
    for (const ChoiceStream& c : streams) reasoning_tokens.push_back(c.reasoning_tokens);
    json c = chunk(nullptr);
    c["usage"] = usage_of(reasoning_tokens).to_json(chat);
    send_event(c);
  }
  if (!write_failed) write_failed = !response.write_chunk("data: [DONE]\n\n");
  response.end_stream();
  if (!write_failed) {
    int slot;
    FinishReason finish;
    {
      std::lock_guard lock(job->mutex);
      slot = job->slot;
      finish = job->result.finish_reason;
    }
    warm_history(history_reply, slot, finish);
  }
}

}  // namespace boltrt::server
