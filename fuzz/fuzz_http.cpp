// libFuzzer entry point for `boltrt serve`'s request path: the HTTP/1.1 request parser on any
// bytes, then — for a request that parses — the OpenAI chat and completion body validators on
// its body. Each must either accept or give one error (a ParseStatus error with a 4xx/5xx
// status, an ApiError with status 400); every other outcome (crash, sanitizer report, other
// exception, hang) is a bug. Small limits make the limit paths reachable.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/http.h"
#include "server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  boltrt::server::HttpLimits limits;
  limits.max_header_bytes = 4096;
  limits.max_headers = 16;
  limits.max_body_bytes = 32768;
  boltrt::server::HttpRequest request;
  std::string_view rest = input;
  for (int i = 0; i < 4 && !rest.empty(); ++i) {  // pipelined requests, as a connection reads them
    const boltrt::server::ParseStatus s = boltrt::server::parse_http_request(rest, limits, request);
    if (s.kind == boltrt::server::ParseStatus::kError) {
      if (s.status < 400 || s.status > 599 || s.message.empty()) __builtin_trap();
      return 0;
    }
    if (s.kind == boltrt::server::ParseStatus::kIncomplete) return 0;
    if (s.consumed == 0 || s.consumed > rest.size()) __builtin_trap();
    if (request.body.size() != request.content_length) __builtin_trap();
    if (request.path.empty() || (request.path[0] != '/' && request.path != "*")) __builtin_trap();
    for (const bool chat : {true, false}) {
      try {
        if (chat) {
          (void)boltrt::server::parse_chat_request(request.body);
        } else {
          (void)boltrt::server::parse_completion_request(request.body);
        }
      } catch (const boltrt::server::ApiError& e) {
        if (e.status != 400) __builtin_trap();
      }
    }
    rest.remove_prefix(s.consumed);
  }
  return 0;
}
