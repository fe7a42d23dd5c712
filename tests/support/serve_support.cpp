#include "support/serve_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "support/paths.h"

namespace boltrt::test {
namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

ServeProcess::ServeProcess(const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> argv_storage = {cli_path(), "serve"};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  argv_storage.push_back("--port");
  argv_storage.push_back("0");
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(pipe_fds[1], 2);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    const int null_fd = ::open("/dev/null", O_RDWR);
    ::dup2(null_fd, 0);
    ::dup2(null_fd, 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  stderr_fd_ = pipe_fds[0];
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  const std::string marker = "listening on http://127.0.0.1:";
  while (port_ == 0) {
    pollfd p{stderr_fd_, POLLIN, 0};
    if (::poll(&p, 1, std::min(ms_left(deadline), 200)) > 0) {
      char buf[4096];
      const ssize_t n = ::read(stderr_fd_, buf, sizeof buf);
      if (n <= 0) break;
      stderr_.append(buf, static_cast<size_t>(n));
    }
    const size_t at = stderr_.find(marker);
    if (at != std::string::npos) {
      const size_t end = stderr_.find('\n', at);
      if (end != std::string::npos)
        port_ = std::stoi(stderr_.substr(at + marker.size(), end - at - marker.size()));
    }
    if (ms_left(deadline) == 0) break;
  }
  if (port_ == 0) {
    terminate(std::chrono::seconds(5));
    throw std::runtime_error("boltrt serve did not start: " + stderr_);
  }
  ::fcntl(stderr_fd_, F_SETFL, O_NONBLOCK);
}

int ServeProcess::terminate(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (ms_left(deadline) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  char buf[4096];
  for (ssize_t n; (n = ::read(stderr_fd_, buf, sizeof buf)) > 0;)
    stderr_.append(buf, static_cast<size_t>(n));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) terminate(std::chrono::seconds(30));
  if (stderr_fd_ >= 0) ::close(stderr_fd_);
}

HttpClient::HttpClient(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error(std::string("connect to 127.0.0.1 failed: ") + std::strerror(errno));
}

HttpClient::~HttpClient() {
  close();
}

void HttpClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool HttpClient::send_raw(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool HttpClient::read_until(const std::string& pattern, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (received_.find(pattern) == std::string::npos) {
    pollfd p{fd_, POLLIN, 0};
    const int left = ms_left(deadline);
    if (left == 0) return false;
    if (::poll(&p, 1, left) <= 0) continue;
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return received_.find(pattern) != std::string::npos;
    received_.append(buf, static_cast<size_t>(n));
  }
  return true;
}

bool HttpClient::read_until_closed(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    const int left = ms_left(deadline);
    if (left == 0) return false;
    if (::poll(&p, 1, left) <= 0) continue;
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return true;
    received_.append(buf, static_cast<size_t>(n));
  }
}

HttpResponse parse_response(const std::string& raw) {
  HttpResponse r;
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return r;
  const std::string head = raw.substr(0, head_end);
  if (head.size() < 12) return r;
  r.status = std::stoi(head.substr(9, 3));
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos && pos < head.size()) {
    const size_t next = head.find("\r\n", pos + 2);
    const std::string line =
        head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      r.headers[name] = value;
    }
    pos = next;
  }
  size_t at = head_end + 4;
  if (r.headers.count("content-length")) {
    const size_t n = std::stoul(r.headers["content-length"]);
    r.body = raw.substr(at, n);
    r.complete = raw.size() >= at + n;
  } else if (r.headers["transfer-encoding"] == "chunked") {
    for (;;) {
      const size_t line_end = raw.find("\r\n", at);
      if (line_end == std::string::npos) return r;
      const size_t n = std::stoul(raw.substr(at, line_end - at), nullptr, 16);
      if (n == 0) {
        r.complete = raw.size() >= line_end + 4;
        return r;
      }
      if (raw.size() < line_end + 2 + n + 2) return r;
      r.body += raw.substr(line_end + 2, n);
      at = line_end + 2 + n + 2;
    }
  } else {
    r.body = raw.substr(at);
  }
  return r;
}

HttpResponse http_request(int port, const std::string& method, const std::string& path,
                          const std::string& body, const std::string& extra_headers,
                          std::chrono::milliseconds timeout) {
  HttpClient client(port);
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers;
  if (!body.empty() || method == "POST")
    request +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  request += "Connection: close\r\n\r\n" + body;
  client.send_raw(request);
  client.read_until_closed(timeout);
  return parse_response(client.received());
}

}  // namespace boltrt::test
