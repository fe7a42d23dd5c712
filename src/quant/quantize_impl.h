// Per-type reference quantizers behind quantize_row() (quantize.cpp). Internal to src/quant.
// Inputs are finite (quantize_row checks that first); n is a multiple of the block size.
#pragma once
#include <cstdint>

#include "quant/blocks.h"

namespace boltrt::quant_detail {

// quantize_legacy.cpp (§3, §6.3)
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t n);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t n);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t n);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t n);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t n);
void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t n);

// With an importance matrix (llama-quantize --imatrix; qw has n entries, n is one whole row).
void quantize_q4_0_weighted(const float* x, BlockQ4_0* y, int64_t n, const float* qw);
void quantize_q4_1_weighted(const float* x, BlockQ4_1* y, int64_t n, const float* qw);
void quantize_q5_0_weighted(const float* x, BlockQ5_0* y, int64_t n, const float* qw);
void quantize_q5_1_weighted(const float* x, BlockQ5_1* y, int64_t n, const float* qw);

// quantize_kquants.cpp (§5)
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t n);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t n);
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t n);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t n);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t n);
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t n);
void quantize_q2_k_weighted(const float* x, BlockQ2_K* y, int64_t n, const float* qw);
void quantize_q3_k_weighted(const float* x, BlockQ3_K* y, int64_t n, const float* qw);
void quantize_q4_k_weighted(const float* x, BlockQ4_K* y, int64_t n, const float* qw);
void quantize_q5_k_weighted(const float* x, BlockQ5_K* y, int64_t n, const float* qw);
void quantize_q6_k_weighted(const float* x, BlockQ6_K* y, int64_t n, const float* qw);

// quantize_iq4.cpp (§6.1, §6.2): llama-quantize's (ggml_quantize_chunk's) variants.
// qw (n entries) may be null.
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n, const float* qw);
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n, const float* qw);

}  // namespace boltrt::quant_detail
