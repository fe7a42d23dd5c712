// GGUF reader: maps a file read-only and validates every field before anything uses it.
// Layout and the checks are described in shared/docs/gguf.md. Every rejection is one
// boltrt::Error of the form  "FILE: at byte N: FIELD: PROBLEM".
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "quant/ggml_type.h"

namespace boltrt::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);
// Bytes a value of type t takes in a file: the fixed width of a scalar; for STRING the 8-byte
// length field and for ARRAY the 12-byte header (element type + count), i.e. the least they take.
size_t value_type_min_size(ValueType t);

struct Value;
// An array value: element type plus the elements (strings and nested arrays included).
struct Array {
  ValueType type = ValueType::UINT8;
  std::vector<Value> items;
};

struct Value {
  ValueType type = ValueType::UINT8;
  // Integers of every width are held as int64/uint64, floats as double; `type` says what the
  // file had. Strings are copied (metadata is small next to tensor data).
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  bool is_integer() const;
  bool is_float() const;
  std::optional<int64_t> as_int() const;   // any integer type (and bool), range-checked
  std::optional<double> as_float() const;  // any number
  const std::string* as_string() const;
  const Array* as_array() const;
};

struct KeyValue {
  std::string key;
  Value value;
  uint64_t offset = 0;  // absolute byte offset of the entry (its key length) in the file
};

// Nested arrays deeper than this are rejected (llama.cpp rejects any nesting; gguf-py writes it).
inline constexpr int kMaxArrayDepth = 4;
// Tensor names are at most this many bytes (ggml's GGML_MAX_NAME is 64 including the NUL).
inline constexpr size_t kMaxTensorName = 63;
// general.alignment must be a power of two no larger than this.
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 20;

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] = innermost (row length), as ggml
  uint64_t offset = 0;           // relative to the data section
  uint64_t nbytes = 0;           // row_size(type, ne[0]) * ne[1] * ne[2] * ne[3]
  uint64_t record_offset = 0;    // absolute byte offset of the tensor's record (its name)
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Opens, maps and validates. Throws boltrt::Error on any problem.
  static std::unique_ptr<File> open(const std::string& path);
  // Parses an in-memory image (for fuzzing and tests); `name` appears in error messages.
  static std::unique_ptr<File> parse(std::span<const uint8_t> bytes, std::string name);
  ~File();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute byte offset of tensor data
  uint64_t file_size() const { return size_; }

  const std::vector<KeyValue>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;  // nullptr when absent

  // Typed getters: nullopt when absent; throw boltrt::Error naming the key when the value
  // has the wrong type.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  const Array* get_array(std::string_view key) const;
  // Architecture-prefixed helpers: get_arch_int("block_count") reads "<arch>.block_count".
  std::string architecture() const;  // general.architecture or ""
  std::optional<int64_t> get_arch_int(std::string_view suffix) const;
  std::optional<double> get_arch_float(std::string_view suffix) const;

  // Oddities that do not stop loading (gguf.md §9 O, P): alignment below 32, non-zero padding,
  // bytes after the data, a missing final padding. One line each.
  const std::vector<std::string>& warnings() const { return warnings_; }

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
  // Pointer to a tensor's bytes inside the mapping (valid while the File lives).
  const uint8_t* tensor_data(const TensorInfo& t) const;

 private:
  File() = default;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> kv_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::string> warnings_;
  struct Index;  // name -> position lookups for keys and tensors
  std::unique_ptr<Index> index_;
  friend class Parser;
};

}  // namespace boltrt::gguf
