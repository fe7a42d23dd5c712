#include "server/http.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "util/error.h"

namespace boltrt::server {
namespace {

using Clock = std::chrono::steady_clock;

bool is_token_char(char c) {
  if (c >= 'a' && c <= 'z') return true;
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= '0' && c <= '9') return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool contains_token(std::string_view list, std::string_view token) {
  // A comma-separated header value ("keep-alive, Upgrade"), compared case-insensitively.
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    if (lower(trim_ows(list.substr(pos, comma - pos))) == token) return true;
    pos = comma + 1;
  }
  return false;
}

ParseStatus error(int status, std::string message) {
  ParseStatus s;
  s.kind = ParseStatus::kError;
  s.status = status;
  s.message = std::move(message);
  return s;
}

int remaining_ms(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return &v;
  return nullptr;
}

namespace {

ParseStatus parse_one(std::string_view buffer, const HttpLimits& limits, HttpRequest& out) {
  // Lines end with CRLF (a bare LF is accepted, as RFC 9112 allows); the head ends with an empty
  // line.
  size_t head_end = std::string_view::npos;  // index just past the empty line
  for (size_t pos = 0; pos < buffer.size();) {
    const size_t nl = buffer.find('\n', pos);
    if (nl == std::string_view::npos) break;
    const size_t len = nl - pos;
    if (len == 0 || (len == 1 && buffer[pos] == '\r')) {
      if (pos == 0) return error(400, "the request starts with an empty line");
      head_end = nl + 1;
      break;
    }
    pos = nl + 1;
  }
  if (head_end == std::string_view::npos) {
    const size_t first_nl = buffer.find('\n');
    if (first_nl == std::string_view::npos && buffer.size() > limits.max_header_bytes)
      return error(
          414, fmt::format("the request line is longer than {} bytes", limits.max_header_bytes));
    if (buffer.size() > limits.max_header_bytes)
      return error(431, fmt::format("the request headers are longer than {} bytes",
                                    limits.max_header_bytes));
    return {};
  }
  if (head_end > limits.max_header_bytes + 2)
    return error(
        431, fmt::format("the request headers are longer than {} bytes", limits.max_header_bytes));

  out = HttpRequest();
  std::string_view head = buffer.substr(0, head_end);
  auto next_line = [&]() {
    const size_t nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    head.remove_prefix(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };

  // Request line: METHOD SP target SP HTTP/1.x
  const std::string_view request_line = next_line();
  const size_t sp1 = request_line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : request_line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      request_line.find(' ', sp2 + 1) != std::string_view::npos)
    return error(400, "malformed request line");
  const std::string_view method = request_line.substr(0, sp1);
  const std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = request_line.substr(sp2 + 1);
  if (method.empty()) return error(400, "malformed request line: no method");
  for (char c : method)
    if (!is_token_char(c)) return error(400, "malformed request line: bad method");
  if (target.empty() || (target[0] != '/' && target != "*"))
    return error(400, "malformed request line: the target must start with '/'");
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7F) return error(400, "malformed request line: bad byte in target");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/")
    return error(400, "malformed request line: bad version");
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return error(505, fmt::format("{} is not supported (HTTP/1.1 or HTTP/1.0)", version));
  out.method = std::string(method);
  out.target = std::string(target);
  out.path = std::string(target.substr(0, target.find('?')));
  out.version = std::string(version);

