#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace boltrt::gguf {

struct Writer::Tensor {
  std::string name;
  GgmlType type;
  uint32_t n_dims;
  int64_t ne[4];
  uint64_t nbytes;
  TensorProducer producer;
};

namespace {

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) & ~(a - 1);
}

// Byte size of a value's payload (without the key and the value-type tag).
uint64_t value_size(const Value& v) {
  switch (v.type) {
    case ValueType::STRING:
      return 8 + v.as_string()->size();
    case ValueType::ARRAY: {
      uint64_t n = value_type_min_size(ValueType::ARRAY);
      for (const Value& e : v.as_array()->items) n += value_size(e);
      return n;
    }
    default:
      return value_type_min_size(v.type);
  }
}

// Checks that the variant alternative matches the declared type, recursively, so emit() never
// has to guess.
void check_value(const std::string& key, const Value& v, int depth) {
  bool ok = false;
  switch (v.type) {
    case ValueType::UINT8:
    case ValueType::UINT16:
    case ValueType::UINT32:
    case ValueType::UINT64:
      ok = std::holds_alternative<uint64_t>(v.data);
      break;
    case ValueType::INT8:
    case ValueType::INT16:
    case ValueType::INT32:
    case ValueType::INT64:
      ok = std::holds_alternative<int64_t>(v.data);
      break;
    case ValueType::FLOAT32:
    case ValueType::FLOAT64:
      ok = std::holds_alternative<double>(v.data);
      break;
    case ValueType::BOOL:
      ok = std::holds_alternative<bool>(v.data);
      break;
    case ValueType::STRING:
      ok = std::holds_alternative<std::string>(v.data);
      break;
    case ValueType::ARRAY: {
      const Array* a = v.as_array();
      ok = a != nullptr;
      if (ok && a->type == ValueType::ARRAY && depth + 1 >= kMaxArrayDepth) {
        fail("gguf writer: key '{}': arrays nested deeper than {} levels", key, kMaxArrayDepth);
      }
      if (ok) {
        for (const Value& e : a->items) {
          if (e.type != a->type) {
            fail("gguf writer: key '{}': array of {} holds a {}", key, value_type_name(a->type),
                 value_type_name(e.type));
          }
          check_value(key, e, depth + 1);
        }
      }
      break;
    }
  }
  if (!ok) fail("gguf writer: key '{}': value does not hold a {}", key, value_type_name(v.type));
}

class Emitter {
 public:
  explicit Emitter(TensorSink& out) : out_(out) {}
  template <typename T>
  void pod(T v) {
    out_.write(&v, sizeof v);
  }
  void str(std::string_view s) {
    pod<uint64_t>(s.size());
    out_.write(s.data(), s.size());
  }
  void payload(const Value& v) {
    switch (v.type) {
      case ValueType::UINT8:
        pod<uint8_t>(static_cast<uint8_t>(std::get<uint64_t>(v.data)));
        break;
      case ValueType::INT8:
        pod<int8_t>(static_cast<int8_t>(std::get<int64_t>(v.data)));
        break;
      case ValueType::UINT16:
        pod<uint16_t>(static_cast<uint16_t>(std::get<uint64_t>(v.data)));
        break;
      case ValueType::INT16:
        pod<int16_t>(static_cast<int16_t>(std::get<int64_t>(v.data)));
        break;
      case ValueType::UINT32:
        pod<uint32_t>(static_cast<uint32_t>(std::get<uint64_t>(v.data)));
        break;
      case ValueType::INT32:
        pod<int32_t>(static_cast<int32_t>(std::get<int64_t>(v.data)));
        break;
      case ValueType::UINT64:
        pod<uint64_t>(std::get<uint64_t>(v.data));
        break;
      case ValueType::INT64:
        pod<int64_t>(std::get<int64_t>(v.data));
        break;
      case ValueType::FLOAT32:
        pod<float>(static_cast<float>(std::get<double>(v.data)));
        break;
      case ValueType::FLOAT64:
        pod<double>(std::get<double>(v.data));
        break;
      case ValueType::BOOL:
        pod<uint8_t>(std::get<bool>(v.data) ? 1 : 0);
        break;
      case ValueType::STRING:
        str(*v.as_string());
        break;
      case ValueType::ARRAY: {
        const Array& a = *v.as_array();
        pod<uint32_t>(static_cast<uint32_t>(a.type));
        pod<uint64_t>(a.items.size());
        for (const Value& e : a.items) payload(e);
        break;
      }
    }
  }
  void zeros(uint64_t n) {
    static const uint8_t kZero[256] = {};
    while (n > 0) {
      size_t k = n < sizeof kZero ? n : sizeof kZero;
      out_.write(kZero, k);
      n -= k;
    }
  }

