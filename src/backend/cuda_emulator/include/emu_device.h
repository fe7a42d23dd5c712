// Device-side CUDA for the CPU emulator build: the built-in variables, the intrinsics boltrt's
// kernels call, shared memory, and the kernel launch (kernels/portable.cuh's BOLTRT_LAUNCH).
// Every CUDA thread of a block runs on its own fiber; the intrinsics are the points where the
// emulator switches between them (src/backend/cuda_emulator/scheduler.cpp), so nothing runs in
// lockstep and nothing another thread wrote is visible without the synchronisation CUDA asks for.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "emu_types.h"

struct CUstream_st;

namespace boltrt::emu {

// The built-in variables of the CUDA thread running on this OS thread (null outside a kernel).
struct Builtins {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
extern thread_local const Builtins* tl_builtins;
[[noreturn]] void builtin_outside_kernel(const char* what);
inline const Builtins& builtins(const char* what) {
  if (!tl_builtins) builtin_outside_kernel(what);
  return *tl_builtins;
}

enum class ShflKind { kIdx, kUp, kDown, kXor };
// One warp shuffle of an 8-byte payload (4-byte types use the low word). The call site (return
// address) identifies "the same intrinsic" across the lanes.
uint64_t shfl(ShflKind kind, unsigned mask, uint64_t value, int operand, int width);
enum class VoteKind { kBallot, kAny, kAll, kSyncwarp };
unsigned vote(VoteKind kind, unsigned mask, int predicate);
unsigned active_mask();
int barrier(int predicate, int reduce);  // reduce: 0 none, 1 count, 2 and, 3 or

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 with D = C = d (the kernels
// accumulate in place): a warp collective of all 32 lanes, fragments as in the PTX ISA.
void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool bf16);

// Shared memory of the running block: the variable declared at `site` (one object per block,
// poisoned when the block starts, with guard bytes around it), and the dynamic array.
void* block_shared(const void* site, size_t bytes, size_t align, const char* name);
void* dynamic_shared();

// Atomics on device memory (global or shared): checked addresses, relaxed order.
int atomic_add_i32(int* p, int v);
unsigned atomic_add_u32(unsigned* p, unsigned v);
unsigned long long atomic_add_u64(unsigned long long* p, unsigned long long v);
float atomic_add_f32(float* p, float v);
int atomic_max_i32(int* p, int v);
int atomic_min_i32(int* p, int v);
int atomic_exch_i32(int* p, int v);
int atomic_cas_i32(int* p, int compare, int v);

// ---- kernel launch ------------------------------------------------------------------------
struct PointerArg {
  const void* ptr;
  bool writable;  // non-const pointee: the launch may write through it
  int index;      // parameter position, for messages
};
struct LaunchRequest {
  const char* name = "";
  const void* fn = nullptr;
  dim3 grid, block;
  size_t dynamic_shared = 0;
  CUstream_st* stream = nullptr;
  std::function<void()> run;  // the kernel body for the CUDA thread now current
  std::vector<PointerArg> pointers;
};
void launch(LaunchRequest&& request);

// Records that kernel `name` (every instantiation) was declared __launch_bounds__(max_threads).
bool declare_launch_bounds(const char* name, int max_threads);

template <typename Tuple, size_t... I>
void collect_pointers(const Tuple& args, std::vector<PointerArg>& out, std::index_sequence<I...>) {
  (
      [&] {
        using T = std::tuple_element_t<I, Tuple>;
        if constexpr (std::is_pointer_v<T>) {
          out.push_back(PointerArg{static_cast<const void*>(std::get<I>(args)),
                                   !std::is_const_v<std::remove_pointer_t<T>>,
                                   static_cast<int>(I)});
        }
      }(),
      ...);
}

// `BOLTRT_LAUNCH(grid, block, smem, stream, kernel)(args...)`: the arguments are converted to
// the kernel's parameter types and copied once at launch (as CUDA does), and every CUDA thread
// calls the kernel with its own copy of them.
template <typename... P>
class Launcher {
 public:
  Launcher(void (*fn)(P...), const char* name, dim3 grid, dim3 block, size_t smem,
           CUstream_st* stream)
      : fn_(fn), name_(name), grid_(grid), block_(block), smem_(smem), stream_(stream) {}

  template <typename... A>
  void operator()(A&&... a) const {
    static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong argument count");
    using Args = std::tuple<std::decay_t<P>...>;
    auto args = std::make_shared<const Args>(std::forward<A>(a)...);
    LaunchRequest r;
    r.name = name_;
    r.fn = reinterpret_cast<const void*>(fn_);
    r.grid = grid_;
    r.block = block_;
    r.dynamic_shared = smem_;
    r.stream = stream_;
    collect_pointers(*args, r.pointers, std::index_sequence_for<P...>{});
    r.run = [fn = fn_, args] { std::apply(fn, *args); };
    launch(std::move(r));
  }

