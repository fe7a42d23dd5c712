// Small-batch matmul: below the crossover to the 16-row lane kernels (cpu::avx512_row_max_batch:
// 4 for Q4_0 and Q5_0, 8 for Q6_K; every size for the batch-invariant types) the AVX-512 kernels
// compute every activation row with exactly the arithmetic of a batch-1 call, so a batched verify
// of drafted tokens gives bit for bit the logits of one-token decoding. Checked with exact equality
// against separate batch-1 calls on awkward shapes (row counts that are not multiples of 16, block
// counts that are not multiples of 4, columns long enough to be cut into slices), with and without
// threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_internal.h"
#include "matmul_test_util.h"
#include "runtime/thread_pool.h"

namespace boltrt {
namespace {

using test::matmul_block_bytes;
using test::matmul_block_elems;
using test::random_activations;
using test::random_weights;
using test::type_name;

class MatmulBatch : public ::testing::TestWithParam<GgmlType> {};

// Sets the AVX-512 level; false (the level put back to `saved`) where the CPU lacks it.
bool switch_to_avx512(SimdLevel saved) {
  set_simd_level(SimdLevel::Avx512);
  if (simd_level() == SimdLevel::Avx512) return true;
  set_simd_level(saved);
  return false;
}

TEST_P(MatmulBatch, EveryRowEqualsBatchOneBitForBit) {
  const GgmlType t = GetParam();
  const SimdLevel saved = simd_level();
  if (!switch_to_avx512(saved)) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  // (types that are batch invariant at every size, INT64_MAX: test_matmul_invariance covers
  // them at all sizes; here up to 8 rows on the shapes below)
  const int64_t max_batch = std::min<int64_t>(8, cpu::avx512_row_max_batch(t));
  ASSERT_GE(max_batch, 2) << "small batches should stay on the batch-1 arithmetic";
  ThreadPool pool(3);
  uint32_t seed = 11;
  for (const int64_t cols : {32, 96, 256, 736, 2560, 10240}) {
    if (cols % matmul_block_elems(t) != 0) continue;
    for (const int64_t rows : {1, 7, 33, 255}) {
      const auto data = random_weights(t, rows, cols, seed++);
      const size_t stride =
          static_cast<size_t>(cols / matmul_block_elems(t)) * matmul_block_bytes(t);
      const WeightView w{t, data.data(), rows, cols, stride};
      const int64_t batch = max_batch;
      const auto x = random_activations(batch * cols, seed++);
      // batch-1 results, one activation row at a time, single thread
      std::vector<float> single(static_cast<size_t>(rows * batch));
      for (int64_t b = 0; b < batch; ++b)
        matmul(w, x.data() + b * cols, 1, single.data() + b * rows, nullptr);
      for (int64_t nb = 2; nb <= batch; ++nb) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          SCOPED_TRACE(std::string(type_name(t)) + " rows " + std::to_string(rows) + " cols " +
                       std::to_string(cols) + " batch " + std::to_string(nb) +
                       (p ? " threads 3" : " threads 1"));
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
    }
  }
  set_simd_level(saved);
}

// LanePacks' copies (every Q4_0, Q5_0, Q8_0, Q4_K and Q5_K matrix) give the raw rows' bits at every
// batch size, row range and thread count; other types are left alone.
TEST(MatmulBatchLanePacks, PackedEqualTheUnpackedKernelsBitForBit) {
  const SimdLevel saved = simd_level();
  if (!switch_to_avx512(saved)) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  ThreadPool pool(3);
  uint32_t seed = 77;
  LanePacks packs;
  for (const GgmlType t :
       {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q5_K}) {
    const int64_t block = type_traits(t).block_size;
    // odd block counts (32, 736 columns) end the packed groups with a half-used pair
    for (const auto& [cols, rows] : {std::pair<int64_t, int64_t>{32, 1},
                                     {256, 31},
                                     {256, 1920},
                                     {512, 256},
                                     {736, 40},
                                     {1024, 100},
                                     {2560, 17},
                                     {736, 1400}}) {  // over 1 MB
      if (cols % block != 0) continue;
      const auto data = random_weights(t, rows, cols, seed++);
      const size_t stride = static_cast<size_t>(cols / block) * matmul_block_bytes(t);
      const WeightView plain{t, data.data(), rows, cols, stride};
      WeightView packed = plain;
      packs.pack(packed);
      ASSERT_NE(packed.lanes, nullptr) << type_name(t) << " cols " << cols << " rows " << rows;
      const int64_t batch = 19;
      const auto x = random_activations(batch * cols, seed++);
      for (int64_t nb : {1, 2, 3, 4, 7, 8, 9, 19}) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> want(static_cast<size_t>(rows * nb)), got(want.size());
          matmul(plain, x.data(), nb, want.data(), p);
          matmul(packed, x.data(), nb, got.data(), p);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
              << type_name(t) << " cols " << cols << " rows " << rows << " batch " << nb;
        }
      }
      // row ranges: whole groups use the copy, others the raw rows; the same bits either way
      for (const auto& [r0, r1] :
           {std::pair<int64_t, int64_t>{0, rows}, {16, rows}, {3, rows}, {16, 32}}) {
        if (r0 >= r1 || r1 > rows) continue;
        std::vector<float> want(static_cast<size_t>((r1 - r0) * 3)), got(want.size());
        matmul_rows(plain, r0, r1, x.data(), 3, want.data(), nullptr);
        matmul_rows(packed, r0, r1, x.data(), 3, got.data(), nullptr);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << type_name(t) << " rows " << r0 << ".." << r1;
      }
    }
  }
  // an expert stack packed whole: each expert's rows (weight_rows) read the copy where they
  // start a 16-row group (24-row experts: 0 and 2 do, 1 does not) and give the raw rows' bits
  for (const auto& [t, rows] : {std::pair<GgmlType, int64_t>{GgmlType::Q4_0, 24},
                                {GgmlType::Q4_0, 32},
                                {GgmlType::Q5_0, 24},
                                {GgmlType::Q8_0, 24},
                                {GgmlType::Q4_K, 24},
                                {GgmlType::Q5_K, 32}}) {
    const int64_t cols = 512, n_expert = 3;
    const size_t stride =
        static_cast<size_t>(cols / type_traits(t).block_size) * matmul_block_bytes(t);
    const auto data = random_weights(t, rows * n_expert, cols, seed++);
    WeightView stack{t, data.data(), rows * n_expert, cols, stride};
    packs.pack(stack);
    ASSERT_NE(stack.lanes, nullptr);
    const auto x = random_activations(5 * cols, seed++);
    for (int64_t e = 0; e < n_expert; ++e) {
      const WeightView expert = weight_rows(stack, e * rows, rows);
      EXPECT_EQ(expert.lanes != nullptr, e * rows % 16 == 0)
          << type_name(t) << " rows " << rows << " expert " << e;
      const WeightView plain{t, data.data() + static_cast<size_t>(e * rows) * stride, rows, cols,
                             stride};
      for (int64_t nb : {1, 5}) {
        std::vector<float> want(static_cast<size_t>(rows * nb)), got(want.size());
        matmul(plain, x.data(), nb, want.data(), &pool);
        matmul(expert, x.data(), nb, got.data(), &pool);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << type_name(t) << " rows " << rows << " expert " << e << " batch " << nb;
      }
    }
  }
  // not packed: another type
  const auto q6k = random_weights(GgmlType::Q6_K, 64, 256, seed++);
  WeightView wk{GgmlType::Q6_K, q6k.data(), 64, 256, matmul_block_bytes(GgmlType::Q6_K)};
  packs.pack(wk);
  EXPECT_EQ(wk.lanes, nullptr);
  set_simd_level(saved);
}

INSTANTIATE_TEST_SUITE_P(SmallBatchTypes, MatmulBatch,
                         ::testing::Values(GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0,
                                           GgmlType::Q4_K, GgmlType::Q6_K),
                         [](const auto& info) { return std::string(type_name(info.param)); });

}  // namespace
}  // namespace boltrt
