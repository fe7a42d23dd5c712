// Speculative decoding (shared/docs/dflash.md A4-A7): hidden-state capture against llama.cpp's
// taps, and the draft/verify loop against plain decoding (Generator) on a synthetic target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "generate/speculative.h"
#include "generate_fakes.h"
#include "gguf/gguf.h"
#include "model/dflash.h"
#include "model/dflash_synth.h"
#include "model/gemma4.h"
#include "model/gemma4_session.h"
#include "model/gemma4_synth.h"
#include "model/registry.h"
#include "model/synth_weights.h"
#include "support/paths.h"
#include "util/error.h"

namespace boltrt {
namespace {

// The tiny synthetic Gemma 4 target (f32, seed 1: the pair tests/data/dflash/golden.bin was
// made from), sliding window 8.
const Gemma4Model& target() {
  static std::unique_ptr<Gemma4Model> model = [] {
    const std::string path = test::scratch_dir("spec_target") + "/target.gguf";
    model::Gemma4SynthOptions options;
    options.type = "f32";
    model::write_gemma4_synth(model::gemma4_preset("tiny"), options, path);
    return Gemma4Model::load(path);
  }();
  return *model;
}

const DFlashDraft& draft() {
  static std::unique_ptr<DFlashDraft> d = [] {
    const std::string path = test::scratch_dir("spec_draft") + "/draft.gguf";
    model::write_dflash_synth(target().config(), {}, path);
    return DFlashDraft::load(path, target());
  }();
  return *d;
}

// ---------------------------------------------------------------------------------------------
// 1. Hidden-state capture
// ---------------------------------------------------------------------------------------------

TEST(SpeculativeTaps, EqualLlamaCppLayerInputs) {
  const std::string path = test::source_dir() + "/tests/data/dflash/golden.bin";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr) << path;
  int32_t h[6];
  ASSERT_EQ(std::fread(h, sizeof(h), 1, f), 1u);
  const int32_t n_ctx = h[0], n_taps = h[1], n_embd = h[2];
  std::vector<int32_t> prompt(static_cast<size_t>(n_ctx));
  std::vector<float> want(static_cast<size_t>(n_ctx * n_taps * n_embd));
  ASSERT_EQ(std::fread(prompt.data(), 4, prompt.size(), f), prompt.size());
  ASSERT_EQ(std::fread(want.data(), 4, want.size(), f), want.size());
  std::fclose(f);
  ASSERT_EQ(draft().config().n_taps(), n_taps);