 private:
  TensorSink& out_;
};

// Counts what a producer emits and refuses more than the tensor's size.
class CountingSink final : public TensorSink {
 public:
  CountingSink(TensorSink& out, const std::string& name, uint64_t limit)
      : out_(out), name_(name), limit_(limit) {}
  void write(const void* data, size_t n) override {
    if (n > limit_ - count_) {
      fail("gguf writer: tensor '{}': producer wrote more than its {} bytes", name_, limit_);
    }
    out_.write(data, n);
    count_ += n;
  }
  uint64_t count() const { return count_; }

 private:
  TensorSink& out_;
  const std::string& name_;
  uint64_t limit_;
  uint64_t count_ = 0;
};

// Buffered writes to a descriptor; any failure names the file and the byte count reached.
// Buffers writes; a whole buffer of zero bytes becomes a hole (lseek) in a regular file, so
// layout-only models (Gemma4SynthOptions::zero_weights) of tens of GB take no disk.
class FdSink final : public TensorSink {
 public:
  FdSink(int fd, const std::string& name) : fd_(fd), name_(name) {
    buffer_.reserve(kBuffer);
    struct stat st {};
    sparse_ = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  }
  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      size_t k = std::min(n, kBuffer - buffer_.size());
      buffer_.insert(buffer_.end(), p, p + k);
      p += k;
      n -= k;
      if (buffer_.size() == kBuffer) flush();
    }
  }
  void flush() {
    const uint8_t* p = buffer_.data();
    size_t n = buffer_.size();
    if (sparse_ && n == kBuffer &&
        std::all_of(buffer_.begin(), buffer_.end(), [](uint8_t b) { return b == 0; })) {
      if (::lseek(fd_, static_cast<off_t>(n), SEEK_CUR) >= 0) {
        written_ += n;
        hole_at_end_ = true;
        buffer_.clear();
        return;
      }
    }
    if (n > 0) hole_at_end_ = false;
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        fail("{}: write failed after {} bytes: {}", name_, written_,
             w < 0 ? std::strerror(errno) : "no progress");
      }
      p += w;
      n -= static_cast<size_t>(w);
      written_ += static_cast<uint64_t>(w);
    }
    buffer_.clear();
  }
  // After the last flush: a file that ends in a hole gets its length.
  void finish() {
    flush();
    if (hole_at_end_ && ::ftruncate(fd_, static_cast<off_t>(::lseek(fd_, 0, SEEK_CUR))) != 0) {
      fail("{}: cannot extend to {} bytes: {}", name_, written_, std::strerror(errno));
    }
  }

 private:
  static constexpr size_t kBuffer = size_t{4} << 20;
  int fd_;
  const std::string& name_;
  std::vector<uint8_t> buffer_;
  uint64_t written_ = 0;
  bool sparse_ = false, hole_at_end_ = false;
};

class MemorySink final : public TensorSink {
 public:
  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + n);
  }
  std::vector<uint8_t> bytes;
};

}  // namespace

Writer::Writer(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) {
    fail("gguf writer: alignment {} is not a power of two up to {}", alignment, kMaxAlignment);
  }
  if (alignment != 32) set_u32("general.alignment", alignment);
}

Writer::~Writer() = default;

bool Writer::has(const std::string& key) const {
  for (const KeyValue& kv : kv_) {
    if (kv.key == key) return true;
  }
  return false;
}

void Writer::set(const std::string& key, Value value) {
  if (key.empty()) fail("gguf writer: empty key");
  for (char c : key) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      fail("gguf writer: key '{}' is not printable ASCII", key);
    }
  }
  check_value(key, value, 0);
  if (key == "general.alignment") {
    auto a = value.type == ValueType::UINT32 ? std::get<uint64_t>(value.data) : 0;
    if (a != alignment_) {
      fail("gguf writer: general.alignment must be the UINT32 {} given to the Writer", alignment_);
    }
  }
  for (KeyValue& kv : kv_) {
    if (kv.key == key) {
      if (key == "general.alignment") return;
      kv.value = std::move(value);  // replacing keeps the original position
      return;
    }
  }
  kv_.push_back({key, std::move(value), 0});
}

