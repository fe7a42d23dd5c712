// The CUDA emulator's own tests (-DBOLTRT_CUDA_EMULATOR=ON): that it runs correct kernels as
// CUDA does and makes wrong kernels fail. Expected values come from the CUDA documentation as
// ../shared/docs/cuda-emulation.md paraphrases it (shuffle index rules §2.5, mma fragments §3.2
// and the known answers of §3.7, launch errors §2.2, copies §2.11, capture §2.13), never from
// the emulator itself. Built only in the emulator build (other builds compile no tests here).
#if defined(BOLTRT_CUDA_EMULATOR)
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_emulator/emulator.h"
#include "portable.cuh"
#include "quant/fp16.h"

namespace {

using boltrt::emu::findings;
using boltrt::emu::reset_faults;

class CudaEmulator : public ::testing::Test {
 protected:
  void SetUp() override {
    boltrt::emu::select_device("h200");
    reset_faults();
  }
  void TearDown() override { reset_faults(); }

  // The one finding a faulty launch produced, after synchronising (which must report it).
  static std::string sole_finding() {
    EXPECT_NE(cudaDeviceSynchronize(), cudaSuccess);
    const auto f = findings();
    EXPECT_EQ(f.size(), 1u);
    return f.empty() ? std::string() : f.front();
  }
};

template <typename T>
T* device_alloc(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> download(const T* d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// ---- correct kernels ----------------------------------------------------------------------------

__global__ void shuffle_kernel(int kind, int operand, int width, int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  const int v = 100 + lane;
  int r = 0;
  switch (kind) {
    case 0:
      r = __shfl_sync(0xffffffffu, v, operand, width);
      break;
    case 1:
      r = __shfl_up_sync(0xffffffffu, v, static_cast<unsigned>(operand), width);
      break;
    case 2:
      r = __shfl_down_sync(0xffffffffu, v, static_cast<unsigned>(operand), width);
      break;
    default:
      r = __shfl_xor_sync(0xffffffffu, v, operand, width);
      break;
  }
  out[lane] = r;
}

// The source lane of each shuffle as the CUDA Programming Guide defines it: segments of `width`
// lanes; idx reads lane (src mod width) of the own segment; up/down read lane -/+ delta when it
// stays inside the segment, else keep their own value; xor reads lane ^ mask unless that lies in
// a later segment.
int expected_shuffle(int kind, int lane, int operand, int width) {
  const int seg_start = lane / width * width;
  switch (kind) {
    case 0:
      return 100 + seg_start + operand % width;
    case 1:
      return 100 + (lane - operand >= seg_start ? lane - operand : lane);
    case 2:
      return 100 + (lane + operand < seg_start + width ? lane + operand : lane);
    default: {
      const int j = lane ^ operand;
      return 100 + (j < seg_start + width ? j : lane);
    }
  }
}

TEST_F(CudaEmulator, ShufflesFollowTheProgrammingGuide) {
  int* out = device_alloc<int>(32);
  for (int kind = 0; kind < 4; ++kind) {
    for (int width : {1, 2, 8, 16, 32}) {
      for (int operand : {0, 1, 3, 5, 16, 31}) {
        BOLTRT_LAUNCH(1, 32, 0, nullptr, shuffle_kernel)(kind, operand, width, out);
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);
        const auto got = download(out, 32);
        for (int lane = 0; lane < 32; ++lane) {
          ASSERT_EQ(got[static_cast<size_t>(lane)], expected_shuffle(kind, lane, operand, width))
              << "kind " << kind << " width " << width << " operand " << operand << " lane "
              << lane;
        }
      }
    }
  }
  EXPECT_TRUE(findings().empty());
  cudaFree(out);
}

__global__ void vote_kernel(unsigned* out) {
  const unsigned lane = threadIdx.x;
  const int p = lane % 3 == 0;
  out[lane * 3] = __ballot_sync(0xffffffffu, p);
  out[lane * 3 + 1] = static_cast<unsigned>(__any_sync(0xffffffffu, lane == 7));
  out[lane * 3 + 2] = static_cast<unsigned>(__all_sync(0xffffffffu, lane < 31));
}

TEST_F(CudaEmulator, VotesReduceOverTheWarp) {
  unsigned* out = device_alloc<unsigned>(96);
  BOLTRT_LAUNCH(1, 32, 0, nullptr, vote_kernel)(out);
  const auto got = download(out, 96);
  unsigned ballot = 0;
  for (unsigned l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(got[static_cast<size_t>(l) * 3], ballot);
    EXPECT_EQ(got[static_cast<size_t>(l) * 3 + 1], 1u);
    EXPECT_EQ(got[static_cast<size_t>(l) * 3 + 2], 0u);
  }
  cudaFree(out);
}

__global__ void block_reduce_kernel(const float* x, float* out) {
  BOLTRT_SHARED(float, partial, [256]);
  const unsigned t = threadIdx.x;
  partial[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

TEST_F(CudaEmulator, SharedMemoryAndBarriersReduceABlock) {
  constexpr int kBlocks = 5, kThreads = 256;
  std::vector<float> x(kBlocks * kThreads);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97);
  float* dx = device_alloc<float>(x.size());
  float* dout = device_alloc<float>(kBlocks);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  BOLTRT_LAUNCH(kBlocks, kThreads, 0, nullptr, block_reduce_kernel)(dx, dout);
  const auto got = download(dout, kBlocks);
  for (int b = 0; b < kBlocks; ++b) {
    double want = 0;
    for (int i = 0; i < kThreads; ++i) want += x[static_cast<size_t>(b * kThreads + i)];
    EXPECT_EQ(got[static_cast<size_t>(b)], static_cast<float>(want));  // small integers: exact
  }
  EXPECT_TRUE(findings().empty());
  cudaFree(dx);
  cudaFree(dout);
}

// ---- mma.sync known answers (§3.7) -------------------------------------------------------------

__global__ void mma_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d,
                           bool bf16) {
  const unsigned lane = threadIdx.x;
  const uint32_t ar[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
  float acc[4] = {c[lane * 4], c[lane * 4 + 1], c[lane * 4 + 2], c[lane * 4 + 3]};
  ::boltrt::emu::mma_m16n8k16(acc, ar, b[lane * 2], b[lane * 2 + 1], bf16);
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = acc[i];
}

struct MmaCase {
  std::vector<uint32_t> a, b;  // per lane: 4 A registers, 2 B registers
  std::vector<float> c, want;  // per lane: 4 accumulators
};

// Fragments from the PTX ISA tables (g = lane / 4, c = lane % 4): register r of A holds rows
// g (+8 for r = 1, 3), columns 2c, 2c + 1 (+8 for r = 2, 3), low half first; B register r holds
// k = 2c, 2c + 1 (+8 for r = 1) of column g; D element i is row g (+8 for i >= 2), column
// 2c + (i & 1).
MmaCase make_mma_case(float (*A)(int, int), float (*B)(int, int), float (*C)(int, int), bool bf16) {
  auto bits = [&](float v) -> uint32_t {
    return bf16 ? boltrt::fp32_to_bf16(v) : boltrt::fp32_to_fp16(v);
  };
  auto pack = [&](float lo, float hi) { return bits(lo) | bits(hi) << 16; };
  MmaCase m;
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, c = lane & 3;
    m.a.push_back(pack(A(g, 2 * c), A(g, 2 * c + 1)));
    m.a.push_back(pack(A(g + 8, 2 * c), A(g + 8, 2 * c + 1)));
    m.a.push_back(pack(A(g, 2 * c + 8), A(g, 2 * c + 9)));
    m.a.push_back(pack(A(g + 8, 2 * c + 8), A(g + 8, 2 * c + 9)));
    m.b.push_back(pack(B(2 * c, g), B(2 * c + 1, g)));
    m.b.push_back(pack(B(2 * c + 8, g), B(2 * c + 9, g)));
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i >= 2 ? 8 : 0), col = 2 * c + (i & 1);
      double sum = C(row, col);
      for (int k = 0; k < 16; ++k) sum += static_cast<double>(A(row, k)) * B(k, col);
      m.c.push_back(C(row, col));
      m.want.push_back(static_cast<float>(sum));
    }
  }
  return m;
}

