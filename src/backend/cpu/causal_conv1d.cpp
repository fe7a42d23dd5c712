#include "backend/cpu/causal_conv1d.h"

namespace boltrt::cpu {

void causal_conv1d(int64_t n, int64_t kc, int64_t c_begin, int64_t c_end, const float* m,
                   int64_t m_stride, const float* w, float* state, float* y, int64_t y_stride) {
  const int64_t ks = kc - 1;  // window length
  for (int64_t c = c_begin; c < c_end; ++c) {
    const float* wc = w + c * kc;
    float* sc = state + c * ks;
    for (int64_t t = 0; t < n; ++t) {
      // taps 0 … ks−1 read the window (oldest first), tap ks the current input; summed in tap order
      // so one token at a time and n tokens at once give the same bits
      float acc = 0.0f;
      for (int64_t j = 0; j < ks; ++j) {
        const int64_t src = t - ks + j;  // token index of tap j; < 0 means the window
        acc += wc[j] * (src < 0 ? sc[ks + src] : m[src * m_stride + c]);
      }
      acc += wc[ks] * m[t * m_stride + c];
      y[t * y_stride + c] = acc;
    }
    // new window: the last ks inputs of (old window ++ this call's inputs)
    for (int64_t j = 0; j < ks; ++j) {
      const int64_t src = n - ks + j;
      sc[j] = src < 0 ? sc[ks + src] : m[src * m_stride + c];
    }
  }
}

}  // namespace boltrt::cpu
