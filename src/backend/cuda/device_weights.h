// Weights in device memory and the matrix product over them, shared by every architecture's CUDA
// runtime (gemma4_cuda.cpp, qwen35_cuda.cpp): a matrix or expert stack as the kernels read it,
// the uploader that places a model's tensors in one arena (converting types the GEMV kernel
// lacks to F16), and linear(), which picks GEMV, tensor-core GEMM or cuBLAS by batch size.
//
// Plain C++ header apart from cudaStream_t; built only with CUDA.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_backend.h"
#include "model/weights.h"

namespace boltrt::cuda {

class CublasLinear;

// Throws boltrt::Error "CUDA <what>: <reason>" unless status is cudaSuccess.
void check(cudaError_t status, const char* what);

// Device arena alignment of every tensor and scratch slot.
constexpr size_t kAlign = 256;
inline size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}
// Device `index` for a model upload, or one error ("no usable CUDA device: ...").
DeviceInfo open_device(int index);

// Appends the hidden-state taps a forward pass of n tokens left in pinned memory,
// [n_taps][n_batch][D], to `taps` as [n][n_taps][D] (LanguageModel::taps order).
void append_taps(const float* host_tap, int64_t n, int64_t n_taps, int64_t n_batch, int64_t D,
                 std::vector<float>& taps);

// "12.3 MiB"
std::string mib(size_t bytes);

// "" when need <= free_bytes, else the one-line error: "out of device memory: <what> need N MiB,
// F MiB of T MiB free (short by S MiB)".
std::string device_memory_shortfall(const std::string& what, size_t need, size_t free_bytes,
                                    size_t total_bytes);

// The context bucket of a token at `pos`: its keys rounded up to a power of two from 256. A
// decode graph serves one bucket, and the split-KV attention of a token splits its keys as the
// bucket's graph does, with or without graphs (so a row's bits do not depend on the batch it is
// in nor on whether graphs are on).
inline int64_t decode_bucket(int64_t pos) {
  int64_t bucket = 256;
  while (bucket < pos + 1) bucket *= 2;
  return bucket;
}

// Captures what `enqueue` queues on `stream` as a CUDA graph and instantiates it (a decode step
// replayed for every token of a context bucket). A throw inside enqueue ends the capture first.
cudaGraphExec_t capture_graph(cudaStream_t stream, const std::function<void()>& enqueue);

// A weight matrix in device memory: y[n][rows] = x[n][cols] W^T (times scale).
struct DeviceMatrix {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;
  size_t row_stride = 0;
  float scale = 1.0f;
  bool present() const { return data != nullptr; }
};

// A stack of n_expert matrices of rows x cols in device memory, expert e at data +
// e * expert_stride (the GGUF's [cols, rows, n_expert] *_exps tensor, uploaded whole). scale:
// device [n_expert] per-expert output scales, or null.
struct DeviceExperts {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;
  size_t row_stride = 0, expert_stride = 0;
  const float* scale = nullptr;
  bool present() const { return data != nullptr; }
  // rows [row0, row0 + n) of every expert (the gate or up half of a merged gate_up stack)
  const void* rows_from(int64_t row0) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(row0) * row_stride;
  }
};

// Collects every tensor first (to allocate one arena of the exact size and report it), then
// copies. Host pointers already placed are shared (a tied output head reuses token_embd).
class Uploader {
 public:
  // A matrix; types without a Sub32 unpacker become F16 rows.
  DeviceMatrix* matrix(const WeightView& w, float scale, DeviceMatrix* out);
  DeviceMatrix* matrix(const Matrix& m, DeviceMatrix* out) { return matrix(m.w, m.scale, out); }
  // A stack of n_expert matrices (first = expert 0, the others follow it contiguously)
  // uploaded as one block, converted to F16 rows like matrix(); scale: per-expert output
  // scales (empty: none).
  void experts(const WeightView& first, int64_t n_expert, const std::vector<float>& scale,
               DeviceExperts* out);
  void vector(const F32Vector& v, const float** out);
  size_t total() const { return total_; }
  int converted() const { return converted_; }

  // Allocates the arena and copies; resolves every pointer handed out.
  void upload(DeviceBuffer& arena);
  // What a model's constructor does with it on `device`: one clear error (naming `path` and the
  // MiB) when the weights cannot fit, else upload() and wait for the copies (pageable copies may
  // still be in flight and sessions run on non-blocking streams). Returns the device's free and
  // total bytes after the upload.
  struct Loaded {
    size_t free_bytes = 0, total_bytes = 0;
  };
  Loaded upload_to(const DeviceInfo& device, DeviceBuffer& arena, const std::string& path);

 private:
  struct Item {
    const void* host;
    size_t bytes, offset;
    bool convert;
    WeightView view;
    std::vector<const void**> targets;
  };
  void place(const void* host, size_t bytes, bool convert, const WeightView& view,
             const void** target);
  std::vector<Item> items_;
  std::map<const void*, size_t> placed_;
  size_t total_ = 0;
  int converted_ = 0;
};

// How batches of n >= kGemmMinBatch rows multiply: on (else GEMV batches), and the cuBLAS
// GEMM for F16/BF16 matrices when blas is set (its activation scratch: B * max cols halves).
struct GemmPath {
  bool on = true;
  CublasLinear* blas = nullptr;
  void* blas_scratch = nullptr;
};

// y[n][rows] = x[n][cols] W^T: for prefill chunks and verify batches (n >= kGemmMinBatch,
// unless gemm.on is false) cuBLAS for F16/BF16 matrices, the tensor-core GEMM of
// kernels/gemm_quant_mma.cu for the block formats; else GEMV batches of up to kGemvMaxBatch rows.
void linear(const DeviceMatrix& m, const float* x, int64_t n, float* y, cudaStream_t stream,
            const GemmPath& gemm);

}  // namespace boltrt::cuda
