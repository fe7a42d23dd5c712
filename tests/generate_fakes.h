// Test doubles for the generation loop: a LanguageModel whose logits the test scripts.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generate/text_model.h"
#include "runtime/language_model.h"
#include "util/error.h"

namespace boltrt {

// A LanguageModel whose next token is chosen by the test: `next(context)` names the token that
// gets logit 10 after the tokens in `context` (everything else gets small distinct logits, the
// runner-up being `runner_up(context)` with logit 5).
class ScriptedModel : public LanguageModel {
 public:
  ScriptedModel(int64_t n_vocab, int64_t n_ctx) : n_vocab_(n_vocab), n_ctx_(n_ctx) {}

  std::function<int32_t(const std::vector<int32_t>&)> next;
  std::function<int32_t(const std::vector<int32_t>&)> runner_up;
  std::vector<int64_t> decode_sizes;  // tokens per decode() call

  int64_t n_vocab() const override { return n_vocab_; }
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t n_past() const override { return static_cast<int64_t>(context_.size()); }

  std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits) override {
    EXPECT_FALSE(all_logits);
    if (n_past() + static_cast<int64_t>(tokens.size()) > n_ctx_) fail("fake model: context full");
    decode_sizes.push_back(static_cast<int64_t>(tokens.size()));
    context_.insert(context_.end(), tokens.begin(), tokens.end());
    logits_.assign(static_cast<size_t>(n_vocab_), 0.0f);
    for (size_t i = 0; i < logits_.size(); ++i) logits_[i] = -0.01f * static_cast<float>(i);
    if (runner_up) logits_[static_cast<size_t>(runner_up(context_))] = 5.0f;
    logits_[static_cast<size_t>(next(context_))] = 10.0f;
    return logits_;
  }
  void rollback(int64_t n_past) override {
    // Like a sliding-window cache: only short rollbacks (or a full reset) are possible.
    if (n_past > 0 && static_cast<int64_t>(context_.size()) - n_past > max_rollback) {
      fail("fake model: cannot roll back {} tokens",
           static_cast<int64_t>(context_.size()) - n_past);
    }
    context_.resize(static_cast<size_t>(n_past));
  }
  int64_t max_rollback = 1 << 30;

  const std::vector<int32_t>& context() const { return context_; }

 private:
  int64_t n_vocab_, n_ctx_;
  std::vector<int32_t> context_;
  std::vector<float> logits_;
};

// A byte-level TextModel over a ScriptedModel. Ids 0..6 are special tokens written in text as
// below; id 7 + b is byte b. The chat format is
//   [<sys>SYSTEM] (<user>TEXT | <asst>TEXT)... <gen> [<|channel>thought\n<channel|> when not
//   thinking]
// and the model answers the k-th user turn (counting <user> tokens in its context) with
// replies[k-1], then <end>.
class FakeTextModel : public TextModel {
 public:
  static constexpr int32_t kEnd = 0, kOpen = 1, kClose = 2, kGen = 3, kUser = 4, kAsst = 5,
                           kSys = 6, kBytes = 7;
  static constexpr const char* kSpecial[] = {"<end>",  "<|channel>", "<channel|>", "<gen>",
                                             "<user>", "<asst>",     "<sys>"};

  explicit FakeTextModel(int64_t n_ctx = 4096) : scripted(kBytes + 256, n_ctx) {
    scripted.next = [this](const std::vector<int32_t>& context) -> int32_t {
      const auto turn = std::count(context.begin(), context.end(), kUser);
      const auto gen = std::find(context.rbegin(), context.rend(), kGen);
      if (turn == 0 || gen == context.rend() || static_cast<size_t>(turn) > replies.size()) {
        return kEnd;
      }
      // Tokens produced since the prompt (which ends at <gen> or at the pre-filled channel).
      size_t produced = static_cast<size_t>(gen - context.rbegin());
      const auto& reply = replies[static_cast<size_t>(turn - 1)];
      const size_t prefill = prompt_tail;
      if (produced < prefill) return kEnd;
      produced -= prefill;
      return produced < reply.size() ? reply[produced] : kEnd;
    };
  }

  ScriptedModel scripted;
  std::vector<std::vector<int32_t>> replies;
  std::string last_prompt;
  size_t prompt_tail = 0;  // tokens after <gen> in the last rendered prompt

  LanguageModel& model() override { return scripted; }

  std::vector<int32_t> tokenize(std::string_view text, bool add_special) const override {
    (void)add_special;
    std::vector<int32_t> ids;
    size_t i = 0;
    while (i < text.size()) {
      bool special = false;
      for (int32_t id = 0; id < kBytes; ++id) {
        const std::string_view name = kSpecial[id];
        if (text.substr(i, name.size()) == name) {
          ids.push_back(id);
          i += name.size();
          special = true;
          break;
        }
      }
      if (!special) ids.push_back(kBytes + static_cast<unsigned char>(text[i++]));
    }
    return ids;
  }

  GenerationVocab vocab() const override {
    GenerationVocab v;
    v.piece = [](int32_t id) {
      return id < kBytes ? std::string() : std::string(1, static_cast<char>(id - kBytes));
    };
    v.end_of_generation = {kEnd};
    return v;
  }

  bool has_chat_template() const override { return true; }

  std::string render_chat(std::span<const ChatMessage> messages, bool thinking) const override {
    std::string out;
    for (const auto& m : messages) {
      out += m.role == "system" ? "<sys>" : m.role == "user" ? "<user>" : "<asst>";
      out += m.content;
    }
    out += "<gen>";
    if (!thinking) out += "<|channel>thought\n<channel|>";
    auto* self = const_cast<FakeTextModel*>(this);
    self->last_prompt = out;
    self->prompt_tail = thinking ? 0 : tokenize("<|channel>thought\n<channel|>", false).size();
    return out;
  }

  std::optional<ReasoningMarkers> reasoning_markers() const override {
    return ReasoningMarkers{kOpen, kClose, "thought\n"};
  }

  SamplerConfig sampling_defaults(const SamplerConfig& defaults) const override { return defaults; }
};

}  // namespace boltrt
