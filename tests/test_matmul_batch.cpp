// Batch invariance of matmul: at every SIMD level and for every weight type, each activation row
// of a batched call gets bit for bit the result of a batch-1 call, whatever the batch size, the
// other rows, the thread count or the row range. At AVX-512 the 16-row lane kernels run every
// batch, one row included; the row kernels (AVX2, NEON, scalar) give each activation row the
// operations of a batch-1 call. This is what makes a token's logits the same in decode, prompt
// micro-batches, speculative verify and multi-sequence batches (test_batch_invariance.cpp).
// Checked with exact equality on awkward shapes: row counts that are not multiples of 16 (the
// lane kernels' row group), batches on both sides of the kernels' 8-row activation groups, and
// row ranges that start inside a row group.
#include <gtest/gtest.h>

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

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q4_0,
                           GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::Q8_0,
                           GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,   GgmlType::Q5_K,
                           GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

std::vector<SimdLevel> available_levels() {
  std::vector<SimdLevel> levels;
  const SimdLevel saved = simd_level();
  for (SimdLevel l : {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512, SimdLevel::Neon,
                      SimdLevel::NeonDot}) {
    set_simd_level(l);
    if (simd_level() == l) levels.push_back(l);
  }
  set_simd_level(saved);
  return levels;
}

class MatmulBatch : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatmulBatch, EveryRowEqualsBatchOneBitForBit) {
  const GgmlType t = GetParam();
  const SimdLevel saved = simd_level();
  ThreadPool pool(3);
  uint32_t seed = 11;
  const int64_t kMaxBatch = 17;
  for (const SimdLevel level : available_levels()) {
    set_simd_level(level);
    for (const int64_t cols : {256, 768}) {
      if (cols % matmul_block_elems(t) != 0) continue;
      for (const int64_t rows : {1, 7, 37}) {
        const auto data = random_weights(t, rows, cols, seed++);
        const size_t stride =
            static_cast<size_t>(cols / matmul_block_elems(t)) * matmul_block_bytes(t);
        const WeightView w{t, data.data(), rows, cols, stride};
        const auto x = random_activations(kMaxBatch * cols, seed++);
        // batch-1 results, one activation row at a time, single thread
        std::vector<float> single(static_cast<size_t>(rows * kMaxBatch));
        for (int64_t b = 0; b < kMaxBatch; ++b)
          matmul(w, x.data() + b * cols, 1, single.data() + b * rows, nullptr);
        for (const int64_t nb : {2, 3, 4, 5, 8, 9, 16, 17}) {
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
            SCOPED_TRACE(std::string(simd_level_name(level)) + " " + type_name(t) + " rows " +
                         std::to_string(rows) + " cols " + std::to_string(cols) + " batch " +
                         std::to_string(nb) + (p ? " threads 3" : " threads 1"));
            std::vector<float> y(static_cast<size_t>(rows * nb));
            matmul(w, x.data(), nb, y.data(), p);
            for (int64_t b = 0; b < nb; ++b) {
              for (int64_t r = 0; r < rows; ++r) {
                // exact equality: the same operations in the same order
                ASSERT_EQ(y[static_cast<size_t>(b * rows + r)],
                          single[static_cast<size_t>(b * rows + r)])
                    << "b " << b << " r " << r;
              }
            }
          }
        }
        // A row range starting inside a 16-row group (the model's column slices, MoE experts).
        if (rows > 5) {
          const int64_t r0 = 5, nb = 9;
          std::vector<float> y(static_cast<size_t>((rows - r0) * nb));
          matmul_rows(w, r0, rows, x.data(), nb, y.data(), &pool);
          for (int64_t b = 0; b < nb; ++b) {
            for (int64_t r = r0; r < rows; ++r) {
              ASSERT_EQ(y[static_cast<size_t>(b * (rows - r0) + r - r0)],
                        single[static_cast<size_t>(b * rows + r)])
                  << simd_level_name(level) << " row range from " << r0 << ", b " << b << " r "
                  << r;
            }
          }
        }
      }
    }
  }
  set_simd_level(saved);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulBatch, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(type_name(info.param)); });

}  // namespace
}  // namespace boltrt
