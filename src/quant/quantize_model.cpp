// quantize_model(): plan (quant_mix), then stream every tensor through the GGUF writer, converting
// slabs of rows in parallel (quantize_tensor). Key order follows llama-quantize: the input's keys
// in order, minus split.* and the two keys it rewrites, which are appended at the end
// (general.quantization_version = 2, then general.file_type).
#include "quant/quantize_model.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/imatrix.h"
#include "quant/quantize_tensor.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION
constexpr uint64_t kSlabBytes = 64ull << 20;  // output bytes converted per step

// ggml_n_dims: trailing dimensions of size 1 are not written (llama-quantize re-derives n_dims).
std::vector<int64_t> written_shape(const int64_t ne[4]) {
  int n = 1;
  for (int d = 3; d >= 1; --d) {
    if (ne[d] > 1) {
      n = d + 1;
      break;
    }
  }
  return std::vector<int64_t>(ne, ne + n);
}

}  // namespace

ModelDesc describe_model(const gguf::File& file) {
  ModelDesc m;
  m.arch = file.architecture();
  m.n_layer = file.get_arch_int("block_count").value_or(0);
  m.n_expert = file.get_arch_int("expert_count").value_or(0);
  m.tensors.reserve(file.tensors().size());
  for (const gguf::TensorInfo& t : file.tensors()) {
    TensorDesc d;
    d.name = t.name;
    d.type = t.type;
    std::copy(t.ne, t.ne + 4, d.ne);
    m.tensors.push_back(std::move(d));
  }
  return m;
}

