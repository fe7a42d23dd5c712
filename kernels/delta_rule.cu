// The gated delta rule as a recurrence (Qwen3.5 Gated DeltaNet layers, shared/docs/qwen35.md
// §4.4), token by token on each value head's state S [dk][dv] (row = key dim):
//   S <- e^g S;   delta = beta (v - S^T k);   S <- S + k delta^T;   o = scale * S^T q
// Thread j of a value head owns state column S[:, j] and does, per token, exactly
// cpu::delta_rule_recurrent's float operations for column j in its order (decay rounded, then
// times k_i, summed over i in order; then the update and the output sum), so the two backends
// differ only where the compilers fuse a multiply-add. The token's q and k are staged in shared
// memory.
//
// Work split: blocks of kCols columns of one head (grid: column groups x value heads), so the
// 4B shape's 32 heads of 128 columns give 128 blocks rather than 32. For dk of 32, 64 or 128
// (every released Qwen3.5: 128) a thread keeps its column in registers for the whole call: the
// state is read once and written once per call however many tokens it has (a 512-token prompt
// chunk would otherwise stream each head's 64 KiB state 1,024 times); other sizes read and write
// the column in device memory every token.
#include "ops.cuh"

namespace boltrt::kernels {
namespace {

constexpr int kCols = 32;  // state columns (threads) per block

// kDk > 0: the column lives in registers (dk == kDk); 0: in device memory.
// (Pointers are plain kernel arguments, not struct members: the CUDA emulator checks and
// snapshots every pointer a launch is given.)
template <int kDk>
__global__ void delta_rule_kernel(const float* __restrict__ u, int64_t n_tokens,
                                  int64_t token_stride, int64_t q_offset, int64_t k_offset,
                                  int64_t v_offset, int64_t n_k_heads, int64_t n_v_heads,
                                  int64_t dk_arg, int64_t dv, const float* __restrict__ gamma,
                                  const float* __restrict__ beta, float scale, float* state,
                                  float* out) {
  BOLTRT_DYNAMIC_SHARED(float, qk);                   // q [dk], then k [dk]
  const int64_t hv = blockIdx.y, g = hv % n_k_heads;  // value head h reads key head h mod Hk
  const int64_t j = blockIdx.x * static_cast<int64_t>(kCols) + threadIdx.x;
  const int64_t dk = kDk > 0 ? kDk : dk_arg;
  const bool active = j < dv;
  float* S = state + hv * dk * dv;
  float col[kDk > 0 ? kDk : 1];
  if constexpr (kDk > 0) {
#pragma unroll
    for (int i = 0; i < kDk; ++i) col[i] = active ? S[i * dv + j] : 0.0f;
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = u + t * token_stride;
    __syncthreads();  // the previous token's q and k are no longer read
    for (int64_t i = threadIdx.x; i < dk; i += kCols) {
      qk[i] = row[q_offset + g * dk + i];
      qk[dk + i] = row[k_offset + g * dk + i];
    }
    __syncthreads();
    if (!active) continue;
    const float decay = expf(gamma[t * n_v_heads + hv]);
    const float b = beta[t * n_v_heads + hv];
    float delta = 0.0f, o = 0.0f;
    if constexpr (kDk > 0) {
#pragma unroll
      for (int i = 0; i < kDk; ++i) delta += (col[i] * decay) * qk[kDk + i];
      delta = b * (row[v_offset + hv * dv + j] - delta);
#pragma unroll
      for (int i = 0; i < kDk; ++i) {
        col[i] = col[i] * decay + qk[kDk + i] * delta;
        o += col[i] * qk[i];
      }
    } else {
      for (int64_t i = 0; i < dk; ++i) delta += (S[i * dv + j] * decay) * qk[dk + i];
      delta = b * (row[v_offset + hv * dv + j] - delta);
      for (int64_t i = 0; i < dk; ++i) {
        const float s = S[i * dv + j] * decay + qk[dk + i] * delta;
        S[i * dv + j] = s;
        o += s * qk[i];
      }
    }
    out[t * n_v_heads * dv + hv * dv + j] = o * scale;
  }
  if constexpr (kDk > 0) {
    if (active) {
#pragma unroll
      for (int i = 0; i < kDk; ++i) S[i * dv + j] = col[i];
    }
  }
}

}  // namespace

cudaError_t launch_delta_rule(const float* u, int64_t n_tokens, int64_t token_stride,
                              int64_t q_offset, int64_t k_offset, int64_t v_offset,
                              int64_t n_k_heads, int64_t n_v_heads, int64_t dk, int64_t dv,
                              const float* gamma, const float* beta, float scale, float* state,
                              float* out, cudaStream_t stream) {
  if (n_tokens <= 0 || n_v_heads <= 0) return cudaSuccess;
  if (dv < 1 || dk < 1 || dk > 4096 || n_k_heads < 1 || n_v_heads % n_k_heads != 0 ||
      n_v_heads > 65535) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>((dv + kCols - 1) / kCols),
                  static_cast<unsigned>(n_v_heads));
  const size_t smem = static_cast<size_t>(2 * dk) * sizeof(float);
  if (dk == 128) {
    BOLTRT_LAUNCH(grid, kCols, smem, stream, delta_rule_kernel<128>)
    (u, n_tokens, token_stride, q_offset, k_offset, v_offset, n_k_heads, n_v_heads, dk, dv, gamma,
     beta, scale, state, out);
  } else if (dk == 64) {
    BOLTRT_LAUNCH(grid, kCols, smem, stream, delta_rule_kernel<64>)
    (u, n_tokens, token_stride, q_offset, k_offset, v_offset, n_k_heads, n_v_heads, dk, dv, gamma,
     beta, scale, state, out);
  } else if (dk == 32) {
    BOLTRT_LAUNCH(grid, kCols, smem, stream, delta_rule_kernel<32>)
    (u, n_tokens, token_stride, q_offset, k_offset, v_offset, n_k_heads, n_v_heads, dk, dv, gamma,
     beta, scale, state, out);
  } else {
    BOLTRT_LAUNCH(grid, kCols, smem, stream, delta_rule_kernel<0>)
    (u, n_tokens, token_stride, q_offset, k_offset, v_offset, n_k_heads, n_v_heads, dk, dv, gamma,
     beta, scale, state, out);
  }
  return cudaGetLastError();
}

}  // namespace boltrt::kernels
