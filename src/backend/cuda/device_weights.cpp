#include "backend/cuda/device_weights.h"

#include <fmt/format.h>

#include <cstring>

#include "backend/cuda/cublas_linear.h"
#include "gemm_quant.cuh"
#include "gemv_quant.cuh"
#include "ops.cuh"
#include "quant/dequantize.h"
#include "quant/fp16.h"
#include "sub32_dispatch.cuh"
#include "util/error.h"

namespace boltrt::cuda {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("CUDA {}: {}", what, cudaGetErrorString(status));
}

DeviceInfo open_device(int index) {
  std::string why;
  auto info = probe_device(index, &why);
  if (!info) fail("no usable CUDA device: {}", why);
  return *info;
}

void append_taps(const float* host_tap, int64_t n, int64_t n_taps, int64_t n_batch, int64_t D,
                 std::vector<float>& taps) {
  const size_t at = taps.size();
  taps.resize(at + static_cast<size_t>(n * n_taps * D));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < n_taps; ++i) {
      std::memcpy(taps.data() + at + static_cast<size_t>((t * n_taps + i) * D),
                  host_tap + (i * n_batch + t) * D, static_cast<size_t>(D) * 4);
    }
  }
}

std::string mib(size_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

std::string device_memory_shortfall(const std::string& what, size_t need, size_t free_bytes,
                                    size_t total_bytes) {
  if (need <= free_bytes) return "";
  return fmt::format("out of device memory: {} need {}, {} of {} free (short by {})", what,
                     mib(need), mib(free_bytes), mib(total_bytes), mib(need - free_bytes));
}

cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& enqueue) {
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "graph capture");
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  check(cudaStreamEndCapture(stream, &graph), "graph capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(status, "graph instantiate");
  return exec;
}

DeviceMatrix* Uploader::matrix(const WeightView& w, float scale, DeviceMatrix* out) {
  if (!w.data) return out;
  out->rows = w.rows;
  out->cols = w.cols;
  out->scale = scale;
  if (kernels::has_sub32_block(static_cast<uint32_t>(w.type))) {
    out->type = w.type;
    out->row_stride = w.row_stride;
    place(w.data, w.row_stride * static_cast<size_t>(w.rows), false, w, &out->data);
  } else {
    out->type = GgmlType::F16;
    out->row_stride = static_cast<size_t>(w.cols) * 2;
    place(w.data, out->row_stride * static_cast<size_t>(w.rows), true, w, &out->data);
  }
  return out;
}

void Uploader::experts(const WeightView& first, int64_t n_expert, const std::vector<float>& scale,
                       DeviceExperts* out) {
  if (!first.data) return;
  WeightView all = first;  // the stack as rows * n_expert rows (checked contiguous)
  all.rows = first.rows * n_expert;
  out->rows = first.rows;
  out->cols = first.cols;
  const bool convert = !kernels::has_sub32_block(static_cast<uint32_t>(all.type));
  out->type = convert ? GgmlType::F16 : all.type;
  out->row_stride = convert ? static_cast<size_t>(all.cols) * 2 : all.row_stride;
  out->expert_stride = out->row_stride * static_cast<size_t>(out->rows);
  place(all.data, out->row_stride * static_cast<size_t>(all.rows), convert, all, &out->data);
  if (!scale.empty()) vector(F32Vector{scale.data(), n_expert}, &out->scale);
}

void Uploader::vector(const F32Vector& v, const float** out) {
  if (!v.data) return;
  WeightView none;
  place(v.data, static_cast<size_t>(v.n) * sizeof(float), false, none,
        reinterpret_cast<const void**>(out));
}

void Uploader::upload(DeviceBuffer& arena) {
  arena = DeviceBuffer(total_);
  std::vector<uint16_t> f16;
  std::vector<float> row;
  for (const Item& item : items_) {
    if (!item.convert) {
      arena.upload(item.host, item.bytes, item.offset);
    } else {
      const WeightView& w = item.view;
      f16.resize(static_cast<size_t>(w.rows * w.cols));
      row.resize(static_cast<size_t>(w.cols));
      for (int64_t r = 0; r < w.rows; ++r) {
        dequantize_row(w.type,
                       static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * w.row_stride,
                       row.data(), w.cols);
        for (int64_t i = 0; i < w.cols; ++i) {
          f16[static_cast<size_t>(r * w.cols + i)] = fp32_to_fp16(row[static_cast<size_t>(i)]);
        }
      }
      arena.upload(f16.data(), item.bytes, item.offset);
    }
    for (const void** p : item.targets)
      *p = static_cast<const uint8_t*>(arena.data()) + item.offset;
  }
}

Uploader::Loaded Uploader::upload_to(const DeviceInfo& device, DeviceBuffer& arena,
                                     const std::string& path) {
  size_t free_bytes = 0, total_bytes = 0;
  check(cudaSetDevice(device.index), "cudaSetDevice");
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (std::string why = device_memory_shortfall("the weights", total_, free_bytes, total_bytes);
      !why.empty()) {
    fail("{}: {}", path, why);
  }
  try {
    upload(arena);
  } catch (const Error& e) {
    fail("{}: the weights need {} of device memory: {}", path, mib(total_), e.what());
  }
  check(cudaDeviceSynchronize(), "weight upload");
  Loaded loaded;
  check(cudaMemGetInfo(&loaded.free_bytes, &loaded.total_bytes), "cudaMemGetInfo");
  return loaded;
}

void Uploader::place(const void* host, size_t bytes, bool convert, const WeightView& view,
                     const void** target) {
  auto it = placed_.find(host);
  if (it != placed_.end() && items_[it->second].convert == convert &&
      items_[it->second].bytes == bytes) {
    items_[it->second].targets.push_back(target);
    return;
  }
  placed_[host] = items_.size();
  items_.push_back({host, bytes, total_, convert, view, {target}});
  total_ = align_up(total_ + bytes);
  if (convert) ++converted_;
}

void linear(const DeviceMatrix& m, const float* x, int64_t n, float* y, cudaStream_t stream,
            const GemmPath& gemm) {
  if (gemm.on && n >= kernels::kGemmMinBatch && gemm.blas && CublasLinear::supports(m.type)) {
    gemm.blas->run(m.type, m.data, m.rows, m.cols, m.row_stride, x, n, y, gemm.blas_scratch,
                   stream);
    if (m.scale != 1.0f) check(kernels::launch_scale(y, n * m.rows, m.scale, stream), "scale");
    return;
  }
  if (gemm.on && n >= kernels::kGemmMinBatch) {
    check(kernels::launch_gemm_quant(static_cast<uint32_t>(m.type), m.data, m.rows, m.cols,
                                     m.row_stride, x, n, y, stream),
          "gemm");
    if (m.scale != 1.0f) check(kernels::launch_scale(y, n * m.rows, m.scale, stream), "scale");
    return;
  }
  for (int64_t b = 0; b < n; b += kernels::kGemvMaxBatch) {
    const int batch = static_cast<int>(std::min<int64_t>(kernels::kGemvMaxBatch, n - b));
    check(kernels::launch_gemv_quant(static_cast<uint32_t>(m.type), m.data, m.rows, m.cols,
                                     m.row_stride, x + b * m.cols, batch, y + b * m.rows, stream),
          "gemv");
  }
  if (m.scale != 1.0f) check(kernels::launch_scale(y, n * m.rows, m.scale, stream), "scale");
}

}  // namespace boltrt::cuda
