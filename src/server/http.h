// A small HTTP/1.1 server for `boltrt serve`: one thread per connection (bounded), keep-alive,
// bodies by Content-Length only, chunked responses for Server-Sent Events.
//
// Written for clients that misbehave: every limit is explicit (header bytes and count, body
// bytes) and every wait has a deadline — the whole header must arrive within header_timeout_ms
// of its first byte and the whole body within body_timeout_ms, so a client that trickles one
// byte at a time is dropped as surely as one that sends nothing; a write that makes no progress
// for write_timeout_ms drops the client too. Chunked request bodies are refused with 411 (the
// OpenAI clients always send Content-Length), which keeps the parser to one code path.
//
//   HttpServer server(limits, [](const HttpRequest& req, HttpResponder& res) { ... });
//   int port = server.listen("127.0.0.1", 0);   // 0: a free port
//   std::thread t([&] { server.run(); });      // until stop()
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace boltrt::server {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;  // request line and headers together
  size_t max_headers = 64;
  size_t max_body_bytes = 16 * 1024 * 1024;
  int header_timeout_ms = 10'000;  // from a request's first byte to the end of its headers
  int body_timeout_ms = 30'000;    // from the end of the headers to the end of the body
  int idle_timeout_ms = 30'000;    // keep-alive: waiting for the next request's first byte
  int write_timeout_ms = 30'000;   // a response write that makes no progress this long
  int max_connections = 256;       // more are answered 503 and closed
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;   // "GET", "POST", ...
  std::string target;   // as sent: "/v1/models?x=1"
  std::string path;     // target without the query
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  HttpHeaders headers;  // names lower-cased, values trimmed
  std::string body;
  bool keep_alive = true;
  bool expect_continue = false;  // "Expect: 100-continue"
  size_t content_length = 0;

  // The first header of that (lower-case) name, or null.
  const std::string* header(std::string_view name) const;
};

// One step of parsing the bytes received so far on a connection.
struct ParseStatus {
  enum Kind { kIncomplete, kComplete, kError } kind = kIncomplete;
  bool headers_done = false;  // kIncomplete: the headers are parsed, the body is still short
  size_t consumed = 0;        // kComplete: bytes of `buffer` that made up the request
  int status = 0;             // kError: the HTTP status to answer (400, 411, 413, 414, 431, 505)
  std::string message;        // kError: why, one line
};

// Parses one request from the start of `buffer` (stateless: call it again with more bytes).
// Never reads past the request, so pipelined requests stay in the buffer.
ParseStatus parse_http_request(std::string_view buffer, const HttpLimits& limits, HttpRequest& out);

std::string_view http_reason(int status);

// How a handler answers. Either send() once, or begin_stream() then write_chunk()s and
// end_stream(). Every write returns false once the client is gone (or too slow); the handler
// should then stop its work.
class HttpResponder {
 public:
  HttpResponder(int fd, const HttpLimits& limits, bool keep_alive, const std::atomic<bool>& stop)
      : fd_(fd), limits_(limits), keep_alive_(keep_alive), stop_(stop) {}

  bool send(int status, std::string_view content_type, std::string_view body,
            const HttpHeaders& extra = {});
  bool begin_stream(int status, std::string_view content_type, const HttpHeaders& extra = {});
  bool write_chunk(std::string_view data);
  bool end_stream();
  // True when the client closed its side or the connection failed (a peek, no blocking).
  bool client_gone();
  // Closes the connection after this response (e.g. while shutting down).
  void close_after() { keep_alive_ = false; }
  // A header every response of this request carries (set before responding). The value must
  // not contain CR or LF.
  void add_header(std::string name, std::string value) {
    always_.emplace_back(std::move(name), std::move(value));
  }

  bool responded() const { return responded_; }
  bool keep_alive() const { return keep_alive_ && !failed_; }
  bool failed() const { return failed_; }
  int status() const { return status_; }

 private:
  bool write_all(std::string_view data);
  std::string head(int status, std::string_view content_type, const HttpHeaders& extra,
                   std::optional<size_t> content_length);

  int fd_;
  const HttpLimits& limits_;
  bool keep_alive_;
  const std::atomic<bool>& stop_;
  HttpHeaders always_;
  bool responded_ = false;
  bool streaming_ = false;
  bool failed_ = false;
  int status_ = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;
// Called for requests that fail to parse, to shape the error body (status, message) -> body.
using HttpErrorBody = std::function<std::string(int status, std::string_view message)>;

class HttpServer {
 public:
  HttpServer(HttpLimits limits, HttpHandler handler, HttpErrorBody error_body);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; returns the port (a free one for port 0). Throws boltrt::Error.
  int listen(const std::string& host, int port);
  // Accepts connections until stop(); then waits for the connection threads to end.
  void run();
  // Stops accepting; idle keep-alive connections are closed, handlers see stopping().
  void stop();
  bool stopping() const { return stop_.load(); }
  int active_connections() const;

 private:
  void serve_connection(int fd);

  HttpLimits limits_;
  HttpHandler handler_;
  HttpErrorBody error_body_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::condition_variable connections_changed_;
  int connections_ = 0;
};

}  // namespace boltrt::server
