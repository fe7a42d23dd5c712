// Qwen3.5 sequences decoded together (issue 21, item 2): one forward pass over several
// Qwen35Sessions (projections and FFN over all rows, attention and the Gated DeltaNet state per
// sequence) gives every sequence the bits it gets alone, whatever the other sequences' lengths
// and positions; rollback, including to a prompt checkpoint kept for prefix reuse, continues with
// the bits of a fresh run; and `boltrt batch` writes the same text for --parallel 3 and 1.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/qwen35.h"
#include "model/qwen35_session.h"
#include "model/qwen35_synth.h"
#include "model/registry.h"
#include "runtime/multi_sequence.h"
#include "runtime/thread_pool.h"
#include "support/paths.h"

namespace boltrt {
namespace {

using test::shell_quote;

std::string synth_tiny(const std::string& dir) {
  const std::string path = dir + "/tiny.gguf";
  model::write_qwen35_synth(model::qwen35_preset("tiny"), {}, path);
  return path;
}

std::vector<int32_t> prompt_of(int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 7919 + seed * 104729 + 13) % 512);
  return p;
}

std::vector<float> copy(std::span<const float> x) {
  return {x.begin(), x.end()};
}

TEST(Qwen35Batch, BatchedDecodeEqualsEachSequenceAlone) {
  const std::string dir = test::scratch_dir("qwen35_batch");
  auto model = Qwen35Model::load(synth_tiny(dir));
  ThreadPool pool(2);
  SessionOptions opts;
  opts.n_ctx = 96;
  opts.n_batch = 16;
  opts.kv_type = KvType::F32;
  // three sequences at different lengths; each step gives each a prefill chunk (up to a
  // micro-batch), a single token, or nothing
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(40, 1), prompt_of(9, 2),
                                                     prompt_of(23, 3)};
  // steps[s][i]: how many tokens sequence i takes at step s (0: it sits the step out)
  const std::vector<std::vector<int>> steps = {{16, 9, 1}, {16, 1, 16}, {8, 1, 6}, {1, 0, 1},
                                               {1, 1, 1},  {0, 1, 1},   {1, 1, 0}};
  std::vector<std::unique_ptr<Qwen35Session>> batched, alone;
  for (int i = 0; i < 3; ++i) {
    batched.push_back(std::make_unique<Qwen35Session>(*model, opts, &pool));
    alone.push_back(std::make_unique<Qwen35Session>(*model, opts, &pool));
  }
  std::vector<size_t> used(3, 0);
  std::vector<std::vector<int32_t>> history(3);
  for (size_t s = 0; s < steps.size(); ++s) {
    std::vector<Qwen35Session*> sessions;
    std::vector<std::vector<int32_t>> tokens;
    std::vector<int> which;
    for (int i = 0; i < 3; ++i) {
      const int n = steps[s][static_cast<size_t>(i)];
      if (n == 0) continue;
      std::vector<int32_t> t;
      for (int k = 0; k < n; ++k) {
        // the prompt first, then tokens a sampler might have picked
        t.push_back(used[static_cast<size_t>(i)] < prompts[static_cast<size_t>(i)].size()
                        ? prompts[static_cast<size_t>(i)][used[static_cast<size_t>(i)]]
                        : static_cast<int32_t>((used[static_cast<size_t>(i)] * 31 + 7) % 512));
        ++used[static_cast<size_t>(i)];
      }
      sessions.push_back(batched[static_cast<size_t>(i)].get());
      tokens.push_back(t);
      which.push_back(i);
    }
    std::vector<std::span<const int32_t>> spans(tokens.begin(), tokens.end());
    const auto out = Qwen35Session::decode_batch(sessions, spans);
    ASSERT_EQ(out.size(), sessions.size());
    for (size_t j = 0; j < which.size(); ++j) {
      Qwen35Session& ref = *alone[static_cast<size_t>(which[j])];
      const auto want = copy(ref.decode(tokens[j]));
      EXPECT_EQ(copy(out[j]), want) << "step " << s << " sequence " << which[j];
      EXPECT_EQ(sessions[j]->n_past(), ref.n_past());
      EXPECT_EQ(sessions[j]->checkpoint_positions(), ref.checkpoint_positions());
    }
  }
  // a bad input fails the whole call and leaves every session where it was
  std::vector<Qwen35Session*> two = {batched[0].get(), batched[1].get()};
  const std::vector<int32_t> good = {5}, bad = {512};
  const std::vector<std::span<const int32_t>> bad_spans = {good, bad};
  const int64_t past0 = batched[0]->n_past(), past1 = batched[1]->n_past();
  EXPECT_THROW(Qwen35Session::decode_batch(two, bad_spans), Error);
  EXPECT_EQ(batched[0]->n_past(), past0);
  EXPECT_EQ(batched[1]->n_past(), past1);
  const std::vector<std::span<const int32_t>> good_spans = {good, good};
  const auto after = Qwen35Session::decode_batch(two, good_spans);
  EXPECT_EQ(copy(after[0]), copy(alone[0]->decode(good)));
  EXPECT_EQ(copy(after[1]), copy(alone[1]->decode(good)));
}

