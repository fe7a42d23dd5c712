// Perplexity: the log-softmax against float64, the windowing and scoring rules on a scripted
// model, and `boltrt perplexity` / compute_perplexity on the tiny models against
// llama-perplexity's output (tests/data/perplexity/goldens.txt, made by make_goldens.sh there).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "model/gemma4.h"
#include "model/gemma4_session.h"
#include "runtime/perplexity.h"
#include "runtime/thread_pool.h"
#include "support/paths.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt {
namespace {

TEST(Perplexity, NegativeLogLikelihoodMatchesFloat64) {
  const std::vector<float> logits = {1.5f, -2.0f, 3.25f, 0.0f, 3.0f};
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - 3.25);
  for (int32_t t = 0; t < 5; ++t) {
    const double want = -((static_cast<double>(logits[t]) - 3.25) - std::log(sum));
    EXPECT_NEAR(negative_log_likelihood(logits, t), want, 1e-6) << t;
  }
  EXPECT_THROW(negative_log_likelihood(logits, 5), Error);
  EXPECT_THROW(negative_log_likelihood(logits, -1), Error);
}

// A model over V = 4 whose logits at each position depend only on the input token:
// logit[v] = (v == (token + 1) % V) ? 2 : 0. Records every token it is fed and every decode size.
class ScriptedModel : public LanguageModel {
 public:
  static constexpr int64_t kVocab = 4;
  ScriptedModel(int64_t n_ctx, std::vector<std::vector<int32_t>>* fed, std::vector<size_t>* sizes)
      : n_ctx_(n_ctx), fed_(fed), sizes_(sizes) {
    fed_->emplace_back();
  }
  int64_t n_vocab() const override { return kVocab; }
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t n_past() const override { return n_past_; }
  std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits) override {
    sizes_->push_back(tokens.size());
    logits_.clear();
    for (size_t i = 0; i < tokens.size(); ++i) {
      fed_->back().push_back(tokens[i]);
      if (!all_logits && i + 1 < tokens.size()) continue;
      for (int64_t v = 0; v < kVocab; ++v) logits_.push_back(v == (tokens[i] + 1) % kVocab ? 2 : 0);
    }
    n_past_ += static_cast<int64_t>(tokens.size());
    return logits_;
  }
  void rollback(int64_t n) override { n_past_ = n; }

 private:
  int64_t n_ctx_;
  int64_t n_past_ = 0;
  std::vector<std::vector<int32_t>>* fed_;
  std::vector<size_t>* sizes_;
  std::vector<float> logits_;
};

TEST(Perplexity, WindowsBosAndSecondHalfScoring) {
  // 37 tokens, n_ctx 8: 4 windows (the last 5 tokens dropped), 3 of them scored with --chunks 3.
  std::vector<int32_t> tokens;
  for (int i = 0; i < 37; ++i)
    tokens.push_back((i + i / 5) % 4);  // mostly token+1: some hits, some misses
  std::vector<std::vector<int32_t>> fed;
  std::vector<size_t> sizes;
  PerplexityOptions options;
  options.n_ctx = 8;
  options.n_batch = 3;
  options.n_chunks = 3;
  std::vector<double> reported;
  const auto result = compute_perplexity(
      tokens, /*bos=*/3, options, [&] { return std::make_unique<ScriptedModel>(8, &fed, &sizes); },
      [&](int64_t i, double ppl) {
        EXPECT_EQ(i, static_cast<int64_t>(reported.size()));
        reported.push_back(ppl);
      });
  ASSERT_EQ(fed.size(), 3u);  // a fresh sequence per window
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 3, 2, 3, 3, 2, 3, 3, 2}));
  const double lse = std::log(std::exp(2.0) + 3.0);
  double nll = 0, nll2 = 0;
  std::vector<double> want_running;
  for (int w = 0; w < 3; ++w) {
    std::vector<int32_t> window(tokens.begin() + w * 8, tokens.begin() + w * 8 + 8);
    window[0] = 3;
    EXPECT_EQ(fed[static_cast<size_t>(w)], window) << w;
    for (int p = 4; p < 7; ++p) {  // first = 4; positions 4..6 predict tokens 5..7
      const double v = window[p + 1] == (window[p] + 1) % 4 ? lse - 2.0 : lse;
      nll += v;
      nll2 += v * v;
    }
    want_running.push_back(std::exp(nll / (3.0 * (w + 1))));
  }
  ASSERT_EQ(result.running_ppl.size(), 3u);
  for (int w = 0; w < 3; ++w)
    EXPECT_NEAR(result.running_ppl[w], want_running[w], 1e-7 * want_running[w]);
  EXPECT_EQ(reported, result.running_ppl);
  EXPECT_EQ(result.n_scored, 9);
  EXPECT_EQ(result.n_tokens, 37);
  const double mean = nll / 9;
  // expf in float: about 1e-8 relative.
  EXPECT_NEAR(result.ppl, std::exp(mean), 1e-7 * result.ppl);
  const double want_error = std::sqrt((nll2 / 9 - mean * mean) / 8) * std::exp(mean);
  EXPECT_GT(want_error, 0.1);
  EXPECT_NEAR(result.ppl_error, want_error, 1e-6 * want_error);
}