  // Micro-batches of 4 tokens: the taps of every chunk row are kept, not only the last.
  SessionOptions so;
  so.n_ctx = 64;
  so.n_batch = 4;
  so.kv_type = KvType::F16;  // as llama.cpp's target context in make_golden.cpp
  Gemma4Session session(target(), so, nullptr);
  session.set_tap_layers(draft().config().target_layers);
  std::vector<float> got;
  for (int32_t i = 0; i < n_ctx; i += 5) {  // decode() calls of 5, 5, 1 tokens
    const auto chunk = std::span<const int32_t>(prompt).subspan(
        static_cast<size_t>(i), static_cast<size_t>(std::min(5, n_ctx - i)));
    session.decode(chunk);
    ASSERT_EQ(session.taps().size(), chunk.size() * static_cast<size_t>(n_taps * n_embd));
    got.insert(got.end(), session.taps().begin(), session.taps().end());
  }
  // llama.cpp's target ran with its default f16 cache and CPU flash attention (f16 Q/K/V and
  // softmax), and the f16-table GELU: ~1e-3 relative by the last tap (measured 7.6e-4), the
  // same noise the gemma4 logit parity allows (3e-3). A tap of the wrong layer is off by O(1).
  auto max_err = [&](int32_t k_got, int32_t k_want, double* max_abs) {
    double err = 0;
    for (int32_t t = 0; t < n_ctx; ++t) {
      for (int32_t i = 0; i < n_embd; ++i) {
        const size_t row = static_cast<size_t>(t) * n_taps;
        const float g = got[(row + k_got) * n_embd + i], w = want[(row + k_want) * n_embd + i];
        err = std::max(err, static_cast<double>(std::abs(g - w)));
        if (max_abs) *max_abs = std::max(*max_abs, static_cast<double>(std::abs(w)));
      }
    }
    return err;
  };
  for (int32_t k = 0; k < n_taps; ++k) {
    double max_abs = 0;
    const double err = max_err(k, k, &max_abs);
    const double err_neighbour = max_err(k, (k + 1) % n_taps, nullptr);
    std::printf("tap %d (layer input %d) vs llama.cpp: max |err| %.3g (max |tap| %.3g)\n", k,
                draft().config().target_layers[static_cast<size_t>(k)], err, max_abs);
    EXPECT_GT(max_abs, 0.1);
    EXPECT_LT(err, 2e-3 * max_abs) << "tap " << k;
    EXPECT_GT(err_neighbour, 0.1 * max_abs) << "tap " << k << " does not tell layers apart";
  }
}

TEST(SpeculativeTaps, CaptureDoesNotChangeLogitsAndLayerIdsAreChecked) {
  SessionOptions so;
  so.n_ctx = 64;
  Gemma4Session plain(target(), so, nullptr), tapped(target(), so, nullptr);
  const int64_t L = target().config().n_layer, D = target().config().n_embd;
  tapped.set_tap_layers({0, 3, static_cast<int32_t>(L), 3});
  const std::vector<int32_t> tokens = {3, 9, 27, 81, 243};
  const auto a = plain.decode(tokens, true);
  const std::vector<float> a_copy(a.begin(), a.end());
  const auto b = tapped.decode(tokens, true);
  ASSERT_EQ(a_copy.size(), b.size());
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(a_copy[i], b[i]) << i;
  EXPECT_TRUE(plain.taps().empty());
  const auto taps = tapped.taps();
  ASSERT_EQ(taps.size(), static_cast<size_t>(5 * 4 * D));
  // layer 0's input is the scaled token embedding; a repeated id gives the same rows
  for (int64_t t = 0; t < 5; ++t) {
    for (int64_t i = 0; i < D; ++i) {
      ASSERT_EQ(taps[static_cast<size_t>((t * 4 + 1) * D + i)],
                taps[static_cast<size_t>((t * 4 + 3) * D + i)]);
    }
  }
  EXPECT_THROW(tapped.set_tap_layers({static_cast<int32_t>(L + 1)}), Error);
  EXPECT_THROW(tapped.set_tap_layers({-1}), Error);
}

// ---------------------------------------------------------------------------------------------
// 2. The loop against plain decoding
// ---------------------------------------------------------------------------------------------

GenerationVocab test_vocab() {
  GenerationVocab v;
  v.piece = [](int32_t t) { return std::string(1, static_cast<char>('a' + t % 26)); };
  return v;
}

std::vector<int32_t> random_prompt(uint64_t seed, int64_t n) {
  model::Rng rng(seed);
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(rng.uniform() * 500.0f));
  return p;
}

SessionOptions session_options() {
  SessionOptions so;
  so.n_ctx = 512;
  so.n_batch = 16;
  return so;
}

SamplerConfig greedy() {
  SamplerConfig c;
  c.temperature = 0.0f;
  c.seed = 7;
  return c;
}

// A drafter that proposes the target's own greedy continuation (a second session on the same
// model): the "perfect" draft at temperature 0.
class GreedyOracleDrafter : public BlockDrafter {
 public:
  // corrupt > 0: each proposed token is replaced by another one with probability `corrupt`
  // (partial acceptance, rollbacks of every length).
  explicit GreedyOracleDrafter(int64_t max_draft, float corrupt = 0.0f)
      : max_draft_(max_draft), corrupt_(corrupt), session_(target(), session_options(), nullptr) {}
  int64_t max_draft() const override { return max_draft_; }
  std::vector<int32_t> tap_layers() const override { return {}; }
  void reset() override { session_.reset(); }
  void add_context(std::span<const int32_t> tokens, const float*) override {
    session_.decode(tokens);
  }
  int64_t context_end() const override { return session_.n_past(); }
  void propose(int32_t last, int64_t n, int32_t* out) override {
    const int64_t start = session_.n_past();
    int32_t t = last;
    for (int64_t i = 0; i < n; ++i) {
      const auto logits = session_.decode(std::span<const int32_t>(&t, 1));
      t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (corrupt_ > 0 && rng_.uniform() < corrupt_) t = (t + 1) % 512;
      out[i] = t;
    }
    session_.rollback(start);
  }

