// The CUDA self-check: the kernels a Gemma 4 or Qwen3.5 model needs, run on small shapes on the
// device and compared with references computed here on the CPU in double precision from the same
// (dequantized) inputs. On a real GPU the quick form runs the first time a process uses the
// device (resolve_device, ~100 kernel launches on shapes of a few KiB: well under the 200 ms
// budget); a mismatch refuses the device. `boltrt selftest --device cuda` runs the full form
// (every weight type, both KV formats) on any device, emulated or real.
//
// Tolerances are relative to the largest |reference| of each output: f32 accumulation (GEMV,
// norms, RoPE) 1e-4; the tensor-core GEMM rounds activations and weight tiles to f16 (2^-11
// relative each), 4e-3; attention through f16 K/V, 2e-3 (Q8_0 K/V: 1e-2).
#include "backend/cuda/self_check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "gemm_quant.cuh"
#include "gemv_quant.cuh"
#include "ops.cuh"
#include "quant/dequantize.h"
#include "quant/fp16.h"
#include "quant/quantize.h"
#include "util/error.h"

namespace boltrt::cuda {
namespace {

struct Checker {
  SelfCheckReport* report;
  std::mt19937 rng{1234};

  std::vector<float> random(size_t n, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  }

  template <typename T>
  DeviceBuffer upload(const std::vector<T>& v) {
    DeviceBuffer b(std::max<size_t>(1, v.size()) * sizeof(T));
    if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
    return b;
  }

  std::vector<float> download(const DeviceBuffer& b, size_t n) {
    synchronize();
    std::vector<float> v(n);
    b.download(v.data(), n * 4);
    return v;
  }

  // Records one check: the largest error relative to the largest |reference|.
  void compare(const std::string& what, const std::vector<double>& want,
               const std::vector<float>& got, double tolerance) {
    double max_abs = 0, max_err = 0;
    bool finite = true;
    for (size_t i = 0; i < want.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(want[i]));
      if (!std::isfinite(got[i])) finite = false;
      max_err = std::max(max_err, std::fabs(want[i] - static_cast<double>(got[i])));
    }
    const double rel = max_err / std::max(1e-30, max_abs);
    SelfCheckResult r{what, finite ? rel : INFINITY, tolerance, finite && rel <= tolerance};
    report->results.push_back(r);
  }

  void check_launch(cudaError_t e, const std::string& what) {
    if (e != cudaSuccess) fail("{}: launch failed: {}", what, cudaGetErrorString(e));
  }

