// CPU reference ops for transformer forward passes (everything except the quantized matmul,
// which lives in matmul.h). All math is f32 with the accumulation choices llama.cpp's CPU
// backend makes (sums of squares and softmax denominators in double), so results agree with
// llama.cpp to float rounding. Vectors are contiguous f32 unless a stride is given.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace boltrt {
class ThreadPool;
}

namespace boltrt::cpu {

// IEEE half <-> float, round to nearest even (as F16C / ggml do).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

// The same for rows of n values (F16C when the CPU has it; identical results).
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n);
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n);

// y = x / sqrt(mean(x^2) + eps) * w   (w may be null: no weight). y may alias x.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y);
// The same over `rows` consecutive rows of length n, in place (per-head Q/K/V norms).
void rms_norm_rows(float* x, int64_t rows, int64_t n, const float* w, float eps);

// NEOX ("rotate half") RoPE. rope_angles fills cos/sin for the n_rot/2 rotated pairs of
// position `pos`: theta_i = pos * base^(-2i/n_rot) / freq_factors[i] (freq_factors may be null),
// computed by repeated multiplication like ggml so the angles match bit for bit.
void rope_angles(int64_t pos, int64_t n_rot, float base, const float* freq_factors, float* cos_out,
                 float* sin_out);
// Rotates pairs (i, i + n_rot/2), i < n_rot/2, in each of n_heads heads of head_dim values;
// dims >= n_rot pass through unchanged.
void rope_neox(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cos_in,
               const float* sin_in);

// GELU, tanh approximation, as llama.cpp's CPU backend evaluates it: the input is rounded to
// f16 and the result read from an f16 table (x <= -10 -> 0, x >= 10 -> x).
float gelu(float x);
// The exact tanh-approximation GELU in f32 (for references).
float gelu_exact(float x);
// out[i] = gelu(gate[i]) * up[i]; out may alias gate or up.
void geglu(const float* gate, const float* up, float* out, int64_t n);
// x[i] = gelu(x[i])
void gelu_inplace(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i] = gate / (1 + exp(-gate)) * up (SwiGLU, DFlash drafts); out may
// alias gate or up. With AVX2 exp is evaluated 8 at a time (within 2 ulp of std::exp).
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// Index of the first maximum of x[0..n) (std::max_element's answer when x holds no NaN).
int64_t argmax(const float* x, int64_t n);

// x = cap * tanh(x / cap)
void softcap(float* x, int64_t n, float cap);
// In-place softmax (max-subtracted, denominator summed in double).
void softmax(float* x, int64_t n);

// Mixture-of-experts routing: probs = softmax(logits) over all n_expert, then the k largest
// (ties to the lower index), weights renormalised to sum 1 (sum clamped at 2^-14 like
// llama.cpp). selected[k] and weights[k] are ordered by descending probability.
void route_top_k(const float* logits, int64_t n_expert, int64_t k, int32_t* selected,
                 float* weights);

// Causal multi-head attention with grouped KV heads for a run of consecutive query positions.
//   q:   [n_tokens][n_head * head_dim], token t at position q_pos0 + t
//   k,v: [n_kv][n_head_kv * head_dim], row j at position kv_pos0 + j
//   out: [n_tokens][n_head * head_dim]
// Query at position p sees keys at positions p_k with p_k <= p and, when window > 0,
// p - p_k < window. Query head h reads KV head h / (n_head / n_head_kv). scores = scale * q.k.
void attention(const float* q, int64_t n_tokens, int64_t q_pos0, const float* k, const float* v,
               int64_t n_kv, int64_t kv_pos0, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
               int64_t window, float scale, float* out, ThreadPool* pool);

// The same attention with the keys delivered in chunks, in any order of chunks (online
// softmax: running max, rescaled sums), so a long context never has to be held as f32 at once.
//   acc.begin(n_tokens, n_head, head_dim);
//   for each chunk: acc.add(q, q_pos0, k_chunk, v_chunk, n_kv_chunk, chunk_pos0, ...);
//   acc.finish(out);
//
// add() also takes the keys and values in place, in their cache format (KvRows: f32, f16 or
// ggml q8_0 / q4_0 blocks of 32 values), read without a conversion pass and with the same
// results, bit for bit, as on the rows converted to f32.

// Storage formats of KV rows (runtime::KvType): f32, f16, q8_0 (blocks of 32: f16 scale and 32
// int8, 34 bytes), q4_0 (f16 scale and 32 4-bit codes, 18 bytes).
enum class KvFormat { F32, F16, Q8_0, Q4_0 };
// Bytes of n values (n a multiple of 32 for q8_0 / q4_0).
size_t kv_format_bytes(KvFormat format, int64_t n);

// KV rows in place: row j of n_kv at rows[0] + j * row_bytes for j < split and at
// rows[1] + (j - split) * row_bytes after (a ring that wraps around once). A row holds
// n_head_kv heads of head_dim values.
struct KvRows {
  KvFormat format = KvFormat::F32;
  size_t row_bytes = 0;
  const uint8_t* rows[2] = {nullptr, nullptr};
  int64_t split = std::numeric_limits<int64_t>::max();
  const uint8_t* row(int64_t j) const {
    return j < split ? rows[0] + static_cast<size_t>(j) * row_bytes
                     : rows[1] + static_cast<size_t>(j - split) * row_bytes;
  }
};

class AttentionAccumulator {
 public:
  void begin(int64_t n_tokens, int64_t n_head, int64_t head_dim);
  void add(const float* q, int64_t q_pos0, const float* k, const float* v, int64_t n_kv,
           int64_t kv_pos0, int64_t n_head_kv, int64_t window, float scale, ThreadPool* pool);
  void add(const float* q, int64_t q_pos0, const KvRows& k, const KvRows& v, int64_t n_kv,
           int64_t kv_pos0, int64_t n_head_kv, int64_t window, float scale, ThreadPool* pool);
  void finish(float* out) const;

 private:
  int64_t n_tokens_ = 0, n_head_ = 0, head_dim_ = 0;
  std::vector<float> max_;   // per (token, head): running maximum score
  std::vector<double> sum_;  // running sum of exp(score - max)
  std::vector<float> acc_;   // running sum of exp(score - max) * v, head_dim per (token, head)
};

}  // namespace boltrt::cpu