TEST(Qwen35Batch, SequencesOfTheRegistryShareOnePassAndRollBack) {
  const std::string dir = test::scratch_dir("qwen35_batch_registry");
  std::unique_ptr<LoadedModel> loaded = load_model(gguf::File::open(synth_tiny(dir)));
  ASSERT_TRUE(loaded);
  ThreadPool pool(2);
  SessionOptions opts;
  opts.n_ctx = 96;
  opts.n_batch = 8;
  opts.kv_type = KvType::F32;
  opts.prompt_checkpoints = 4;
  auto batched = loaded->new_sequences(3, opts, &pool);
  ASSERT_TRUE(batched->shares_weight_reads());
  ASSERT_EQ(batched->n_slots(), 3);

  // slot 0: a 30-token prompt in one item (longer than a micro-batch: it runs alone), then
  // decode steps beside slot 1's prompt chunks and slot 2's all-logits item
  const std::vector<int32_t> prompt = prompt_of(30, 4);
  auto fresh = loaded->new_session(opts, &pool);
  const auto step = [&](int slot, std::vector<int32_t> tokens, bool all_logits) {
    DecodeItem item;
    item.slot = slot;
    item.tokens = tokens;
    item.all_logits = all_logits;
    std::vector<DecodeItem> items = {item};
    batched->decode(items);
    EXPECT_FALSE(items[0].error);
    return copy(items[0].logits);
  };
  step(0, prompt, false);
  std::vector<std::vector<int32_t>> generated;
  for (int k = 0; k < 6; ++k) {
    std::vector<int32_t> t0 = {static_cast<int32_t>(100 + k)};
    std::vector<int32_t> t1 = prompt_of(5, 10 + k), t2 = prompt_of(3, 20 + k);
    std::vector<DecodeItem> items(3);
    items[0].slot = 0, items[0].tokens = t0;
    items[1].slot = 1, items[1].tokens = t1;
    items[2].slot = 2, items[2].tokens = t2, items[2].all_logits = true;
    batched->decode(items);
    for (const DecodeItem& item : items) EXPECT_FALSE(item.error);
    EXPECT_EQ(items[2].logits.size(), 3u * static_cast<size_t>(batched->n_vocab()));
    generated.push_back(t0);
  }
  EXPECT_EQ(batched->n_past(0), 36);
  // roll slot 0 back into its prompt (a shared prefix of 21 tokens; the prompt checkpoints at
  // 8 and 16 are kept, the decode-call ones past 21 are not) and continue with another tail:
  // the logits equal a fresh sequence's
  batched->rollback(0, 21);
  EXPECT_EQ(batched->n_past(0), 21);
  std::vector<int32_t> tail = prompt_of(6, 5);
  std::vector<int32_t> full(prompt.begin(), prompt.begin() + 21);
  full.insert(full.end(), tail.begin(), tail.end());
  const auto want = copy(fresh->decode(full));
  EXPECT_EQ(step(0, tail, false), want);
  // and back to position 0, then a whole new prompt
  batched->rollback(0, 0);
  auto fresh2 = loaded->new_session(opts, &pool);
  const std::vector<int32_t> other = prompt_of(7, 6);
  EXPECT_EQ(step(0, other, false), copy(fresh2->decode(other)));
}

