// Matmul driver: validates the call, converts activations once, splits weight rows over the
// thread pool and hands each thread's contiguous row range to the kernel of the chosen SIMD level.
#include "backend/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_internal.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt {
namespace {

SimdLevel best_supported_level() {
  const CpuFeatures& f = cpu_features();
  if (f.neon) return f.dotprod ? SimdLevel::NeonDot : SimdLevel::Neon;
  const bool avx2 = f.avx2 && f.fma && f.f16c && f.bmi2;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni;
  if (avx512) return SimdLevel::Avx512;
  if (avx2) return SimdLevel::Avx2;
  return SimdLevel::Scalar;
}

bool is_arm_level(SimdLevel level) {
  return level == SimdLevel::Neon || level == SimdLevel::NeonDot;
}

// The highest supported level at or below `level`; another architecture's levels give scalar.
SimdLevel clamp_level(SimdLevel level) {
  const SimdLevel best = best_supported_level();
  if (is_arm_level(level) != is_arm_level(best)) return SimdLevel::Scalar;
  return static_cast<int>(level) > static_cast<int>(best) ? best : level;
}

SimdLevel initial_level() {
  SimdLevel level = best_supported_level();
  if (const char* env = std::getenv("BOLTRT_SIMD")) {
    const std::string_view want(env);
    SimdLevel asked = level;
    if (want == "scalar") asked = SimdLevel::Scalar;
    if (want == "avx2") asked = SimdLevel::Avx2;
    if (want == "avx512") asked = SimdLevel::Avx512;
    if (want == "neon") asked = SimdLevel::Neon;
    if (want == "neon-dotprod") asked = SimdLevel::NeonDot;
    level = clamp_level(asked);
  }
  return level;
}

std::atomic<SimdLevel>& level_state() {
  static std::atomic<SimdLevel> level{initial_level()};
  return level;
}

cpu::GemmFn pick_kernel(SimdLevel level, GgmlType type) {
  cpu::GemmFn fn = nullptr;
#if defined(__x86_64__) || defined(_M_X64)
  if (level == SimdLevel::Avx512) fn = cpu::avx512_gemm(type);
  if (!fn && level != SimdLevel::Scalar) fn = cpu::avx2_gemm(type);
#elif defined(__aarch64__)
  if (level == SimdLevel::NeonDot) fn = cpu::neon_dotprod_gemm(type);
  if (!fn && level != SimdLevel::Scalar) fn = cpu::neon_gemm(type);
#else
  (void)level;
#endif
  return fn ? fn : cpu::scalar_gemm(type);
}

}  // namespace

#if defined(__x86_64__) || defined(_M_X64)
// AVX-512 has its own Q8_K and Q8_0 quantizers (the decode kernels' activations); the other
// formats are cheap enough in scalar code.
static void avx512_convert_activation_row(cpu::ActFormat format, const float* x, void* dst,
                                          int64_t n) {
  if (format == cpu::ActFormat::Q8_K) {
    cpu::avx512_quantize_act_q8_k(x, dst, n);
  } else if (format == cpu::ActFormat::Q8_0) {
    cpu::avx512_quantize_act_q8_0(x, dst, n);
  } else {
    cpu::convert_activation_row(format, x, dst, n);
  }
}
#endif

cpu::ConvertFn cpu::activation_converter(SimdLevel level) {
#if defined(__aarch64__)
  if (is_arm_level(level)) return &cpu::neon_convert_activation_row;
#elif defined(__x86_64__) || defined(_M_X64)
  if (level == SimdLevel::Avx512) return &avx512_convert_activation_row;
#else
  (void)level;
#endif
  return &cpu::convert_activation_row;
}

SimdLevel simd_level() {
  return level_state().load(std::memory_order_relaxed);
}

void set_simd_level(SimdLevel level) {
  level_state().store(clamp_level(level), std::memory_order_relaxed);
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Scalar:
      return "scalar";
    case SimdLevel::Avx2:
      return "avx2";
    case SimdLevel::Avx512:
      return "avx512";
    case SimdLevel::Neon:
      return "neon";
    case SimdLevel::NeonDot:
      return "neon-dotprod";
  }
  return "?";
}

void matmul(const WeightView& w, const float* x, int64_t batch, float* y, ThreadPool* pool) {
  matmul_rows(w, 0, w.rows, x, batch, y, pool);
}

