// The chat page at / in headless Chromium (Debian's chromium package, installed by
// tools/setup.sh): the page asks a question through its own streaming code (?q=), and the DOM
// Chromium ends with holds the user's bubble, the thinking in a collapsed <details> and the
// answer equal to the API's answer for the same request at temperature 0. A screenshot is kept
// in the build tree (serve_chat_page.png). Skips with a message when chromium is not installed.
//
// Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: it reads
// NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4), and the test polls
// the DOM until the page's request has finished, with a real-time deadline. A virtual-time
// budget (--dump-dom --virtual-time-budget) does not work here: virtual time runs on while a
// stream is pending, so a slow (sanitized) server was cut off mid-answer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/paths.h"
#include "support/serve_support.h"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string unescape_html(std::string s) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"&lt;", "<"},
                                 {"&gt;", ">"},
                                 {"&quot;", "\""},
                                 {"&#39;", "'"},
                                 {"&nbsp;", "\xC2\xA0"},
                                 {"&amp;", "&"}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  }
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string base64_decode(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t bits = 0;
  int n = 0;
  for (char c : text) {
    const int v = value(c);
    if (v < 0) continue;  // padding, line breaks
    bits = (bits << 6) | static_cast<uint32_t>(v);
    n += 6;
    if (n >= 8) {
      n -= 8;
      out.push_back(static_cast<char>((bits >> n) & 0xFF));
    }
  }
  return out;
}

// Headless Chromium with the DevTools protocol on a socket pair in place of the two pipes. Every
// wait is bounded by the caller's deadline; errors throw with Chromium's log attached.
class Chromium {
 public:
  Chromium(const std::vector<std::string>& args, std::string log_path)
      : log_path_(std::move(log_path)) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throw std::runtime_error("socketpair failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      // fd 3 and fd 4 are both our end of the pair (dup2 clears close-on-exec on them).
      const int high = ::fcntl(sv[1], F_DUPFD, 10);
      const int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int null = ::open("/dev/null", O_RDONLY);
      if (high < 0 || log < 0 || null < 0 || ::dup2(null, 0) < 0 || ::dup2(log, 1) < 0 ||
          ::dup2(log, 2) < 0 || ::dup2(high, 3) < 0 || ::dup2(high, 4) < 0)
        ::_exit(126);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>("chromium"));
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp("chromium", argv.data());
      ::_exit(127);
    }
    ::close(sv[1]);
    fd_ = sv[0];
    if (pid_ < 0) throw std::runtime_error("fork failed");
  }

  ~Chromium() {
    try {
      call("Browser.close", json::object(), "", Clock::now() + 10s);
    } catch (const std::exception&) {
    }
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0) {
      const auto until = Clock::now() + 10s;
      int status = 0;
      while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (Clock::now() > until) {
          ::kill(pid_, SIGKILL);
          ::waitpid(pid_, &status, 0);
          break;
        }
        std::this_thread::sleep_for(20ms);
      }
    }
  }
  Chromium(const Chromium&) = delete;
  Chromium& operator=(const Chromium&) = delete;

  // Sends `method` (to the page of `session` when not empty) and returns its result.
  json call(const std::string& method, const json& params, const std::string& session,
            Clock::time_point deadline) {
    const int id = ++next_id_;
    json message = {{"id", id}, {"method", method}, {"params", params}};
    if (!session.empty()) message["sessionId"] = session;
    std::string bytes = message.dump();
    bytes.push_back('\0');
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) fail(method + ": chromium is gone");
      sent += static_cast<size_t>(n);
    }
    for (;;) {
      for (size_t end; (end = buffer_.find('\0')) != std::string::npos;) {
        const json reply = json::parse(buffer_.substr(0, end), nullptr, false);
        buffer_.erase(0, end + 1);
        if (!reply.is_object() || !reply.contains("id") || reply["id"] != id) continue;  // events
        if (reply.contains("error")) fail(method + ": " + reply["error"].dump());
        return reply.value("result", json::object());
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left <= 0ms) fail(method + ": no reply before the deadline");
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) fail(method + ": chromium closed the pipe");
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // The value of a JavaScript expression in the page (JSON-serializable values only).
  json evaluate(const std::string& session, const std::string& expression,
                Clock::time_point deadline) {
    const json r = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}},
                        session, deadline);
    if (r.contains("exceptionDetails")) fail(expression + ": " + r["exceptionDetails"].dump());
    return r["result"].value("value", json());
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(what + "\nchromium's log:\n" + read_file(log_path_));
  }

  std::string log_path_;
  pid_t pid_ = -1;
  int fd_ = -1;
  int next_id_ = 0;
  std::string buffer_;
};