  std::optional<size_t> content_length;
  bool chunked = false;
  std::string connection;
  for (;;) {
    const std::string_view line = next_line();
    if (line.empty()) break;
    if (line[0] == ' ' || line[0] == '\t') return error(400, "folded header lines are not allowed");
    if (out.headers.size() >= limits.max_headers)
      return error(431, fmt::format("more than {} request headers", limits.max_headers));
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return error(400, "malformed header line");
    const std::string_view name = line.substr(0, colon);
    for (char c : name)
      if (!is_token_char(c)) return error(400, "malformed header name");
    const std::string_view value = trim_ows(line.substr(colon + 1));
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7F) return error(400, "control byte in a header value");
    }
    std::string key = lower(name);
    if (key == "content-length") {
      if (value.empty() || value.size() > 15) return error(400, "bad Content-Length");
      size_t n = 0;
      for (char c : value) {
        if (c < '0' || c > '9') return error(400, "bad Content-Length");
        n = n * 10 + static_cast<size_t>(c - '0');
      }
      if (content_length && *content_length != n) return error(400, "conflicting Content-Length");
      content_length = n;
    } else if (key == "transfer-encoding") {
      chunked = true;  // any transfer coding: we take only Content-Length bodies
    } else if (key == "connection") {
      connection += std::string(value) + ",";
    } else if (key == "expect") {
      if (lower(value) != "100-continue") return error(417, "only 'Expect: 100-continue' is known");
      out.expect_continue = true;
    }
    out.headers.emplace_back(std::move(key), std::string(value));
  }
  if (chunked) return error(411, "chunked request bodies are not supported; send a Content-Length");
  out.keep_alive = version == "HTTP/1.1" ? !contains_token(connection, "close")
                                         : contains_token(connection, "keep-alive");
  out.content_length = content_length.value_or(0);
  if (out.content_length > limits.max_body_bytes)
    return error(413, fmt::format("the request body of {} bytes is over the limit of {} bytes",
                                  out.content_length, limits.max_body_bytes));
  if (buffer.size() - head_end < out.content_length) {
    ParseStatus s;
    s.headers_done = true;
    return s;
  }
  out.body = std::string(buffer.substr(head_end, out.content_length));
  ParseStatus s;
  s.kind = ParseStatus::kComplete;
  s.headers_done = true;
  s.consumed = head_end + out.content_length;
  return s;
}

}  // namespace

ParseStatus parse_http_request(std::string_view buffer, const HttpLimits& limits,
                               HttpRequest& out) {
  // RFC 9112 §2.2: empty lines before a request line are ignored (some clients send a CRLF
  // after a body); a few, not an endless stream of them.
  size_t skip = 0;
  while (skip < buffer.size() && skip < 8 && (buffer[skip] == '\r' || buffer[skip] == '\n')) ++skip;
  ParseStatus s = parse_one(buffer.substr(skip), limits, out);
  if (s.kind == ParseStatus::kComplete) s.consumed += skip;
  return s;
}

std::string_view http_reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

// ---- responses ------------------------------------------------------------------------------

bool HttpResponder::write_all(std::string_view data) {
  if (failed_) return false;
  // Each poll waits at most write_timeout_ms for the socket to take more bytes.
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      const int r = ::poll(&p, 1, limits_.write_timeout_ms);
      if (r > 0 && (p.revents & POLLOUT)) continue;
      if (r < 0 && errno == EINTR) continue;
    }
    failed_ = true;
    return false;
  }
  return true;
}

std::string HttpResponder::head(int status, std::string_view content_type, const HttpHeaders& extra,
                                std::optional<size_t> content_length) {
  status_ = status;
  std::string h = fmt::format("HTTP/1.1 {} {}\r\n", status, http_reason(status));
  if (!content_type.empty()) h += fmt::format("Content-Type: {}\r\n", content_type);
  if (content_length) {
    h += fmt::format("Content-Length: {}\r\n", *content_length);
  } else {
    h += "Transfer-Encoding: chunked\r\n";
  }
  for (const auto& [k, v] : extra) h += fmt::format("{}: {}\r\n", k, v);
  for (const auto& [k, v] : always_) h += fmt::format("{}: {}\r\n", k, v);
  if (stop_.load()) keep_alive_ = false;
  h += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  h += "\r\n";
  return h;
}

bool HttpResponder::send(int status, std::string_view content_type, std::string_view body,
                         const HttpHeaders& extra) {
  if (responded_) return false;
  responded_ = true;
  std::string out = head(status, content_type, extra, body.size());
  out.append(body);
  return write_all(out);
}

bool HttpResponder::begin_stream(int status, std::string_view content_type,
                                 const HttpHeaders& extra) {
  if (responded_) return false;
  responded_ = true;
  streaming_ = true;
  return write_all(head(status, content_type, extra, std::nullopt));
}

bool HttpResponder::write_chunk(std::string_view data) {
  if (!streaming_ || data.empty()) return !failed_;
  std::string out = fmt::format("{:x}\r\n", data.size());
  out.append(data);
  out += "\r\n";
  return write_all(out);
}

bool HttpResponder::end_stream() {
  if (!streaming_) return false;
  streaming_ = false;
  return write_all("0\r\n\r\n");
}

bool HttpResponder::client_gone() {
  if (failed_) return true;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  const int r = ::poll(&p, 1, 0);
  if (r <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;  // orderly shutdown by the client
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
  }
  return false;
}

