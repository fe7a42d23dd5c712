// Host <-> device copies for the CUDA kernel tests (only built with CUDA). A zero-length vector
// still gets a one-byte buffer, so kernels may be handed a valid pointer for empty inputs.
#pragma once
#if defined(BOLTRT_HAVE_CUDA)
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace boltrt::test {

template <typename T>
cuda::DeviceBuffer to_device(const std::vector<T>& v) {
  cuda::DeviceBuffer b(std::max<size_t>(1, v.size()) * sizeof(T));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

// Waits for the device, then copies n elements back.
template <typename T>
std::vector<T> from_device(const cuda::DeviceBuffer& b, size_t n) {
  cuda::synchronize();
  std::vector<T> v(n);
  b.download(v.data(), n * sizeof(T));
  return v;
}

}  // namespace boltrt::test
#endif
