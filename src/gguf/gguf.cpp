// GGUF reader (shared/docs/gguf.md §2-9). Every field is read through one bounded cursor over the
// mapped image, all size arithmetic is overflow-checked, and every problem becomes one
// boltrt::Error "FILE: at byte N: FIELD: PROBLEM".
#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "util/error.h"

namespace boltrt::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
      return "uint8";
    case ValueType::INT8:
      return "int8";
    case ValueType::UINT16:
      return "uint16";
    case ValueType::INT16:
      return "int16";
    case ValueType::UINT32:
      return "uint32";
    case ValueType::INT32:
      return "int32";
    case ValueType::FLOAT32:
      return "float32";
    case ValueType::BOOL:
      return "bool";
    case ValueType::STRING:
      return "string";
    case ValueType::ARRAY:
      return "array";
    case ValueType::UINT64:
      return "uint64";
    case ValueType::INT64:
      return "int64";
    case ValueType::FLOAT64:
      return "float64";
  }
  return "invalid";
}

size_t value_type_min_size(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
      return 8;
    case ValueType::STRING:
      return 8;  // at least the length field
    case ValueType::ARRAY:
      return 12;  // at least elem_type + count
  }
  return 0;
}

// ---- Value accessors ------------------------------------------------------------------------

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::UINT16:
    case ValueType::INT16:
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::UINT64:
    case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

bool Value::is_float() const {
  return type == ValueType::FLOAT32 || type == ValueType::FLOAT64;
}

std::optional<int64_t> Value::as_int() const {
  if (const auto* u = std::get_if<uint64_t>(&data)) {
    if (*u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&data)) return *i;
  if (const auto* b = std::get_if<bool>(&data)) return *b ? 1 : 0;
  return std::nullopt;
}

std::optional<double> Value::as_float() const {
  if (const auto* d = std::get_if<double>(&data)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&data)) return static_cast<double>(*i);
  return std::nullopt;
}

const std::string* Value::as_string() const {
  return std::get_if<std::string>(&data);
}
const Array* Value::as_array() const {
  return std::get_if<Array>(&data);
}

// ---- storage ------------------------------------------------------------------------------------

// Either an mmap of a file or an owned, 64-byte aligned copy of an in-memory image.
struct File::Mapping {
  void* addr = nullptr;
  size_t length = 0;
  bool mapped = false;
  ~Mapping() {
    if (!addr) return;
    if (mapped) {
      munmap(addr, length);
    } else {
      ::operator delete (addr, std::align_val_t{64});
    }
  }
};

struct File::Index {
  std::unordered_map<std::string_view, size_t> keys;     // views into kv_[i].key
  std::unordered_map<std::string_view, size_t> tensors;  // views into tensors_[i].name
};

File::~File() = default;

namespace {

constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;  // gguf.cpp's 1 GiB cap
constexpr uint64_t kMaxArrayCount = uint64_t{1} << 30;   // gguf.cpp's 2^30 cap
// Decoded metadata (Value objects plus string bytes) may not exceed this; a 2^30-element uint8
// array is legal per array but would decode to ~50 GiB of Value objects.
constexpr uint64_t kMetadataBudget = uint64_t{1} << 30;
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;      // length, 1-byte key, type, 1-byte value
constexpr uint64_t kMinTensorBytes = 8 + 4 + 4 + 8;  // empty name, n_dims 0, type, offset

std::string printable(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  return out;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    int extra;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static constexpr uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) & ~(a - 1);
}

}  // namespace

// ---- parser -------------------------------------------------------------------------------------

class Parser {
 public:
  Parser(File& file, const uint8_t* base, uint64_t size) : f_(file), base_(base), size_(size) {}

  void run();

