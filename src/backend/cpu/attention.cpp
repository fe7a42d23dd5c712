// Attention on the CPU (cpu::attention, cpu::AttentionAccumulator in ops.h): scores, softmax
// weights and the weighted sum of values, per query head and row, over keys delivered in chunks.
//
// Work is organised so that a key is loaded once for every query that reads it: the jobs
// (token, query head) of one KV head form units that walk the keys in L1-sized blocks together.
// The arithmetic of each (query, key) dot product and of each output element is fixed per SIMD
// level (scalar; AVX2; AVX-512 = AVX2 bit for bit, attention_avx512.cpp), so a query row gets
// the same bits alone as in any batch: decode, speculative verify and prefill agree.
//
// Keys and values come in place from the KV cache, in its format (KvRows: f32, f16, q8_0,
// q4_0). The AVX-512 kernels turn them into f32 in registers as they load them; the other
// levels convert the L1-sized block of rows they are about to use. Both conversions are exact
// (f16) or the product dequantize_block() computes (q8_0, q4_0), so the bits equal those of the
// same attention over rows converted to f32 beforehand.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/ops_x86.h"
#include "quant/dequantize.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

#if defined(__x86_64__)
#define BOLTRT_OPS_X86 1
#endif

namespace boltrt::cpu {

#if BOLTRT_OPS_X86
namespace {

using x86::exp_pd_avx2;
using x86::have_avx2_fma;

// acc[d] += sum_j e[j] * v_j[d] (v_j = v + j * stride), d < n (a multiple of 8). 64 dims at a
// time keep 8 independent fma chains in flight (one chain per 8 dims was latency bound).
__attribute__((target("avx2,fma"))) void weighted_sum_avx2(const float* e, const float* v,
                                                           int64_t stride, int64_t count,
                                                           float* acc, int64_t n) {
  int64_t d = 0;
  for (; d + 64 <= n; d += 64) {
    __m256 a[8];
    for (int k = 0; k < 8; ++k) a[k] = _mm256_loadu_ps(acc + d + 8 * k);
    for (int64_t j = 0; j < count; ++j) {
      const __m256 w = _mm256_set1_ps(e[j]);
      const float* vj = v + j * stride + d;
      for (int k = 0; k < 8; ++k) a[k] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 8 * k), a[k]);
    }
    for (int k = 0; k < 8; ++k) _mm256_storeu_ps(acc + d + 8 * k, a[k]);
  }
  for (; d < n; d += 8) {
    __m256 a = _mm256_loadu_ps(acc + d);
    for (int64_t j = 0; j < count; ++j)
      a = _mm256_fmadd_ps(_mm256_set1_ps(e[j]), _mm256_loadu_ps(v + j * stride + d), a);
    _mm256_storeu_ps(acc + d, a);
  }
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  }
  const __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// dot_avx2(q, k_r) for four keys k_r = k + r * stride at once (n a multiple of 8): per key the
// same operations in the same order, with 8 fma chains in flight instead of 2 (one key at a
// time, a dot of 256 or 512 values waited on the fma latency).
__attribute__((target("avx2,fma"))) void dot4_avx2(const float* q, const float* k, int64_t stride,
                                                   int64_t n, float* out) {
  __m256 a0[4], a1[4];
  for (int r = 0; r < 4; ++r) a0[r] = a1[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 q0 = _mm256_loadu_ps(q + i), q1 = _mm256_loadu_ps(q + i + 8);
    for (int r = 0; r < 4; ++r) {
      a0[r] = _mm256_fmadd_ps(q0, _mm256_loadu_ps(k + r * stride + i), a0[r]);
      a1[r] = _mm256_fmadd_ps(q1, _mm256_loadu_ps(k + r * stride + i + 8), a1[r]);
    }
  }
  if (i + 8 <= n) {
    const __m256 q0 = _mm256_loadu_ps(q + i);
    for (int r = 0; r < 4; ++r) {
      a0[r] = _mm256_fmadd_ps(q0, _mm256_loadu_ps(k + r * stride + i), a0[r]);
    }
  }
  for (int r = 0; r < 4; ++r) {
    const __m256 acc = _mm256_add_ps(a0[r], a1[r]);
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    out[r] = _mm_cvtss_f32(t);
  }
}