 private:
  int64_t max_draft_;
  float corrupt_;
  model::Rng rng_{99};
  Gemma4Session session_;
};

std::vector<int32_t> plain_tokens(const std::vector<int32_t>& prompt, const SamplerConfig& s,
                                  int64_t max_tokens) {
  Gemma4Session session(target(), session_options(), nullptr);
  Generator g(session, test_vocab(), s);
  GenerationOptions o;
  o.max_tokens = max_tokens;
  return g.generate(prompt, o).tokens;
}

TEST(Speculative, GreedyEqualsPlainWithTheSyntheticDraft) {
  Gemma4Session session(target(), session_options(), nullptr);
  DFlashDrafter drafter(draft(), nullptr);
  SpeculativeStats total;
  for (uint64_t p = 0; p < 20; ++p) {
    const auto prompt = random_prompt(100 + p, 3 + static_cast<int64_t>(p % 7) * 5);
    const auto want = plain_tokens(prompt, greedy(), 256);
    SpeculativeOptions so;
    so.adaptive = p % 5 != 1;  // a fixed length on 4 prompts (a random draft: always rejected)
    so.draft_max = p % 10 == 1 ? -1 : 3;
    SpeculativeGenerator spec(session, drafter, test_vocab(), greedy(), so);
    GenerationOptions o;
    o.max_tokens = 256;
    const SpeculativeResult r = spec.generate(prompt, o);
    ASSERT_EQ(r.generation.tokens, want) << "prompt " << p;
    EXPECT_EQ(r.generation.finish_reason, FinishReason::kMaxTokens);
    EXPECT_GT(r.speculative.n_rounds, 0);
    total.n_rounds += r.speculative.n_rounds;
    total.n_drafted += r.speculative.n_drafted;
    total.n_accepted += r.speculative.n_accepted;
  }
  std::printf("synthetic draft: %lld rounds, %lld/%lld accepted, tau %.3f\n",
              static_cast<long long>(total.n_rounds), static_cast<long long>(total.n_accepted),
              static_cast<long long>(total.n_drafted), total.mean_acceptance_length());
}

// Drafts that are right most of the time: every acceptance length occurs, the target rolls back
// by every amount, across the sliding window (8) many times.
TEST(Speculative, GreedyEqualsPlainWithAPartlyRightDraft) {
  Gemma4Session session(target(), session_options(), nullptr);
  GreedyOracleDrafter drafter(7, 0.15f);
  SpeculativeStats total;
  std::vector<int64_t> accepted_lengths(8, 0);
  for (uint64_t p = 0; p < 4; ++p) {
    const auto prompt = random_prompt(300 + p, 5 + static_cast<int64_t>(p) * 3);
    SpeculativeOptions so;
    so.adaptive = p % 2 == 1;
    SpeculativeGenerator spec(session, drafter, test_vocab(), greedy(), so);
    GenerationOptions o;
    o.max_tokens = 256;
    const SpeculativeResult r = spec.generate(prompt, o);
    ASSERT_EQ(r.generation.tokens, plain_tokens(prompt, greedy(), 256)) << "prompt " << p;
    total.n_rounds += r.speculative.n_rounds;
    total.n_drafted += r.speculative.n_drafted;
    total.n_accepted += r.speculative.n_accepted;
  }
  std::printf("partly right draft: %lld rounds, %lld/%lld accepted, tau %.3f\n",
              static_cast<long long>(total.n_rounds), static_cast<long long>(total.n_accepted),
              static_cast<long long>(total.n_drafted), total.mean_acceptance_length());
  EXPECT_GT(total.n_accepted, total.n_drafted / 3);
  EXPECT_LT(total.n_accepted, total.n_drafted);
}