 private:
  template <typename... Args>
  [[noreturn]] void fail_at(uint64_t at, std::string_view field, fmt::format_string<Args...> fmt,
                            Args&&... args) {
    throw Error(fmt::format("{}: at byte {}: {}: {}", f_.path_, at, field,
                            fmt::format(fmt, std::forward<Args>(args)...)));
  }

  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, std::string_view field) {
    if (n > remaining()) {
      fail_at(pos_, field, "needs {} bytes but the file ends after {} (file size {})", n,
              remaining(), size_);
    }
  }
  template <typename T>
  T read(std::string_view field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  // A u64 length followed by that many bytes; returns a view into the image.
  std::string_view read_string(std::string_view field) {
    uint64_t at = pos_;
    uint64_t n = read<uint64_t>(field);
    if (n > kMaxStringBytes) {
      fail_at(at, field, "string length {} exceeds the 1 GiB limit", n);
    }
    if (n > remaining()) {
      fail_at(at, field, "string length {} runs past the end of the file ({} bytes left)", n,
              remaining());
    }
    std::string_view s(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return s;
  }

  void charge(uint64_t bytes, uint64_t at, std::string_view field) {
    decoded_ += bytes;
    if (decoded_ > kMetadataBudget) {
      fail_at(at, field, "decoded metadata exceeds the {} MiB budget", kMetadataBudget >> 20);
    }
  }

  ValueType read_value_type(std::string_view field, bool element) {
    uint64_t at = pos_;
    uint32_t t = read<uint32_t>(field);
    if (t > static_cast<uint32_t>(ValueType::FLOAT64)) {
      fail_at(at, field, "invalid {}type {}", element ? "array element " : "value ", t);
    }
    return static_cast<ValueType>(t);
  }

  Value read_value(ValueType type, const std::string& field, int depth);
  void read_header();
  void read_kvs();
  void check_known_key(const KeyValue& kv);
  void read_tensors();
  void place_tensors();
  void collect_warnings();
  bool zeros(uint64_t begin, uint64_t end) const {
    for (uint64_t i = begin; i < end && i < size_; ++i) {
      if (base_[i] != 0) return false;
    }
    return true;
  }

  File& f_;
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t decoded_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

Value Parser::read_value(ValueType type, const std::string& field, int depth) {
  Value v;
  v.type = type;
  uint64_t at = pos_;
  switch (type) {
    case ValueType::UINT8:
      v.data = uint64_t{read<uint8_t>(field)};
      break;
    case ValueType::INT8:
      v.data = int64_t{read<int8_t>(field)};
      break;
    case ValueType::UINT16:
      v.data = uint64_t{read<uint16_t>(field)};
      break;
    case ValueType::INT16:
      v.data = int64_t{read<int16_t>(field)};
      break;
    case ValueType::UINT32:
      v.data = uint64_t{read<uint32_t>(field)};
      break;
    case ValueType::INT32:
      v.data = int64_t{read<int32_t>(field)};
      break;
    case ValueType::UINT64:
      v.data = read<uint64_t>(field);
      break;
    case ValueType::INT64:
      v.data = read<int64_t>(field);
      break;
    case ValueType::FLOAT32:
      v.data = double{read<float>(field)};
      break;
    case ValueType::FLOAT64:
      v.data = read<double>(field);
      break;
    case ValueType::BOOL: {
      uint8_t b = read<uint8_t>(field);
      if (b > 1) fail_at(at, field, "bool value is {}, must be 0 or 1", b);
      v.data = b != 0;
      break;
    }
    case ValueType::STRING: {
      std::string_view s = read_string(field);
      charge(s.size(), at, field);
      v.data = std::string(s);
      break;
    }
    case ValueType::ARRAY: {
      ValueType elem = read_value_type(field, true);
      uint64_t count_at = pos_;
      uint64_t count = read<uint64_t>(field);
      if (elem == ValueType::ARRAY && depth + 1 >= kMaxArrayDepth) {
        fail_at(at, field, "arrays nested deeper than {} levels", kMaxArrayDepth);
      }
      if (count > kMaxArrayCount) {
        fail_at(count_at, field, "array count {} exceeds the 2^30 limit", count);
      }
      if (count > remaining() / value_type_min_size(elem)) {
        fail_at(count_at, field,
                "array of {} {} elements needs at least {} bytes but only {} remain", count,
                value_type_name(elem), count * value_type_min_size(elem), remaining());
      }
      charge(count * sizeof(Value), count_at, field);
      Array arr;
      arr.type = elem;
      arr.items.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        arr.items.push_back(read_value(elem, field, depth + 1));
      }
      v.data = std::move(arr);
      break;
    }
  }
  return v;
}

void Parser::read_header() {
  if (size_ < 4) {
    fail_at(0, "magic", "file is {} bytes, too short to be GGUF", size_);
  }
  if (std::memcmp(base_, "GGUF", 4) != 0) {
    fail_at(0, "magic", "expected \"GGUF\", found \"{}\"",
            printable(std::string_view(reinterpret_cast<const char*>(base_), 4)));
  }
  pos_ = 4;
  uint32_t version = read<uint32_t>("version");
  if (version == 0) fail_at(4, "version", "version 0 is invalid");
  if ((version & 0xffff) == 0) {
    fail_at(4, "version", "value {:#x} looks byte-swapped: big-endian GGUF files are not supported",
            version);
  }
  if (version == 1) {
    fail_at(4, "version",
            "GGUF v1 (32-bit counts) is obsolete and not supported; convert it to v3");
  }
  if (version > 3) {
    fail_at(4, "version", "version {} is newer than this reader supports (2 and 3)", version);
  }
  f_.version_ = version;
  uint64_t tc = read<uint64_t>("tensor_count");
  uint64_t kc = read<uint64_t>("kv_count");
  if (tc > static_cast<uint64_t>(INT64_MAX))
    fail_at(8, "tensor_count", "negative ({})", int64_t(tc));
  if (kc > static_cast<uint64_t>(INT64_MAX)) fail_at(16, "kv_count", "negative ({})", int64_t(kc));
  if (kc > remaining() / kMinKvBytes) {
    fail_at(16, "kv_count", "{} entries cannot fit in the {} bytes that follow the header", kc,
            remaining());
  }
  if (tc > remaining() / kMinTensorBytes) {
    fail_at(8, "tensor_count", "{} tensors cannot fit in the {} bytes that follow the header", tc,
            remaining());
  }
  n_tensors_ = tc;
  n_kv_ = kc;
}

void Parser::read_kvs() {
  f_.kv_.reserve(n_kv_);
  f_.index_->keys.reserve(n_kv_);
  for (uint64_t i = 0; i < n_kv_; ++i) {
    uint64_t at = pos_;
    std::string key_field = fmt::format("key #{}", i);
    std::string_view key = read_string(key_field);
    if (key.empty()) fail_at(at, key_field, "empty key");
    for (char c : key) {
      auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) {
        fail_at(at, key_field, "key \"{}\" contains a byte {:#04x} (keys must be printable ASCII)",
                printable(key), u);
      }
    }
    if (f_.index_->keys.contains(key)) {
      fail_at(at, fmt::format("key '{}'", key), "duplicate key");
    }
    std::string field = fmt::format("key '{}'", key);
    ValueType type = read_value_type(field, false);
    KeyValue kv;
    kv.key = std::string(key);
    kv.offset = at;
    charge(sizeof(KeyValue) + key.size(), at, field);
    kv.value = read_value(type, field, 0);
    check_known_key(kv);
    f_.kv_.push_back(std::move(kv));
    f_.index_->keys.emplace(key, i);  // view into the image: stable for the File's life
  }
}