// dot_avx2(q, k) for head_dim kN (a multiple of 16) with q held in registers: the same
// operations in the same order as dot_avx2, two keys at a time.
template <int kN>
__attribute__((target("avx2,fma"), always_inline)) inline void dot2_fixed(const __m256* qv,
                                                                          const float* k0,
                                                                          const float* k1,
                                                                          float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
  for (int i = 0; i < kN / 8; i += 2) {
    a0 = _mm256_fmadd_ps(qv[i], _mm256_loadu_ps(k0 + 8 * i), a0);
    a1 = _mm256_fmadd_ps(qv[i + 1], _mm256_loadu_ps(k0 + 8 * i + 8), a1);
    b0 = _mm256_fmadd_ps(qv[i], _mm256_loadu_ps(k1 + 8 * i), b0);
    b1 = _mm256_fmadd_ps(qv[i + 1], _mm256_loadu_ps(k1 + 8 * i + 8), b1);
  }
  const __m256 acc[2] = {_mm256_add_ps(a0, a1), _mm256_add_ps(b0, b1)};
  for (int j = 0; j < 2; ++j) {
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    out[j] = _mm_cvtss_f32(t);
  }
}

template <int kN>
__attribute__((target("avx2,fma"))) void scores_fixed(const float* q, const float* k,
                                                      int64_t stride, int64_t count, float* out) {
  __m256 qv[kN / 8];
  for (int i = 0; i < kN / 8; ++i) qv[i] = _mm256_loadu_ps(q + 8 * i);
  int64_t j = 0;
  for (; j + 2 <= count; j += 2) dot2_fixed<kN>(qv, k + j * stride, k + (j + 1) * stride, out + j);
  if (j < count) {
    float pair[2];
    dot2_fixed<kN>(qv, k + j * stride, k + j * stride, pair);
    out[j] = pair[0];
  }
}

// Softmax weights of attention scores: s[j] = float(exp(s[j] - max)) for j < n (the subtraction
// in float, as the scalar loop does), returning the sum of the rounded weights in double (four
// lanes, then pairs). Every element goes through exp_pd_avx2 (the tail padded with -inf, which
// gives 0), so a key's weight does not depend on where the visible keys start.
__attribute__((target("avx2,fma"))) inline __m128 softmax_weights4_avx2(__m128 v, __m128 max,
                                                                        __m256d& sum) {
  const __m128 e = _mm256_cvtpd_ps(exp_pd_avx2(_mm256_cvtps_pd(_mm_sub_ps(v, max))));
  sum = _mm256_add_pd(sum, _mm256_cvtps_pd(e));
  return e;
}

__attribute__((target("avx2,fma"))) double softmax_weights_avx2(float* s, int64_t n, float max) {
  const __m128 m = _mm_set1_ps(max);
  __m256d sum = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    _mm_storeu_ps(s + j, softmax_weights4_avx2(_mm_loadu_ps(s + j), m, sum));
  if (j < n) {
    alignas(16) float tail[4];
    for (int k = 0; k < 4; ++k)
      tail[k] = j + k < n ? s[j + k] : -std::numeric_limits<float>::infinity();
    _mm_store_ps(tail, softmax_weights4_avx2(_mm_load_ps(tail), m, sum));
    std::memcpy(s + j, tail, static_cast<size_t>(n - j) * sizeof(float));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, sum);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

}  // namespace
#endif

