// CPU matrix multiplication on quantized weights: the op where decode spends its time.
//
//   y[b, r] = sum_k W[r, k] * x[b, k]     W: rows x cols of `type`, row-major, row_stride bytes
//                                         x: batch x cols f32, y: batch x rows f32
//
// Activations are quantized once per call to the 8-bit block type ggml pairs with W's type
// (Q8_0 for legacy blocks, Q8_K for k-quants) exactly as llama.cpp's x86 path does, so results
// match llama.cpp's; float weights (F32/F16/BF16) multiply f32 activations directly.
// The SIMD level (scalar / AVX2 / AVX-512 on x86-64, scalar / NEON / NEON with dotprod on aarch64)
// is chosen once at run time; BOLTRT_SIMD=scalar|avx2|avx512|neon|neon-dotprod lowers it (tests
// use set_simd_level to compare levels). AVX-512 needs F/BW/VL/DQ/VNNI.
//
// Kernels (matmul_scalar.cpp, matmul_x86_kernels.h, matmul_avx512.cpp): the scalar reference
// mirrors ggml's generic dot products; the AVX2 kernels take one weight row against up to 4
// activation rows; at AVX-512, quantized types use 16-row "lane" kernels (one weight row per
// 32-bit lane, vpdpbusd: exact int32 block dots, then acc = fma(S_i, d_i * dy_i, acc) per row in
// block order), and the small-batch kernels (gemv_avx512.cpp for Q4_0, Q5_0, Q4_K, Q6_K;
// gemm_q8_0_rows for Q8_0) compute that same per-row arithmetic without the transposes (and
// matrices with a LanePacks copy, below, run the lane kernel on it at every batch size); float
// weights use the x86 row kernels at every batch size.
// Batch invariance, at every level and for every type: each output row's bits are those of a
// one-token call, whatever the batch size, the other activation rows, the row range
// (matmul_rows) and the thread count (threads split weight rows, never the columns).
// tests/test_matmul_invariance.cpp checks it with random batch compositions.
//
// Threads take chunks of weight rows from a shared counter, the chunks shrinking towards the end
// (ThreadPool::run_shared: a thread not yet scheduled is not waited for); products under ~16 KB
// of weights run on the calling thread. Errors (unsupported type, columns not a multiple of the
// block, bad row range or stride) throw boltrt::Error.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "quant/ggml_type.h"

namespace boltrt {

class ThreadPool;

class LanePacks;

struct WeightView {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;  // bytes between rows (row_size(type, cols) when packed)
  // The same matrix packed by LanePacks for the AVX-512 lane kernels (Q4_0, Q5_0, Q8_0, Q4_K,
  // Q5_K), or
  // null. Only a view of a whole matrix may carry it: a view moved to other rows (an expert of a
  // stack) must drop it.
  const uint8_t* lanes = nullptr;
  const LanePacks* packs = nullptr;  // the owner of `lanes`, which fills it on first use
};

// Rows [row0, row0 + n) of w as a matrix of their own (an expert of a stack). The view keeps w's
// packed copy (LanePacks) where row0 starts one of its 16-row groups, and drops it otherwise.
WeightView weight_rows(const WeightView& w, int64_t row0, int64_t n);

// Copies for the AVX-512 lane kernels, made once at load: every Q4_0, Q5_0, Q8_0, Q4_K and Q5_K
// matrix (and expert stack) in 16-row groups, as compact as the file (matmul_internal.h): per
// 32-column block the 16 rows' codes as zmm words (word q, lane r = 4 code bytes of row r) and
// their 16 f16 scales; per K-quant super-block its bytes as such words. The lane kernels then
// read each group as one sequential stream without the transposes or shuffles the raw rows
// need, with the raw rows' arithmetic, bit for bit (llama.cpp repacks Q4_0 and Q4_K at load for
// the same reason). Costs a copy of those weights in memory
// and a pass over them at load; the file's pages of those matrices are then not read again.
// The copies are made when first needed (ready(): the first CPU session, or the first matmul that
// reads one), so a model that runs on the GPU costs no memory or load time for them. Owned by
// the model whose matrices they copy.
class LanePacks {
 public:
  LanePacks();
  ~LanePacks();
  LanePacks(const LanePacks&) = delete;
  LanePacks& operator=(const LanePacks&) = delete;
  // Sets w.lanes to a packed copy (memory reserved now, filled by ready()) when the AVX-512
  // level is in use and w is a Q4_0, Q5_0, Q8_0, Q4_K or Q5_K matrix; leaves w alone otherwise.
  // w's data must stay valid until ready() has run.
  void pack(WeightView& w);
  // Fills every copy pack() has promised; thread-safe, cheap once done (matmul calls it before
  // reading a copy).
  void ready() const;

 private:
  struct Pending {
    WeightView source;
    uint8_t* dest;
  };
  static void fill(const WeightView& w, uint8_t* dest);
  uint8_t* allocate(size_t bytes);  // 64-byte aligned, in an arena
  mutable std::mutex mutex_;
  mutable std::vector<Pending> pending_;
  mutable std::atomic<size_t> n_pending_{0};
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::vector<std::unique_ptr<uint8_t, Free>> buffers_;  // arenas; the last one is being filled
  size_t arena_size_ = 0, arena_used_ = 0;
};

// Neon is plain Advanced SIMD (every aarch64 CPU), NeonDot adds the dot-product extension.
enum class SimdLevel { Scalar, Avx2, Avx512, Neon, NeonDot };
SimdLevel simd_level();                // the level in use
void set_simd_level(SimdLevel level);  // for tests and benchmarks; clamps to what the CPU has
const char* simd_level_name(SimdLevel level);

// y = W x for `batch` activation rows. pool may be null (single thread).
void matmul(const WeightView& w, const float* x, int64_t batch, float* y, ThreadPool* pool);

// Same, for a subset of weight rows [row_begin, row_end) (MoE experts, vocab slices):
// y[b * (row_end - row_begin) + (r - row_begin)].
void matmul_rows(const WeightView& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t batch, float* y, ThreadPool* pool);

}  // namespace boltrt