  // One weight type through the decode GEMV (batch 1 and 3) and, when supported, the GEMM.
  void matmul(GgmlType type, int64_t rows, int64_t cols, bool with_gemm) {
    const TypeTraits& tt = type_traits(type);
    const size_t row_bytes = static_cast<size_t>(cols / tt.block_size) * tt.type_size;
    const std::vector<float> wf = random(static_cast<size_t>(rows * cols), 0.05f);
    std::vector<uint8_t> wq(row_bytes * static_cast<size_t>(rows));
    std::vector<float> wd(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* dst = wq.data() + static_cast<size_t>(r) * row_bytes;
      if (type == GgmlType::F32) {
        std::memcpy(dst, wf.data() + r * cols, row_bytes);
      } else if (type == GgmlType::F16 || type == GgmlType::BF16) {
        auto* h = reinterpret_cast<uint16_t*>(dst);
        for (int64_t k = 0; k < cols; ++k) {
          const float v = wf[static_cast<size_t>(r * cols + k)];
          h[k] = type == GgmlType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
        }
      } else {
        quantize_row(type, wf.data() + r * cols, dst, cols);
      }
      dequantize_row(type, dst, wd.data() + r * cols, cols);
    }
    const DeviceBuffer dw = upload(wq);
    for (int batch : {1, 3}) {
      const std::vector<float> x = random(static_cast<size_t>(batch * cols));
      const DeviceBuffer dx = upload(x);
      DeviceBuffer dy(static_cast<size_t>(batch * rows) * 4);
      gemv(type, dw.data(), rows, cols, row_bytes, static_cast<const float*>(dx.data()), batch,
           static_cast<float*>(dy.data()));
      std::vector<double> want(static_cast<size_t>(batch * rows));
      for (int b = 0; b < batch; ++b) {
        for (int64_t r = 0; r < rows; ++r) {
          double s = 0;
          for (int64_t k = 0; k < cols; ++k) {
            s += static_cast<double>(wd[static_cast<size_t>(r * cols + k)]) *
                 x[static_cast<size_t>(b * cols + k)];
          }
          want[static_cast<size_t>(b * rows + r)] = s;
        }
      }
      compare(fmt::format("gemv {} {}x{} batch {}", tt.name, rows, cols, batch), want,
              download(dy, want.size()), 1e-4);
    }
    if (!with_gemm || !kernels::gemm_quant_supported(static_cast<uint32_t>(type))) return;
    const int64_t n = 20;  // above kGemvMaxBatch: the tensor-core path
    const std::vector<float> x = random(static_cast<size_t>(n * cols));
    const DeviceBuffer dx = upload(x);
    DeviceBuffer dy(static_cast<size_t>(n * rows) * 4);
    check_launch(kernels::launch_gemm_quant(static_cast<uint32_t>(type), dw.data(), rows, cols,
                                            row_bytes, static_cast<const float*>(dx.data()), n,
                                            static_cast<float*>(dy.data()), nullptr),
                 "gemm");
    std::vector<double> want(static_cast<size_t>(n * rows));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (int64_t k = 0; k < cols; ++k) {
          s += static_cast<double>(wd[static_cast<size_t>(r * cols + k)]) *
               x[static_cast<size_t>(t * cols + k)];
        }
        want[static_cast<size_t>(t * rows + r)] = s;
      }
    }
    compare(fmt::format("gemm {} {}x{} x {} tokens", tt.name, rows, cols, n), want,
            download(dy, want.size()), 4e-3);
  }

  // Qwen3.5's Gated DeltaNet ops: the causal conv1d + SiLU over a carried window, and the
  // delta rule (dk = dv = d; 128 takes the register-column kernel, as every released model does)
  // over two calls that carry the state, against double-precision recurrences.
  void gated_delta_net(int64_t d) {
    {
      const int64_t C = 96, kc = 4, n = 5;
      const std::vector<float> m = random(static_cast<size_t>(n * C)), w = random(C * kc, 0.5f);
      const std::vector<float> window = random(static_cast<size_t>(C * (kc - 1)));
      const DeviceBuffer dm = upload(m), dw = upload(w), dstate = upload(window);
      DeviceBuffer du(static_cast<size_t>(n * C) * 4);
      check_launch(kernels::launch_causal_conv1d_silu(static_cast<const float*>(dm.data()), n, C,
                                                      kc, static_cast<const float*>(dw.data()),
                                                      static_cast<float*>(dstate.data()),
                                                      static_cast<float*>(du.data()), nullptr),
                   "causal conv1d");
      std::vector<double> want(static_cast<size_t>(n * C));
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t t = 0; t < n; ++t) {
          double acc = 0;
          for (int64_t j = 0; j < kc; ++j) {
            const int64_t src = t - (kc - 1) + j;
            const double x =
                src < 0 ? window[size_t(c * (kc - 1) + (kc - 1) + src)] : m[size_t(src * C + c)];
            acc += double(w[size_t(c * kc + j)]) * x;
          }
          want[size_t(t * C + c)] = acc / (1.0 + std::exp(-acc));
        }
      }
      compare("causal conv1d + SiLU, 96 channels, 4 taps", want, download(du, want.size()), 1e-4);
    }
    const int64_t Hk = 1, Hv = 2, n = 3, C = 2 * Hk * d + Hv * d;
    std::vector<double> S(static_cast<size_t>(Hv * d * d), 0.0);
    DeviceBuffer dstate = upload(std::vector<float>(S.size(), 0.0f));
    for (int call = 0; call < 2; ++call) {
      std::vector<float> u = random(static_cast<size_t>(n * C));
      for (int64_t t = 0; t < n; ++t) {  // unit q and k rows, as the layer feeds them
        for (int64_t r = 0; r < 2 * Hk; ++r) {
          double sum = 0;
          for (int64_t i = 0; i < d; ++i)
            sum += double(u[size_t(t * C + r * d + i)]) * u[size_t(t * C + r * d + i)];
          for (int64_t i = 0; i < d; ++i)
            u[size_t(t * C + r * d + i)] /= static_cast<float>(std::sqrt(sum));
        }
      }
      std::vector<float> g = random(static_cast<size_t>(n * Hv), 0.3f);
      std::vector<float> beta = random(g.size());
      for (float& x : g) x = -std::fabs(x);
      for (float& x : beta) x = 1.0f / (1.0f + std::exp(-x));  // write strengths in (0, 1)
      const DeviceBuffer du = upload(u), dg = upload(g), db = upload(beta);
      DeviceBuffer out(static_cast<size_t>(n * Hv * d) * 4);
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      check_launch(
          kernels::launch_delta_rule(
              static_cast<const float*>(du.data()), n, C, 0, Hk * d, 2 * Hk * d, Hk, Hv, d, d,
              static_cast<const float*>(dg.data()), static_cast<const float*>(db.data()), scale,
              static_cast<float*>(dstate.data()), static_cast<float*>(out.data()), nullptr),
          "delta rule");
      std::vector<double> want(static_cast<size_t>(n * Hv * d));
      for (int64_t h = 0; h < Hv; ++h) {
        double* s = S.data() + h * d * d;
        const int64_t key = h % Hk;
        for (int64_t t = 0; t < n; ++t) {
          const float* q = u.data() + t * C + key * d;
          const float* k = u.data() + t * C + Hk * d + key * d;
          const float* v = u.data() + t * C + 2 * Hk * d + h * d;
          const double decay = std::exp(double(g[size_t(t * Hv + h)]));
          for (int64_t x = 0; x < d * d; ++x) s[x] *= decay;
          for (int64_t j = 0; j < d; ++j) {
            double kv = 0;
            for (int64_t i = 0; i < d; ++i) kv += s[i * d + j] * k[i];
            const double delta = beta[size_t(t * Hv + h)] * (v[j] - kv);
            for (int64_t i = 0; i < d; ++i) s[i * d + j] += k[i] * delta;
          }
          for (int64_t j = 0; j < d; ++j) {
            double o = 0;
            for (int64_t i = 0; i < d; ++i) o += s[i * d + j] * q[i];
            want[size_t(t * Hv * d + h * d + j)] = o * scale;
          }
        }
      }
      compare(fmt::format("delta rule, state {}x{}, call {} of 2", d, d, call + 1), want,
              download(out, want.size()), 1e-4);
    }
  }

  void rms_norm() {
    const int64_t rows = 3, n = 320;
    const std::vector<float> x = random(static_cast<size_t>(rows * n)), w = random(n);
    const DeviceBuffer dx = upload(x), dw = upload(w);
    DeviceBuffer dy(static_cast<size_t>(rows * n) * 4);
    check_launch(kernels::launch_rms_norm(static_cast<const float*>(dx.data()),
                                          static_cast<const float*>(dw.data()), rows, n, 1e-6f,
                                          static_cast<float*>(dy.data()), nullptr),
                 "rms_norm");
    std::vector<double> want(static_cast<size_t>(rows * n));
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += double(x[size_t(r * n + i)]) * x[size_t(r * n + i)];
      const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
      for (int64_t i = 0; i < n; ++i)
        want[size_t(r * n + i)] = x[size_t(r * n + i)] * inv * w[size_t(i)];
    }
    compare("rms_norm 3x320", want, download(dy, want.size()), 1e-4);
  }

  // Causal GQA attention over a cache written by kv_store: decode (split-KV) and prefill (flash).
  void attention(kernels::KvFormat format, bool prefill) {
    const int64_t hd = 128, H = 4, Hkv = 2, n_tok = prefill ? 12 : 2, pos0 = prefill ? 0 : 40;
    const int64_t keys = pos0 + n_tok, row = Hkv * hd;
    const std::vector<float> k = random(static_cast<size_t>(keys * row)),
                             v = random(static_cast<size_t>(keys * row)),
                             q = random(static_cast<size_t>(n_tok * H * hd), 0.1f);
    const DeviceBuffer dk = upload(k), dv = upload(v), dq = upload(q);
    const bool q8 = format == kernels::KvFormat::kQ8_0;
    const size_t cell_bytes =
        q8 ? static_cast<size_t>(row / 32 * 34) : static_cast<size_t>(row * 2);
    DeviceBuffer kc(cell_bytes * static_cast<size_t>(keys)),
        vc(cell_bytes * static_cast<size_t>(keys));
    if (q8) {
      check_launch(kernels::launch_kv_store_q8_0(static_cast<const float*>(dk.data()),
                                                 static_cast<const float*>(dv.data()), keys, row, 0,
                                                 keys, static_cast<uint8_t*>(kc.data()),
                                                 static_cast<uint8_t*>(vc.data()), nullptr),
                   "kv store");
    } else {
      check_launch(kernels::launch_kv_store(static_cast<const float*>(dk.data()),
                                            static_cast<const float*>(dv.data()), keys, row, 0,
                                            keys, static_cast<uint16_t*>(kc.data()),
                                            static_cast<uint16_t*>(vc.data()), nullptr),
                   "kv store");
    }
    DeviceBuffer out(static_cast<size_t>(n_tok * H * hd) * 4);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    if (prefill) {
      check_launch(
          kernels::launch_attention_prefill(static_cast<const float*>(dq.data()), kc.data(),
                                            vc.data(), n_tok, pos0, keys, H, Hkv, hd, 0, scale,
                                            0.0f, static_cast<float*>(out.data()), nullptr, format),
          "attention prefill");
    } else {
      const int n_split = 3;
      DeviceBuffer partials(kernels::attention_partials_floats(n_tok, H, hd, n_split) * 4);
      check_launch(
          kernels::launch_attention_decode(
              static_cast<const float*>(dq.data()), kc.data(), vc.data(), n_tok, pos0, keys, H, Hkv,
              hd, 0, scale, 0.0f, n_split, static_cast<float*>(partials.data()),
              static_cast<float*>(out.data()), nullptr, nullptr, format),
          "attention decode");
    }
    // Reference on the values the cache holds (f16-rounded; Q8_0's rounding is bounded by the
    // looser tolerance).
    auto stored = [&](float x) { return q8 ? x : fp16_to_fp32(fp32_to_fp16(x)); };
    std::vector<double> want(static_cast<size_t>(n_tok * H * hd));
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / Hkv);
        const int64_t last = pos0 + t;
        std::vector<double> s(static_cast<size_t>(last + 1));
        double m = -INFINITY;
        for (int64_t j = 0; j <= last; ++j) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) {
            d += double(q[size_t((t * H + h) * hd + i)]) * stored(k[size_t(j * row + g * hd + i)]);
          }
          s[size_t(j)] = d * scale;
          m = std::max(m, s[size_t(j)]);
        }
        double l = 0;
        for (double& e : s) l += (e = std::exp(e - m));
        for (int64_t i = 0; i < hd; ++i) {
          double acc = 0;
          for (int64_t j = 0; j <= last; ++j)
            acc += s[size_t(j)] * stored(v[size_t(j * row + g * hd + i)]);
          want[size_t((t * H + h) * hd + i)] = acc / l;
        }
      }
    }
    compare(fmt::format("attention {} {} KV, {} queries over {} keys",
                        prefill ? "prefill" : "decode", q8 ? "Q8_0" : "F16", n_tok, keys),
            want, download(out, want.size()), q8 ? 1e-2 : 2e-3);
  }
};

}  // namespace

