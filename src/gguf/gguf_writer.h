// GGUF writer (shared/docs/gguf.md §10): version 3, little-endian, records in payload order,
// every payload padded to the alignment (also after the last one). Tensor payloads are
// streamed from producer callbacks, so a multi-GB file never sits in memory. write() goes to a
// temporary file next to the target and renames it into place only when everything succeeded.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "gguf/gguf.h"

namespace boltrt::gguf {

// Receives a tensor's bytes from its producer, in order, in chunks of any size.
class TensorSink {
 public:
  virtual ~TensorSink() = default;
  virtual void write(const void* data, size_t n) = 0;
};

// Called once, when the file is written, to emit exactly TensorInfo::nbytes bytes.
using TensorProducer = std::function<void(TensorSink& sink)>;

class Writer {
 public:
  // `alignment` must be a power of two; when it is not 32 it is also stored as
  // general.alignment (UINT32), so the declared and the used value can never differ.
  explicit Writer(uint32_t alignment = 32);
  ~Writer();

  // Metadata, kept in insertion order. Keys must be unique, non-empty printable ASCII.
  void set(const std::string& key, Value value);
  void set_u8(const std::string& key, uint8_t v);
  void set_i8(const std::string& key, int8_t v);
  void set_u16(const std::string& key, uint16_t v);
  void set_i16(const std::string& key, int16_t v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_i64(const std::string& key, int64_t v);
  void set_f32(const std::string& key, float v);
  void set_f64(const std::string& key, double v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, std::string v);
  void set_array_u32(const std::string& key, std::span<const uint32_t> v);
  void set_array_i32(const std::string& key, std::span<const int32_t> v);
  void set_array_f32(const std::string& key, std::span<const float> v);
  void set_array_bool(const std::string& key, const std::vector<bool>& v);
  void set_array_string(const std::string& key, const std::vector<std::string>& v);
  bool has(const std::string& key) const;

  // Tensors, written in the order they are added. `ne` is in ggml order (innermost first),
  // 1 to 4 dims. The producer must emit exactly the tensor's byte size.
  void add_tensor(const std::string& name, GgmlType type, std::initializer_list<int64_t> ne,
                  TensorProducer producer);
  void add_tensor(const std::string& name, GgmlType type, std::span<const int64_t> ne,
                  TensorProducer producer);
  // Convenience: bytes the caller keeps alive until write() returns.
  void add_tensor_data(const std::string& name, GgmlType type, std::span<const int64_t> ne,
                       const void* data);

  size_t tensor_count() const;
  // Byte size of everything before the data section, including the padding (known before any
  // payload is produced).
  uint64_t data_offset() const;
  // Total file size.
  uint64_t file_size() const;

  // Writes PATH atomically (PATH.tmp-<pid> then rename). Throws boltrt::Error naming the path
  // and the failing operation (e.g. "No space left on device"); the temporary is removed.
  // An existing non-regular PATH (/dev/null, a pipe) is written directly.
  void write(const std::string& path) const;
  // Writes to an open descriptor (no rename); `name` is used in error messages.
  void write_fd(int fd, const std::string& name) const;
  // Whole file in memory (tests, fuzz seeds).
  std::vector<uint8_t> write_to_memory() const;

 private:
  struct Tensor;
  void emit(TensorSink& out) const;
  uint32_t alignment_;
  std::vector<KeyValue> kv_;
  std::vector<Tensor> tensors_;
  std::unordered_set<std::string> tensor_names_;
};

}  // namespace boltrt::gguf