// Keys whose type llama.cpp requires exactly (gguf.md §10, §13). A wrong type here would make
// llama.cpp fail (or abort) later; we say so at parse time, naming the key.
void Parser::check_known_key(const KeyValue& kv) {
  struct Rule {
    std::string_view key;
    ValueType type;
    ValueType elem;  // for arrays
  };
  static constexpr Rule kRules[] = {
      {"general.alignment", ValueType::UINT32, ValueType::UINT8},
      {"general.architecture", ValueType::STRING, ValueType::UINT8},
      {"general.name", ValueType::STRING, ValueType::UINT8},
      {"general.file_type", ValueType::UINT32, ValueType::UINT8},
      {"general.quantization_version", ValueType::UINT32, ValueType::UINT8},
      {"tokenizer.ggml.model", ValueType::STRING, ValueType::UINT8},
      {"tokenizer.ggml.pre", ValueType::STRING, ValueType::UINT8},
      {"tokenizer.ggml.tokens", ValueType::ARRAY, ValueType::STRING},
      {"tokenizer.ggml.merges", ValueType::ARRAY, ValueType::STRING},
      {"tokenizer.ggml.token_type", ValueType::ARRAY, ValueType::INT32},
      {"tokenizer.ggml.bos_token_id", ValueType::UINT32, ValueType::UINT8},
      {"tokenizer.ggml.eos_token_id", ValueType::UINT32, ValueType::UINT8},
      {"tokenizer.ggml.unknown_token_id", ValueType::UINT32, ValueType::UINT8},
      {"tokenizer.ggml.padding_token_id", ValueType::UINT32, ValueType::UINT8},
      {"tokenizer.ggml.add_bos_token", ValueType::BOOL, ValueType::UINT8},
      {"tokenizer.ggml.add_eos_token", ValueType::BOOL, ValueType::UINT8},
      {"tokenizer.chat_template", ValueType::STRING, ValueType::UINT8},
      {"split.no", ValueType::UINT16, ValueType::UINT8},
      {"split.count", ValueType::UINT16, ValueType::UINT8},
      {"split.tensors.count", ValueType::INT32, ValueType::UINT8},
  };
  std::string field = fmt::format("key '{}'", kv.key);
  const Value& v = kv.value;
  for (const Rule& r : kRules) {
    if (kv.key != r.key) continue;
    if (v.type != r.type) {
      fail_at(kv.offset, field, "has type {}, expected {}", value_type_name(v.type),
              value_type_name(r.type));
    }
    if (r.type == ValueType::ARRAY && v.as_array()->type != r.elem) {
      fail_at(kv.offset, field, "is an array of {}, expected an array of {}",
              value_type_name(v.as_array()->type), value_type_name(r.elem));
    }
  }
  if (kv.key == "tokenizer.ggml.scores") {
    const Array* a = v.as_array();
    if (!a || (a->type != ValueType::FLOAT32 && a->type != ValueType::INT32)) {
      fail_at(kv.offset, field, "must be an array of float32 (or int32)");
    }
  }
  if (kv.key == "general.alignment") {
    uint64_t a = std::get<uint64_t>(v.data);
    if (a == 0 || (a & (a - 1)) != 0) {
      fail_at(kv.offset, field, "alignment {} is not a power of two", a);
    }
    if (a > kMaxAlignment) {
      fail_at(kv.offset, field, "alignment {} exceeds the 1 MiB limit", a);
    }
    f_.alignment_ = a;
  }
}

