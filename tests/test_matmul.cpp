// CPU matmul: every weight type x every SIMD level against the scalar reference, the scalar
// reference against float64, on awkward shapes, batches and thread counts.
//
// Tolerances (derived, not tuned):
//  * SIMD vs scalar. Both levels use the same converted activations and compute the same exact
//    integer sum per block, so they differ only by float rounding in accumulation: a sum of m
//    terms rounded in fp32 is within m * 2^-24 * sum|terms| of exact. Take m = blocks + cols/8 + 16
//    (the longer of the scalar per-block chain and the 8-lane SIMD chain plus the horizontal sum),
//    the terms' magnitudes A = sum_k (|w_k without min| + |min_k|) * |x'_k| (w dequantized, x' the
//    dequantized activations, mins included because k-quants subtract them separately), and allow
//    each side that error: tol = 2 * m * 2^-24 * A.
//  * Scalar vs float64 with the original f32 activations. On top of the accumulation term, each
//    activation was rounded: Q8_0/Q8_1 codes are RNE(x * 127/amax) against the fp16 scale
//    h(amax/127), so |x - x'| <= d * (0.5 + 127 * 2^-11 + 2^-16) < 0.57 d; Q8_K uses an fp32 scale,
//    |x - x'| <= 0.51 |d|; F16 and BF16 round to 11 and 8 significant bits (2^-11 |x|, 2^-8 |x|).
//    Q8_1 also stores s = fp16(d * sum q), which moves the min term by |m| * |s - h(d) sum q|.
//    tol = sum_k (|w_k without min| + |min_k|) * e_k + (Q8_1 term) + the accumulation term.
// Each test prints its worst observed error as a fraction of the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_internal.h"
#include "matmul_test_util.h"
#include "quant/dequantize.h"
#include "quant/unpack.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

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

size_t row_bytes(GgmlType t, int64_t cols) {
  return static_cast<size_t>(cols / matmul_block_elems(t)) * matmul_block_bytes(t);
}

// Byte offset of the fp16 min field (Q4_1/Q5_1 m, k-quant dmin) in a block, or -1.
int min_field_offset(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return 2;
    case GgmlType::Q2_K:
      return 82;
    default:
      return -1;
  }
}

// Dequantized weights, split into the part without the block minimum and the minimum's part.
struct DequantWeights {
  std::vector<double> w;      // rows x cols, as dequantize_row gives them
  std::vector<double> scale;  // |w without min| + |min| per element
};

DequantWeights dequant_weights(GgmlType t, const std::vector<uint8_t>& data, int64_t rows,
                               int64_t cols) {
  DequantWeights out;
  out.w.resize(static_cast<size_t>(rows * cols));
  out.scale.resize(out.w.size());
  std::vector<uint8_t> no_min = data;
  const int off = min_field_offset(t);
  if (off >= 0) {
    for (size_t b = 0; b < data.size() / matmul_block_bytes(t); ++b) {
      std::memset(no_min.data() + b * matmul_block_bytes(t) + off, 0, 2);
    }
  }
  std::vector<float> row(static_cast<size_t>(cols)), row_no_min(static_cast<size_t>(cols));
  const size_t rb = row_bytes(t, cols);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t, data.data() + r * rb, row.data(), cols);
    dequantize_row(t, no_min.data() + r * rb, row_no_min.data(), cols);
    for (int64_t k = 0; k < cols; ++k) {
      const size_t i = static_cast<size_t>(r * cols + k);
      out.w[i] = row[static_cast<size_t>(k)];
      out.scale[i] = std::fabs(row_no_min[static_cast<size_t>(k)]) +
                     std::fabs(static_cast<double>(row[static_cast<size_t>(k)]) -
                               row_no_min[static_cast<size_t>(k)]);
    }
  }
  return out;
}

// What the matmul really multiplies: the converted activation row, dequantized (x'), and the
// per-element bound on |x - x'| (see the header comment).
struct ConvertedActivations {
  std::vector<double> x;      // batch x cols
  std::vector<double> err;    // batch x cols
  std::vector<double> s_err;  // Q8_1 only: |s - h(d) sum q| per 32-block, batch x cols/32
};