QuantizeSummary quantize_model(const std::string& in_path, const std::string& out_path,
                               const QuantizeOptions& options) {
  const std::unique_ptr<gguf::File> in = gguf::File::open(in_path);
  const ModelDesc model = describe_model(*in);
  Imatrix imatrix;
  const bool has_imatrix = !options.imatrix_path.empty();
  if (has_imatrix) imatrix = load_imatrix(options.imatrix_path);
  const std::vector<TensorPlan> plans = plan_quantization(model, options.ftype, has_imatrix, options.overrides);

  gguf::Writer writer(32);
  for (const gguf::KeyValue& kv : in->metadata()) {
    if (kv.key == "general.quantization_version" || kv.key == "general.file_type" ||
        kv.key == "split.no" || kv.key == "split.count" || kv.key == "split.tensors.count") {
      continue;
    }
    // Keys rewritten below are moved to the end (llama-quantize removes and appends them).
    if (has_imatrix &&
        (kv.key == "quantize.imatrix.file" || kv.key == "quantize.imatrix.entries_count" ||
         (kv.key == "quantize.imatrix.dataset" && !imatrix.datasets.empty()) ||
         (kv.key == "quantize.imatrix.chunks_count" && imatrix.chunk_count > 0))) {
      continue;
    }
    if (kv.key == "general.alignment") {
      // llama-quantize copies the key but always writes with 32-byte alignment; keep it only
      // when that is what it says.
      if (kv.value.type != gguf::ValueType::UINT32 || kv.value.as_int() != 32) continue;
    }
    writer.set(kv.key, kv.value);
  }
  writer.set_u32("general.quantization_version", kQuantizationVersion);
  writer.set_u32("general.file_type", static_cast<uint32_t>(options.ftype));
  if (has_imatrix) {
    // What llama-quantize records (strings cut to its 127-byte override buffer).
    writer.set_string("quantize.imatrix.file", options.imatrix_path.substr(0, 127));
    if (!imatrix.datasets.empty()) {
      writer.set_string("quantize.imatrix.dataset", imatrix.datasets[0].substr(0, 127));
    }
    writer.set_u32("quantize.imatrix.entries_count", static_cast<uint32_t>(imatrix.weights.size()));
    if (imatrix.chunk_count > 0) {
      writer.set_u32("quantize.imatrix.chunks_count", static_cast<uint32_t>(imatrix.chunk_count));
    }
  }

  QuantizeSummary summary;
  summary.n_tensors = plans.size();
  uint64_t bytes_total = 0;
  for (const TensorPlan& p : plans) bytes_total += in->tensors()[p.index].nbytes;
  // Validate every conversion before writing anything.
  for (const TensorPlan& p : plans) {
    const gguf::TensorInfo& t = in->tensors()[p.index];
    if (p.target == t.type) continue;
    const TypeTraits& from = type_traits(t.type);
    const bool quantized_source =
        t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16;
    if (quantized_source && !options.allow_requantize) {
      fail("{}: tensor '{}' is already {}; requantizing needs --allow-requantize", in_path, t.name,
           from.name);
    }
    if (!from.computable) {
      fail("{}: tensor '{}' has type {}, which boltrt cannot convert", in_path, t.name, from.name);
    }
  }

  ThreadPool pool(std::max(1, options.threads));
  auto shared = std::make_shared<uint64_t>(0);  // input bytes done, for progress
  for (size_t i = 0; i < plans.size(); ++i) {
    const TensorPlan plan = plans[i];
    const gguf::TensorInfo& t = in->tensors()[plan.index];
    const std::vector<int64_t> shape = written_shape(t.ne);
    const int64_t n_per_row = t.ne[0];
    const int64_t n_rows = t.ne[1] * t.ne[2] * t.ne[3];
    summary.bytes_in += t.nbytes;
    summary.n_elements += static_cast<uint64_t>(t.n_elements());
    summary.bytes_out += row_size(plan.target, n_per_row) * static_cast<uint64_t>(n_rows);
    if (plan.target != t.type) ++summary.n_converted;
    if (plan.fallback) ++summary.n_fallback;
    const uint8_t* src = in->tensor_data(t);
    auto report = [&options, shared, i, n = plans.size(), name = t.name, from = t.type,
                   to = plan.target, bytes_total](uint64_t bytes) {
      *shared += bytes;
      if (options.progress) options.progress({i, n, name, from, to, *shared, bytes_total});
    };
    if (plan.target == t.type) {
      writer.add_tensor(t.name, t.type, shape,
                        [src, nbytes = t.nbytes, report](gguf::TensorSink& sink) {
                          for (uint64_t done = 0; done < nbytes; done += kSlabBytes) {
                            const uint64_t n = std::min(kSlabBytes, nbytes - done);
                            sink.write(src + done, n);
                            report(n);
                          }
                        });
      continue;
    }
    // Importance weights: ne0 per expert. A size mismatch is an error, except for the token
    // embeddings (llama-quantize ignores the imatrix there).
    const float* importance = nullptr;
    if (has_imatrix) {
      auto it = imatrix.weights.find(t.name);
      if (it != imatrix.weights.end()) {
        if (static_cast<int64_t>(it->second.size()) == t.ne[0] * t.ne[2]) {
          importance = it->second.data();
        } else if (t.name != "token_embd.weight" && t.name != "per_layer_token_embd.weight") {
          fail("{}: imatrix has {} values for tensor '{}', which needs {}", options.imatrix_path,
               it->second.size(), t.name, t.ne[0] * t.ne[2]);
        }
      }
    }
    writer.add_tensor(
        t.name, plan.target, shape,
        [src, &pool, &t, plan, n_per_row, n_rows, report, importance](gguf::TensorSink& sink) {
          const size_t src_row = row_size(t.type, n_per_row);
          const size_t dst_row = row_size(plan.target, n_per_row);
          const int64_t slab_rows =
              std::max<int64_t>(1, static_cast<int64_t>(kSlabBytes / dst_row));
          std::vector<uint8_t> buffer(dst_row * static_cast<size_t>(std::min(slab_rows, n_rows)));
          for (int64_t r = 0; r < n_rows; r += slab_rows) {
            const int64_t rows = std::min(slab_rows, n_rows - r);
            convert_tensor(t.name, t.type, src + static_cast<size_t>(r) * src_row, plan.target,
                           buffer.data(), n_per_row, rows, &pool, importance, t.ne[1], r);
            sink.write(buffer.data(), dst_row * static_cast<size_t>(rows));
            report(src_row * static_cast<uint64_t>(rows));
          }
        });
  }
  writer.write(out_path);
  return summary;
}

}  // namespace boltrt