// After a run with rejected drafts, the draft's context holds exactly the rows of the committed
// tokens: equal to injecting the taps of one plain prefill over prompt + generated tokens.
TEST(Speculative, DraftContextAfterRollbacksEqualsOneShotInjection) {
  SessionOptions f32 = session_options();
  f32.kv_type = KvType::F32;
  Gemma4Session session(target(), f32, nullptr);
  DFlashDrafter drafter(draft(), nullptr);
  const auto prompt = random_prompt(77, 12);
  // a fixed length: the adaptive one soon stops drafting with a draft that is always rejected
  SpeculativeOptions fixed;
  fixed.adaptive = false;
  fixed.draft_max = 3;
  SpeculativeGenerator spec(session, drafter, test_vocab(), greedy(), fixed);
  GenerationOptions o;
  o.max_tokens = 40;
  const auto r = spec.generate(prompt, o);
  ASSERT_GT(r.speculative.n_rounds, 5);
  const DFlashKv& kv = drafter.kv();
  // the rounds up to the last one: all committed tokens but the final round's
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), r.generation.tokens.begin(), r.generation.tokens.end());
  ASSERT_GE(kv.n_rows, static_cast<int64_t>(all.size()) - 9);
  ASSERT_EQ(kv.pos_end, kv.n_rows);

  Gemma4Session fresh(target(), f32, nullptr);
  fresh.set_tap_layers(draft().config().target_layers);
  std::vector<float> taps;
  for (size_t i = 0; i < static_cast<size_t>(kv.n_rows); i += 16) {
    const auto chunk = std::span<const int32_t>(all).subspan(
        i, std::min<size_t>(16, static_cast<size_t>(kv.n_rows) - i));
    fresh.decode(chunk);
    taps.insert(taps.end(), fresh.taps().begin(), fresh.taps().end());
  }
  DFlashKv want;
  draft().inject(taps.data(), kv.n_rows, want, nullptr);
  // The one-shot prefill runs other batch sizes, and the f32 matmul is not batch-invariant: a
  // one-row product differs from a many-row one by ~1e-4 relative (token-by-token vs one
  // 40-token prefill: taps already differ by 7e-4 at row 0 with |tap| ~ 10), measured here
  // 1.7e-4 relative. A misplaced or stale row (a rejected token's) would be off by O(1).
  double max_err = 0, max_abs = 0;
  for (size_t il = 0; il < kv.k.size(); ++il) {
    ASSERT_EQ(kv.k[il].size(), want.k[il].size());
    ASSERT_EQ(kv.v[il].size(), want.v[il].size());
    for (size_t i = 0; i < kv.k[il].size(); ++i) {
      max_err = std::max({max_err, static_cast<double>(std::abs(kv.k[il][i] - want.k[il][i])),
                          static_cast<double>(std::abs(kv.v[il][i] - want.v[il][i]))});
      max_abs = std::max({max_abs, static_cast<double>(std::abs(want.k[il][i])),
                          static_cast<double>(std::abs(want.v[il][i]))});
    }
  }
  std::printf("draft context after %lld rounds vs one-shot: max |err| %.3g (max %.3g)\n",
              static_cast<long long>(r.speculative.n_rounds), max_err, max_abs);
  EXPECT_LT(max_err, 1e-3 * max_abs);
}

TEST(Speculative, PerfectDraftIsAlwaysAcceptedAndEqualsPlain) {
  Gemma4Session session(target(), session_options(), nullptr);
  for (int64_t max_draft : {1, 4, 7}) {
    GreedyOracleDrafter drafter(max_draft);
    SpeculativeOptions so;
    so.adaptive = false;
    SpeculativeGenerator spec(session, drafter, test_vocab(), greedy(), so);
    const auto prompt = random_prompt(7 + static_cast<uint64_t>(max_draft), 9);
    GenerationOptions o;
    o.max_tokens = 100;
    const SpeculativeResult r = spec.generate(prompt, o);
    EXPECT_EQ(r.generation.tokens, plain_tokens(prompt, greedy(), 100));
    EXPECT_EQ(r.speculative.n_accepted, r.speculative.n_drafted);
    // 1 prefill token, then rounds of max_draft + 1 tokens while at least 2 remain (the last one
    // cut to fit 100; a last single token is a plain step)
    EXPECT_EQ(r.speculative.n_rounds, (98 + max_draft) / (max_draft + 1));
  }
}