ConvertedActivations convert_activations(GgmlType t, const std::vector<float>& x, int64_t batch,
                                         int64_t cols) {
  using namespace cpu;
  const ActFormat format = activation_format(t);
  std::vector<uint8_t> buf(activation_row_bytes(format, cols));
  ConvertedActivations out;
  out.x.resize(static_cast<size_t>(batch * cols));
  out.err.resize(out.x.size());
  out.s_err.assign(static_cast<size_t>(batch * cols / 32), 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    convert_activation_row(format, x.data() + b * cols, buf.data(), cols);
    double* xp = out.x.data() + b * cols;
    double* ep = out.err.data() + b * cols;
    const float* xo = x.data() + b * cols;
    switch (format) {
      case ActFormat::F32:
        for (int64_t k = 0; k < cols; ++k) xp[k] = xo[k], ep[k] = 0.0;
        break;
      case ActFormat::F16:
      case ActFormat::BF16: {
        const auto* h = reinterpret_cast<const float*>(buf.data());
        const double rel = format == ActFormat::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
        for (int64_t k = 0; k < cols; ++k) {
          // Stored as f32 but rounded to the 16-bit format.
          xp[k] = h[k];
          EXPECT_EQ(h[k], format == ActFormat::F16 ? fp16_to_fp32(fp32_to_fp16(xo[k]))
                                                   : bf16_to_fp32(fp32_to_bf16(xo[k])));
          ep[k] = rel * std::fabs(xo[k]);
        }
        break;
      }
      case ActFormat::Q8_0:
      case ActFormat::Q8_1: {
        const size_t bs = format == ActFormat::Q8_0 ? sizeof(ActQ8_0) : sizeof(ActQ8_1);
        const int qs_off = format == ActFormat::Q8_0 ? 2 : 4;
        for (int64_t ib = 0; ib < cols / 32; ++ib) {
          const uint8_t* blk = buf.data() + ib * bs;
          uint16_t dh;
          std::memcpy(&dh, blk, 2);
          const double d = fp16_to_fp32(dh);
          const auto* qs = reinterpret_cast<const int8_t*>(blk + qs_off);
          int sum = 0;
          for (int j = 0; j < 32; ++j) {
            xp[ib * 32 + j] = d * qs[j];
            ep[ib * 32 + j] = 0.57 * d;
            sum += qs[j];
          }
          if (format == ActFormat::Q8_1) {
            uint16_t sh;
            std::memcpy(&sh, blk + 2, 2);
            out.s_err[static_cast<size_t>(b * cols / 32 + ib)] =
                std::fabs(fp16_to_fp32(sh) - d * sum);
          }
        }
        break;
      }
      case ActFormat::Q8_K: {
        const auto* blk = reinterpret_cast<const ActQ8_K*>(buf.data());
        for (int64_t ib = 0; ib < cols / 256; ++ib) {
          for (int j = 0; j < 256; ++j) {
            xp[ib * 256 + j] = static_cast<double>(blk[ib].d) * blk[ib].qs[j];
            ep[ib * 256 + j] = 0.51 * std::fabs(blk[ib].d);
          }
        }
        break;
      }
    }
  }
  return out;
}

// |min| of the Q4_1/Q5_1 block holding element k of a row (the Q8_1 s-rounding term).
double legacy_min(GgmlType t, const uint8_t* row, int64_t block) {
  uint16_t m;
  std::memcpy(&m, row + block * matmul_block_bytes(t) + 2, 2);
  return std::fabs(fp16_to_fp32(m));
}

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

struct Case {
  int64_t rows, cols, batch;
  int threads;
};

// rows {1, 7, 33, 255} x cols {32, 256, 704, 2560, 10240, 96} (multiples of the block only),
// cycling through batches {1, 3, 8, 17} and thread counts {1, 3}; 255 x 10240 runs at batch 1
// only. 96 (last, so the other cases keep their batch and threads): an odd number of 32-element
// blocks after a pair, the AVX2 Q4_0 kernel's tail.
std::vector<Case> cases_for(GgmlType t) {
  std::vector<Case> cases;
  int k = 0;
  for (int64_t cols : {32, 256, 704, 2560, 10240, 96}) {
    if (cols % matmul_block_elems(t) != 0) continue;
    for (int64_t rows : {1, 7, 33, 255}) {
      int64_t batch = std::vector<int64_t>{1, 3, 8, 17}[static_cast<size_t>(k % 4)];
      if (rows == 255 && cols == 10240) batch = 1;
      cases.push_back({rows, cols, batch, (k / 4) % 2 == 0 ? 1 : 3});
      ++k;
    }
  }
  return cases;
}

