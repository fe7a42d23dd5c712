// The few CUDA constructs that plain C++ cannot express, written so that one kernel source
// serves nvcc and the CPU emulator (-DBOLTRT_CUDA_EMULATOR=ON, src/backend/cuda_emulator/):
//   BOLTRT_LAUNCH(grid, block, smem, stream, kernel<...>)(args...)   kernel<<<...>>>(args...)
//   BOLTRT_SHARED(T, name, [dims])                  __shared__ T name[dims];
//   BOLTRT_SHARED_ALIGNED(align, T, name, [dims])   __shared__ __align__(align) T name[dims];
//   BOLTRT_DYNAMIC_SHARED(T, name)                  extern __shared__ T name[];
//   BOLTRT_DECLARE_LAUNCH_BOUNDS(kernel, n)         next to a kernel declared
//                                                   __launch_bounds__(n): the emulator checks
//                                                   launches against it
// Under the emulator a shared variable is one object per block (a reference into the block's
// arena, poisoned and guarded), not a function-local static.
#pragma once
#include <cuda_runtime.h>

#if defined(BOLTRT_CUDA_EMULATOR)

#define BOLTRT_LAUNCH(grid, block, smem, stream, ...) \
  ::boltrt::emu::Launcher(&__VA_ARGS__, #__VA_ARGS__, grid, block, smem, stream)

#define BOLTRT_SHARED_ALIGNED(align, T, name, dims)                        \
  using boltrt_shared_##name##_t = T dims;                                 \
  static const char boltrt_shared_##name##_site = 0;                       \
  boltrt_shared_##name##_t& name =                                         \
      *static_cast<boltrt_shared_##name##_t*>(::boltrt::emu::block_shared( \
          &boltrt_shared_##name##_site, sizeof(boltrt_shared_##name##_t), align, #name))

#define BOLTRT_SHARED(T, name, dims) BOLTRT_SHARED_ALIGNED(alignof(T), T, name, dims)

#define BOLTRT_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::boltrt::emu::dynamic_shared())

#define BOLTRT_DECLARE_LAUNCH_BOUNDS(kernel, n)        \
  [[maybe_unused]] const bool boltrt_bounds_##kernel = \
      ::boltrt::emu::declare_launch_bounds(#kernel, n)

#else

#define BOLTRT_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define BOLTRT_SHARED_ALIGNED(align, T, name, dims) \
  __shared__ __align__(align)                       \
  T name dims
#define BOLTRT_SHARED(T, name, dims) __shared__ T name dims
#define BOLTRT_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#define BOLTRT_DECLARE_LAUNCH_BOUNDS(kernel, n) static_assert((n) > 0, #kernel)

#endif