TEST(Qwen35Batch, PromptCheckpointsStaySpreadAndBounded) {
  const std::string dir = test::scratch_dir("qwen35_batch_checkpoints");
  auto model = Qwen35Model::load(synth_tiny(dir));
  SessionOptions opts;
  opts.n_ctx = 128;
  opts.n_batch = 8;
  opts.kv_type = KvType::F32;
  opts.prompt_checkpoints = 3;
  Qwen35Session s(*model, opts, nullptr);
  const std::vector<int32_t> prompt = prompt_of(60, 7);
  std::vector<float> want;
  {
    Qwen35Session ref(*model, opts, nullptr);
    want = copy(ref.decode(prompt, true));
  }
  s.decode(std::span<const int32_t>(prompt).subspan(0, 50));
  // boundaries 8 .. 48 and the end 50, thinned to 3 spread over [0, 50] (the newest kept)
  const auto kept = s.checkpoint_positions();
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept.back(), 50);
  EXPECT_LE(kept[0], 24);
  EXPECT_EQ(s.recurrent_memory_bytes(), 4 * s.recurrent_state_bytes());
  const int64_t V = model->n_vocab();
  for (const int64_t back : {45, 33, 12, 3}) {
    s.rollback(back);
    auto out = s.decode(std::span<const int32_t>(&prompt[static_cast<size_t>(back)], 1));
    EXPECT_EQ(copy(out), std::vector<float>(want.begin() + back * V, want.begin() + (back + 1) * V))
        << "rollback to " << back;
  }
}

TEST(Qwen35Batch, CliBatchParallel3EqualsParallel1) {
  const std::string dir = test::scratch_dir("qwen35_batch_cli");
  const std::string model = synth_tiny(dir);
  const std::string in = dir + "/in.jsonl";
  {
    std::ofstream f(in);
    const char* prompts[] = {"hello the world is", "the cat",
                             "a much longer prompt about the world and the cat and the dog", "is",
                             "the world the world"};
    int i = 0;
    for (const char* p : prompts) {
      nlohmann::json line = {
          {"id", std::to_string(i)}, {"prompt", p}, {"max_tokens", 6 + 3 * i}, {"temperature", 0}};
      f << line.dump() << "\n";
      ++i;
    }
  }
  std::map<std::string, std::string> texts[2];
  int k = 0;
  for (const int parallel : {1, 3}) {
    const std::string out = dir + "/out" + std::to_string(parallel) + ".jsonl";
    const auto r = test::run_command_split(
        shell_quote(test::cli_path()) + " batch -m " + shell_quote(model) + " --input " +
        shell_quote(in) + " --output " + shell_quote(out) + " --parallel " +
        std::to_string(parallel) + " -t 2 --kv-type f32 --overwrite");
    ASSERT_EQ(r.status, 0) << r.err;
    if (parallel == 3) {
      EXPECT_NE(r.err.find("batched into one forward pass"), std::string::npos) << r.err;
    }
    std::ifstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
      const auto doc = nlohmann::json::parse(line);
      texts[k][doc["id"].get<std::string>()] = doc["text"].get<std::string>();
    }
    ++k;
  }
  EXPECT_EQ(texts[0].size(), 5u);
  EXPECT_EQ(texts[0], texts[1]);
}

}  // namespace
}  // namespace boltrt