std::vector<float> run_mma(const MmaCase& m, bool bf16) {
  uint32_t* da = device_alloc<uint32_t>(m.a.size());
  uint32_t* db = device_alloc<uint32_t>(m.b.size());
  float* dc = device_alloc<float>(m.c.size());
  float* dd = device_alloc<float>(m.c.size());
  cudaMemcpy(da, m.a.data(), m.a.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, m.b.data(), m.b.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dc, m.c.data(), m.c.size() * 4, cudaMemcpyHostToDevice);
  BOLTRT_LAUNCH(1, 32, 0, nullptr, mma_kernel)(da, db, dc, dd, bf16);
  auto d = download(dd, m.c.size());
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dd);
  return d;
}

float a_t1(int r, int k) {
  return static_cast<float>(16 * r + k);
}
float b_t1(int k, int n) {
  return k == n ? 1.0f : 0.0f;
}
float b_t2(int k, int n) {
  return k == n + 8 ? 1.0f : 0.0f;
}
float a_identity(int r, int k) {
  return r == k ? 1.0f : 0.0f;
}
float b_t3(int k, int n) {
  return static_cast<float>(8 * k + n);
}
float b_t4(int k, int n) {
  return b_t1(k, n) + b_t2(k, n);
}
float c_zero(int, int) {
  return 0.0f;
}
float c_t4(int r, int n) {
  return static_cast<float>(1000 + 8 * r + n);
}