TEST(Speculative, StopsAtEndOfGenerationMaxTokensAndContextLikePlain) {
  // End-of-generation: the token plain decoding produces 20th becomes the end token.
  const auto prompt = random_prompt(55, 6);
  const auto ref = plain_tokens(prompt, greedy(), 40);
  GenerationVocab v = test_vocab();
  v.end_of_generation = {ref[19]};
  const auto first_end = std::find(ref.begin(), ref.end(), ref[19]) - ref.begin();
  Gemma4Session session(target(), session_options(), nullptr);
  GreedyOracleDrafter drafter(7);
  SpeculativeGenerator spec(session, drafter, v, greedy(), {});
  GenerationOptions o;
  o.max_tokens = 40;
  auto r = spec.generate(prompt, o);
  EXPECT_EQ(r.generation.finish_reason, FinishReason::kEndOfGeneration);
  EXPECT_EQ(r.generation.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + first_end + 1));

  // A full context: the same tokens as plain decoding in a context of 40.
  SessionOptions small = session_options();
  small.n_ctx = 40;
  Gemma4Session s1(target(), small, nullptr), s2(target(), small, nullptr);
  Generator g(s1, test_vocab(), greedy());
  const auto want = g.generate(prompt, {});
  SpeculativeGenerator spec2(s2, drafter, test_vocab(), greedy(), {});
  const auto got = spec2.generate(prompt, {});
  EXPECT_EQ(want.finish_reason, FinishReason::kContextFull);
  EXPECT_EQ(got.generation.finish_reason, FinishReason::kContextFull);
  EXPECT_EQ(got.generation.tokens, want.tokens);
}

TEST(Speculative, RejectsATargetBatchTooSmallForTheDraft) {
  SessionOptions so = session_options();
  so.n_batch = 4;
  Gemma4Session session(target(), so, nullptr);
  DFlashDrafter drafter(draft(), nullptr);  // block 8: verify batches of 8
  EXPECT_THROW(SpeculativeGenerator(session, drafter, test_vocab(), greedy(), {}), Error);
  SpeculativeOptions short_draft;
  short_draft.draft_max = 3;
  EXPECT_NO_THROW(SpeculativeGenerator(session, drafter, test_vocab(), greedy(), short_draft));
}

// ---------------------------------------------------------------------------------------------
// 3. Temperature > 0
// ---------------------------------------------------------------------------------------------

SamplerConfig sampled(uint32_t seed) {
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 4;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.seed = seed;
  return c;
}

// One draw per committed token from the target's own rows: with the same seed the very same
// tokens as plain sampling (the strongest form of "distributed as without drafting").
TEST(SpeculativeSampling, SameSeedSameTokensAsPlain) {
  Gemma4Session session(target(), session_options(), nullptr);
  GreedyOracleDrafter oracle(7);
  DFlashDrafter dflash(draft(), nullptr);
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    BlockDrafter& drafter = seed % 2 ? static_cast<BlockDrafter&>(oracle) : dflash;
    const auto prompt = random_prompt(900 + seed, 8);
    SpeculativeGenerator spec(session, drafter, test_vocab(), sampled(seed), {});
    GenerationOptions o;
    o.max_tokens = 64;
    const auto r = spec.generate(prompt, o);
    EXPECT_EQ(r.generation.tokens, plain_tokens(prompt, sampled(seed), 64)) << "seed " << seed;
    if (seed % 2) {
      EXPECT_GT(r.speculative.n_accepted, 0);
      EXPECT_LT(r.speculative.n_accepted, r.speculative.n_drafted);  // rejections happened
    }
  }
}