class MatmulType : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatmulType, EveryLevelMatchesScalarAndScalarMatchesFloat64) {
  const GgmlType t = GetParam();
  const auto levels = available_levels();
  const SimdLevel saved = simd_level();
  double worst_simd = 0.0, worst_f64 = 0.0;
  uint32_t seed = 1;
  for (const Case& c : cases_for(t)) {
    SCOPED_TRACE(std::string(type_name(t)) + " rows " + std::to_string(c.rows) + " cols " +
                 std::to_string(c.cols) + " batch " + std::to_string(c.batch) + " threads " +
                 std::to_string(c.threads));
    const auto data = random_weights(t, c.rows, c.cols, seed++);
    const auto x = random_activations(c.batch * c.cols, seed++);
    const WeightView w{t, data.data(), c.rows, c.cols, row_bytes(t, c.cols)};
    ThreadPool pool(c.threads);

    const DequantWeights dq = dequant_weights(t, data, c.rows, c.cols);
    const ConvertedActivations ca = convert_activations(t, x, c.batch, c.cols);
    const double u = std::ldexp(1.0, -24);
    const double chain = static_cast<double>(c.cols / matmul_block_elems(t) + c.cols / 8 + 16);

    std::vector<float> y_scalar(static_cast<size_t>(c.rows * c.batch));
    set_simd_level(SimdLevel::Scalar);
    matmul(w, x.data(), c.batch, y_scalar.data(), &pool);

    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t r = 0; r < c.rows; ++r) {
        double exact_q = 0.0, exact = 0.0, magnitude = 0.0, act_err = 0.0, s_err = 0.0;
        for (int64_t k = 0; k < c.cols; ++k) {
          const size_t wi = static_cast<size_t>(r * c.cols + k),
                       xi = static_cast<size_t>(b * c.cols + k);
          exact_q += dq.w[wi] * ca.x[xi];
          exact += dq.w[wi] * static_cast<double>(x[xi]);
          magnitude += dq.scale[wi] * std::fabs(ca.x[xi]);
          act_err += dq.scale[wi] * ca.err[xi];
        }
        if (cpu::activation_format(t) == cpu::ActFormat::Q8_1) {
          for (int64_t ib = 0; ib < c.cols / 32; ++ib) {
            s_err += legacy_min(t, data.data() + r * w.row_stride, ib) *
                     ca.s_err[static_cast<size_t>(b * c.cols / 32 + ib)];
          }
        }
        const double tol_simd = 2.0 * chain * u * magnitude * 1.01 + 1e-30;
        const double tol_f64 = (act_err + s_err) * 1.01 + tol_simd + 1e-30;
        const double ys = y_scalar[static_cast<size_t>(b * c.rows + r)];
        const double e_f64 = std::fabs(ys - exact);
        worst_f64 = std::max(worst_f64, e_f64 / tol_f64);
        ASSERT_LE(e_f64, tol_f64) << "scalar vs float64 at b " << b << " r " << r;
        // The scalar path itself is within the accumulation bound of the quantized product (plus,
        // for Q8_1, the rounding of s).
        ASSERT_LE(std::fabs(ys - exact_q), tol_simd / 2 * 1.0001 + s_err * 1.01 + 1e-30)
            << "scalar vs x' at b " << b << " r " << r;
      }
    }

    for (const SimdLevel level : levels) {
      if (level == SimdLevel::Scalar) continue;
      set_simd_level(level);
      std::vector<float> y(y_scalar.size());
      matmul(w, x.data(), c.batch, y.data(), &pool);
      for (int64_t b = 0; b < c.batch; ++b) {
        for (int64_t r = 0; r < c.rows; ++r) {
          double magnitude = 0.0;
          for (int64_t k = 0; k < c.cols; ++k) {
            magnitude += dq.scale[static_cast<size_t>(r * c.cols + k)] *
                         std::fabs(ca.x[static_cast<size_t>(b * c.cols + k)]);
          }
          const double tol = 2.0 * chain * u * magnitude * 1.01 + 1e-30;
          const size_t i = static_cast<size_t>(b * c.rows + r);
          const double e = std::fabs(static_cast<double>(y[i]) - y_scalar[i]);
          worst_simd = std::max(worst_simd, e / tol);
          ASSERT_LE(e, tol) << simd_level_name(level) << " vs scalar at b " << b << " r " << r;
        }
      }
    }
  }
  set_simd_level(saved);
  std::printf("[ %-6s ] worst error / tolerance: SIMD vs scalar %.3g, scalar vs float64 %.3g\n",
              type_name(t), worst_simd, worst_f64);
}