namespace {
Value make(ValueType t, std::variant<uint64_t, int64_t, double, bool, std::string, Array> d) {
  Value v;
  v.type = t;
  v.data = std::move(d);
  return v;
}
}  // namespace

void Writer::set_u8(const std::string& k, uint8_t v) {
  set(k, make(ValueType::UINT8, uint64_t{v}));
}
void Writer::set_i8(const std::string& k, int8_t v) {
  set(k, make(ValueType::INT8, int64_t{v}));
}
void Writer::set_u16(const std::string& k, uint16_t v) {
  set(k, make(ValueType::UINT16, uint64_t{v}));
}
void Writer::set_i16(const std::string& k, int16_t v) {
  set(k, make(ValueType::INT16, int64_t{v}));
}
void Writer::set_u32(const std::string& k, uint32_t v) {
  set(k, make(ValueType::UINT32, uint64_t{v}));
}
void Writer::set_i32(const std::string& k, int32_t v) {
  set(k, make(ValueType::INT32, int64_t{v}));
}
void Writer::set_u64(const std::string& k, uint64_t v) {
  set(k, make(ValueType::UINT64, v));
}
void Writer::set_i64(const std::string& k, int64_t v) {
  set(k, make(ValueType::INT64, v));
}
void Writer::set_f32(const std::string& k, float v) {
  set(k, make(ValueType::FLOAT32, double{v}));
}
void Writer::set_f64(const std::string& k, double v) {
  set(k, make(ValueType::FLOAT64, v));
}
void Writer::set_bool(const std::string& k, bool v) {
  set(k, make(ValueType::BOOL, v));
}
void Writer::set_string(const std::string& k, std::string v) {
  set(k, make(ValueType::STRING, std::move(v)));
}

void Writer::set_array_u32(const std::string& k, std::span<const uint32_t> v) {
  Array a{ValueType::UINT32, {}};
  for (uint32_t x : v) a.items.push_back(make(ValueType::UINT32, uint64_t{x}));
  set(k, make(ValueType::ARRAY, std::move(a)));
}
void Writer::set_array_i32(const std::string& k, std::span<const int32_t> v) {
  Array a{ValueType::INT32, {}};
  for (int32_t x : v) a.items.push_back(make(ValueType::INT32, int64_t{x}));
  set(k, make(ValueType::ARRAY, std::move(a)));
}
void Writer::set_array_f32(const std::string& k, std::span<const float> v) {
  Array a{ValueType::FLOAT32, {}};
  for (float x : v) a.items.push_back(make(ValueType::FLOAT32, double{x}));
  set(k, make(ValueType::ARRAY, std::move(a)));
}
void Writer::set_array_bool(const std::string& k, const std::vector<bool>& v) {
  Array a{ValueType::BOOL, {}};
  for (bool x : v) a.items.push_back(make(ValueType::BOOL, x));
  set(k, make(ValueType::ARRAY, std::move(a)));
}
void Writer::set_array_string(const std::string& k, const std::vector<std::string>& v) {
  Array a{ValueType::STRING, {}};
  a.items.reserve(v.size());
  for (const std::string& x : v) a.items.push_back(make(ValueType::STRING, x));
  set(k, make(ValueType::ARRAY, std::move(a)));
}

void Writer::add_tensor(const std::string& name, GgmlType type, std::initializer_list<int64_t> ne,
                        TensorProducer producer) {
  add_tensor(name, type, std::span<const int64_t>(ne.begin(), ne.size()), std::move(producer));
}