// Different seeds: the distribution of the tokens at drafted positions (2nd and 3rd generated
// token, jointly with the 1st) from speculative runs matches plain runs (two-sample chi-square).
TEST(SpeculativeSampling, TrigramDistributionMatchesPlainChiSquare) {
  const auto prompt = random_prompt(4242, 5);
  const int kRuns = 700;
  Gemma4Session session(target(), session_options(), nullptr);
  Generator plain(session, test_vocab(), sampled(1));
  Gemma4Session session2(target(), session_options(), nullptr);
  GreedyOracleDrafter oracle(2);
  SpeculativeOptions so;
  so.adaptive = false;
  SpeculativeGenerator spec(session2, oracle, test_vocab(), sampled(1000003), so);
  GenerationOptions o;
  o.max_tokens = 3;
  std::map<std::vector<int32_t>, std::pair<double, double>> counts;
  int64_t accepted = 0;
  for (int i = 0; i < kRuns; ++i) {
    counts[plain.generate(prompt, o).tokens].first += 1;
    const auto r = spec.generate(prompt, o);
    counts[r.generation.tokens].second += 1;
    accepted += r.speculative.n_accepted;
  }
  // Pool rare trigrams (expected count < 5) into one bin.
  double chi2 = 0, rare_a = 0, rare_b = 0;
  int bins = 0;
  for (const auto& entry : counts) {
    const auto [a, b] = entry.second;
    if (a + b < 10) {
      rare_a += a;
      rare_b += b;
      continue;
    }
    chi2 += (a - b) * (a - b) / (a + b);
    ++bins;
  }
  if (rare_a + rare_b > 0) {
    chi2 += (rare_a - rare_b) * (rare_a - rare_b) / (rare_a + rare_b);
    ++bins;
  }
  const int dof = bins - 1;
  std::printf("trigram chi-square %.2f with %d dof over %zu trigrams, %lld drafts accepted\n", chi2,
              dof, counts.size(), static_cast<long long>(accepted));
  ASSERT_GE(dof, 3);
  EXPECT_GT(accepted, kRuns / 4);  // the drafted path is really exercised
  // 99.9% quantile of chi-square(dof) (Wilson-Hilferty), a fixed-seed test: no flakiness
  const double z = 3.09, k = dof;
  const double limit = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
  EXPECT_LT(chi2, limit);
}

// Verify batches compute a row's output head only when it is read: the rows equal a decode
// with every row's logits (up to the last bits: the head runs on 1 row instead of n), in any
// order of reading, and a rollback or a new decode drops them.
TEST(Speculative, LazyVerifyRowsEqualAllLogits) {
  SessionOptions so = session_options();
  Gemma4Session a(target(), so, nullptr), b(target(), so, nullptr);
  const auto prompt = random_prompt(11, 9);
  a.decode(prompt);
  b.decode(prompt);
  const std::vector<int32_t> step = {5, 17, 2, 40, 33};
  const auto all = a.decode(step, true);
  const std::vector<float> want(all.begin(), all.end());
  b.decode_verify(step);
  EXPECT_EQ(b.n_past(), a.n_past());
  const int64_t V = target().config().n_vocab;
  for (int64_t j : {3, 0, 4, 1, 2, 3}) {
    const auto row = b.verify_row(j);
    ASSERT_EQ(row.size(), static_cast<size_t>(V));
    double err = 0, scale = 0;
    for (int64_t i = 0; i < V; ++i) {
      err = std::max(err, static_cast<double>(std::abs(row[static_cast<size_t>(i)] -
                                                       want[static_cast<size_t>(j * V + i)])));
      scale = std::max(scale, static_cast<double>(std::abs(want[static_cast<size_t>(j * V + i)])));
    }
    EXPECT_LT(err, 1e-4 * std::max(1.0, scale)) << "row " << j;
  }
  EXPECT_THROW(b.verify_row(5), Error);
  b.rollback(b.n_past() - 2);
  EXPECT_THROW(b.verify_row(0), Error);
}