TEST_F(CudaEmulator, MmaKnownAnswersF16) {
  // T1: the doc's register words for lanes 0, 5, 31 and D = 16 r + n.
  const MmaCase t1 = make_mma_case(a_t1, b_t1, c_zero, false);
  EXPECT_EQ(t1.a[0], 0x3c000000u);
  EXPECT_EQ(t1.a[1], 0x58085800u);
  EXPECT_EQ(t1.a[2], 0x48804800u);
  EXPECT_EQ(t1.a[3], 0x58485840u);
  EXPECT_EQ(t1.a[5 * 4], 0x4cc04c80u);
  EXPECT_EQ(t1.a[31 * 4 + 3], 0x5bf85bf0u);
  EXPECT_EQ(t1.b[4 * 2], 0x3c000000u);
  const std::vector<float> d1 = run_mma(t1, false);
  const float lane0[4] = {0, 1, 128, 129}, lane13[4] = {50, 51, 178, 179};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(d1[static_cast<size_t>(i)], lane0[i]);
    EXPECT_EQ(d1[13 * 4 + static_cast<size_t>(i)], lane13[i]);
  }
  EXPECT_EQ(d1, t1.want);
  // T2 (a[2], a[3], b[1] halves), T3 (B fully, lane 5: 10, 11, 74, 75), T4 (C accumulated).
  const MmaCase t2 = make_mma_case(a_t1, b_t2, c_zero, false);
  const std::vector<float> d2 = run_mma(t2, false);
  EXPECT_EQ(d2[31 * 4], 126.0f);
  EXPECT_EQ(d2, t2.want);
  const MmaCase t3 = make_mma_case(a_identity, b_t3, c_zero, false);
  EXPECT_EQ(t3.b[5 * 2], 0x4e404c40u);
  const std::vector<float> d3 = run_mma(t3, false);
  EXPECT_EQ(d3[5 * 4 + 2], 74.0f);
  EXPECT_EQ(d3, t3.want);
  const MmaCase t4 = make_mma_case(a_t1, b_t4, c_t4, false);
  const std::vector<float> d4 = run_mma(t4, false);
  const float lane31[4] = {1306, 1309, 1626, 1629};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d4[31 * 4 + static_cast<size_t>(i)], lane31[i]);
  EXPECT_EQ(d4, t4.want);
  EXPECT_TRUE(findings().empty());
}

TEST_F(CudaEmulator, MmaKnownAnswersBf16) {
  const MmaCase t1 = make_mma_case(a_t1, b_t1, c_zero, true);
  EXPECT_EQ(t1.a[0], 0x3f800000u);
  EXPECT_EQ(t1.a[1], 0x43014300u);
  EXPECT_EQ(t1.a[5 * 4], 0x41984190u);
  EXPECT_EQ(t1.a[31 * 4 + 3], 0x437f437eu);
  EXPECT_EQ(t1.b[0], 0x00003f80u);
  EXPECT_EQ(run_mma(t1, true), t1.want);
}