TEST(ServePage, ChromiumChatsThroughThePage) {
  if (boltrt::test::run_command("command -v chromium >/dev/null") != 0)
    GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it)";
  boltrt::test::ServeProcess server(
      {"-m", boltrt::test::source_dir() + "/models/tiny/tiny-q8_0.gguf", "-t", "1"});
  const std::string question = "What did you think of the ball?";
  const json request = {{"model", "m"},
                        {"messages", json::array({{{"role", "user"}, {"content", question}}})},
                        {"temperature", 0},
                        {"max_tokens", 512},
                        {"reasoning", "on"}};
  const auto api = boltrt::test::http_request(server.port(), "POST", "/v1/chat/completions",
                                              request.dump(), "", std::chrono::seconds(600));
  ASSERT_EQ(api.status, 200) << api.body;
  const json message = json::parse(api.body)["choices"][0]["message"];

  const std::string scratch = boltrt::test::scratch_dir("chromium");
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) +
                          "/?temp=0&think=1&q=What%20did%20you%20think%20of%20the%20ball%3F";
  // Real time, however slow the server: a sanitized build streams this answer in minutes.
  const auto deadline = Clock::now() + 600s;
  Chromium browser({"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--user-data-dir=" + scratch + "/profile", "--window-size=1000,700",
                    "--remote-debugging-pipe", "about:blank"},
                   scratch + "/chromium.log");
  const json target = browser.call("Target.createTarget", {{"url", url}}, "", deadline);
  const std::string session =
      browser.call("Target.attachToTarget", {{"targetId", target["targetId"]}, {"flatten", true}},
                   "", deadline)["sessionId"];
  // The page's request has finished (answered, or failed with an error bubble) once its
  // assistant bubble exists and the Stop button is Send again (send() sets Stop before its
  // first await and Send in its finally block).
  const std::string finished =
      "!!document.querySelector('.msg.assistant') && "
      "document.getElementById('send').textContent === 'Send'";
  while (browser.evaluate(session, finished, deadline) != json(true)) {
    ASSERT_TRUE(Clock::now() < deadline) << "the page did not finish its answer";
    std::this_thread::sleep_for(100ms);
  }
  const std::string html =
      browser.evaluate(session, "document.documentElement.outerHTML", deadline).get<std::string>();
  EXPECT_EQ(html.find("<div class=\"msg error\">"), std::string::npos) << html;
  EXPECT_NE(html.find("<div class=\"msg user\">" + question + "</div>"), std::string::npos) << html;
  // The answer bubble: <details class="thinking">…<div>THOUGHT</div></details><div>ANSWER</div>
  std::smatch m;
  const std::regex bubble(
      "<div class=\"msg assistant\"><details class=\"thinking\"( hidden=\"\")?><summary>"
      "Thinking</summary><div>([^<]*)</div></details><div>([^<]*)</div>");
  ASSERT_TRUE(std::regex_search(html, m, bubble)) << html;
  const std::string reasoning = message.value("reasoning_content", "");
  EXPECT_EQ(m[1].matched, reasoning.empty()) << "thinking shown exactly when there is some";
  EXPECT_EQ(unescape_html(m[2].str()), reasoning);
  EXPECT_EQ(unescape_html(m[3].str()), message["content"].get<std::string>());
  EXPECT_EQ(html.find("<details class=\"thinking\" open"), std::string::npos) << "collapsed";

  const std::string shot = boltrt::test::binary_dir() + "/serve_chat_page.png";
  std::filesystem::remove(shot);
  const json png = browser.call("Page.captureScreenshot", {{"format", "png"}}, session, deadline);
  {
    std::ofstream out(shot, std::ios::binary);
    out << base64_decode(png.value("data", ""));
  }
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
