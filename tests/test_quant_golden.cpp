// boltrt's conversions, dequantizers and quantizers against llama.cpp's own outputs recorded in
// tests/data/quant/goldens.bin (made by tests/data/quant/make_goldens.cpp; format described
// there). Every comparison is exact: fp32 bit patterns and quantized bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "quant/dequantize.h"
#include "quant/fp16.h"
#include "quant/ggml_type.h"
#include "quant/quantize.h"
#include "support/paths.h"

namespace boltrt {
namespace {

struct Record {
  uint32_t kind, type, aux, count;
  std::vector<uint8_t> payload;
};

enum Kind : uint32_t { kInput = 1, kDecode = 2, kEncode = 3, kHash = 4, kWeighted = 5 };

const std::vector<Record>& golden_records() {
  static const std::vector<Record> records = [] {
    const std::string path = test::source_dir() + "/tests/data/quant/goldens.bin";
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    std::vector<Record> out;
    if (bytes.size() < 8 || std::memcmp(bytes.data(), "BQGOLD01", 8) != 0) {
      ADD_FAILURE() << "missing or corrupt " << path;
      return out;
    }
    size_t pos = 8;
    while (pos + 24 <= bytes.size()) {
      Record r;
      uint64_t size;
      std::memcpy(&r.kind, &bytes[pos], 4);
      std::memcpy(&r.type, &bytes[pos + 4], 4);
      std::memcpy(&r.aux, &bytes[pos + 8], 4);
      std::memcpy(&r.count, &bytes[pos + 12], 4);
      std::memcpy(&size, &bytes[pos + 16], 8);
      pos += 24;
      if (size > bytes.size() - pos) {
        ADD_FAILURE() << "truncated record in " << path;
        break;
      }
      r.payload.assign(bytes.begin() + static_cast<std::ptrdiff_t>(pos),
                       bytes.begin() + static_cast<std::ptrdiff_t>(pos + size));
      pos += size;
      out.push_back(std::move(r));
    }
    return out;
  }();
  return records;
}

std::vector<float> as_floats(const uint8_t* p, size_t n) {
  std::vector<float> v(n);
  std::memcpy(v.data(), p, n * 4);
  return v;
}

const Record* find_input(uint32_t set) {
  for (const Record& r : golden_records()) {
    if (r.kind == kInput && r.aux == set) return &r;
  }
  return nullptr;
}

// Same generator and sample stream as make_goldens.cpp.
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
uint64_t mix(uint64_t h, uint64_t v) {
  return (h ^ v) * 0x100000001B3ull;
}
constexpr uint64_t kHashStart = 0xCBF29CE484222325ull;

template <typename F>
uint64_t sample_inputs(F&& f) {
  uint64_t count = 0;
  for (uint32_t i = 0; i < (1u << 24); ++i) {
    f(i << 8);
    f((i << 8) | static_cast<uint32_t>(splitmix64(i) & 0xFF));
    count += 2;
  }
  for (uint32_t i = 0; i < (1u << 19); ++i) {
    f((i << 13) | 0x0FFFu);
    f((i << 13) | 0x1000u);
    f((i << 13) | 0x1001u);
    count += 3;
  }
  return count;
}

TEST(QuantGolden, FileHasEveryRecordKind) {
  int counts[6] = {};
  for (const Record& r : golden_records()) {
    ASSERT_GE(r.kind, 1u);
    ASSERT_LE(r.kind, 5u);
    counts[r.kind]++;
  }
  EXPECT_EQ(counts[kInput], 6);  // 3 input sets + their importance rows
  EXPECT_EQ(counts[kWeighted], 3 * 11);
  EXPECT_EQ(counts[kDecode], 15);
  EXPECT_EQ(counts[kEncode], 3 * 15 + 2);
  EXPECT_EQ(counts[kHash], 3);
}

TEST(QuantGolden, Fp16AndBf16ConversionsMatchGgml) {
  for (const Record& r : golden_records()) {
    if (r.kind != kHash) continue;
    uint64_t expected;
    std::memcpy(&expected, r.payload.data(), 8);
    uint64_t h = kHashStart, count = 0;
    if (r.aux == 0) {
      for (uint32_t v = 0; v < 65536; ++v) {
        h = mix(h, float_bits(fp16_to_fp32(static_cast<uint16_t>(v))));
      }
      count = 65536;
    } else if (r.aux == 1) {
      count = sample_inputs([&](uint32_t u) { h = mix(h, fp32_to_fp16(float_from_bits(u))); });
    } else {
      count = sample_inputs([&](uint32_t u) { h = mix(h, fp32_to_bf16(float_from_bits(u))); });
    }
    EXPECT_EQ(count, r.count) << "conversion " << r.aux;
    EXPECT_EQ(h, expected) << "conversion " << r.aux << " differs from ggml";
  }
}

TEST(QuantGolden, DequantizeIsBitExact) {
  int checked = 0;
  for (const Record& r : golden_records()) {
    if (r.kind != kDecode) continue;
    const auto type = static_cast<GgmlType>(r.type);
    const size_t bytes = row_size(type, r.count);
    ASSERT_EQ(r.payload.size(), bytes + 4 * static_cast<size_t>(r.count));
    const std::vector<float> expected = as_floats(r.payload.data() + bytes, r.count);
    std::vector<float> got(r.count);
    // Decode from an odd address: blocks in a GGUF row are not aligned.
    std::vector<uint8_t> shifted(bytes + 1);
    std::memcpy(shifted.data() + 1, r.payload.data(), bytes);
    const void* src = type == GgmlType::Q8_K ? r.payload.data() : shifted.data() + 1;
    dequantize_row(type, src, got.data(), r.count);
    int mismatches = 0;
    for (uint32_t i = 0; i < r.count && mismatches < 5; ++i) {
      if (float_bits(got[i]) != float_bits(expected[i])) {
        ++mismatches;
        ADD_FAILURE() << type_traits(type).name << " element " << i << ": got " << got[i]
                      << " expected " << expected[i];
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 15);
}

TEST(QuantGolden, QuantizeIsByteIdentical) {
  int checked = 0;
  for (const Record& r : golden_records()) {
    if (r.kind != kEncode) continue;
    const auto type = static_cast<GgmlType>(r.type);
    const Record* input = find_input(r.aux);
    ASSERT_NE(input, nullptr);
    const int64_t n = r.count;
    const size_t rows = input->payload.size() / 4 / static_cast<size_t>(n);
    const std::vector<float> x = as_floats(input->payload.data(), rows * static_cast<size_t>(n));
    const size_t row_bytes = row_size(type, n);
    ASSERT_EQ(r.payload.size(), rows * row_bytes) << type_traits(type).name;
    std::vector<uint32_t> storage(row_bytes / 4 + 1);  // 4-byte aligned for Q8_K
    auto* q = reinterpret_cast<uint8_t*>(storage.data());
    for (size_t row = 0; row < rows; ++row) {
      const uint8_t* expected = r.payload.data() + row * row_bytes;
      ASSERT_EQ(quantize_row(type, x.data() + row * n, q, n), row_bytes);
      const size_t block_bytes = type_traits(type).type_size;
      for (size_t b = 0; b < row_bytes; ++b) {
        if (q[b] != expected[b]) {
          ADD_FAILURE() << type_traits(type).name << " set " << r.aux << " row " << row << " block "
                        << b / block_bytes << " byte " << b % block_bytes << ": got 0x" << std::hex
                        << int{q[b]} << " expected 0x" << int{expected[b]} << std::dec;
          break;
        }
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 3 * 15 + 2);
}

// ggml_quantize_chunk with an imatrix (llama-quantize --imatrix): same bytes.
TEST(QuantGolden, WeightedQuantizeIsByteIdentical) {
  int checked = 0;
  for (const Record& r : golden_records()) {
    if (r.kind != kWeighted) continue;
    const auto type = static_cast<GgmlType>(r.type);
    const Record* input = find_input(r.aux);
    const Record* importance = find_input(r.aux + 10);
    ASSERT_NE(input, nullptr);
    ASSERT_NE(importance, nullptr);
    const int64_t n = r.count;
    const size_t rows = input->payload.size() / 4 / static_cast<size_t>(n);
    const std::vector<float> x = as_floats(input->payload.data(), rows * static_cast<size_t>(n));
    const std::vector<float> qw = as_floats(importance->payload.data(), static_cast<size_t>(n));
    const size_t row_bytes = row_size(type, n);
    ASSERT_EQ(r.payload.size(), rows * row_bytes) << type_traits(type).name;
    std::vector<uint8_t> q(row_bytes);
    for (size_t row = 0; row < rows; ++row) {
      quantize_row(type, x.data() + row * n, q.data(), n, qw.data());
      const uint8_t* expected = r.payload.data() + row * row_bytes;
      const size_t block_bytes = type_traits(type).type_size;
      for (size_t b = 0; b < row_bytes; ++b) {
        if (q[b] != expected[b]) {
          ADD_FAILURE() << type_traits(type).name << " (imatrix) set " << r.aux << " row " << row
                        << " block " << b / block_bytes << " byte " << b % block_bytes << ": got 0x"
                        << std::hex << int{q[b]} << " expected 0x" << int{expected[b]} << std::dec;
          break;
        }
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 33);
}

// Root-mean-square error of llama.cpp's quantization of each input set (from the golden
// bytes) against ours: within 2% (equal when the bytes are identical, which the test above
// also demands; this one bounds the damage of any future divergence).
TEST(QuantGolden, RmseWithinTwoPercentOfLlamaCpp) {
  for (const Record& r : golden_records()) {
    if (r.kind != kEncode || r.aux == 0) continue;  // sets 1 (Gaussian) and 2 (Student-t)
    const auto type = static_cast<GgmlType>(r.type);
    if (type == GgmlType::Q8_1) continue;  // activation-only: ggml has no dequantizer for it
    const Record* input = find_input(r.aux);
    ASSERT_NE(input, nullptr);
    const int64_t n = r.count;
    const size_t rows = input->payload.size() / 4 / static_cast<size_t>(n);
    const std::vector<float> x = as_floats(input->payload.data(), rows * static_cast<size_t>(n));
    const size_t row_bytes = row_size(type, n);
    std::vector<uint32_t> storage(row_bytes / 4 + 1);
    auto* q = reinterpret_cast<uint8_t*>(storage.data());
    std::vector<float> ours(static_cast<size_t>(n)), theirs(static_cast<size_t>(n));
    double err_ours = 0, err_theirs = 0;
    for (size_t row = 0; row < rows; ++row) {
      const float* xr = x.data() + row * n;
      quantize_row(type, xr, q, n);
      dequantize_row(type, q, ours.data(), n);
      std::memcpy(q, r.payload.data() + row * row_bytes, row_bytes);
      dequantize_row(type, q, theirs.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        err_ours += (double{ours[i]} - xr[i]) * (double{ours[i]} - xr[i]);
        err_theirs += (double{theirs[i]} - xr[i]) * (double{theirs[i]} - xr[i]);
      }
    }
    const double count = static_cast<double>(rows) * static_cast<double>(n);
    const double rmse_ours = std::sqrt(err_ours / count);
    const double rmse_theirs = std::sqrt(err_theirs / count);
    EXPECT_GT(rmse_theirs, 0.0);
    EXPECT_LE(rmse_ours, rmse_theirs * 1.02)
        << type_traits(type).name << " set " << r.aux << ": ours " << rmse_ours << " llama.cpp "
        << rmse_theirs;
  }
}

}  // namespace
}  // namespace boltrt