// ---- the server -----------------------------------------------------------------------------

HttpServer::HttpServer(HttpLimits limits, HttpHandler handler, HttpErrorBody error_body)
    : limits_(limits), handler_(std::move(handler)), error_body_(std::move(error_body)) {}

HttpServer::~HttpServer() {
  stop();
  std::unique_lock lock(mutex_);
  connections_changed_.wait(lock, [&] { return connections_ == 0; });
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

int HttpServer::listen(const std::string& host, int port) {
  if (port < 0 || port > 65535) fail("port {} is outside 0..65535", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    fail("cannot resolve host '{}': {}", host, ::gai_strerror(rc));
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    listen_fd_ = fd;
    break;
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) fail("cannot listen on {}:{}: {}", host, port, last_error);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

void HttpServer::stop() {
  stop_ = true;
}

int HttpServer::active_connections() const {
  std::lock_guard lock(mutex_);
  return connections_;
}

void HttpServer::run() {
  if (listen_fd_ < 0) fail("HttpServer::run before listen");
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, 100);  // wakes up to see stop()
    if (r <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    {
      std::lock_guard lock(mutex_);
      if (connections_ >= limits_.max_connections) {
        HttpResponder res(fd, limits_, false, stop_);
        res.send(503, "application/json", error_body_(503, "too many connections"));
        ::close(fd);
        continue;
      }
      ++connections_;
    }
    std::thread([this, fd] {
      try {
        serve_connection(fd);
      } catch (...) {
        // A handler that throws loses its connection, never the server.
      }
      ::close(fd);
      std::lock_guard lock(mutex_);
      --connections_;
      connections_changed_.notify_all();
    }).detach();
  }
  ::close(listen_fd_);
  listen_fd_ = -1;
  std::unique_lock lock(mutex_);
  connections_changed_.wait(lock, [&] { return connections_ == 0; });
}

void HttpServer::serve_connection(int fd) {
  std::string buffer;
  bool first_request = true;
  char chunk[16 * 1024];
  while (!stop_) {
    // Waiting for a request: the idle timeout until its first byte (a new connection gets the
    // header timeout), then header_timeout_ms for the whole head and body_timeout_ms for the
    // body. Polls wake every 100 ms to notice stop().
    auto deadline =
        Clock::now() + std::chrono::milliseconds(first_request ? limits_.header_timeout_ms
                                                               : limits_.idle_timeout_ms);
    bool started = !buffer.empty();
    if (started) deadline = Clock::now() + std::chrono::milliseconds(limits_.header_timeout_ms);
    bool headers_done = false;
    bool sent_continue = false;
    HttpRequest request;
    ParseStatus status;
    for (;;) {
      status = parse_http_request(buffer, limits_, request);
      if (status.kind != ParseStatus::kIncomplete) break;
      if (status.headers_done && !headers_done) {
        headers_done = true;
        deadline = Clock::now() + std::chrono::milliseconds(limits_.body_timeout_ms);
      }
      if (status.headers_done && request.expect_continue && !sent_continue) {
        sent_continue = true;
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        if (::send(fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL) < 0) return;
      }
      const int left = remaining_ms(deadline);
      if (left == 0) {
        if (started) {
          HttpResponder res(fd, limits_, false, stop_);
          res.send(408, "application/json",
                   error_body_(408, headers_done ? "the request body did not arrive in time"
                                                 : "the request headers did not arrive in time"));
        }
        return;
      }
      if (stop_ && !started) return;
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, std::min(left, 100));
      if (r < 0 && errno != EINTR) return;
      if (r <= 0) continue;
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n == 0) return;  // the client closed
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        return;
      }
      if (!started) {
        started = true;
        deadline = Clock::now() + std::chrono::milliseconds(limits_.header_timeout_ms);
      }
      buffer.append(chunk, static_cast<size_t>(n));
    }
    first_request = false;
    if (status.kind == ParseStatus::kError) {
      HttpResponder res(fd, limits_, false, stop_);
      res.send(status.status, "application/json", error_body_(status.status, status.message));
      return;
    }
    buffer.erase(0, status.consumed);
    HttpResponder res(fd, limits_, request.keep_alive, stop_);
    handler_(request, res);
    if (!res.responded())
      res.send(500, "application/json", error_body_(500, "the handler gave no response"));
    if (!res.keep_alive()) return;
  }
}

}  // namespace boltrt::server
