// convert_tensor(): row-parallel conversion gives the same bytes as quantize_row on each row,
// for any thread count, from F32/F16/BF16 and quantized sources.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "quant/quantize_tensor.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt {
namespace {

std::vector<float> gaussian(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

std::vector<uint8_t> row_by_row(GgmlType to, const std::vector<float>& x, int64_t n, int64_t rows) {
  const size_t rs = row_size(to, n);
  std::vector<uint8_t> out(rs * static_cast<size_t>(rows));
  std::vector<uint32_t> tmp(rs / 4 + 1);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(to, x.data() + r * n, tmp.data(), n);
    std::memcpy(out.data() + static_cast<size_t>(r) * rs, tmp.data(), rs);
  }
  return out;
}

TEST(ConvertTensor, ThreadCountDoesNotChangeBytes) {
  const int64_t n = 512, rows = 37;
  const auto x = gaussian(static_cast<size_t>(n * rows), 3);
  for (GgmlType to : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_0,
                      GgmlType::Q5_0, GgmlType::F16, GgmlType::Q8_K}) {
    const auto expected = row_by_row(to, x, n, rows);
    for (int threads : {1, 2, 5}) {
      ThreadPool pool(threads);
      std::vector<uint8_t> got(expected.size());
      convert_tensor("t", GgmlType::F32, x.data(), to, got.data(), n, rows, &pool);
      EXPECT_EQ(got, expected) << type_traits(to).name << " threads " << threads;
    }
  }
}

TEST(ConvertTensor, FromHalfAndQuantizedSources) {
  const int64_t n = 256, rows = 9;
  const auto x = gaussian(static_cast<size_t>(n * rows), 4);
  for (GgmlType from : {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
    std::vector<uint8_t> src(row_size(from, n) * rows);
    convert_tensor("src", GgmlType::F32, x.data(), from, src.data(), n, rows, nullptr);
    std::vector<float> y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(from, src.data() + r * row_size(from, n), y.data() + r * n, n);
    }
    const auto expected = row_by_row(GgmlType::Q4_K, y, n, rows);
    std::vector<uint8_t> got(expected.size());
    ThreadPool pool(2);
    convert_tensor("t", from, src.data(), GgmlType::Q4_K, got.data(), n, rows, &pool);
    EXPECT_EQ(got, expected) << type_traits(from).name;
  }
}

TEST(ConvertTensor, ImportancePerExpertSlice) {
  const int64_t n = 256, rows_per_slice = 4, slices = 3, rows = rows_per_slice * slices;
  const auto x = gaussian(static_cast<size_t>(n * rows), 6);
  std::vector<float> qw(static_cast<size_t>(n * slices));
  for (size_t i = 0; i < qw.size(); ++i) qw[i] = 0.5f + static_cast<float>(i % 7);
  const size_t rs = row_size(GgmlType::Q4_K, n);
  std::vector<uint8_t> expected(rs * rows);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(GgmlType::Q4_K, x.data() + r * n, expected.data() + r * rs, n,
                 qw.data() + (r / rows_per_slice) * n);
  }
  ThreadPool pool(3);
  // In two calls, the second starting at row 5 (first_row keeps the slices aligned).
  std::vector<uint8_t> got(expected.size());
  convert_tensor("t", GgmlType::F32, x.data(), GgmlType::Q4_K, got.data(), n, 5, &pool, qw.data(),
                 rows_per_slice, 0);
  convert_tensor("t", GgmlType::F32, x.data() + 5 * n, GgmlType::Q4_K, got.data() + 5 * rs, n,
                 rows - 5, &pool, qw.data(), rows_per_slice, 5);
  EXPECT_EQ(got, expected);
  std::vector<uint8_t> plain(expected.size());
  convert_tensor("t", GgmlType::F32, x.data(), GgmlType::Q4_K, plain.data(), n, rows, &pool);
  EXPECT_NE(plain, expected);  // the weights do change the result
}

TEST(ConvertTensor, ErrorNamesTensorAndRow) {
  const int64_t n = 256, rows = 4;
  auto x = gaussian(static_cast<size_t>(n * rows), 5);
  x[2 * n + 7] = NAN;
  std::vector<uint8_t> out(row_size(GgmlType::Q4_K, n) * rows);
  ThreadPool pool(2);
  try {
    convert_tensor("blk.3.ffn_up.weight", GgmlType::F32, x.data(), GgmlType::Q4_K, out.data(), n,
                   rows, &pool);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("blk.3.ffn_up.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("row 2"), std::string::npos) << m;
    EXPECT_NE(m.find("element 7"), std::string::npos) << m;
  }
  EXPECT_THROW(
      convert_tensor("t", GgmlType::F32, x.data(), GgmlType::Q4_K, out.data(), 100, 1, nullptr),
      Error);
  EXPECT_THROW(
      convert_tensor("t", GgmlType::IQ2_XXS, x.data(), GgmlType::Q4_K, out.data(), 256, 1, nullptr),
      Error);
}

}  // namespace
}  // namespace boltrt
