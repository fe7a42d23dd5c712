// Byte-level GGUF builder for reader tests: every field is explicit, so a test can break exactly
// one thing (a count, a length, a type id, an offset) and know the byte offset of the field it
// broke. Header-only; used by tests/test_gguf_*.cpp and the fuzz seed maker.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace boltrt::test {

class Bytes {
 public:
  std::vector<uint8_t> data;
  size_t size() const { return data.size(); }
  template <typename T>
  Bytes& pod(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    data.insert(data.end(), b, b + sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return pod(v); }
  Bytes& u32(uint32_t v) { return pod(v); }
  Bytes& i32(int32_t v) { return pod(v); }
  Bytes& u64(uint64_t v) { return pod(v); }
  Bytes& i64(int64_t v) { return pod(v); }
  Bytes& f32(float v) { return pod(v); }
  Bytes& raw(const std::string& s) {
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& str(const std::string& s) {
    u64(s.size());
    return raw(s);
  }
  Bytes& append(const Bytes& o) {
    data.insert(data.end(), o.data.begin(), o.data.end());
    return *this;
  }
  Bytes& zeros(size_t n) {
    data.insert(data.end(), n, 0);
    return *this;
  }
};

struct RawKv {
  std::string key;
  uint32_t type = 4;  // UINT32
  Bytes payload;      // the value's bytes (for arrays: elem type, count, elements)
};

struct RawTensor {
  std::string name;
  uint32_t n_dims = 1;
  std::vector<int64_t> ne = {8};
  uint32_t type = 0;               // F32
  std::optional<uint64_t> offset;  // default: running padded sum
  uint64_t nbytes = 0;             // payload bytes to reserve (default from ne for F32/I8)
};

// A GGUF image with explicit fields; build() lays it out and remembers where things went.
struct RawFile {
  std::string magic = "GGUF";
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count, kv_count;  // default: the real counts
  std::vector<RawKv> kvs;
  std::vector<RawTensor> tensors;
  uint64_t alignment = 32;  // used for padding (independently of any general.alignment key)
  bool pad_after_last = true;

  // Filled by build():
  std::vector<size_t> kv_offsets, tensor_offsets;  // where each entry / record starts
  size_t data_offset = 0;

  static uint64_t align(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

  std::vector<uint8_t> build() {
    Bytes b;
    b.raw(magic).u32(version);
    b.u64(tensor_count.value_or(tensors.size()));
    b.u64(kv_count.value_or(kvs.size()));
    kv_offsets.clear();
    tensor_offsets.clear();
    for (const RawKv& kv : kvs) {
      kv_offsets.push_back(b.size());
      b.str(kv.key).u32(kv.type).append(kv.payload);
    }
    uint64_t running = 0;
    std::vector<uint64_t> sizes;
    for (const RawTensor& t : tensors) {
      tensor_offsets.push_back(b.size());
      b.str(t.name).u32(t.n_dims);
      for (uint32_t d = 0; d < t.n_dims && d < t.ne.size(); ++d) b.i64(t.ne[d]);
      b.u32(t.type);
      uint64_t n = t.nbytes;
      if (n == 0 && (t.type == 0 || t.type == 24)) {
        n = t.type == 0 ? 4 : 1;
        for (uint32_t d = 0; d < t.n_dims && d < t.ne.size(); ++d)
          n *= static_cast<uint64_t>(t.ne[d]);
      }
      sizes.push_back(n);
      b.u64(t.offset.value_or(running));
      running += align(n, alignment);
    }
    data_offset = align(b.size(), alignment);
    b.zeros(data_offset - b.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      for (uint64_t k = 0; k < sizes[i]; ++k) b.u8(static_cast<uint8_t>(i * 31 + k));
      if (pad_after_last || i + 1 < sizes.size()) b.zeros(align(sizes[i], alignment) - sizes[i]);
    }
    return b.data;
  }
};

inline RawKv kv_u32(const std::string& key, uint32_t v) {
  RawKv kv{key, 4, {}};
  kv.payload.u32(v);
  return kv;
}
inline RawKv kv_string(const std::string& key, const std::string& v) {
  RawKv kv{key, 8, {}};
  kv.payload.str(v);
  return kv;
}

}  // namespace boltrt::test
