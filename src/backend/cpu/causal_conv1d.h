// Causal depthwise conv1d over time with a carried window (Qwen3.5 GDN layers, docs/qwen35.md
// §4.4, §5.1). For channel c and token t, with Kc taps:
//   y_t[c] = Σ_{j=0}^{Kc−1} w[c][j] · m_{t−(Kc−1)+j}[c]
// where inputs before the first token of this call come from the window state. The state holds
// the last Kc−1 raw inputs per channel, time contiguous, oldest first: state[c·(Kc−1) + j]
// (llama.cpp's layout). A fresh sequence's window is all zeros.
#pragma once

#include <cstdint>

namespace boltrt::cpu {

// Channels [c_begin, c_end) of n tokens. m: n × C inputs (row stride m_stride), w: C × Kc taps
// (row c contiguous), state: C × (Kc−1), updated to the last Kc−1 inputs; y: n × C (row stride
// y_stride). Each channel is independent, so threads split by channel ranges and a channel's bits
// never depend on how the range was split.
void causal_conv1d(int64_t n, int64_t kc, int64_t c_begin, int64_t c_end, const float* m,
                   int64_t m_stride, const float* w, float* state, float* y, int64_t y_stride);

}  // namespace boltrt::cpu