void matmul_rows(const WeightView& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t batch, float* y, ThreadPool* pool) {
  if (!cpu::matmul_supported(w.type)) {
    fail("matmul: weight type {} (id {}) has no CPU kernel", type_traits(w.type).name,
         static_cast<uint32_t>(w.type));
  }
  const TypeTraits& traits = type_traits(w.type);
  if (w.cols <= 0 || w.cols % traits.block_size != 0) {
    fail("matmul: {} columns is not a positive multiple of the {} block size {}", w.cols,
         traits.name, traits.block_size);
  }
  if (w.rows > 1 && w.row_stride < row_size(w.type, w.cols)) {
    fail("matmul: row stride {} B is smaller than a {} row of {} columns ({} B)", w.row_stride,
         traits.name, w.cols, row_size(w.type, w.cols));
  }
  if (row_begin < 0 || row_end > w.rows || row_begin > row_end) {
    fail("matmul: row range [{}, {}) outside the weight's {} rows", row_begin, row_end, w.rows);
  }
  if (batch < 0) fail("matmul: negative batch {}", batch);
  const int64_t n_rows = row_end - row_begin;
  if (n_rows == 0 || batch == 0) return;
  if (!w.data || !x || !y) fail("matmul: null weight, activation or output pointer");

  // Activations in the weight type's vec_dot format; one buffer per calling thread, reused.
  const SimdLevel level = simd_level();
  const cpu::ActFormat format = cpu::activation_format(w.type);
  const size_t a_stride = cpu::activation_row_bytes(format, w.cols);
  const uint8_t* a = reinterpret_cast<const uint8_t*>(x);
  thread_local std::vector<uint8_t> act_buffer;
  if (format != cpu::ActFormat::F32) {
    act_buffer.resize(a_stride * static_cast<size_t>(batch));
    uint8_t* dst = act_buffer.data();
    const cpu::ConvertFn convert_row = cpu::activation_converter(level);
    auto convert = [&](int64_t b0, int64_t b1, int) {
      for (int64_t b = b0; b < b1; ++b) {
        convert_row(format, x + b * w.cols, dst + b * a_stride, w.cols);
      }
    };
    if (pool && batch >= 4) {
      // rows from a shared counter: a worker not yet scheduled is not waited for
      std::atomic<int64_t> next_row{0};
      pool->run_shared([&](int thread) {
        for (int64_t b = next_row.fetch_add(1); b < batch; b = next_row.fetch_add(1))
          convert(b, b + 1, thread);
      });
    } else {
      convert(0, batch, 0);
    }
    a = act_buffer.data();
  }

  cpu::GemmFn gemm = pick_kernel(level, w.type);
  // A packed copy (LanePacks) serves whole 16-row groups: row ranges that start on one.
  const uint8_t* lanes = nullptr;
#if defined(__x86_64__) || defined(_M_X64)
  if (w.lanes && level == SimdLevel::Avx512 && row_begin % 16 == 0 && cpu::lane_packable(w.type)) {
    if (w.packs) w.packs->ready();
    lanes = w.lanes;
    gemm = &cpu::avx512_gemm_lane_packed;
  }
#endif
  const size_t lane_group_bytes = cpu::lane_pack_group_bytes(w.type, w.cols);
  const uint8_t* w0 = static_cast<const uint8_t*>(w.data) + row_begin * w.row_stride;
  auto run_rows = [&](int64_t r0, int64_t r1, int) {
    cpu::GemmTile tile;
    tile.type = w.type;
    tile.cols = w.cols;
    tile.w = w0 + r0 * w.row_stride;
    tile.w_stride = w.row_stride;
    tile.n_rows = r1 - r0;
    tile.a = a;
    tile.a_stride = a_stride;
    tile.n_act = batch;
    tile.y = y + r0;
    tile.y_stride = n_rows;
    tile.matrix_bytes = static_cast<double>(w.rows) * static_cast<double>(w.row_stride);
    if (lanes) tile.lanes = lanes + static_cast<size_t>((row_begin + r0) / 16) * lane_group_bytes;
    gemm(tile);
  };
  // Small products are not worth waking the pool (decode has many 2560 x 256-row slices).
  const double work_bytes =
      static_cast<double>(n_rows) * static_cast<double>(w.row_stride) * static_cast<double>(batch);
  if (!pool || pool->size() == 1 || work_bytes < 16 * 1024) {
    run_rows(0, n_rows, 0);
    return;
  }
  // Threads take chunks of rows from a shared counter rather than one fixed share each, so on a
  // shared machine a thread that is preempted or slower does not hold the others up at the end
  // of every matmul. Chunks shrink as the work runs out (a fraction of what is left, down to
  // about kMinChunkBytes of weights), so the threads finish within a small chunk of each other.
  // Chunk starts and sizes are multiples of 16 rows (the AVX-512 lane kernels' row group).
  constexpr double kMinChunkBytes = 32 * 1024;
  const int64_t n_threads = pool->size();
  const double row_bytes = static_cast<double>(w.row_stride) * static_cast<double>(batch);
  const int64_t min_chunk = std::max<int64_t>(
      16, (static_cast<int64_t>(kMinChunkBytes / std::max(1.0, row_bytes)) + 15) / 16 * 16);
  if (n_rows <= min_chunk) {
    run_rows(0, n_rows, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  pool->run_shared([&](int thread) {
    int64_t r0 = next.load(std::memory_order_relaxed);
    for (;;) {
      if (r0 >= n_rows) return;
      const int64_t share = (n_rows - r0) / (2 * n_threads);
      const int64_t size = std::max(min_chunk, (share + 15) / 16 * 16);
      const int64_t r1 = std::min(n_rows, r0 + size);
      if (next.compare_exchange_weak(r0, r1, std::memory_order_relaxed)) {
        run_rows(r0, r1, thread);
        r0 = next.load(std::memory_order_relaxed);
      }
    }
  });
}

WeightView weight_rows(const WeightView& w, int64_t row0, int64_t n) {
  if (row0 < 0 || n < 0 || row0 + n > w.rows) {
    fail("weight_rows: rows [{}, {}) outside the weight's {} rows", row0, row0 + n, w.rows);
  }
  WeightView v = w;
  v.data = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(row0) * w.row_stride;
  v.rows = n;
  v.lanes = nullptr;
  if (w.lanes && row0 % 16 == 0) {
    v.lanes = w.lanes + static_cast<size_t>(row0 / 16) * cpu::lane_pack_group_bytes(w.type, w.cols);
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// LanePacks
// ---------------------------------------------------------------------------------------------

LanePacks::LanePacks() = default;
LanePacks::~LanePacks() = default;

void LanePacks::Free::operator()(uint8_t* p) const {
  std::free(p);
}

void LanePacks::pack(WeightView& w) {
  w.lanes = nullptr;
  w.packs = nullptr;
  if (simd_level() != SimdLevel::Avx512 || !cpu::lane_packable(w.type) || !w.data || w.rows <= 0 ||
      w.cols <= 0 || w.cols % (cpu::lane_pack_words(w.type) ? 256 : 32) != 0) {
    return;
  }
  const size_t total =
      static_cast<size_t>((w.rows + 15) / 16) * cpu::lane_pack_group_bytes(w.type, w.cols);
  std::lock_guard<std::mutex> lock(mutex_);
  // reserved address space only: its pages cost nothing until fill() writes them
  uint8_t* dest = allocate(total);
  pending_.push_back({w, dest});
  n_pending_.store(pending_.size(), std::memory_order_release);
  w.lanes = dest;
  w.packs = this;
}

void LanePacks::ready() const {
  if (n_pending_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Pending& p : pending_) fill(p.source, p.dest);
  pending_.clear();
  n_pending_.store(0, std::memory_order_release);
}

void LanePacks::fill(const WeightView& w, uint8_t* packed) {
  const int64_t nblk = w.cols / 32, groups = (w.rows + 15) / 16;
  const size_t block_bytes = type_traits(w.type).type_size;
  const size_t code_bytes = cpu::lane_pack_code_bytes(w.type);
  const size_t pair_bytes = cpu::lane_pack_pair_bytes(w.type);
  const size_t group_bytes = cpu::lane_pack_group_bytes(w.type, w.cols);
  const size_t total = static_cast<size_t>(groups) * group_bytes;
  const auto* src = static_cast<const uint8_t*>(w.data);
  // where the file's blocks keep the codes and Q5_0 its qh (the f16 d is at 0 in all three)
  const size_t qs_at = w.type == GgmlType::Q5_0 ? 6 : 2;
  const int code_words = w.type == GgmlType::Q8_0 ? 8 : 4;
  const uint32_t flip = w.type == GgmlType::Q8_0 ? 0x80808080u : 0;  // Q8_0 codes + 128
  // K-quants: each 16-row group's blocks as transposed words, word w lane r = bytes 4w..4w+3
  // of row r's block
  auto pack_words = [&](int64_t g) {
    uint8_t* group = packed + static_cast<size_t>(g) * group_bytes;
    const size_t words = block_bytes / 4;
    for (int64_t i = 0; i < w.cols / 256; ++i) {
      uint8_t* dest = group + static_cast<size_t>(i) * words * 64;
      for (int64_t r = 0; r < 16; ++r) {
        // lanes past the last row repeat it (their results are never stored)
        const int64_t row = std::min(g * 16 + r, w.rows - 1);
        const uint8_t* blk =
            src + static_cast<size_t>(row) * w.row_stride + static_cast<size_t>(i) * block_bytes;
        for (size_t k = 0; k < words; ++k) std::memcpy(dest + k * 64 + r * 4, blk + 4 * k, 4);
      }
    }
  };
  auto pack_group = [&](int64_t g) {
    if (cpu::lane_pack_words(w.type)) return pack_words(g);
    uint8_t* group = packed + static_cast<size_t>(g) * group_bytes;
    for (int64_t i = 0; i < nblk; ++i) {
      uint8_t* pair = group + static_cast<size_t>(i / 2) * pair_bytes;
      uint8_t* codes = pair + static_cast<size_t>(i % 2) * code_bytes;
      uint8_t* scales = pair + 2 * code_bytes + static_cast<size_t>(i % 2) * 32;
      if (i % 2 == 0 && i + 1 == nblk) {  // the unused half of a last pair
        std::memset(codes + code_bytes, 0, code_bytes);
        std::memset(scales + 32, 0, 32);
      }
      for (int64_t r = 0; r < 16; ++r) {
        // lanes past the last row repeat it (their results are never stored)
        const int64_t row = std::min(g * 16 + r, w.rows - 1);
        const uint8_t* blk =
            src + static_cast<size_t>(row) * w.row_stride + static_cast<size_t>(i) * block_bytes;
        for (int q = 0; q < code_words; ++q) {
          uint32_t word;
          std::memcpy(&word, blk + qs_at + 4 * q, sizeof word);
          word ^= flip;
          std::memcpy(codes + q * 64 + r * 4, &word, sizeof word);
        }
        if (w.type == GgmlType::Q5_0) std::memcpy(codes + 4 * 64 + r * 4, blk + 2, 4);
        std::memcpy(scales + r * 2, blk, 2);
      }
    }
  };
  auto pack_groups = [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) pack_group(g);
  };
  // A big matrix is copied by all cores (the copy, and the kernel zeroing its fresh pages, were
  // ~40 % of a 24-token E4B Q4_0 run on one thread; `boltrt bench -n 1` on that file took
  // 2.9-3.7 s with one thread packing, 1.35-1.67 s with two); std::thread because a model loads
  // before it has a pool.
  const auto n_threads = static_cast<int64_t>(std::min<size_t>(
      {std::max(1u, std::thread::hardware_concurrency()), 8, total / (size_t{4} << 20) + 1}));
  std::vector<std::thread> helpers;
  for (int64_t k = 1; k < n_threads; ++k) {
    const int64_t g0 = groups * k / n_threads, g1 = groups * (k + 1) / n_threads;
    try {
      helpers.emplace_back(pack_groups, g0, g1);
    } catch (const std::system_error&) {  // no thread to be had: this one does that part
      pack_groups(g0, g1);
    }
  }
  pack_groups(0, groups / n_threads);
  for (std::thread& h : helpers) h.join();
}

uint8_t* LanePacks::allocate(size_t bytes) {
  // Matrices go one after another into arenas of >= 4 MiB (64 MiB once a matrix is over 1 MiB)
  // on 2 MiB pages where the kernel offers them (a page fault per 4 KiB page
  // made loading the tiny model 3x slower; the decode kernels read the copies once per token).
  if (arena_used_ + bytes > arena_size_) {
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t least = bytes > (size_t{1} << 20) ? size_t{64} << 20 : size_t{4} << 20;
    arena_size_ = std::max(least, (bytes + kHuge - 1) / kHuge * kHuge);
    auto* arena = static_cast<uint8_t*>(std::aligned_alloc(kHuge, arena_size_));
    if (!arena) fail("out of memory packing a weight matrix of {} bytes", bytes);
#if defined(__linux__)
    madvise(arena, arena_size_, MADV_HUGEPAGE);  // advice only: fine if refused
#endif
    buffers_.emplace_back(arena);
    arena_used_ = 0;
  }
  uint8_t* p = buffers_.back().get() + arena_used_;
  arena_used_ += bytes;
  return p;
}

}  // namespace boltrt
