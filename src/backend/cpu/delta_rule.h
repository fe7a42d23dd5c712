// Gated delta rule (Qwen3.5 Gated DeltaNet layers, docs/qwen35.md §4.4 and §6), one value head.
//
// Both forms compute, for tokens t = 0 … n−1 of one value head with state S (dk × dv, row = key
// dim, carried across calls):
//   S  ← exp(g_t) · S                      decay first (g_t ≤ 0 is a log-decay)
//   δ  = β_t · (v_t − Sᵀ k_t)              [dv], on the decayed state
//   S  ← S + k_t δᵀ                        rank-1 update
//   o_t = Sᵀ q_t                           [dv], on the updated state
// q and k are expected already L2-normalised, q already scaled by 1/sqrt(dk).
//
// delta_rule_recurrent is the token-by-token form (decode, and the scalar reference);
// delta_rule_chunked is the chunked parallel form for prefill (§6.1), equal to it up to F32
// summation order. Both touch only this head's data, so callers split work across threads by
// (sequence, value head) and a row's bits never depend on batch size or thread count.
#pragma once

#include <cstdint>

namespace boltrt::cpu {

struct DeltaRuleHead {
  int64_t n = 0;                // tokens
  int64_t dk = 0, dv = 0;       // key (state rows) and value (state columns) widths
  const float* q = nullptr;     // n × dk, row stride q_stride
  const float* k = nullptr;     // n × dk, row stride k_stride
  const float* v = nullptr;     // n × dv, row stride v_stride
  const float* g = nullptr;     // n log-decays (≤ 0)
  const float* beta = nullptr;  // n write strengths (sigmoid outputs)
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
  float* state = nullptr;  // dk × dv row-major, read and updated in place
  float* out = nullptr;    // n × dv, row stride out_stride
  int64_t out_stride = 0;
};

void delta_rule_recurrent(const DeltaRuleHead& h);

// chunk: tokens per chunk (1 … 64 is sensible); the last chunk may be shorter.
void delta_rule_chunked(const DeltaRuleHead& h, int64_t chunk);

}  // namespace boltrt::cpu
