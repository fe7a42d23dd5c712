// The llama.cpp logits goldens of tests/data/gemma4/ (made by make_goldens.sh): reading them,
// and checking that a re-synthesised model is the file a golden was made from. Shared by the
// CPU (test_gemma4_parity) and CUDA (test_cuda_parity) comparisons.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace boltrt::test {

struct Golden {
  uint64_t model_hash = 0;  // FNV-1a 64 of the model file the golden was made from
  std::vector<int32_t> tokens;
  int64_t n_vocab = 0;
  std::vector<uint32_t> positions;
  std::vector<float> logits;  // [positions][n_vocab]
};

// Throws std::runtime_error for a missing, foreign or truncated file.
Golden read_golden(const std::string& path);
uint64_t fnv1a64(const std::string& path);
// The synthesizer must reproduce the golden's model byte for byte (a gtest assertion).
void expect_same_model(const Golden& g, const std::string& path);
// Compares logits rows (position-major, all positions) against the golden at its positions:
// max |dlogit| <= tol * max |logit| per row and the argmax where the golden's top two logits are
// further apart than that (gtest expectations, one line of the worst error printed).
// moe_quantized: test_gemma4_parity's 90 % rule for quantized MoE instead of every position.
void expect_matches(const Golden& g, const std::vector<float>& logits, double tol,
                    const std::string& mode, bool moe_quantized = false);

}  // namespace boltrt::test