TEST(Perplexity, RejectsShortTextAndSmallContext) {
  std::vector<std::vector<int32_t>> fed;
  std::vector<size_t> sizes;
  const auto factory = [&] { return std::make_unique<ScriptedModel>(8, &fed, &sizes); };
  const std::vector<int32_t> tokens(15, 1);
  PerplexityOptions options;
  options.n_ctx = 8;
  try {
    compute_perplexity(tokens, -1, options, factory);
    FAIL() << "15 tokens with a context of 8 should be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only 15 tokens"), std::string::npos) << e.what();
  }
  options.n_ctx = 16;  // the model holds only 8
  const std::vector<int32_t> longer(40, 1);
  EXPECT_THROW(compute_perplexity(longer, -1, options, factory), Error);
  EXPECT_TRUE(fed.size() <= 1u);
}

struct Golden {
  std::string model;
  int64_t n_ctx = 0, n_batch = 0, n_chunks = -1;
  std::string kv;
  std::vector<double> running;
  double ppl = 0, error = 0;
};

std::vector<Golden> read_goldens() {
  std::ifstream in(test::source_dir() + "/tests/data/perplexity/goldens.txt");
  std::vector<Golden> goldens;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    Golden g;
    std::string bar;
    s >> g.model >> g.n_ctx >> g.n_batch >> g.kv >> g.n_chunks >> bar;
    for (std::string item; s >> item && item != "|";) g.running.push_back(std::stod(item));
    s >> g.ppl >> g.error;
    goldens.push_back(g);
  }
  return goldens;
}

