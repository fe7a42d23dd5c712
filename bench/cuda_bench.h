// The start every CUDA benchmark shares: say why nothing runs (no CUDA in the build, no usable
// device) or name the device it runs on. A missing device is not an error for a benchmark: it
// prints one line and the program exits 0, so bench/gpu-check.sh and CPU-only builds run them all.
#pragma once
#include <fmt/format.h>

#include <optional>
#include <string>

#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

namespace boltrt::bench {

inline int report_built_without_cuda(const char* bench) {
  fmt::print("{}: built without CUDA\n", bench);
  return 0;
}

#if defined(BOLTRT_HAVE_CUDA)
// Device 0 if it is usable (printing its name, architecture and peak bandwidth), else nullopt
// after printing why.
inline std::optional<cuda::DeviceInfo> bench_device(const char* bench) {
  std::string why;
  auto device = cuda::probe_device(0, &why);
  if (!device) {
    fmt::print("{}: no usable CUDA device: {}\n", bench, why);
    return std::nullopt;
  }
  fmt::print("device: {} (sm_{}{}), peak {:.0f} GB/s\n", device->name, device->compute_major,
             device->compute_minor, device->peak_bandwidth_gbs);
  return device;
}
#endif

}  // namespace boltrt::bench