void Parser::read_tensors() {
  f_.tensors_.reserve(n_tensors_);
  f_.index_->tensors.reserve(n_tensors_);
  for (uint64_t i = 0; i < n_tensors_; ++i) {
    TensorInfo t;
    t.record_offset = pos_;
    std::string field = fmt::format("tensor #{}", i);
    std::string_view name = read_string(field + " name");
    if (name.empty()) fail_at(t.record_offset, field + " name", "empty tensor name");
    if (name.size() > kMaxTensorName) {
      fail_at(t.record_offset, field + " name", "name \"{}...\" is {} bytes, the limit is {}",
              printable(name.substr(0, 32)), name.size(), kMaxTensorName);
    }
    if (name.find('\0') != std::string_view::npos) {
      fail_at(t.record_offset, field + " name", "name \"{}\" contains a NUL byte", printable(name));
    }
    if (!valid_utf8(name)) {
      fail_at(t.record_offset, field + " name", "name \"{}\" is not valid UTF-8", printable(name));
    }
    field = fmt::format("tensor '{}'", name);
    if (f_.index_->tensors.contains(name)) fail_at(t.record_offset, field, "duplicate tensor name");
    t.name = std::string(name);

    uint64_t at = pos_;
    uint32_t n_dims = read<uint32_t>(field + " n_dims");
    if (n_dims < 1 || n_dims > 4) {
      fail_at(at, field + " n_dims", "{} dimensions, must be 1 to 4", n_dims);
    }
    t.n_dims = n_dims;
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      at = pos_;
      int64_t ne = read<int64_t>(field + " ne");
      if (ne < 0) fail_at(at, fmt::format("{} ne[{}]", field, d), "negative dimension {}", ne);
      t.ne[d] = ne;
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(ne), &elements) ||
          elements >= static_cast<uint64_t>(INT64_MAX)) {
        fail_at(at, fmt::format("{} ne[{}]", field, d), "element count overflows 64 bits");
      }
    }
    at = pos_;
    uint32_t type_id = read<uint32_t>(field + " type");
    const TypeTraits& tr = type_traits(type_id);
    if (tr.removed) {
      fail_at(at, field + " type", "type id {} ({}) was removed from the format", type_id,
              tr.name.empty() ? "retired" : tr.name);
    }
    if (!tr.known || tr.block_size <= 0) {
      fail_at(at, field + " type", "unknown tensor type id {}", type_id);
    }
    t.type = static_cast<GgmlType>(type_id);
    if (t.ne[0] % tr.block_size != 0) {
      fail_at(at, field + " type", "row length {} is not a multiple of the {} block size {}",
              t.ne[0], tr.name, tr.block_size);
    }
    uint64_t nbytes = static_cast<uint64_t>(t.ne[0] / tr.block_size);
    bool ovf = __builtin_mul_overflow(nbytes, static_cast<uint64_t>(tr.type_size), &nbytes);
    for (int d = 1; d < 4; ++d) {
      ovf = ovf || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(t.ne[d]), &nbytes);
    }
    if (ovf) fail_at(at, field + " type", "byte size overflows 64 bits");
    t.nbytes = nbytes;
    at = pos_;
    t.offset = read<uint64_t>(field + " offset");
    f_.tensors_.push_back(std::move(t));
    f_.index_->tensors.emplace(name, i);  // view into the image
  }
}

