// tokenizer.ggml.suppress_tokens: read as llama.cpp's vocabulary loader reads it (i32 array
// only, out-of-range ids dropped, same list as text::Tokenizer::suppress_tokens()), and applied
// to a logits row as the -inf logit bias of llama.cpp's common/sampling.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "generate/suppress_tokens.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "text/tokenizer.h"
#include "util/error.h"

namespace boltrt {
namespace {

// A gemma4 vocabulary of 9 + 256 byte tokens (enough for text::Tokenizer to load).
void add_vocabulary(gguf::Writer& w) {
  w.set_string("general.architecture", "gemma4");
  w.set_string("tokenizer.ggml.model", "gemma4");
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>", "<|turn>",
                                     "h",     "i",     "hi",    "▁"};
  std::vector<int32_t> types = {3, 3, 3, 3, 3, 1, 1, 1, 1};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    tokens.push_back(hex);
    types.push_back(6);
  }
  w.set_array_string("tokenizer.ggml.tokens", tokens);
  w.set_array_i32("tokenizer.ggml.token_type", types);
  w.set_array_string("tokenizer.ggml.merges", {"h i"});
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
}

std::unique_ptr<gguf::File> parse(const gguf::Writer& w) {
  return gguf::File::parse(w.write_to_memory(), "vocab.gguf");
}

TEST(SuppressTokens, AbsentKeyGivesEmptyList) {
  gguf::Writer w;
  add_vocabulary(w);
  const auto file = parse(w);
  EXPECT_TRUE(read_suppress_tokens(*file).empty());
}

TEST(SuppressTokens, OutOfRangeIdsDroppedOrderAndDuplicatesKept) {
  gguf::Writer w;
  add_vocabulary(w);
  const std::vector<int32_t> listed = {7, -1, 4, 265, 4, 264, 0, 100000};
  w.set_array_i32("tokenizer.ggml.suppress_tokens", listed);
  const auto file = parse(w);
  const std::vector<int32_t> ids = read_suppress_tokens(*file);
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 4, 4, 264, 0}));
  // The tokenizer reads the same list.
  const auto tokenizer = text::Tokenizer::from_gguf(*file);
  EXPECT_EQ(tokenizer->suppress_tokens(), ids);
}

TEST(SuppressTokens, WrongTypeIsOneLineError) {
  gguf::Writer as_u32;
  add_vocabulary(as_u32);
  const std::vector<uint32_t> unsigned_ids = {4};
  as_u32.set_array_u32("tokenizer.ggml.suppress_tokens", unsigned_ids);
  gguf::Writer as_scalar;
  add_vocabulary(as_scalar);
  as_scalar.set_i32("tokenizer.ggml.suppress_tokens", 4);
  for (const gguf::Writer* w : {&as_u32, &as_scalar}) {
    const auto file = parse(*w);
    try {
      read_suppress_tokens(*file);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(
          message.rfind("vocab.gguf: tokenizer.ggml.suppress_tokens: expected an array of i32", 0),
          0u)
          << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

TEST(SuppressTokens, ApplySetsListedLogitsToMinusInfinityOnly) {
  std::vector<float> logits = {1.0f, -2.5f, 30.0f, 0.0f, 7.0f};
  const std::vector<int32_t> ids = {2, 4, 2, -3, 5, 99};
  apply_suppress_tokens(logits, ids);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.5f, -inf, 0.0f, -inf}));
  // The argmax moves to the best token that is not suppressed.
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  EXPECT_EQ(best, 0u);
  apply_suppress_tokens(logits, {});
  EXPECT_EQ(logits[0], 1.0f);
}

}  // namespace
}  // namespace boltrt