// A row's result must not depend on the thread count or the row range it was computed in, for
// any batch size. (Across batch sizes it may differ in the last bits where the AVX-512 level
// switches to the 16-row kernels, whose float accumulation order differs: from 4 activation rows
// up, or past avx512_gemv_max_batch for the types test_matmul_batch.cpp checks bit for bit.)
TEST_P(MatmulType, ResultsIndependentOfThreadsAndRowRange) {
  const GgmlType t = GetParam();
  const int64_t rows = 37, cols = 512;
  const auto data = random_weights(t, rows, cols, 99);
  const WeightView w{t, data.data(), rows, cols, row_bytes(t, cols)};
  ThreadPool pool3(3);
  const SimdLevel saved = simd_level();
  for (const int64_t batch : {1, 2, 9}) {
    const auto x = random_activations(batch * cols, 100);
    for (const SimdLevel level : available_levels()) {
      SCOPED_TRACE(std::string(simd_level_name(level)) + " batch " + std::to_string(batch));
      set_simd_level(level);
      std::vector<float> full(static_cast<size_t>(rows * batch));
      matmul(w, x.data(), batch, full.data(), nullptr);
      std::vector<float> threaded(full.size());
      matmul(w, x.data(), batch, threaded.data(), &pool3);
      EXPECT_EQ(full, threaded);
      for (const auto& [r0, r1] :
           {std::pair<int64_t, int64_t>{20, 30}, {0, 1}, {36, 37}, {3, 37}}) {
        std::vector<float> part(static_cast<size_t>((r1 - r0) * batch));
        matmul_rows(w, r0, r1, x.data(), batch, part.data(), &pool3);
        for (int64_t b = 0; b < batch; ++b) {
          for (int64_t r = r0; r < r1; ++r) {
            ASSERT_EQ(part[static_cast<size_t>(b * (r1 - r0) + r - r0)],
                      full[static_cast<size_t>(b * rows + r)])
                << "rows [" << r0 << ", " << r1 << ") row " << r << " b " << b;
          }
        }
      }
    }
  }
  set_simd_level(saved);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulType, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(type_name(info.param)); });

// The levels offered are those the CPU reports, of its own architecture only; the best one is
// printed (tools/test-aarch64.sh checks it on an emulated CPU without dotprod).
TEST(Matmul, LevelsFollowCpuFeatures) {
  const CpuFeatures& f = cpu_features();
  const auto levels = available_levels();
  const auto has = [&](SimdLevel l) {
    return std::find(levels.begin(), levels.end(), l) != levels.end();
  };
  EXPECT_TRUE(has(SimdLevel::Scalar));
  EXPECT_EQ(has(SimdLevel::Neon), f.neon);
  EXPECT_EQ(has(SimdLevel::NeonDot), f.neon && f.dotprod);
  EXPECT_EQ(has(SimdLevel::Avx2), f.avx2 && f.fma && f.f16c && f.bmi2);
#if defined(__aarch64__)
  EXPECT_TRUE(f.neon) << "Advanced SIMD is mandatory on aarch64";
  EXPECT_FALSE(has(SimdLevel::Avx2) || has(SimdLevel::Avx512));
#else
  EXPECT_FALSE(f.neon || f.dotprod);
#endif
  std::printf("best SIMD level: %s\n", simd_level_name(levels.back()));
}