namespace {

// n values of a KV row in `format` as f32 (the exact conversion of KvCache::read)
void kv_to_f32(KvFormat format, const uint8_t* src, float* dst, int64_t n) {
  switch (format) {
    case KvFormat::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvFormat::F16:
      return fp16_to_fp32_row(reinterpret_cast<const uint16_t*>(src), dst, n);
    case KvFormat::Q8_0:
      return dequantize_row(GgmlType::Q8_0, src, dst, n);
    case KvFormat::Q4_0:
      return dequantize_row(GgmlType::Q4_0, src, dst, n);
  }
}

float dot(const float* a, const float* b, int64_t n) {
#if BOLTRT_OPS_X86
  if (have_avx2_fma()) return dot_avx2(a, b, n);
#endif
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

size_t kv_format_bytes(KvFormat format, int64_t n) {
  const size_t values = static_cast<size_t>(n);
  switch (format) {
    case KvFormat::F32:
      return values * 4;
    case KvFormat::F16:
      return values * 2;
    case KvFormat::Q8_0:
      return values / 32 * 34;
    case KvFormat::Q4_0:
      return values / 32 * 18;
  }
  return 0;
}

void AttentionAccumulator::begin(int64_t n_tokens, int64_t n_head, int64_t head_dim) {
  n_tokens_ = n_tokens;
  n_head_ = n_head;
  head_dim_ = head_dim;
  const size_t jobs = static_cast<size_t>(n_tokens * n_head);
  max_.assign(jobs, -std::numeric_limits<float>::infinity());
  sum_.assign(jobs, 0.0);
  acc_.assign(jobs * static_cast<size_t>(head_dim), 0.0f);
}

namespace {

// The three passes of attention over one run of keys, at the best level the CPU (and
// simd_level(), for tests) allows. Each level has one arithmetic per (query, key) dot product
// and per output element, whatever the blocking, batching or threading around it, so a query
// row gets the same bits alone as in a batch (decode = verify = prefill).
struct AttentionKernels {
  bool vector = false;  // AVX2 (or AVX-512) softmax weights and weighted sum
  bool avx512 = false;  // AVX-512 dots and weighted sums (head_dim a multiple of 16)
  bool avx2_dots = false;

  explicit AttentionKernels(int64_t head_dim) {
#if BOLTRT_OPS_X86
    avx2_dots = have_avx2_fma();
    vector = avx2_dots && head_dim % 8 == 0;
    avx512 = vector && head_dim % 16 == 0 && simd_level() == SimdLevel::Avx512;
#else
    (void)head_dim;
#endif
  }

  // out[j] = q . k_j (unscaled), j < count
  void dots(const float* q, const float* k, int64_t stride, int64_t count, int64_t head_dim,
            float* out) const {
#if BOLTRT_OPS_X86
    if (avx2_dots) {
      if (head_dim == 64) return scores_fixed<64>(q, k, stride, count, out);
      if (head_dim == 128) return scores_fixed<128>(q, k, stride, count, out);
      int64_t j = 0;
      if (head_dim % 8 == 0) {
        for (; j + 4 <= count; j += 4) dot4_avx2(q, k + j * stride, stride, head_dim, out + j);
      }
      for (; j < count; ++j) out[j] = dot_avx2(q, k + j * stride, head_dim);
      return;
    }
#endif
    for (int64_t j = 0; j < count; ++j) out[j] = dot(q, k + j * stride, head_dim);
  }

  // s[j] = exp(s[j] - max), returning the sum of the weights (in double)
  double weights(float* s, int64_t n, float max) const {
#if BOLTRT_OPS_X86
    // exp in double, 4 at a time: within rounding of std::exp
    if (vector) return softmax_weights_avx2(s, n, max);
#endif
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - max);
      sum += static_cast<double>(s[j]);
    }
    return sum;
  }

  // acc[d] += sum_j e[j] * v_j[d]; with e1/acc1, a second query over the same keys
  void weighted_sum(const float* e, const float* e1, const float* v, int64_t stride, int64_t count,
                    float* acc, float* acc1, int64_t head_dim) const {
#if BOLTRT_OPS_X86
    if (vector) {
      weighted_sum_avx2(e, v, stride, count, acc, head_dim);
      if (e1) weighted_sum_avx2(e1, v, stride, count, acc1, head_dim);
      return;
    }
#endif
    for (const auto& [w, a] : {std::pair{e, acc}, std::pair{e1, acc1}}) {
      if (!w) continue;
      for (int64_t j = 0; j < count; ++j) {
        const float* vj = v + j * stride;
        for (int64_t d = 0; d < head_dim; ++d) a[d] += w[j] * vj[d];
      }
    }
  }

  // The same two for n jobs (queries) over `count` rows `stride` bytes apart, each starting
  // with the head's head_dim values: out[c][j] = q[c] . k_j and acc[c][d] += sum_j e[c][j] *
  // v_j[d]. Each job's arithmetic is the single-job one. The AVX-512 kernels read every cache
  // format in place; the other levels take f32 rows (add() converts a block once for all jobs).
  // prefetch: the next block's rows follow these (the AVX-512 kernels bring them into L2).
  void dots(const float* const* q, int n, KvFormat format, const uint8_t* k, size_t stride,
            int64_t count, int64_t head_dim, float* const* out, bool prefetch) const {
#if BOLTRT_OPS_X86
    if (avx512) {
      return detail::attention_dots_avx512(format, q, n, k, stride, count, head_dim, out, prefetch);
    }
#endif
    (void)prefetch;
    if (format != KvFormat::F32) fail("attention: f32 rows expected below AVX-512");
    const auto* rows = reinterpret_cast<const float*>(k);
    for (int c = 0; c < n; ++c) {
      dots(q[c], rows, static_cast<int64_t>(stride / 4), count, head_dim, out[c]);
    }
  }
  void weighted_sum(const float* const* e, int n, KvFormat format, const uint8_t* v, size_t stride,
                    int64_t count, float* const* acc, int64_t head_dim, bool prefetch) const {
#if BOLTRT_OPS_X86
    if (avx512) {
      return detail::attention_weighted_sum_avx512(format, e, n, v, stride, count, acc, head_dim,
                                                   prefetch);
    }
#endif
    (void)prefetch;
    if (format != KvFormat::F32) fail("attention: f32 rows expected below AVX-512");
    const auto* rows = reinterpret_cast<const float*>(v);
    for (int c = 0; c < n; c += 2) {
      weighted_sum(e[c], c + 1 < n ? e[c + 1] : nullptr, rows, static_cast<int64_t>(stride / 4),
                   count, acc[c], c + 1 < n ? acc[c + 1] : nullptr, head_dim);
    }
  }
};

// fn(r0', r1') for the parts of rows [r0, r1) that lie on one side of rows.split (consecutive
// in memory)
template <typename Fn>
void for_each_run(const KvRows& rows, int64_t r0, int64_t r1, Fn&& fn) {
  if (r0 < rows.split && rows.split < r1) {
    fn(r0, rows.split);
    fn(rows.split, r1);
  } else {
    fn(r0, r1);
  }
}

}  // namespace

