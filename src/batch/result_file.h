// ResultFile — the append-only JSON Lines file that `boltrt batch` writes its results to, built
// so that nothing is lost and nothing is written twice:
//
//  * each result is one line written with a single write() loop, then fdatasync()ed, so after
//    a kill -9 the file holds whole lines plus at most one partial last line;
//  * open_for_resume() truncates such a partial line and returns the ids already present;
//  * write() refuses an id that is already in the file;
//  * a failed write (ENOSPC, EFBIG, EIO, ...) cuts the file back to its last whole line when it
//    can and throws WriteError, so the next --resume finds a clean file.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>

namespace boltrt::batch {

// A write to the results or errors file failed: the run must stop (the disk is full, ...).
class WriteError : public std::runtime_error {
 public:
  explicit WriteError(const std::string& message) : std::runtime_error(message) {}
};

class ResultFile {
 public:
  ResultFile() = default;
  ~ResultFile();
  ResultFile(const ResultFile&) = delete;
  ResultFile& operator=(const ResultFile&) = delete;

  // Creates `path` (or empties it when `truncate`); the caller decided that is allowed.
  void open_new(const std::string& path, bool truncate);
  // Opens an existing (or missing) file to continue it: a partial last line is cut off, every
  // whole line must be a JSON object with an "id". Returns how many bytes were cut.
  int64_t open_for_resume(const std::string& path);

  // The ids (id_key form) present in the file.
  const std::unordered_set<std::string>& ids() const { return ids_; }
  bool contains(const std::string& key) const { return ids_.contains(key); }

  // Appends `line` (no trailing newline) for id `key` and syncs it to disk. Returns false (and
  // writes nothing) when the id is already present. Throws WriteError when the write fails.
  bool write(const std::string& key, std::string_view line);

  // Appends a line without an id (the errors file) and syncs it. Throws WriteError.
  void append(std::string_view line);

  const std::string& path() const { return path_; }
  int64_t size() const { return size_; }

  // Test hook: fail every write once the file would grow past this many bytes (< 0: off).
  void set_fail_after_bytes(int64_t bytes) { fail_after_ = bytes; }

 private:
  void write_all(std::string_view data);
  void close();

  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
  int64_t fail_after_ = -1;
  std::unordered_set<std::string> ids_;
};

}  // namespace boltrt::batch