// Every level's activation conversion writes the scalar reference's bytes, including blocks of
// zeros, ties between +amax and -amax (Q8_K keeps the sign of the first), values that round to
// exactly +-127 and tiny or huge magnitudes.
TEST(Matmul, ActivationConversionBitExactAtEveryLevel) {
  using namespace cpu;
  const int64_t n = 1024;
  std::vector<std::vector<float>> rows;
  rows.push_back(random_activations(n, 7));
  rows.push_back(std::vector<float>(n, 0.0f));
  {
    auto r = random_activations(n, 8);
    for (int64_t k = 0; k < 256; ++k) r[static_cast<size_t>(k)] = 0.0f;  // one zero block each
    r[300] = 100.0f, r[301] = -100.0f;                                   // tie, + first
    r[600] = -90.0f, r[700] = 90.0f;                                     // tie, - first
    for (int64_t k = 768; k < 800; ++k) r[static_cast<size_t>(k)] = k % 2 ? 1e-30f : -3e30f;
    rows.push_back(r);
  }
  {
    std::vector<float> r(n);
    for (int64_t k = 0; k < n; ++k) r[static_cast<size_t>(k)] = static_cast<float>(k % 255) - 127;
    rows.push_back(r);
  }
  const SimdLevel saved = simd_level();
  for (const SimdLevel level : available_levels()) {
    const ConvertFn convert = activation_converter(level);
    for (const ActFormat format : {ActFormat::F32, ActFormat::F16, ActFormat::BF16, ActFormat::Q8_0,
                                   ActFormat::Q8_1, ActFormat::Q8_K}) {
      const size_t bytes = activation_row_bytes(format, n);
      for (size_t i = 0; i < rows.size(); ++i) {
        std::vector<uint8_t> want(bytes), got(bytes, 0xAA);
        convert_activation_row(format, rows[i].data(), want.data(), n);
        convert(format, rows[i].data(), got.data(), n);
        EXPECT_EQ(want, got) << simd_level_name(level) << " format " << static_cast<int>(format)
                             << " row " << i;
      }
    }
  }
  set_simd_level(saved);
}

// The AVX-512 Q8_K activation quantizer must give the scalar quantizer's bytes exactly (the
// matmul results of every level are compared against the scalar path's activations): random
// rows, a zero block, ties of +amax and -amax in either order, values that round to +-127.5.
TEST(Matmul, SimdQ8KActivationsEqualScalar) {
  const SimdLevel saved = simd_level();
  set_simd_level(SimdLevel::Avx512);
  const bool have = simd_level() == SimdLevel::Avx512;
  set_simd_level(saved);
  if (!have) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
#if defined(__x86_64__)
  const int64_t n = 256 * 6;
  std::vector<float> x = random_activations(n, 5);
  for (int64_t i = 256; i < 512; ++i) x[static_cast<size_t>(i)] = 0.0f;  // block 1: all zero
  x[512 + 3] = -9.0f;  // block 2: -amax first, then +amax
  x[512 + 200] = 9.0f;
  x[768 + 10] = 9.0f;  // block 3: +amax first
  x[768 + 11] = -9.0f;
  for (int64_t i = 1024; i < 1280; ++i) {  // block 4: codes at exact .5 (round to even)
    x[static_cast<size_t>(i)] = static_cast<float>(i % 255 - 127) + 0.5f;
  }
  x[1024] = 127.0f;
  x[1280 + 7] = 1e-30f;  // block 5: tiny values
  const size_t bytes = cpu::activation_row_bytes(cpu::ActFormat::Q8_K, n);
  std::vector<uint8_t> scalar(bytes), simd(bytes, 0xAB);
  cpu::convert_activation_row(cpu::ActFormat::Q8_K, x.data(), scalar.data(), n);
  cpu::avx512_quantize_act_q8_k(x.data(), simd.data(), n);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(simd[i], scalar[i]) << "byte " << i;
#endif
}

TEST(Matmul, RejectsBadShapesAndTypes) {
  std::vector<uint8_t> data(4096);
  std::vector<float> x(512), y(64);
  EXPECT_THROW(
      matmul(WeightView{GgmlType::Q4_K, data.data(), 1, 100, 100}, x.data(), 1, y.data(), nullptr),
      Error);
  EXPECT_THROW(
      matmul(WeightView{GgmlType::Q4_0, data.data(), 1, 48, 27}, x.data(), 1, y.data(), nullptr),
      Error);
  EXPECT_THROW(matmul(WeightView{GgmlType::IQ2_XXS, data.data(), 1, 256, 66}, x.data(), 1, y.data(),
                      nullptr),
               Error);
  EXPECT_THROW(matmul_rows(WeightView{GgmlType::F32, data.data(), 4, 32, 128}, 2, 5, x.data(), 1,
                           y.data(), nullptr),
               Error);
}

}  // namespace
}  // namespace boltrt