void Writer::add_tensor(const std::string& name, GgmlType type, std::span<const int64_t> ne,
                        TensorProducer producer) {
  if (name.empty() || name.size() > kMaxTensorName || name.find('\0') != std::string::npos) {
    fail("gguf writer: tensor name '{}' must be 1 to {} bytes without NUL", name, kMaxTensorName);
  }
  if (tensor_names_.contains(name)) fail("gguf writer: duplicate tensor name '{}'", name);
  if (ne.empty() || ne.size() > 4) {
    fail("gguf writer: tensor '{}': {} dimensions, must be 1 to 4", name, ne.size());
  }
  const TypeTraits& tr = type_traits(type);
  if (!tr.known || tr.removed || tr.block_size <= 0) {
    fail("gguf writer: tensor '{}': unusable type id {}", name, static_cast<uint32_t>(type));
  }
  Tensor t{name, type, static_cast<uint32_t>(ne.size()), {1, 1, 1, 1}, 0, std::move(producer)};
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) fail("gguf writer: tensor '{}': negative dimension {}", name, ne[d]);
    t.ne[d] = ne[d];
  }
  if (t.ne[0] % tr.block_size != 0) {
    fail("gguf writer: tensor '{}': row length {} is not a multiple of the {} block size {}", name,
         t.ne[0], tr.name, tr.block_size);
  }
  uint64_t nbytes = static_cast<uint64_t>(t.ne[0] / tr.block_size) * tr.type_size;
  bool ovf = false;
  for (int d = 1; d < 4; ++d) {
    ovf = ovf || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(t.ne[d]), &nbytes);
  }
  if (ovf) fail("gguf writer: tensor '{}': byte size overflows", name);
  t.nbytes = nbytes;
  tensors_.push_back(std::move(t));
  tensor_names_.insert(name);
}

void Writer::add_tensor_data(const std::string& name, GgmlType type, std::span<const int64_t> ne,
                             const void* data) {
  add_tensor(name, type, ne, nullptr);
  tensors_.back().producer = [data, n = tensors_.back().nbytes](TensorSink& sink) {
    sink.write(data, n);
  };
}

size_t Writer::tensor_count() const {
  return tensors_.size();
}

uint64_t Writer::data_offset() const {
  uint64_t n = 4 + 4 + 8 + 8;
  for (const KeyValue& kv : kv_) n += 8 + kv.key.size() + 4 + value_size(kv.value);
  for (const Tensor& t : tensors_) n += 8 + t.name.size() + 4 + 8 * t.n_dims + 4 + 8;
  return align_up(n, alignment_);
}

uint64_t Writer::file_size() const {
  uint64_t n = data_offset();
  for (const Tensor& t : tensors_) n += align_up(t.nbytes, alignment_);
  return n;
}

void Writer::emit(TensorSink& out) const {
  Emitter e(out);
  out.write("GGUF", 4);
  e.pod<uint32_t>(3);
  e.pod<uint64_t>(tensors_.size());
  e.pod<uint64_t>(kv_.size());
  uint64_t header = 24;
  for (const KeyValue& kv : kv_) {
    e.str(kv.key);
    e.pod<uint32_t>(static_cast<uint32_t>(kv.value.type));
    e.payload(kv.value);
    header += 8 + kv.key.size() + 4 + value_size(kv.value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    e.str(t.name);
    e.pod<uint32_t>(t.n_dims);
    for (uint32_t d = 0; d < t.n_dims; ++d) e.pod<int64_t>(t.ne[d]);
    e.pod<uint32_t>(static_cast<uint32_t>(t.type));
    e.pod<uint64_t>(offset);
    offset += align_up(t.nbytes, alignment_);
    header += 8 + t.name.size() + 4 + 8 * t.n_dims + 4 + 8;
  }
  e.zeros(align_up(header, alignment_) - header);
  for (const Tensor& t : tensors_) {
    CountingSink counted(out, t.name, t.nbytes);
    if (t.producer) t.producer(counted);
    if (counted.count() != t.nbytes) {
      fail("gguf writer: tensor '{}': producer wrote {} of its {} bytes", t.name, counted.count(),
           t.nbytes);
    }
    e.zeros(align_up(t.nbytes, alignment_) - t.nbytes);
  }
}

void Writer::write_fd(int fd, const std::string& name) const {
  FdSink sink(fd, name);
  emit(sink);
  sink.finish();
}

void Writer::write(const std::string& path) const {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A device or pipe (/dev/null, /dev/stdout): no temporary, no rename.
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail("{}: cannot open for writing: {}", path, std::strerror(errno));
    try {
      write_fd(fd, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    return;
  }
  std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", tmp, std::strerror(errno));
  try {
    write_fd(fd, path);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("{}: close failed: {}", path, std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("{}: cannot rename the finished temporary into place: {}", path, std::strerror(err));
  }
}

std::vector<uint8_t> Writer::write_to_memory() const {
  MemorySink sink;
  sink.bytes.reserve(file_size());
  emit(sink);
  return std::move(sink.bytes);
}

}  // namespace boltrt::gguf
