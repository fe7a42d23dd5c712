// Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe: it
// reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4), for tests of
// pages (the chat page of `boltrt serve`, the HTML report of `boltrt eval`). Debian's chromium
// package (tools/setup.sh installs it); tests skip when `chromium` is not on the PATH.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace boltrt::test {

// Decodes base64 (padding and line breaks skipped), e.g. Page.captureScreenshot's data.
std::string base64_decode(const std::string& text);

// Headless Chromium with the DevTools protocol on a socket pair in place of the two pipes. Every
// wait is bounded by the caller's deadline; errors throw with Chromium's log attached.
class Chromium {
 public:
  using Clock = std::chrono::steady_clock;
  Chromium(const std::vector<std::string>& args, std::string log_path);
  ~Chromium();
  Chromium(const Chromium&) = delete;
  Chromium& operator=(const Chromium&) = delete;

  // Sends `method` (to the page of `session` when not empty) and returns its result. Events
  // that arrive meanwhile are kept in events().
  nlohmann::json call(const std::string& method, const nlohmann::json& params,
                      const std::string& session, Clock::time_point deadline);
  // The value of a JavaScript expression in the page (JSON-serializable values only).
  nlohmann::json evaluate(const std::string& session, const std::string& expression,
                          Clock::time_point deadline);
  // The events ({"method", "params", "sessionId"}) received so far, in order.
  const std::vector<nlohmann::json>& events() const { return events_; }

 private:
  [[noreturn]] void fail(const std::string& what) const;

  std::string log_path_;
  pid_t pid_ = -1;
  int fd_ = -1;
  int next_id_ = 0;
  std::string buffer_;
  std::vector<nlohmann::json> events_;
};

}  // namespace boltrt::test
