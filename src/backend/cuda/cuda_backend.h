// The CUDA backend's host-side interface, in plain C++ (no CUDA headers), so tests, benchmarks
// and the runtime can call it from ordinary translation units. Built only when CMake finds nvcc
// (BOLTRT_HAVE_CUDA); callers guard their use with that macro.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "quant/ggml_type.h"

namespace boltrt::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  size_t total_bytes = 0, free_bytes = 0;
  double peak_bandwidth_gbs = 0;  // memory clock x bus width x 2 (DDR), as the vendor quotes it
};

// The device `index` when it exists and can run our kernels; otherwise nullopt with the reason
// ("CUDA driver version is insufficient", "no CUDA-capable device", "compute capability 7.5 <
// 8.0", ...) in *why.
std::optional<DeviceInfo> probe_device(int index, std::string* why);

// Device memory owned by one object. Allocation failure throws boltrt::Error naming the MiB
// asked for and the MiB free.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Page-locked host memory (cudaMallocHost): staging for asynchronous copies (the batch's
// per-layer embedding rows, logits). Allocation failure throws boltrt::Error.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Decode GEMV on device memory: y[b, r] = sum_k W[r, k] x[b, k] for batch 1..8, f32
// activations, weights unpacked in registers, fp32 accumulation (kernels/gemv_quant.cu).
// x must be 16-byte aligned (cudaMalloc memory is) and cols a multiple of 32.
bool gemv_supported(GgmlType type);
void gemv(GgmlType type, const void* w, int64_t rows, int64_t cols, size_t row_stride,
          const float* x, int batch, float* y);

// Waits for all queued device work; throws boltrt::Error on a device fault.
void synchronize();

// Milliseconds between two points on the device's timeline, for benchmarks: call
// timer_start(), queue work, then timer_stop_ms() (which synchronizes).
void timer_start();
double timer_stop_ms();

}  // namespace boltrt::cuda
