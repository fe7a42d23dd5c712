// Batch invariance of the CPU matmul: at every SIMD level, each output row's bits are those of a
// one-token, single-thread call over the whole matrix, whatever the batch size, the other
// activation rows in the batch, the row range (matmul_rows) and the thread count. Random batch
// compositions on awkward shapes (row counts that are not multiples of 16, block counts that are
// not multiples of 4), exact equality.
// Every weight type the CPU computes, at every level (scalar, AVX2, AVX-512 on x86-64; scalar,
// NEON, NEON with dotprod on aarch64; skipped where the CPU lacks one).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "matmul_test_util.h"
#include "runtime/thread_pool.h"

namespace boltrt {
namespace {

using test::matmul_block_bytes;
using test::matmul_block_elems;
using test::random_activations;
using test::random_weights;
using test::type_name;

struct Case {
  GgmlType type;
  SimdLevel level;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name =
      std::string(type_name(info.param.type)) + "_" + simd_level_name(info.param.level);
  // GoogleTest takes letters, digits and '_' only ("neon-dotprod" has a '-').
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class MatmulInvariance : public ::testing::TestWithParam<Case> {};

TEST_P(MatmulInvariance, EveryRowHasTheBitsOfAOneTokenCall) {
  const auto [t, level] = GetParam();
  const SimdLevel saved = simd_level();
  set_simd_level(level);
  if (simd_level() != level) {
    set_simd_level(saved);
    GTEST_SKIP() << simd_level_name(level) << " not available on this CPU";
  }
  ThreadPool pool(2);
  std::mt19937 rng(1234 + static_cast<uint32_t>(t) * 7 + static_cast<uint32_t>(level));
  uint32_t seed = 3;
  for (const int64_t cols : {32, 96, 256, 736, 2560}) {
    if (cols % matmul_block_elems(t) != 0) continue;
    for (const int64_t rows : {1, 7, 33, 130}) {
      const auto data = random_weights(t, rows, cols, seed++);
      const size_t stride =
          static_cast<size_t>(cols / matmul_block_elems(t)) * matmul_block_bytes(t);
      const WeightView w{t, data.data(), rows, cols, stride};
      constexpr int64_t kPool = 48;  // activation rows to draw batches from
      const auto x = random_activations(kPool * cols, seed++);
      std::vector<float> single(static_cast<size_t>(rows * kPool));
      for (int64_t b = 0; b < kPool; ++b)
        matmul(w, x.data() + b * cols, 1, single.data() + b * rows, nullptr);
      for (int trial = 0; trial < 6; ++trial) {
        // a batch of random size made of random activation rows (repeats allowed)
        static constexpr int64_t kSizes[] = {2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 40};
        const int64_t nb = kSizes[rng() % std::size(kSizes)];
        std::vector<int64_t> pick(static_cast<size_t>(nb));
        std::vector<float> batch_x(static_cast<size_t>(nb * cols));
        for (int64_t b = 0; b < nb; ++b) {
          pick[static_cast<size_t>(b)] = static_cast<int64_t>(rng() % kPool);
          std::memcpy(batch_x.data() + b * cols, x.data() + pick[static_cast<size_t>(b)] * cols,
                      static_cast<size_t>(cols) * sizeof(float));
        }
        int64_t r0 = 0, r1 = rows;
        if (trial % 2 == 1) {
          r0 = static_cast<int64_t>(rng() % static_cast<uint32_t>(rows));
          r1 = r0 + 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(rows - r0));
        }
        ThreadPool* p = trial % 3 == 0 ? nullptr : &pool;
        SCOPED_TRACE(std::string(type_name(t)) + " " + simd_level_name(level) + " rows " +
                     std::to_string(rows) + " [" + std::to_string(r0) + ", " + std::to_string(r1) +
                     ") cols " + std::to_string(cols) + " batch " + std::to_string(nb) +
                     (p ? " threads 2" : " threads 1"));
        const int64_t n = r1 - r0;
        std::vector<float> y(static_cast<size_t>(n * nb));
        matmul_rows(w, r0, r1, batch_x.data(), nb, y.data(), p);
        for (int64_t b = 0; b < nb; ++b) {
          for (int64_t r = 0; r < n; ++r) {
            const float want =
                single[static_cast<size_t>(pick[static_cast<size_t>(b)] * rows + r0 + r)];
            const float got = y[static_cast<size_t>(b * n + r)];
            ASSERT_EQ(0, std::memcmp(&want, &got, sizeof got))
                << "b " << b << " r " << r0 + r << ": " << got << " vs " << want;
          }
        }
      }
    }
  }
  set_simd_level(saved);
}

std::vector<Case> all_cases() {
  static constexpr GgmlType kTypes[] = {
      GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q4_0,
      GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::Q8_0,
      GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,   GgmlType::Q5_K,
      GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};
  std::vector<Case> out;
#if defined(__x86_64__) || defined(_M_X64)
  const SimdLevel levels[] = {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512};
#elif defined(__aarch64__)
  const SimdLevel levels[] = {SimdLevel::Scalar, SimdLevel::Neon, SimdLevel::NeonDot};
#else
  const SimdLevel levels[] = {SimdLevel::Scalar};
#endif
  for (const GgmlType t : kTypes) {
    for (const SimdLevel l : levels) out.push_back({t, l});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulInvariance, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace boltrt
