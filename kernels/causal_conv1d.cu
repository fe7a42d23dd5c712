// Causal depthwise conv1d over time with a carried window, then SiLU (Qwen3.5 Gated DeltaNet
// layers, shared/docs/qwen35.md §4.4). One thread per channel walks the call's tokens in order:
// the taps are summed in tap order, as cpu::causal_conv1d sums them, and the window is read and
// rewritten only by its channel's thread.
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxTaps = 64;  // Qwen35Config allows conv_kernel <= 64

__global__ void causal_conv1d_silu_kernel(const float* __restrict__ m, int64_t n_tokens,
                                          int64_t channels, int64_t kc, const float* __restrict__ w,
                                          float* state, float* u) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (c >= channels) return;
  const int64_t ks = kc - 1;  // window length
  const float* wc = w + c * kc;
  float* sc = state + c * ks;
  float window[kMaxTaps];  // the last ks inputs, oldest first
  for (int64_t j = 0; j < ks; ++j) window[j] = sc[j];
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float x = m[t * channels + c];
    float acc = 0.0f;
    for (int64_t j = 0; j < ks; ++j) acc += wc[j] * window[j];
    acc += wc[ks] * x;
    u[t * channels + c] = acc / (1.0f + expf(-acc));  // SiLU
    for (int64_t j = 0; j + 1 < ks; ++j) window[j] = window[j + 1];
    if (ks > 0) window[ks - 1] = x;
  }
  for (int64_t j = 0; j < ks; ++j) sc[j] = window[j];
}

}  // namespace

cudaError_t launch_causal_conv1d_silu(const float* m, int64_t n_tokens, int64_t channels,
                                      int64_t kc, const float* w, float* state, float* u,
                                      cudaStream_t stream) {
  if (n_tokens <= 0 || channels <= 0) return cudaSuccess;
  if (kc < 1 || kc > kMaxTaps) return cudaErrorInvalidValue;
  const auto blocks = static_cast<unsigned>((channels + kThreads - 1) / kThreads);
  BOLTRT_LAUNCH(blocks, kThreads, 0, stream, causal_conv1d_silu_kernel)
  (m, n_tokens, channels, kc, w, state, u);
  return cudaGetLastError();
}

}  // namespace boltrt::kernels