// The jobs (token t, query head h) that read one KV head form units: a unit walks its keys in
// blocks small enough to stay in L1 (K for the dot products, then V for the weighted sums)
// while every job of the unit uses them, instead of each job streaming all keys from L2. A
// one-token step of a GQA model shares each key among its query heads; a verify or prefill
// batch among all its rows too.
void AttentionAccumulator::add(const float* q, int64_t q_pos0, const float* k, const float* v,
                               int64_t n_kv, int64_t kv_pos0, int64_t n_head_kv, int64_t window,
                               float scale, ThreadPool* pool) {
  KvRows k_rows, v_rows;
  k_rows.row_bytes = v_rows.row_bytes = static_cast<size_t>(n_head_kv * head_dim_) * sizeof(float);
  k_rows.rows[0] = reinterpret_cast<const uint8_t*>(k);
  v_rows.rows[0] = reinterpret_cast<const uint8_t*>(v);
  add(q, q_pos0, k_rows, v_rows, n_kv, kv_pos0, n_head_kv, window, scale, pool);
}

void AttentionAccumulator::add(const float* q, int64_t q_pos0, const KvRows& k, const KvRows& v,
                               int64_t n_kv, int64_t kv_pos0, int64_t n_head_kv, int64_t window,
                               float scale, ThreadPool* pool) {
  const int64_t n_head = n_head_, head_dim = head_dim_, n_tokens = n_tokens_;
  const int64_t group = n_head / n_head_kv;
  const int64_t q_stride = n_head * head_dim;
  for (const KvRows* rows : {&k, &v}) {
    if (rows->format != KvFormat::F32 && rows->format != KvFormat::F16 && head_dim % 32 != 0) {
      fail("attention: a q8_0 / q4_0 KV cache needs heads of a multiple of 32 values, not {}",
           head_dim);
    }
  }
  const AttentionKernels kern(head_dim);
  // ~32 KB of keys (or values) per block in their cache format, a multiple of 8 keys: with the
  // 4 query rows (or accumulators) of a kernel call it stays in L1 (32 KB or more) while every
  // job of the unit goes over it. (16 KB of f32 rows, the earlier size, left the kernels
  // reloading accumulators every 8 keys at head_dim 512: 20 % slower.)
  // The other levels convert a block to f32 first: 16 KB of f32 rows.
  const int64_t block =
      kern.avx512
          ? std::max<int64_t>(
                8, 32768 / static_cast<int64_t>(kv_format_bytes(k.format, head_dim)) / 8 * 8)
          : std::max<int64_t>(8, 16384 / (head_dim * 4) / 8 * 8);

  // Units: KV head x a run of tokens x a run of the KV head's query heads; at most ~64 jobs
  // (their scores stay small), and with threads enough units to share.
  const int64_t jobs = n_tokens * n_head;
  // below ~64K multiply-adds a thread hand-off costs more than it saves
  const bool parallel = pool && pool->size() > 1 && jobs > 1 && jobs * n_kv * head_dim >= (1 << 16);
  int64_t unit_tokens = std::clamp<int64_t>(64 / group, 1, n_tokens);
  int64_t unit_heads = group;
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  if (parallel) {
    // a one-token step: one unit per KV head when there are enough of them, so each KV head's
    // rows are read from memory once for all its query heads; batches: two units per thread
    const int64_t want = (n_tokens == 1 ? 1 : 2) * pool->size();
    while (unit_tokens > 1 && n_head_kv * ceil_div(n_tokens, unit_tokens) < want) {
      unit_tokens = ceil_div(unit_tokens, 2);
    }
    const int64_t units = n_head_kv * ceil_div(n_tokens, unit_tokens);
    if (units < want) unit_heads = std::max<int64_t>(1, group * units / want);
  }
  const int64_t token_runs = ceil_div(n_tokens, unit_tokens);
  const int64_t head_runs = ceil_div(group, unit_heads);
  const int64_t n_units = n_head_kv * token_runs * head_runs;

  struct Job {
    int64_t id, j0, j1;  // (token, head) index; visible key rows [j0, j1) of this chunk
    float* s;            // scores, then weights, of rows j0 .. j1 - 1 (s[j])
  };
  auto run_unit = [&](int64_t unit) {
    const int64_t kvh = unit / (token_runs * head_runs);
    const int64_t t_begin = (unit / head_runs) % token_runs * unit_tokens;
    const int64_t t_end = std::min(n_tokens, t_begin + unit_tokens);
    const int64_t h_begin = kvh * group + unit % head_runs * unit_heads;
    const int64_t h_end = std::min((kvh + 1) * group, h_begin + unit_heads);
    // per thread, kept between calls (a verify step has ~16 attention calls)
    thread_local std::vector<float> score_buffer;
    thread_local std::vector<Job> unit_jobs;
    unit_jobs.clear();
    int64_t lo = n_kv, hi = 0;
    for (int64_t t = t_begin; t < t_end; ++t) {
      const int64_t pos = q_pos0 + t;
      const int64_t first = window > 0 ? pos - window + 1 : 0;
      const int64_t j0 = std::max<int64_t>(0, first - kv_pos0);
      const int64_t j1 = std::min<int64_t>(n_kv, pos - kv_pos0 + 1);
      if (j1 <= j0) continue;
      for (int64_t h = h_begin; h < h_end; ++h) unit_jobs.push_back({t * n_head + h, j0, j1, {}});
      lo = std::min(lo, j0);
      hi = std::max(hi, j1);
    }
    if (unit_jobs.empty()) return;
    const size_t need = unit_jobs.size() * static_cast<size_t>(n_kv);
    if (score_buffer.size() < need) score_buffer.resize(need);
    for (size_t i = 0; i < unit_jobs.size(); ++i) {
      unit_jobs[i].s = score_buffer.data() + i * static_cast<size_t>(n_kv);
    }
    // the KV head's values within a row (a whole number of blocks: head_dim % 32 == 0)
    const size_t k_head = kv_format_bytes(k.format, kvh * head_dim);
    const size_t v_head = kv_format_bytes(v.format, kvh * head_dim);

    // Runs of up to kGroup neighbouring jobs that see the same keys of a block go to the
    // kernels together, so each key / value row is loaded and converted once for all of them:
    // the query heads of one token always, and in a prefill every job of the unit over the
    // blocks before its first token. group(b, e, fn) calls fn(first job, jobs, r0, r1,
    // prefetch): the first call of a block that has another after it prefetches that one.
    constexpr int kGroup = 4;
    auto group = [&](int64_t b, int64_t e, auto&& fn) {
      bool prefetch = e < hi;
      for (size_t i = 0; i < unit_jobs.size();) {
        const int64_t r0 = std::max(unit_jobs[i].j0, b), r1 = std::min(unit_jobs[i].j1, e);
        size_t n = 1;
        while (n < kGroup && i + n < unit_jobs.size() && std::max(unit_jobs[i + n].j0, b) == r0 &&
               std::min(unit_jobs[i + n].j1, e) == r1) {
          ++n;
        }
        if (r0 < r1) {
          fn(i, static_cast<int>(n), r0, r1, prefetch);
          prefetch = false;
        }
        i += n;
      }
    };
    // The rows [b, e) of this KV head as the kernels read them: in place (the AVX-512 kernels
    // convert in registers; f32 needs nothing), or, for the other levels, converted to f32 once
    // per block for every job of the unit. Row j is view.rows.row(j - view.first) + view.head.
    struct BlockView {
      KvRows rows;
      size_t head;
      int64_t first;
    };
    thread_local std::vector<float> block_buffer;
    auto view_block = [&](const KvRows& src, size_t head, int64_t b, int64_t e) {
      if (kern.avx512 || src.format == KvFormat::F32) return BlockView{src, head, 0};
      block_buffer.resize(static_cast<size_t>((e - b) * head_dim));
      for_each_run(src, b, e, [&](int64_t s0, int64_t s1) {
        for (int64_t j = s0; j < s1; ++j) {
          kv_to_f32(src.format, src.row(j) + head, block_buffer.data() + (j - b) * head_dim,
                    head_dim);
        }
      });
      KvRows f32;
      f32.row_bytes = static_cast<size_t>(head_dim) * sizeof(float);
      f32.rows[0] = reinterpret_cast<const uint8_t*>(block_buffer.data());
      return BlockView{f32, 0, b};
    };
    // 1. dot products, a block of keys at a time for every job
    for (int64_t b = lo; b < hi; b += block) {
      const int64_t e = std::min(hi, b + block);
      const BlockView view = view_block(k, k_head, b, e);
      group(b, e, [&](size_t i, int n, int64_t r0, int64_t r1, bool prefetch) {
        const float* qs[kGroup];
        for (int c = 0; c < n; ++c) {
          const int64_t id = unit_jobs[i + c].id;
          qs[c] = q + id / n_head * q_stride + id % n_head * head_dim;
        }
        const KvRows& rows = view.rows;
        for_each_run(rows, r0 - view.first, r1 - view.first, [&](int64_t s0, int64_t s1) {
          float* out[kGroup];
          for (int c = 0; c < n; ++c) out[c] = unit_jobs[i + c].s + view.first + s0;
          kern.dots(qs, n, rows.format, rows.row(s0) + view.head, rows.row_bytes, s1 - s0, head_dim,
                    out, prefetch);
        });
      });
    }
    // 2. per job: scale, maximum, rescale of earlier chunks, softmax weights
    for (const Job& job : unit_jobs) {
      float chunk_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = job.j0; j < job.j1; ++j) {
        job.s[j] *= scale;
        chunk_max = std::max(chunk_max, job.s[j]);
      }
      float& max = max_[static_cast<size_t>(job.id)];
      double& sum = sum_[static_cast<size_t>(job.id)];
      float* acc = acc_.data() + job.id * head_dim;
      if (chunk_max > max) {  // rescale what earlier chunks added
        if (sum > 0.0) {
          const float c = std::exp(max - chunk_max);
          sum *= static_cast<double>(c);
          for (int64_t d = 0; d < head_dim; ++d) acc[d] *= c;
        }
        max = chunk_max;
      }
      sum += kern.weights(job.s + job.j0, job.j1 - job.j0, max);
    }
    // 3. weighted sums of the values, a block of keys at a time
    for (int64_t b = lo; b < hi; b += block) {
      const int64_t e = std::min(hi, b + block);
      const BlockView view = view_block(v, v_head, b, e);
      group(b, e, [&](size_t i, int n, int64_t r0, int64_t r1, bool prefetch) {
        float* acc[kGroup];
        for (int c = 0; c < n; ++c) acc[c] = acc_.data() + unit_jobs[i + c].id * head_dim;
        const KvRows& rows = view.rows;
        for_each_run(rows, r0 - view.first, r1 - view.first, [&](int64_t s0, int64_t s1) {
          const float* w[kGroup];
          for (int c = 0; c < n; ++c) w[c] = unit_jobs[i + c].s + view.first + s0;
          kern.weighted_sum(w, n, rows.format, rows.row(s0) + view.head, rows.row_bytes, s1 - s0,
                            acc, head_dim, prefetch);
        });
      });
    }
  };
  if (parallel && n_units > 1) {
    // Units from a shared counter (run_shared): a worker the OS has not scheduled is not waited
    // for. With parallel_for a verify step's attention waited a whole time slice (~6 ms)
    // whenever the other core was busy.
    std::atomic<int64_t> next{0};
    pool->run_shared([&](int) {
      for (int64_t u = next.fetch_add(1); u < n_units; u = next.fetch_add(1)) run_unit(u);
    });
  } else {
    for (int64_t u = 0; u < n_units; ++u) run_unit(u);
  }
}

void AttentionAccumulator::finish(float* out) const {
  for (int64_t job = 0; job < n_tokens_ * n_head_; ++job) {
    const double sum = sum_[static_cast<size_t>(job)];
    const float inv = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
    const float* acc = acc_.data() + job * head_dim_;
    float* o = out + job * head_dim_;
    for (int64_t d = 0; d < head_dim_; ++d) o[d] = acc[d] * inv;
  }
}

void attention(const float* q, int64_t n_tokens, int64_t q_pos0, const float* k, const float* v,
               int64_t n_kv, int64_t kv_pos0, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
               int64_t window, float scale, float* out, ThreadPool* pool) {
  AttentionAccumulator acc;
  acc.begin(n_tokens, n_head, head_dim);
  acc.add(q, q_pos0, k, v, n_kv, kv_pos0, n_head_kv, window, scale, pool);
  acc.finish(out);
}

}  // namespace boltrt::cpu