// Greedy drafting writes the argmax of the logits draft() computes, and leaves the context
// as it was (the block rows are appended for the call only).
TEST(Speculative, GreedyDraftEqualsArgmaxOfDraftLogits) {
  Gemma4Session session(target(), session_options(), nullptr);
  session.set_tap_layers(draft().config().target_layers);
  const auto prompt = random_prompt(21, 14);
  session.decode(prompt);
  DFlashKv kv;
  draft().inject(session.taps().data(), static_cast<int64_t>(prompt.size()), kv, nullptr);
  const DFlashKv before = kv;
  const int64_t V = target().config().n_vocab, B = draft().config().block_size;
  DFlashScratch ws;
  for (int64_t n = 2; n <= B; ++n) {
    std::vector<int32_t> block(static_cast<size_t>(n), draft().config().mask_token);
    block[0] = prompt.back();
    std::vector<float> logits(static_cast<size_t>((n - 1) * V));
    draft().draft(block.data(), n, kv, logits.data(), nullptr);
    std::vector<int32_t> got(static_cast<size_t>(n - 1));
    draft().draft_greedy(block.data(), n, kv, ws, got.data(), nullptr);
    for (int64_t r = 0; r < n - 1; ++r) {
      const float* row = logits.data() + r * V;
      EXPECT_EQ(got[static_cast<size_t>(r)], std::max_element(row, row + V) - row)
          << "block " << n << " slot " << r + 1;
    }
    ASSERT_EQ(kv.n_rows, before.n_rows);
    ASSERT_EQ(kv.k, before.k);
    ASSERT_EQ(kv.v, before.v);
  }
}

// The adaptive length (deterministic cost model): grows to the longest draft while every
// draft is accepted; with nothing accepted it falls back to plain steps and probes again
// after 8 (counting the first plain step), then 16, 32, 64, 64 steps.
TEST(DraftLengthPolicy, FollowsAcceptanceAndFallsBackToPlainSteps) {
  SpeculativeOptions o;
  o.draft_max = 7;
  o.timed = false;
  DraftLengthPolicy policy;
  policy.reset(o);
  int64_t n = policy.next();
  EXPECT_GE(n, 1);
  for (int r = 0; r < 20; ++r) {
    policy.observe_acceptance(n, n);
    n = policy.next();
  }
  EXPECT_EQ(n, 7);
  for (int r = 0; r < 10 && n > 0; ++r) {
    policy.observe_acceptance(n, 0);
    n = policy.next();
  }
  EXPECT_EQ(n, 0);
  // plain steps, then one probe per interval
  std::vector<int64_t> probes_at;
  for (int64_t step = 1; step <= 8 + 16 + 32 + 64 + 64; ++step) {
    const int64_t len = policy.next();
    if (len > 0) {
      probes_at.push_back(step);
      policy.observe_acceptance(len, 0);
    }
  }
  EXPECT_EQ(probes_at, (std::vector<int64_t>{7, 23, 55, 119, 183}));
  // a probe that is accepted brings the drafting back
  policy.observe_acceptance(1, 1);
  policy.observe_acceptance(1, 1);
  policy.observe_acceptance(1, 1);
  EXPECT_GE(policy.next(), 1);

  // timed: plain steps until one is measured (the first three, cold, are not counted), then
  // drafting costed from it until drafting rounds are measured; poor acceptance at a measured
  // cost: plain
  o.timed = true;
  policy.reset(o);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(policy.next(), 0);
    policy.observe_cost(0, 5e-3);
  }
  EXPECT_EQ(policy.next(), 0);
  policy.observe_cost(0, 1e-3);
  EXPECT_DOUBLE_EQ(policy.cost(0), 1e-3);
  EXPECT_DOUBLE_EQ(policy.cost(2), 2e-3);  // 1 + n/2 plain steps
  n = policy.next();
  EXPECT_EQ(n, 2);  // acceptance 0.7: 2.19 tokens per 2 ms
  for (int r = 0; r < 3; ++r) {
    policy.observe_cost(n, 9e-3);  // the first three drafting rounds are not counted
    policy.observe_acceptance(n, n);
    n = policy.next();
  }
  EXPECT_GE(n, 2);
  policy.observe_cost(n, 1e-3 * (1 + 0.5 * static_cast<double>(n)));
  EXPECT_NEAR(policy.cost(1), 1.5e-3, 1e-12);  // the line through the plain step and length n
  for (int r = 0; r < 3; ++r) policy.observe_acceptance(n, 0);
  EXPECT_EQ(policy.next(), 0);  // q[1] 0.18: 1.18 tokens per 1.5 ms < 1 per 1 ms
  policy.observe_cost(0, 1.0);  // a preempted step counts at most twice the estimate
  EXPECT_DOUBLE_EQ(policy.cost(0), 1e-3 + 0.2 * 1e-3);
}

