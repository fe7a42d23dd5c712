#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <utility>

#include "gemv_quant.cuh"
#include "util/error.h"

namespace boltrt::cuda {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("CUDA {}: {}", what, cudaGetErrorString(status));
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

std::optional<DeviceInfo> probe_device(int index, std::string* why) {
  int count = 0;
  if (cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
    if (why) *why = cudaGetErrorString(status);
    cudaGetLastError();  // clear the error so later calls start clean
    return std::nullopt;
  }
  if (index < 0 || index >= count) {
    if (why) *why = fmt::format("device {} requested, {} present", index, count);
    return std::nullopt;
  }
  DeviceInfo info;
  info.index = index;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  if (prop.major < 8) {
    if (why) {
      *why = fmt::format("{}: compute capability {}.{} < 8.0", info.name, prop.major, prop.minor);
    }
    return std::nullopt;
  }
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, index);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, index);
  info.peak_bandwidth_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  check(cudaSetDevice(index), "cudaSetDevice");
  check(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo");
  return info;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  if (cudaMalloc(&data_, bytes) != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    data_ = nullptr;
    size_ = 0;
    fail("out of device memory: {:.1f} MiB needed, {:.1f} MiB free of {:.1f} MiB", bytes / kMiB,
         free_bytes / kMiB, total_bytes / kMiB);
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  if (offset + bytes > size_) {
    fail("DeviceBuffer::upload: {} bytes at offset {} past its {} bytes", bytes, offset, size_);
  }
  check(cudaMemcpy(static_cast<char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice),
        "upload");
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  if (offset + bytes > size_) {
    fail("DeviceBuffer::download: {} bytes at offset {} past its {} bytes", bytes, offset, size_);
  }
  check(cudaMemcpy(host, static_cast<const char*>(data_) + offset, bytes, cudaMemcpyDeviceToHost),
        "download");
}

PinnedBuffer::PinnedBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  if (cudaMallocHost(&data_, bytes) != cudaSuccess) {
    cudaGetLastError();
    data_ = nullptr;
    size_ = 0;
    fail("out of page-locked host memory: {:.1f} MiB needed", bytes / kMiB);
  }
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

bool gemv_supported(GgmlType type) {
  return kernels::gemv_quant_supported(static_cast<uint32_t>(type));
}

void gemv(GgmlType type, const void* w, int64_t rows, int64_t cols, size_t row_stride,
          const float* x, int batch, float* y) {
  if (!gemv_supported(type)) fail("CUDA gemv: type {} is not supported", type_traits(type).name);
  if (batch < 1 || batch > kernels::kGemvMaxBatch) {
    fail("CUDA gemv: batch {} is not in 1..{}", batch, kernels::kGemvMaxBatch);
  }
  if (cols % type_traits(type).block_size != 0) {
    fail("CUDA gemv: {} columns is not a multiple of the {} block", cols, type_traits(type).name);
  }
  check(kernels::launch_gemv_quant(static_cast<uint32_t>(type), w, rows, cols, row_stride, x, batch,
                                   y, nullptr),
        "gemv launch");
}

void synchronize() {
  check(cudaDeviceSynchronize(), "synchronize");
}

namespace {
cudaEvent_t g_timer_begin = nullptr, g_timer_end = nullptr;
}

void timer_start() {
  if (!g_timer_begin) {
    check(cudaEventCreate(&g_timer_begin), "cudaEventCreate");
    check(cudaEventCreate(&g_timer_end), "cudaEventCreate");
  }
  check(cudaEventRecord(g_timer_begin), "cudaEventRecord");
}

double timer_stop_ms() {
  check(cudaEventRecord(g_timer_end), "cudaEventRecord");
  check(cudaEventSynchronize(g_timer_end), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, g_timer_begin, g_timer_end), "cudaEventElapsedTime");
  return ms;
}

}  // namespace boltrt::cuda
