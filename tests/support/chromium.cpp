#include "support/chromium.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

namespace boltrt::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::string read_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

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

Chromium::Chromium(const std::vector<std::string>& args, std::string log_path)
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

Chromium::~Chromium() {
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

json Chromium::call(const std::string& method, const json& params, const std::string& session,
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
      json reply = json::parse(buffer_.substr(0, end), nullptr, false);
      buffer_.erase(0, end + 1);
      if (!reply.is_object()) continue;
      if (!reply.contains("id")) {
        if (reply.contains("method")) events_.push_back(std::move(reply));
        continue;
      }
      if (reply["id"] != id) continue;
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

json Chromium::evaluate(const std::string& session, const std::string& expression,
                        Clock::time_point deadline) {
  const json r = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}},
                      session, deadline);
  if (r.contains("exceptionDetails")) fail(expression + ": " + r["exceptionDetails"].dump());
  return r["result"].value("value", json());
}

void Chromium::fail(const std::string& what) const {
  throw std::runtime_error(what + "\nchromium's log:\n" + read_log(log_path_));
}

}  // namespace boltrt::test
