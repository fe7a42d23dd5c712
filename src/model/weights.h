// Weights of a model as views into its mmapped GGUF file, and the binder that finds them by
// name and checks their shapes (shared by every architecture's model file).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"

namespace boltrt {

class ThreadPool;

namespace gguf {
class File;
struct TensorInfo;
}  // namespace gguf

// An f32 vector: a view into the file, or a converted copy when the file stores another type.
struct F32Vector {
  const float* data = nullptr;
  int64_t n = 0;
};

// A matrix plus the optional per-tensor ".scale" multiplier some quantized files carry.
struct Matrix {
  WeightView w;
  float scale = 1.0f;
  bool present() const { return w.data != nullptr; }
};

// y[n][rows] = x[n][cols] · Wᵀ, times the tensor's scale when it has one.
void linear(const Matrix& m, const float* x, int64_t n, float* y, ThreadPool* pool);

// Grows a workspace vector to at least n floats (never shrinks it) and returns its data.
float* sized(std::vector<float>& v, int64_t n);

// Binds tensors of one file. Converted f32 copies go to `converted`, packed copies of small
// matrices to `packs` (both owned by the model and outliving the views).
class TensorBinder {
 public:
  TensorBinder(const gguf::File& file, std::vector<std::vector<float>>& converted, LanePacks& packs)
      : file_(file), converted_(converted), packs_(packs) {}

  const gguf::TensorInfo* find(const std::string& name) const;
  // Checks ne against `shape` (missing trailing dims are 1) and that boltrt can compute with
  // its type. Returns null when absent and not required; a missing required tensor or a wrong
  // shape is one clear error naming the file and tensor.
  const gguf::TensorInfo* get(const std::string& name, std::initializer_list<int64_t> shape,
                              bool required) const;
  WeightView view(const gguf::TensorInfo& t) const;
  // Gives w the backend's packed copy where it makes one (LanePacks::pack).
  void pack(WeightView& w) const { packs_.pack(w); }
  // [in, out] matrix "<base>.weight" plus (with_scale2) its optional "<base>.scale" scalar.
  Matrix matrix(const std::string& base, int64_t in, int64_t out, bool required,
                bool with_scale2 = true) const;
  F32Vector vector(const std::string& name, int64_t n, bool required) const;
  // A vector of any shape whose elements count n (e.g. a [Kc, C] conv kernel read as C·Kc).
  F32Vector values(const std::string& name, std::initializer_list<int64_t> shape,
                   bool required) const;
  // f32 data of a small tensor: the mapped bytes when stored as F32, else a converted copy.
  const float* to_f32(const gguf::TensorInfo& t) const;

 private:
  const gguf::File& file_;
  std::vector<std::vector<float>>& converted_;
  LanePacks& packs_;
};

}  // namespace boltrt