// ---- wrong kernels must fail --------------------------------------------------------------------

__global__ void divergent_barrier_kernel(float* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1.0f;
}

TEST_F(CudaEmulator, BarrierInDivergentCodeIsAFinding) {
  float* out = device_alloc<float>(64);
  BOLTRT_LAUNCH(1, 64, 0, nullptr, divergent_barrier_kernel)(out);
  const std::string f = sole_finding();
  EXPECT_NE(f.find("divergent_barrier_kernel"), std::string::npos) << f;
  EXPECT_NE(f.find("__syncthreads"), std::string::npos) << f;
  // A fault is sticky: the next calls fail until the process (here: reset_faults) ends.
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaMemset(out, 0, 4), cudaErrorLaunchFailure);
}

// Two barriers in two functions the compiler may not merge (inlining and hoisting identical
// calls out of both branches would leave one call site).
__device__ __attribute__((noinline)) void barrier_then_write(float* out) {
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}
__device__ __attribute__((noinline)) void barrier_then_write_half(float* out) {
  __syncthreads();
  out[threadIdx.x / 2] = 2.0f;
}
__global__ void two_barriers_kernel(float* out) {
  if (threadIdx.x % 2) {
    barrier_then_write(out);
  } else {
    barrier_then_write_half(out);
  }
}

TEST_F(CudaEmulator, BarriersAtDifferentSitesAreAFinding) {
  float* out = device_alloc<float>(64);
  BOLTRT_LAUNCH(1, 64, 0, nullptr, two_barriers_kernel)(out);
  EXPECT_NE(sole_finding().find("different call sites"), std::string::npos);
}

__global__ void shuffle_outside_mask_kernel(int* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, 1, 20);
}

TEST_F(CudaEmulator, ShuffleFromALaneOutsideTheMaskIsAFinding) {
  int* out = device_alloc<int>(32);
  BOLTRT_LAUNCH(1, 32, 0, nullptr, shuffle_outside_mask_kernel)(out);
  EXPECT_NE(sole_finding().find("outside the mask"), std::string::npos);
}

__global__ void mask_without_caller_kernel(int* out) {
  out[threadIdx.x] = __shfl_xor_sync(0x2u, 1, 1);
}

TEST_F(CudaEmulator, MaskThatDoesNotNameTheCallerIsAFinding) {
  int* out = device_alloc<int>(32);
  BOLTRT_LAUNCH(1, 32, 0, nullptr, mask_without_caller_kernel)(out);
  EXPECT_NE(sole_finding().find("does not name the calling lane"), std::string::npos);
}

__global__ void shuffle_width_not_a_power_of_two_kernel(int* out) {
  out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0, 12);
}

TEST_F(CudaEmulator, ShuffleWidthThatIsNotAPowerOfTwoIsAFinding) {
  int* out = device_alloc<int>(32);
  BOLTRT_LAUNCH(1, 32, 0, nullptr, shuffle_width_not_a_power_of_two_kernel)(out);
  EXPECT_NE(sole_finding().find("width 12 is not a power of two"), std::string::npos);
}

__global__ void shuffle_after_exit_kernel(int* out) {
  if (threadIdx.x == 3) return;
  out[threadIdx.x] = __shfl_sync(0xffffffffu, 7, 3);  // lane 3 has exited
}

TEST_F(CudaEmulator, ShuffleFromAnExitedLaneIsAFinding) {
  int* out = device_alloc<int>(32);
  BOLTRT_LAUNCH(1, 32, 0, nullptr, shuffle_after_exit_kernel)(out);
  EXPECT_NE(sole_finding().find("exited"), std::string::npos);
}

__global__ void partial_warp_mma_kernel(float* out) {
  if (threadIdx.x >= 16) return;
  const uint32_t a[4] = {0, 0, 0, 0};
  float d[4] = {0, 0, 0, 0};
  ::boltrt::emu::mma_m16n8k16(d, a, 0, 0, false);
  out[threadIdx.x] = d[0];
}

TEST_F(CudaEmulator, MmaOnADivergedWarpIsAFinding) {
  float* out = device_alloc<float>(32);
  BOLTRT_LAUNCH(1, 32, 0, nullptr, partial_warp_mma_kernel)(out);
  EXPECT_NE(sole_finding().find("mma.sync"), std::string::npos);
}