// gguf.cpp's rule (the one llama.cpp enforces): payloads follow the records in order, each at
// the running sum of the previous padded sizes. We name the exact way a file breaks it.
void Parser::place_tensors() {
  const uint64_t a = f_.alignment_;
  uint64_t end_of_records = pos_;
  uint64_t data = align_up(end_of_records, a);
  if (n_tensors_ == 0) {
    // Metadata-only file: writers pad, gguf.cpp does not; accept both.
    f_.data_offset_ = std::min(data, size_);
    return;
  }
  if (data > size_) {
    fail_at(end_of_records, "data section",
            "file ends at byte {}, before the {}-aligned data start {}", size_, a, data);
  }
  f_.data_offset_ = data;
  uint64_t expected = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : f_.tensors_) {
    uint64_t at = t.record_offset + 8 + t.name.size() + 4 + 8 * t.n_dims + 4;
    std::string field = fmt::format("tensor '{}' offset", t.name);
    if (t.offset % a != 0) {
      fail_at(at, field, "data offset {} is not a multiple of the alignment {}", t.offset, a);
    }
    if (t.offset < expected) {
      fail_at(at, field, "data at offset {} overlaps tensor '{}' (which ends at {})", t.offset,
              prev->name, prev->offset + prev->nbytes);
    }
    if (t.offset > expected) {
      fail_at(at, field, "data offset {} leaves a gap: expected {} (payloads must be contiguous)",
              t.offset, expected);
    }
    uint64_t end;
    if (__builtin_add_overflow(data, t.offset, &end) ||
        __builtin_add_overflow(end, t.nbytes, &end) || end > size_) {
      fail_at(at, field, "data ({} bytes at file byte {}) runs past the end of the file (size {})",
              t.nbytes, data + t.offset, size_);
    }
    uint64_t padded = align_up(t.nbytes, a);
    if (padded < t.nbytes || __builtin_add_overflow(expected, padded, &expected)) {
      fail_at(at, field, "data size overflows 64 bits");
    }
    prev = &t;
  }
}