SelfCheckReport self_check(bool full) {
  SelfCheckReport report;
  const auto start = std::chrono::steady_clock::now();
  Checker c{&report};
  c.rms_norm();
  const std::vector<GgmlType> quick = {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0,
                                       GgmlType::F16};
  const std::vector<GgmlType> all = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K,
                                     GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F32,
                                     GgmlType::F16,  GgmlType::BF16};
  for (GgmlType t : full ? all : quick) {
    if (gemv_supported(t)) c.matmul(t, 96, 512, /*with_gemm=*/full || t == GgmlType::Q4_K);
  }
  c.attention(kernels::KvFormat::kF16, false);
  c.attention(kernels::KvFormat::kF16, true);
  c.gated_delta_net(full ? 128 : 32);
  if (full) {
    c.gated_delta_net(40);  // the kernel that keeps the state in device memory
    c.attention(kernels::KvFormat::kQ8_0, false);
    c.attention(kernels::KvFormat::kQ8_0, true);
  }
  report.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return report;
}

bool SelfCheckReport::passed() const {
  return std::all_of(results.begin(), results.end(),
                     [](const SelfCheckResult& r) { return r.passed; });
}

std::string SelfCheckReport::first_failure() const {
  for (const SelfCheckResult& r : results) {
    if (!r.passed) {
      return fmt::format("{}: relative error {:.2e} above {:.0e}", r.what, r.relative_error,
                         r.tolerance);
    }
  }
  return "";
}

}  // namespace boltrt::cuda
