// load_imatrix(): the GGUF imatrix format as llama.cpp's common_imatrix_load reads it, and the
// normalisation of llama-quantize's load_imatrix.
#include "quant/imatrix.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "gguf/gguf.h"
#include "util/error.h"

namespace boltrt {

Imatrix load_imatrix(const std::string& path) {
  const std::unique_ptr<gguf::File> file = gguf::File::open(path);
  if (file->tensors().empty()) fail("{}: imatrix has no entries", path);
  if (!file->find("imatrix.datasets") || !file->find("imatrix.chunk_count") ||
      !file->find("imatrix.chunk_size")) {
    fail(
        "{}: missing imatrix metadata (imatrix.datasets, imatrix.chunk_count, "
        "imatrix.chunk_size)",
        path);
  }
  Imatrix m;
  if (const gguf::Array* datasets = file->get_array("imatrix.datasets")) {
    for (const gguf::Value& v : datasets->items) {
      if (const std::string* s = v.as_string()) m.datasets.push_back(*s);
    }
  }
  m.chunk_count = file->get_int("imatrix.chunk_count").value_or(0);

  struct Pair {
    const gguf::TensorInfo* sums = nullptr;
    const gguf::TensorInfo* counts = nullptr;
  };
  std::map<std::string, Pair> pairs;
  for (const gguf::TensorInfo& t : file->tensors()) {
    const std::string& name = t.name;
    if (name.ends_with(".in_sum2")) {
      pairs[name.substr(0, name.size() - 8)].sums = &t;
    } else if (name.ends_with(".counts")) {
      pairs[name.substr(0, name.size() - 7)].counts = &t;
    }
  }
  for (const auto& [name, p] : pairs) {
    if (!p.sums || !p.counts) fail("{}: mismatched sums and counts for '{}'", path, name);
    if (p.sums->type != GgmlType::F32 || p.counts->type != GgmlType::F32) {
      fail("{}: sums and counts for '{}' must be F32", path, name);
    }
    const int64_t n_values = p.sums->n_elements();
    const int64_t n_counts = p.counts->n_elements();
    if (n_counts < 1 || n_values % n_counts != 0) {
      fail("{}: '{}' has {} sums for {} counts", path, name, n_values, n_counts);
    }
    std::vector<float> sums(static_cast<size_t>(n_values)), counts(static_cast<size_t>(n_counts));
    std::memcpy(sums.data(), file->tensor_data(*p.sums), sums.size() * 4);
    std::memcpy(counts.data(), file->tensor_data(*p.counts), counts.size() * 4);
    const int64_t ne0 = n_values / n_counts;
    std::vector<float>& w = m.weights[name];
    w.resize(sums.size());
    for (int64_t j = 0; j < n_counts; ++j) {
      const float c = counts[static_cast<size_t>(j)];
      if (!std::isfinite(c) || std::fabs(c) > 9e18f)
        fail("{}: '{}' count {} is not finite", path, name, j);
      const auto count = static_cast<float>(std::lround(c));
      for (int64_t i = 0; i < ne0; ++i) {
        const size_t k = static_cast<size_t>(j * ne0 + i);
        w[k] = count > 0.0f ? sums[k] / count : 1.0f;
        if (!std::isfinite(w[k])) fail("{}: '{}' has a non-finite value at {}", path, name, k);
      }
    }
  }
  return m;
}

}  // namespace boltrt