 private:
  void (*fn_)(P...);
  const char* name_;
  dim3 grid_, block_;
  size_t smem_;
  CUstream_st* stream_;
};

}  // namespace boltrt::emu

// ---- built-in variables -------------------------------------------------------------------
#define threadIdx (::boltrt::emu::builtins("threadIdx").thread_idx)
#define blockIdx (::boltrt::emu::builtins("blockIdx").block_idx)
#define blockDim (::boltrt::emu::builtins("blockDim").block_dim)
#define gridDim (::boltrt::emu::builtins("gridDim").grid_dim)
constexpr int warpSize = 32;

// ---- synchronisation, warp intrinsics -----------------------------------------------------
inline __attribute__((always_inline)) void __syncthreads() {
  ::boltrt::emu::barrier(0, 0);
}
inline __attribute__((always_inline)) int __syncthreads_count(int p) {
  return ::boltrt::emu::barrier(p, 1);
}
inline __attribute__((always_inline)) int __syncthreads_and(int p) {
  return ::boltrt::emu::barrier(p, 2);
}
inline __attribute__((always_inline)) int __syncthreads_or(int p) {
  return ::boltrt::emu::barrier(p, 3);
}
inline __attribute__((always_inline)) void __syncwarp(unsigned mask = 0xffffffffu) {
  ::boltrt::emu::vote(::boltrt::emu::VoteKind::kSyncwarp, mask, 0);
}
inline __attribute__((always_inline)) unsigned __ballot_sync(unsigned mask, int p) {
  return ::boltrt::emu::vote(::boltrt::emu::VoteKind::kBallot, mask, p);
}
inline __attribute__((always_inline)) int __any_sync(unsigned mask, int p) {
  return static_cast<int>(::boltrt::emu::vote(::boltrt::emu::VoteKind::kAny, mask, p));
}
inline __attribute__((always_inline)) int __all_sync(unsigned mask, int p) {
  return static_cast<int>(::boltrt::emu::vote(::boltrt::emu::VoteKind::kAll, mask, p));
}
inline unsigned __activemask() {
  return ::boltrt::emu::active_mask();
}
inline void __threadfence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_block() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

namespace boltrt::emu {
template <typename T>
inline __attribute__((always_inline)) T shfl_typed(ShflKind kind, unsigned mask, T v, int operand,
                                                   int width) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 2, "shuffle of 2, 4 or 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = shfl(kind, mask, bits, operand, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace boltrt::emu

template <typename T>
inline __attribute__((always_inline)) T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::boltrt::emu::shfl_typed(::boltrt::emu::ShflKind::kIdx, mask, v, src, width);
}
template <typename T>
inline __attribute__((always_inline)) T __shfl_up_sync(unsigned mask, T v, unsigned delta,
                                                       int width = 32) {
  return ::boltrt::emu::shfl_typed(::boltrt::emu::ShflKind::kUp, mask, v, static_cast<int>(delta),
                                   width);
}
template <typename T>
inline __attribute__((always_inline)) T __shfl_down_sync(unsigned mask, T v, unsigned delta,
                                                         int width = 32) {
  return ::boltrt::emu::shfl_typed(::boltrt::emu::ShflKind::kDown, mask, v, static_cast<int>(delta),
                                   width);
}
template <typename T>
inline __attribute__((always_inline)) T __shfl_xor_sync(unsigned mask, T v, int lane_mask,
                                                        int width = 32) {
  return ::boltrt::emu::shfl_typed(::boltrt::emu::ShflKind::kXor, mask, v, lane_mask, width);
}

// ---- atomics ------------------------------------------------------------------------------
inline int atomicAdd(int* p, int v) {
  return ::boltrt::emu::atomic_add_i32(p, v);
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return ::boltrt::emu::atomic_add_u32(p, v);
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return ::boltrt::emu::atomic_add_u64(p, v);
}
inline float atomicAdd(float* p, float v) {
  return ::boltrt::emu::atomic_add_f32(p, v);
}
inline int atomicMax(int* p, int v) {
  return ::boltrt::emu::atomic_max_i32(p, v);
}
inline int atomicMin(int* p, int v) {
  return ::boltrt::emu::atomic_min_i32(p, v);
}
inline int atomicExch(int* p, int v) {
  return ::boltrt::emu::atomic_exch_i32(p, v);
}
inline int atomicCAS(int* p, int compare, int v) {
  return ::boltrt::emu::atomic_cas_i32(p, compare, v);
}

// ---- math and bit casts (device functions with host equivalents) --------------------------
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
inline double rsqrt(double x) {
  return 1.0 / std::sqrt(x);
}
inline float __fdividef(float a, float b) {
  return a / b;
}
inline float __expf(float x) {
  return std::exp(x);
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) {
  int u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