void Parser::collect_warnings() {
  const uint64_t a = f_.alignment_;
  auto& w = f_.warnings_;
  if (a < 32) {
    w.push_back(
        fmt::format("alignment {} is below 32: llama.cpp's mmap CPU path needs 32-byte "
                    "aligned tensor data",
                    a));
  }
  if (!zeros(pos_, f_.data_offset_)) {
    w.push_back(
        fmt::format("non-zero padding between byte {} and the data at {}", pos_, f_.data_offset_));
  }
  uint64_t end = f_.data_offset_;
  bool reported = false;
  for (const TensorInfo& t : f_.tensors_) {
    const uint64_t payload_end = f_.data_offset_ + t.offset + t.nbytes;
    end = f_.data_offset_ + t.offset + align_up(t.nbytes, a);
    if (!reported && !zeros(payload_end, end)) {
      w.push_back(fmt::format("non-zero padding after tensor '{}'", t.name));
      reported = true;
    }
  }
  if (end > size_) {
    w.push_back(
        fmt::format("the file ends {} bytes short of the last tensor's padding "
                    "(gguf.cpp's payload-loading mode rejects this)",
                    end - size_));
  } else if (end < size_ && !f_.tensors_.empty()) {
    w.push_back(
        fmt::format("{} bytes after the end of the tensor data (byte {})", size_ - end, end));
  }
}

void Parser::run() {
  read_header();
  read_kvs();
  read_tensors();
  place_tensors();
  collect_warnings();
}

// ---- File ---------------------------------------------------------------------------------------

std::unique_ptr<File> File::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail("{}: cannot stat: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  f->mapping_ = std::make_unique<Mapping>();
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* addr = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      fail("{}: cannot mmap {} bytes: {}", path, f->size_, std::strerror(e));
    }
    f->mapping_->addr = addr;
    f->mapping_->length = f->size_;
    f->mapping_->mapped = true;
    f->base_ = static_cast<const uint8_t*>(addr);
  }
  ::close(fd);
  f->index_ = std::make_unique<Index>();
  Parser(*f, f->base_, f->size_).run();
  return f;
}

std::unique_ptr<File> File::parse(std::span<const uint8_t> bytes, std::string name) {
  std::unique_ptr<File> f(new File());
  f->path_ = std::move(name);
  f->mapping_ = std::make_unique<Mapping>();
  f->size_ = bytes.size();
  if (!bytes.empty()) {
    void* copy = ::operator new (bytes.size(), std::align_val_t{64});
    std::memcpy(copy, bytes.data(), bytes.size());
    f->mapping_->addr = copy;
    f->mapping_->length = bytes.size();
    f->base_ = static_cast<const uint8_t*>(copy);
  }
  f->index_ = std::make_unique<Index>();
  Parser(*f, f->base_, f->size_).run();
  return f;
}

const Value* File::find(std::string_view key) const {
  auto it = index_->keys.find(key);
  return it == index_->keys.end() ? nullptr : &kv_[it->second].value;
}

namespace {
[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const Value& v,
                             std::string_view expected) {
  fail("{}: key '{}': has type {}, expected {}", path, key, value_type_name(v.type), expected);
}
}  // namespace

std::optional<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) wrong_type(path_, key, *v, "an integer");
  auto i = v->as_int();
  if (!i)
    fail("{}: key '{}': value {} does not fit in int64", path_, key, std::get<uint64_t>(v->data));
  return i;
}

std::optional<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_float() && !v->is_integer()) wrong_type(path_, key, *v, "a number");
  return v->as_float();
}

std::optional<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) wrong_type(path_, key, *v, "bool");
  return std::get<bool>(v->data);
}

std::optional<std::string> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING) wrong_type(path_, key, *v, "string");
  return *v->as_string();
}

const Array* File::get_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return nullptr;
  if (v->type != ValueType::ARRAY) wrong_type(path_, key, *v, "array");
  return v->as_array();
}

std::string File::architecture() const {
  return get_string("general.architecture").value_or("");
}

std::optional<int64_t> File::get_arch_int(std::string_view suffix) const {
  return get_int(architecture() + "." + std::string(suffix));
}

std::optional<double> File::get_arch_float(std::string_view suffix) const {
  return get_float(architecture() + "." + std::string(suffix));
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = index_->tensors.find(name);
  return it == index_->tensors.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* File::tensor_data(const TensorInfo& t) const {
  return base_ + data_offset_ + t.offset;
}

}  // namespace boltrt::gguf