std::string read_sample() {
  std::ifstream in(test::source_dir() + "/tests/data/perplexity/sample.txt", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// F32 weights: llama.cpp and boltrt compute the same function up to float rounding and
// llama.cpp's f16 GELU table (about 1e-3 relative on single logits, averaging out over ~1000
// scored tokens), measured at most 3.3e-5 relative here. Quantized weights: llama.cpp quantizes
// the activations to 8 bits for every dot product, worth about 1e-2 relative on logits; the
// estimates agree within 3.3e-3 (Q4_K, all windows) measured, 1e-2 asserted. llama.cpp's own
// quantized results move by about 1e-3 with the number of windows sharing one batch.
double tolerance(const std::string& model) {
  return model.find("f32") != std::string::npos ? 1e-4 : 1e-2;
}

TEST(Perplexity, TinyModelsMatchLlamaPerplexity) {
  const auto goldens = read_goldens();
  ASSERT_EQ(goldens.size(), 5u);
  const std::string text = read_sample();
  ASSERT_GT(text.size(), 7000u);
  ThreadPool pool(2);
  for (const Golden& g : goldens) {
    SCOPED_TRACE(g.model + " -c " + std::to_string(g.n_ctx) + " -b " + std::to_string(g.n_batch) +
                 " kv " + g.kv + " --chunks " + std::to_string(g.n_chunks));
    auto model = Gemma4Model::load(test::source_dir() + "/models/tiny/" + g.model);
    const auto tokenizer = text::Tokenizer::from_gguf(model->file());
    const auto tokens = tokenizer->encode(text, true, false);
    ASSERT_EQ(tokens.size(), 2315u);
    SessionOptions session_options;
    session_options.n_ctx = g.n_ctx;
    session_options.n_batch = std::min(g.n_batch, g.n_ctx);
    session_options.kv_type = *kv_type_from_name(g.kv);
    PerplexityOptions options;
    options.n_ctx = g.n_ctx;
    options.n_batch = g.n_batch;
    options.n_chunks = g.n_chunks;
    const auto result = compute_perplexity(tokens, tokenizer->bos(), options, [&] {
      return std::make_unique<Gemma4Session>(*model, session_options, &pool);
    });
    const double tol = tolerance(g.model);
    ASSERT_EQ(result.running_ppl.size(), g.running.size());
    for (size_t i = 0; i < g.running.size(); ++i) {
      EXPECT_NEAR(result.running_ppl[i], g.running[i], tol * g.running[i]) << "window " << i + 1;
    }
    EXPECT_NEAR(result.ppl, g.ppl, tol * g.ppl);
    EXPECT_NEAR(result.ppl_error, g.error, tol * g.error + 1e-5);
  }
}

// The accuracy of the quantized KV caches: perplexity of the tiny model over the whole sample
// (4 windows of 512, so keys up to 511 positions back) with an f16, q8_0 and q4_0 cache.
// Measured (2026-12-05, x86-64 AVX-512): f16 37.2581, q8_0 37.2670 (+2.4e-4 relative), q4_0
// 37.2430 (-4.0e-4); llama-perplexity -fa on on the same file and text: f16 37.2580, q8_0
// 37.2459 (-3.2e-4), q4_0 37.2994 (+1.1e-3). The bounds, 1e-3 for q8_0 and 3e-3 for q4_0, are
// about 4x and 7x what was measured and cover llama.cpp's own shift; a cache type that silently
// fell back to f16 would give f16's bits, which is checked too.
TEST(Perplexity, QuantizedKvCachesStayNearF16) {
  const std::string text = read_sample();
  ThreadPool pool(2);
  auto model = Gemma4Model::load(test::source_dir() + "/models/tiny/tiny-f32.gguf");
  const auto tokenizer = text::Tokenizer::from_gguf(model->file());
  const auto tokens = tokenizer->encode(text, true, false);
  auto ppl = [&](KvType kv) {
    SessionOptions session_options;
    session_options.n_ctx = 512;
    session_options.n_batch = 512;
    session_options.kv_type = kv;
    PerplexityOptions options;
    options.n_ctx = 512;
    options.n_batch = 512;
    return compute_perplexity(
               tokens, tokenizer->bos(), options,
               [&] { return std::make_unique<Gemma4Session>(*model, session_options, &pool); })
        .ppl;
  };
  const double f16 = ppl(KvType::F16), q8 = ppl(KvType::Q8_0), q4 = ppl(KvType::Q4_0);
  EXPECT_NEAR(f16, 37.2581, 1e-4 * 37.2581);  // as llama-perplexity's 37.2580 above
  EXPECT_NEAR(q8, f16, 1e-3 * f16);
  EXPECT_NEAR(q4, f16, 3e-3 * f16);
  EXPECT_NE(q8, f16);
  EXPECT_NE(q4, f16);
  EXPECT_NE(q4, q8);
}

TEST(Perplexity, CliPrintsLlamaPerplexityLayout) {
  const std::string root = test::source_dir();
  std::string out;
  const int rc = test::run_command(
      test::cli_path() + " perplexity -m " + root + "/models/tiny/tiny-f32.gguf -f " + root +
          "/tests/data/perplexity/sample.txt -c 256 -b 64 --chunks 2 -t 1",
      &out);
  ASSERT_EQ(rc, 0) << out;
  // llama-perplexity: [1]30.4012,[2]29.4847, / Final estimate: PPL = 29.4847 +/- 4.09214
  EXPECT_NE(out.find("\n[1]30.401"), std::string::npos) << out;
  EXPECT_NE(out.find(",[2]29.48"), std::string::npos) << out;
  EXPECT_NE(out.find("\nFinal estimate: PPL = 29.48"), std::string::npos) << out;
  EXPECT_NE(out.find(" +/- 4.09"), std::string::npos) << out;

  const int bad = test::run_command(test::cli_path() + " perplexity -m " + root +
                                        "/models/tiny/tiny-f32.gguf -f " + root +
                                        "/tests/data/perplexity/sample.txt -c 2048",
                                    &out);
  EXPECT_EQ(bad, 1);
  EXPECT_NE(out.find("boltrt: error: perplexity: the text tokenizes to only 2315 tokens"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace boltrt
