// Helpers for the `boltrt serve` tests: start the server as a child process on a free port
// (127.0.0.1 only) and speak raw HTTP/1.1 to it over loopback, with a deadline on every wait.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace boltrt::test {

// A running `boltrt serve ARGS --port 0`. The destructor sends SIGTERM and reaps it.
class ServeProcess {
 public:
  explicit ServeProcess(const std::vector<std::string>& args);
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  // What the server wrote on stderr so far (the listening line included).
  const std::string& stderr_text() const { return stderr_; }
  // SIGTERM, then waits up to `timeout` for the exit; returns the exit status (-1: still running,
  // then killed; 128+N: killed by signal N).
  int terminate(std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  pid_t pid_ = -1;
  int stderr_fd_ = -1;
  int port_ = 0;
  std::string stderr_;
};

// One TCP connection to 127.0.0.1:port.
class HttpClient {
 public:
  explicit HttpClient(int port);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  bool send_raw(const std::string& bytes);
  // Reads until `pattern` is in what was read (returns true) or the peer closed / the timeout
  // passed (false). Everything read is kept in received().
  bool read_until(const std::string& pattern, std::chrono::milliseconds timeout);
  // Reads until the peer closes or the timeout passes; true when it closed.
  bool read_until_closed(std::chrono::milliseconds timeout);
  const std::string& received() const { return received_; }
  void clear() { received_.clear(); }
  void close();

 private:
  int fd_ = -1;
  std::string received_;
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
  bool complete = false;
};

// Parses one response from the front of `raw` (Content-Length or chunked); complete is false
// when it is cut short.
HttpResponse parse_response(const std::string& raw);

// A whole request on a new connection: "POST path" with a JSON body (or GET when body is
// empty); extra header lines end with \r\n.
HttpResponse http_request(int port, const std::string& method, const std::string& path,
                          const std::string& body = "", const std::string& extra_headers = "",
                          std::chrono::milliseconds timeout = std::chrono::seconds(120));

}  // namespace boltrt::test