__global__ void missing_barrier_kernel(float* out) {
  BOLTRT_SHARED(float, value, [1]);
  if (threadIdx.x == 0) value[0] = 42.0f;
  // no __syncthreads(): the other threads may read before thread 0 wrote
  out[threadIdx.x] = value[0];
}

TEST_F(CudaEmulator, MissingBarrierIsFoundByTheRaceCheck) {
  float* out = device_alloc<float>(64);
  BOLTRT_LAUNCH(1, 64, 0, nullptr, missing_barrier_kernel)(out);
  const std::string f = sole_finding();
  EXPECT_NE(f.find("missing_barrier_kernel"), std::string::npos) << f;
  EXPECT_NE(f.find("order of its threads"), std::string::npos) << f;
}

__global__ void global_race_kernel(unsigned* out) {
  out[0] = blockIdx.x * blockDim.x + threadIdx.x;  // every thread of every block, one word
}

TEST_F(CudaEmulator, ConflictingGlobalWritesAreFoundByTheRaceCheck) {
  unsigned* out = device_alloc<unsigned>(1);
  BOLTRT_LAUNCH(4, 32, 0, nullptr, global_race_kernel)(out);
  EXPECT_NE(sole_finding().find("order of its threads"), std::string::npos);
}

__global__ void shared_overrun_kernel(float* out) {
  BOLTRT_SHARED(float, small, [8]);
  small[threadIdx.x] = 1.0f;  // 32 threads write an 8-element array
  __syncthreads();
  out[threadIdx.x] = small[0];
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BOLTRT_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define BOLTRT_TEST_ASAN 1
#endif

TEST_F(CudaEmulator, SharedMemoryOverrunIsCaught) {
  float* out = device_alloc<float>(32);
#if defined(BOLTRT_TEST_ASAN)
  // The guard bytes between shared variables are poisoned: AddressSanitizer (or UBSan's array
  // bounds check) stops the process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        BOLTRT_LAUNCH(1, 32, 0, nullptr, shared_overrun_kernel)(out);
        cudaDeviceSynchronize();
      },
      "AddressSanitizer|out of bounds");  // UBSan's bounds check may see the index first
#else
  // Without ASan the guard bytes hold a canary, checked when the block ends.
  BOLTRT_LAUNCH(1, 32, 0, nullptr, shared_overrun_kernel)(out);
  EXPECT_NE(sole_finding().find("out of bounds"), std::string::npos);
#endif
}

__global__ void big_shared_kernel(float* out) {
  BOLTRT_SHARED(float, big, [13000]);  // 52,000 bytes > the 48 KiB default
  big[threadIdx.x] = 1.0f;
  out[threadIdx.x] = big[threadIdx.x];
}

TEST_F(CudaEmulator, StaticSharedMemoryAboveTheLimitIsAFinding) {
  float* out = device_alloc<float>(32);
  BOLTRT_LAUNCH(1, 32, 0, nullptr, big_shared_kernel)(out);
  EXPECT_NE(sole_finding().find("exceed"), std::string::npos);
}