// Timed, while drafting wins: an early overestimate of long rounds (cold caches) does not lock
// the length short. Every 5th round drafts 2 more (or fewer), every 32nd is a plain step, and
// recent rounds outweigh old ones in the cost line, so the length climbs to where the true
// costs put it.
TEST(DraftLengthPolicy, TimedExploresAndRecoversFromColdEstimates) {
  SpeculativeOptions o;
  o.draft_max = 7;
  DraftLengthPolicy policy;
  policy.reset(o);
  // true costs: a plain step 1 ms, a round of n drafts 1.6 + 0.15 n ms; every draft accepted
  auto true_cost = [](int64_t n) { return n == 0 ? 1e-3 : 1.6e-3 + 0.15e-3 * n; };
  std::vector<int64_t> lengths;
  int64_t plain = 0;
  for (int r = 0; r < 200; ++r) {
    const int64_t n = policy.next();
    // the first rounds of lengths 2 and 3 are cold: 8 times their cost
    const bool cold = r < 12 && n >= 2;
    policy.observe_cost(n, true_cost(n) * (cold ? 8.0 : 1.0));
    if (n > 0) policy.observe_acceptance(n, n);
    if (r >= 100) {
      lengths.push_back(n);
      plain += n == 0;
    }
  }
  // after the first 100 rounds: mostly the longest length, some exploration, a few plain steps
  const auto at_max = std::count(lengths.begin(), lengths.end(), int64_t{7});
  EXPECT_GE(at_max, 70) << "rounds at length 7 of the last 100";
  EXPECT_GE(plain, 2);
  EXPECT_LE(plain, 4);
}

}  // namespace
}  // namespace boltrt

namespace boltrt {
namespace {

// The CLI's way to a draft: the target opened through the model registry, the draft loaded by
// the loaded model (LoadedModel::load_draft, which TextModel::load_drafter calls), the loop over
// any LanguageModel.
TEST(DraftThroughTheRegistry, LoadsTheDraftForTheModelAndEqualsPlain) {
  const std::string path = test::scratch_dir("spec_cli_draft") + "/draft.gguf";
  model::DFlashSynthOptions o;
  o.block_size = 4;
  model::write_dflash_synth(target().config(), o, path);
  const std::shared_ptr<const LoadedModel> loaded =
      load_model(gguf::File::open(target().file().path()));
  const std::shared_ptr<const DFlashDraft> draft = loaded->load_draft(path, loaded);
  EXPECT_EQ(draft->config().block_size, 4);
  const std::unique_ptr<LanguageModel> session = loaded->new_session(session_options(), nullptr);
  DFlashDrafter drafter(draft, nullptr);
  SpeculativeOptions untimed;  // adaptive (the default), with the deterministic cost model
  untimed.timed = false;
  SpeculativeGenerator gen(*session, drafter, test_vocab(), greedy(), untimed);
  const auto prompt = random_prompt(5, 10);
  GenerationOptions go;
  go.max_tokens = 30;
  const auto r = gen.generate(prompt, go);
  EXPECT_EQ(r.generation.tokens, plain_tokens(prompt, greedy(), 30));
  // nothing accepted (DraftLengthPolicy, block 4): a draft of 2 tokens at the prior acceptance,
  // then plain steps with probes of 2 and 1 tokens after 8 and 16 more
  EXPECT_EQ(r.speculative.n_rounds, 3);
  EXPECT_EQ(r.speculative.n_drafted, 5);
  const std::string line = format_speculative_stats(r);
  EXPECT_EQ(line.rfind("draft: 0/", 0), 0u) << line;
  EXPECT_NE(line.find("mean acceptance length 1.00 over"), std::string::npos) << line;

  // A target that cannot give the draft its hidden states: one error, before any decoding.
  ScriptedModel no_taps(512, 64);
  try {
    SpeculativeGenerator bad(no_taps, drafter, test_vocab(), greedy(), {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "this model cannot capture hidden states for a draft");
  }
  EXPECT_THROW(loaded->load_draft(path + ".missing", loaded), Error);
}

}  // namespace
}  // namespace boltrt
