#include "model/weights.h"

#include "gguf/gguf.h"
#include "quant/dequantize.h"
#include "quant/ggml_type.h"
#include "util/error.h"

namespace boltrt {

void linear(const Matrix& m, const float* x, int64_t n, float* y, ThreadPool* pool) {
  matmul(m.w, x, n, y, pool);
  if (m.scale != 1.0f) {
    for (int64_t i = 0; i < n * m.w.rows; ++i) y[i] *= m.scale;
  }
}

float* sized(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

const gguf::TensorInfo* TensorBinder::find(const std::string& name) const {
  return file_.find_tensor(name);
}

const gguf::TensorInfo* TensorBinder::get(const std::string& name,
                                          std::initializer_list<int64_t> shape,
                                          bool required) const {
  const gguf::TensorInfo* t = file_.find_tensor(name);
  if (!t) {
    if (required) fail("{}: missing tensor '{}'", file_.path(), name);
    return nullptr;
  }
  int64_t want[4] = {1, 1, 1, 1};
  size_t i = 0;
  for (int64_t d : shape) want[i++] = d;
  if (t->ne[0] != want[0] || t->ne[1] != want[1] || t->ne[2] != want[2] || t->ne[3] != want[3]) {
    fail("{}: tensor '{}' has shape [{}, {}, {}, {}], expected [{}, {}, {}, {}]", file_.path(),
         name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], want[0], want[1], want[2], want[3]);
  }
  if (!type_traits(t->type).computable) {
    fail("{}: tensor '{}' has type {}, which boltrt cannot compute with", file_.path(), name,
         type_traits(t->type).name);
  }
  return t;
}

WeightView TensorBinder::view(const gguf::TensorInfo& t) const {
  WeightView w;
  w.type = t.type;
  w.data = file_.tensor_data(t);
  w.cols = t.ne[0];
  w.rows = t.ne[1];
  w.row_stride = row_size(t.type, t.ne[0]);
  return w;
}

Matrix TensorBinder::matrix(const std::string& base, int64_t in, int64_t out, bool required,
                            bool with_scale2) const {
  Matrix m;
  if (const gguf::TensorInfo* t = get(base + ".weight", {in, out}, required)) {
    m.w = view(*t);
    packs_.pack(m.w);
    if (!with_scale2) return m;
    if (const gguf::TensorInfo* s = get(base + ".scale", {1}, false)) m.scale = to_f32(*s)[0];
  }
  return m;
}

F32Vector TensorBinder::vector(const std::string& name, int64_t n, bool required) const {
  return values(name, {n}, required);
}

F32Vector TensorBinder::values(const std::string& name, std::initializer_list<int64_t> shape,
                               bool required) const {
  F32Vector v;
  if (const gguf::TensorInfo* t = get(name, shape, required)) {
    v.data = to_f32(*t);
    v.n = t->n_elements();
  }
  return v;
}

const float* TensorBinder::to_f32(const gguf::TensorInfo& t) const {
  if (t.type == GgmlType::F32) return reinterpret_cast<const float*>(file_.tensor_data(t));
  std::vector<float>& out = converted_.emplace_back(static_cast<size_t>(t.n_elements()));
  dequantize_row(t.type, file_.tensor_data(t), out.data(), t.n_elements());
  return out.data();
}

}  // namespace boltrt