__global__ void write_kernel(float* out, float v) {
  out[threadIdx.x] = v;
}
__global__ void dynamic_kernel(float* out) {
  BOLTRT_DYNAMIC_SHARED(float, buf);
  buf[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = buf[31 - threadIdx.x];
}
constexpr int kBounded = 64;
BOLTRT_DECLARE_LAUNCH_BOUNDS(bounded_kernel, kBounded);
__global__ void __launch_bounds__(kBounded) bounded_kernel(float* out) {
  out[threadIdx.x] = 0.0f;
}

TEST_F(CudaEmulator, LaunchLimitsFailWithTheHardwareErrorCodes) {
  float* out = device_alloc<float>(2048);
  BOLTRT_LAUNCH(1, 1025, 0, nullptr, write_kernel)(out, 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // launch errors are not sticky
  BOLTRT_LAUNCH(dim3(1, 65536), 1, 0, nullptr, write_kernel)(out, 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  BOLTRT_LAUNCH(0, 32, 0, nullptr, write_kernel)(out, 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  BOLTRT_LAUNCH(dim3(1), dim3(8, 8, 65), 0, nullptr, write_kernel)(out, 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  // Dynamic shared memory: 48 KiB by default, more only after cudaFuncSetAttribute, at most the
  // device's opt-in maximum (227 KiB on an H200).
  BOLTRT_LAUNCH(1, 32, 48 * 1024 + 4, nullptr, dynamic_kernel)(out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(
      cudaFuncSetAttribute(dynamic_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024),
      cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(
      cudaFuncSetAttribute(dynamic_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024),
      cudaSuccess);
  BOLTRT_LAUNCH(1, 32, 100 * 1024, nullptr, dynamic_kernel)(out);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  const auto got = download(out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], 31.0f - i);
  // __launch_bounds__(64): 128 threads cannot launch.
  BOLTRT_LAUNCH(1, 128, 0, nullptr, bounded_kernel)(out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchOutOfResources);
  BOLTRT_LAUNCH(1, 64, 0, nullptr, bounded_kernel)(out);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(findings().empty());
  cudaFree(out);
}

TEST_F(CudaEmulator, HostPointerArgumentIsAFinding) {
  std::vector<float> host(32);
  BOLTRT_LAUNCH(1, 32, 0, nullptr, write_kernel)(host.data(), 1.0f);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_NE(findings().at(0).find("not device memory"), std::string::npos);
  EXPECT_EQ(host[0], 0.0f);  // the kernel never ran
}

TEST_F(CudaEmulator, NewDeviceMemoryIsPoisonedWithNaN) {
  float* d = device_alloc<float>(16);
  const auto got = download(d, 16);
  for (float v : got) EXPECT_TRUE(std::isnan(v));
  cudaFree(d);
}

// ---- asynchrony ---------------------------------------------------------------------------------

TEST_F(CudaEmulator, HostReadsBeforeSynchronisingSeeStaleData) {
  float* d = device_alloc<float>(32);
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 32 * 4), cudaSuccess);
  auto* h = static_cast<float*>(pinned);
  for (int i = 0; i < 32; ++i) h[i] = -1.0f;
  boltrt::emu::hold_device(true);
  BOLTRT_LAUNCH(1, 32, 0, nullptr, write_kernel)(d, 5.0f);
  ASSERT_EQ(cudaMemcpyAsync(h, d, 32 * 4, cudaMemcpyDeviceToHost, nullptr), cudaSuccess);
  EXPECT_EQ(h[0], -1.0f);  // queued, not run: the pinned buffer still holds the old values
  boltrt::emu::hold_device(false);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(h[0], 5.0f);
  EXPECT_EQ(h[31], 5.0f);
  cudaFreeHost(pinned);
  cudaFree(d);
}

TEST_F(CudaEmulator, PinnedSourcesAreReadWhenTheCopyRunsPageableOnesAtTheCall) {
  float* d = device_alloc<float>(2);
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 4), cudaSuccess);
  auto* p = static_cast<float*>(pinned);
  float pageable = 1.0f;
  *p = 1.0f;
  boltrt::emu::hold_device(true);
  ASSERT_EQ(cudaMemcpyAsync(d, p, 4, cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d + 1, &pageable, 4, cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  *p = 2.0f;        // before the copy runs: the device gets 2
  pageable = 2.0f;  // staged at the call: the device keeps 1
  boltrt::emu::hold_device(false);
  const auto got = download(d, 2);
  EXPECT_EQ(got[0], 2.0f);
  EXPECT_EQ(got[1], 1.0f);
  cudaFreeHost(pinned);
  cudaFree(d);
}

__global__ void add_arg_kernel(float* out, float v) {
  out[threadIdx.x] += v;
}

TEST_F(CudaEmulator, GraphsReplayKernelArgumentsFrozenAtCapture) {
  float* d = device_alloc<float>(32);
  cudaMemset(d, 0, 32 * 4);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float v = 3.0f;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  BOLTRT_LAUNCH(1, 32, 0, s, add_arg_kernel)(d, v);
  // Illegal while capturing: synchronising the stream, allocating (the capture is invalidated).
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  EXPECT_EQ(download(d, 1)[0], 0.0f);  // captured work does not run
  v = 100.0f;
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(download(d, 1)[0], 6.0f);  // 2 x 3, the value at capture
  cudaGraphExecDestroy(exec);

  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  cudaStreamDestroy(s);
  cudaFree(d);
}

TEST_F(CudaEmulator, EventsTimeTheDeviceTimeline) {
  cudaEvent_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);  // never recorded
  cudaGetLastError();
  boltrt::emu::hold_device(true);
  cudaEventRecord(a);
  cudaEventRecord(b);
  EXPECT_EQ(cudaEventQuery(b), cudaErrorNotReady);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
  boltrt::emu::hold_device(false);
  ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

// ---- devices, memory, cuBLAS
// ------------------------------------------------------------------------

TEST_F(CudaEmulator, DeviceProfilesReportTheirSizes) {
  struct Want {
    const char* key;
    int major, minor, sms;
    double total_gib;
  };
  for (const Want& w : {Want{"h200", 9, 0, 132, 140.4}, Want{"rtx5070", 12, 0, 48, 11.94},
                        Want{"orin-nano", 8, 7, 8, 7.44}}) {
    boltrt::emu::select_device(w.key);
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    EXPECT_EQ(prop.major, w.major) << w.key;
    EXPECT_EQ(prop.minor, w.minor) << w.key;
    EXPECT_EQ(prop.multiProcessorCount, w.sms) << w.key;
    size_t free_b = 0, total_b = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    EXPECT_NEAR(static_cast<double>(total_b) / (1 << 30), w.total_gib, 0.01) << w.key;
    EXPECT_LT(free_b, total_b);
  }
  // The RTX 5070's 672 GB/s from its clock and bus width, as probe_device computes it.
  boltrt::emu::select_device("rtx5070");
  std::string why;
  const auto info = boltrt::cuda::probe_device(0, &why);
  ASSERT_TRUE(info) << why;
  EXPECT_NEAR(info->peak_bandwidth_gbs, 672.0, 0.5);
  // More than is free: cudaErrorMemoryAllocation (not sticky), nothing allocated.
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, size_t{13} << 30), cudaErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  boltrt::emu::select_device("none");
  int count = -1;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaErrorNoDevice);
  EXPECT_EQ(count, 0);
  cudaGetLastError();
  EXPECT_FALSE(boltrt::cuda::probe_device(0, &why));
  boltrt::emu::select_device("h200");
}

TEST_F(CudaEmulator, CublasGemmExIsTheColumnMajorProduct) {
  // y[t][r] = sum_k W[r][k] x[t][k], as cublas_linear.cpp calls it (A = W^T via OP_T).
  const int rows = 5, cols = 24, n = 3;
  std::vector<uint16_t> w(rows * cols), x(n * cols);
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < cols; ++k)
      w[r * cols + k] = boltrt::fp32_to_fp16(float((r + 2 * k) % 7 - 3));
  }
  for (int t = 0; t < n; ++t) {
    for (int k = 0; k < cols; ++k)
      x[t * cols + k] = boltrt::fp32_to_fp16(float((t * 5 + k) % 5 - 2));
  }
  uint16_t* dw = device_alloc<uint16_t>(w.size());
  uint16_t* dx = device_alloc<uint16_t>(x.size());
  float* dy = device_alloc<float>(rows * n);
  cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice);
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, dw, CUDA_R_16F, cols,
                         dx, CUDA_R_16F, cols, &beta, dy, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  const auto y = download(dy, rows * n);
  for (int t = 0; t < n; ++t) {
    for (int r = 0; r < rows; ++r) {
      float want = 0;
      for (int k = 0; k < cols; ++k) {
        want += boltrt::fp16_to_fp32(w[r * cols + k]) * boltrt::fp16_to_fp32(x[t * cols + k]);
      }
      EXPECT_EQ(y[static_cast<size_t>(t * rows + r)], want);  // small integers: exact
    }
  }
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, dw, CUDA_R_16F,
                         cols - 1, dx, CUDA_R_16F, cols, &beta, dy, CUDA_R_32F, rows,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);  // lda < k
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, dw, CUDA_R_16F, cols,
                         dx, CUDA_R_16BF, cols, &beta, dy, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_SUPPORTED);  // mixed input types
  cublasDestroy(h);
  cudaFree(dw);
  cudaFree(dx);
  cudaFree(dy);
}

}  // namespace
#endif
