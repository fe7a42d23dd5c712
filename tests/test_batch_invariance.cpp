// Batch invariance: a token's logits do not depend on how many tokens share its forward pass.
// Prompt micro-batches of any size, a speculative verify batch (with its lazy head) and several
// sequences batched into one forward all give each row the bits of one-token decoding. This is
// what makes drafted decoding at temperature 0 reproduce plain decoding exactly, and a batch job's
// results independent of --parallel, on any model (a deep random model amplifies a last-bit
// difference into a different greedy token within a few dozen steps). It holds per SIMD level:
// every matmul row goes through the same kernel arithmetic whatever the batch (matmul.h), and
// attention, norms and RoPE are computed per row.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "model/gemma4.h"
#include "model/gemma4_synth.h"
#include "runtime/session.h"
#include "runtime/thread_pool.h"
#include "support/paths.h"

namespace boltrt {
namespace {

struct Case {
  const char* name;
  const char* preset;
  const char* type;
  KvType kv;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

// 70 tokens: crosses the synthetic presets' sliding windows several times.
std::vector<int32_t> prompt(int64_t n_vocab) {
  std::vector<int32_t> p = {2};
  for (int32_t i = 1; i < 70; ++i) p.push_back(static_cast<int32_t>((i * 7919 + 13) % n_vocab));
  return p;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class BatchInvariance : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    const std::string path = test::scratch_dir(std::string("invariance_") + c.name) + "/m.gguf";
    model::Gemma4SynthOptions so;
    so.type = c.type;
    model::write_gemma4_synth(model::gemma4_preset(c.preset), so, path);
    model_ = Gemma4Model::load(path);
    options_.n_ctx = 128;
    options_.kv_type = c.kv;
    tokens_ = prompt(model_->config().n_vocab);
    // The reference: one token per forward pass.
    Gemma4Session s(*model_, options_, &pool_);
    for (int32_t t : tokens_) {
      const auto row = s.decode(std::span<const int32_t>(&t, 1));
      one_by_one_.emplace_back(row.begin(), row.end());
    }
  }

  // Row i of a decode of tokens_[begin, begin + n) with all logits, checked against one_by_one_.
  void expect_rows(std::span<const float> logits, int64_t begin, int64_t n, const char* what) {
    const size_t V = static_cast<size_t>(model_->config().n_vocab);
    ASSERT_EQ(logits.size(), static_cast<size_t>(n) * V) << what;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(same_bits(logits.subspan(static_cast<size_t>(i) * V, V),
                            one_by_one_[static_cast<size_t>(begin + i)]))
          << what << ": position " << begin + i;
    }
  }

  ThreadPool pool_{3};
  std::unique_ptr<Gemma4Model> model_;
  SessionOptions options_;
  std::vector<int32_t> tokens_;
  std::vector<std::vector<float>> one_by_one_;
};

TEST_P(BatchInvariance, PromptMicroBatchesGiveOneTokenBits) {
  for (int64_t batch : {2, 3, 5, 8, 16, 70}) {
    Gemma4Session s(*model_, options_, &pool_);
    for (int64_t begin = 0; begin < static_cast<int64_t>(tokens_.size()); begin += batch) {
      const int64_t n = std::min<int64_t>(batch, static_cast<int64_t>(tokens_.size()) - begin);
      const auto logits = s.decode(std::span<const int32_t>(tokens_).subspan(begin, n), true);
      expect_rows(logits, begin, n, ("micro-batch " + std::to_string(batch)).c_str());
    }
  }
}

TEST_P(BatchInvariance, VerifyRowsGiveOneTokenBits) {
  // A prefix, then verify batches of 2..8 tokens read row by row through the lazy head, each
  // rolled back and re-verified one longer (the rows are the prompt's own next tokens).
  Gemma4Session s(*model_, options_, &pool_);
  s.set_tap_layers({1, 2});  // as with a draft attached
  const int64_t prefix = 40;
  s.decode(std::span<const int32_t>(tokens_).first(prefix));
  for (int64_t n = 2; n <= 8; ++n) {
    s.decode_verify(std::span<const int32_t>(tokens_).subspan(prefix, n));
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_TRUE(same_bits(s.verify_row(j), one_by_one_[static_cast<size_t>(prefix + j)]))
          << "verify of " << n << ", row " << j;
    }
    s.rollback(prefix);
  }
}

TEST_P(BatchInvariance, SequencesInOneForwardGiveOneTokenBits) {
  // Three sequences at different positions, advanced together by 1, 3 and 2 tokens a step.
  std::vector<std::unique_ptr<Gemma4Session>> owned;
  std::vector<Gemma4Session*> sessions;
  const std::vector<int64_t> start = {0, 11, 30}, step = {1, 3, 2};
  for (size_t k = 0; k < start.size(); ++k) {
    owned.push_back(std::make_unique<Gemma4Session>(*model_, options_, &pool_));
    sessions.push_back(owned.back().get());
    if (start[k] > 0) sessions.back()->decode(std::span<const int32_t>(tokens_).first(start[k]));
  }
  std::vector<int64_t> at = start;
  for (int round = 0; round < 10; ++round) {
    std::vector<std::span<const int32_t>> tokens;
    for (size_t k = 0; k < sessions.size(); ++k) {
      tokens.push_back(std::span<const int32_t>(tokens_).subspan(at[k], step[k]));
    }
    const auto last = Gemma4Session::decode_batch(sessions, tokens);
    for (size_t k = 0; k < sessions.size(); ++k) {
      at[k] += step[k];
      ASSERT_TRUE(same_bits(last[k], one_by_one_[static_cast<size_t>(at[k] - 1)]))
          << "sequence " << k << ", position " << at[k] - 1;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, BatchInvariance,
    ::testing::Values(Case{"tiny_f32_kv_f16", "tiny", "f32", KvType::F16},
                      Case{"tiny_q8_0_kv_f16", "tiny", "q8_0", KvType::F16},
                      Case{"tiny_q4_k_m_kv_q8_0", "tiny", "q4_k_m", KvType::Q8_0},
                      Case{"tiny_e2b_like_q4_k_m_kv_f32", "tiny-e2b-like", "q4_k_m", KvType::F32},
                      Case{"tiny_moe_q8_0_kv_f16", "tiny-moe", "q8_0", KvType::F16},
                      Case{"tiny_q5_k_m_kv_f16", "tiny", "q5_k_m", KvType::F16},
                      Case{"tiny_bf16_kv_f16", "tiny", "bf16", KvType::F16}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace boltrt
