#include "batch/result_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "batch/request.h"
#include "util/error.h"

namespace boltrt::batch {

ResultFile::~ResultFile() {
  close();
}

void ResultFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ResultFile::open_new(const std::string& path, bool truncate) {
  close();
  path_ = path;
  ids_.clear();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0),
               0644);
  if (fd_ < 0) fail("{}: cannot create: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
  size_ = static_cast<int64_t>(st.st_size);
}

int64_t ResultFile::open_for_resume(const std::string& path) {
  close();
  path_ = path;
  ids_.clear();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  std::string content;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::pread(fd_, buffer, sizeof buffer, static_cast<off_t>(content.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("{}: cannot read: {}", path, std::strerror(errno));
    }
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
  }
  // Whole lines end with '\n'; anything after the last one is a write cut short by a kill.
  const size_t keep = content.rfind('\n') == std::string::npos ? 0 : content.rfind('\n') + 1;
  const int64_t cut = static_cast<int64_t>(content.size() - keep);
  if (cut > 0) {
    if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0)
      fail("{}: cannot cut the partial last line: {}", path, std::strerror(errno));
    ::fdatasync(fd_);
  }
  size_ = static_cast<int64_t>(keep);
  size_t start = 0;
  int64_t line_number = 0;
  while (start < keep) {
    const size_t end = content.find('\n', start);
    ++line_number;
    const std::string_view line(content.data() + start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    nlohmann::ordered_json object =
        nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!object.is_object() || !object.contains("id"))
      fail("{}:{}: not a result line (no JSON object with an 'id'); is this a results file?", path,
           line_number);
    ids_.insert(id_key(object["id"]));
  }
  return cut;
}

void ResultFile::write_all(std::string_view data) {
  if (fd_ < 0) throw WriteError(path_ + ": not open");
  const int64_t start_size = size_;
  size_t done = 0;
  while (done < data.size()) {
    size_t chunk = data.size() - done;
    if (fail_after_ >= 0) {
      const int64_t room = fail_after_ - size_;
      if (room <= 0) {
        errno = ENOSPC;
        chunk = 0;
      } else {
        chunk = std::min<size_t>(chunk, static_cast<size_t>(room));
      }
    }
    const ssize_t n = chunk == 0 ? -1 : ::write(fd_, data.data() + done, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      // Leave only whole lines behind so a later --resume starts clean.
      if (::ftruncate(fd_, static_cast<off_t>(start_size)) == 0) size_ = start_size;
      throw WriteError(path_ + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
    size_ += n;
  }
  if (::fdatasync(fd_) != 0 && errno != EINVAL && errno != EROFS) {
    const int err = errno;
    throw WriteError(path_ + ": sync failed: " + std::strerror(err));
  }
}

bool ResultFile::write(const std::string& key, std::string_view line) {
  if (ids_.contains(key)) return false;
  std::string data(line);
  data.push_back('\n');
  write_all(data);
  ids_.insert(key);
  return true;
}

void ResultFile::append(std::string_view line) {
  std::string data(line);
  data.push_back('\n');
  write_all(data);
}

}  // namespace boltrt::batch
