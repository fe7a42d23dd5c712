// `boltrt tokenize` end to end: output byte for byte equal to llama-tokenize's on the real
// Gemma 4 vocabulary (when llama-ref and the vocabulary are present), and one-line errors on a
// tiny vocabulary-only GGUF written here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "gguf/gguf_writer.h"
#include "support/paths.h"

namespace boltrt {
namespace {

namespace fs = std::filesystem;

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string run(const std::string& cmd, int* rc) {
  std::string out;
  *rc = test::run_command(cmd, &out);
  return out;
}

std::string tiny_vocab(const std::string& dir) {
  gguf::Writer w;
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
  const std::string path = dir + "/tiny-vocab.gguf";
  w.write(path);
  return path;
}

TEST(TokenizeCli, TinyVocabularyAndErrors) {
  const std::string dir = test::scratch_dir("tokenize_cli");
  const std::string vocab = tiny_vocab(dir);
  const std::string cli = test::cli_path();
  int rc = 0;
  EXPECT_EQ(run(cli + " tokenize -m " + vocab + " -p 'hi <|turn>h' --ids", &rc),
            "[2, 7, 8, 4, 5]\n");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(run(cli + " tokenize -m " + vocab + " -p 'hi' --no-bos --show-count", &rc),
            "     7 -> 'hi'\nTotal number of tokens: 1\n");
  // --no-parse-special: <|turn> is a control token, so its text is tokenized as text.
  EXPECT_EQ(run(cli + " tokenize -m " + vocab + " -p '<|' --ids --no-parse-special --no-bos", &rc),
            "[69, 133]\n");
  // Escapes are processed unless --no-escape.
  EXPECT_EQ(run(cli + " tokenize -m " + vocab + " -p 'h\\ti' --ids --no-bos", &rc), "[5, 18, 6]\n");
  EXPECT_EQ(run(cli + " tokenize -m " + vocab + " -p 'h\\ti' --ids --no-bos --no-escape", &rc),
            "[5, 101, 125, 6]\n");
  {
    std::ofstream(dir + "/in.txt") << "hihi";
    EXPECT_EQ(run(cli + " tokenize -m " + vocab + " -f " + dir + "/in.txt --ids", &rc),
              "[2, 7, 7]\n");
    EXPECT_EQ(run("printf hi | " + cli + " tokenize -m " + vocab + " --stdin --ids", &rc),
              "[2, 7]\n");
  }
  std::string out = run(cli + " tokenize -m " + dir + "/missing.gguf -p hi", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("boltrt: error: "), std::string::npos) << out;
  EXPECT_NE(out.find("missing.gguf"), std::string::npos) << out;
  out = run(cli + " tokenize -m " + vocab, &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("give the text with -p TEXT, -f FILE or --stdin"), std::string::npos) << out;
  out = run(cli + " tokenize -m " + vocab + " -f " + dir + "/nope.txt", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("nope.txt: cannot open"), std::string::npos) << out;
}

TEST(TokenizeCli, SameOutputAsLlamaTokenize) {
  const std::string bin = test::llama_ref_bin();
  const std::string vocab = test::source_dir() + "/tests/data/vocab/ggml-vocab-gemma-4.gguf";
  if (bin.empty()) GTEST_SKIP() << "llama-ref is not built (tools/setup.sh builds it)";
  if (!fs::exists(vocab)) GTEST_SKIP() << vocab << " missing; run tools/fetch-test-data.sh";
  // Each llama-tokenize run loads the 262k vocabulary (about a second), so a few runs that
  // together cover the piece format, --ids, --show-count, --no-bos, --no-parse-special,
  // --no-escape, escapes, special tokens, emoji and invalid UTF-8.
  const std::pair<std::string, std::string> cases[] = {
      {"<|turn>user\\nHi  there\\t<turn|>\\n<|turn>model\\n<|channel>thought\\n<channel|>", ""},
      {"emoji 👩‍💻🇯🇵 and 日本語, bytes \\xff\\xfe end", "--ids --show-count"},
      {"<|turn>user\\n<bos>x</s>", "--no-bos --no-parse-special --ids"},
      {"keep \\n literally <|tool_call>", "--no-escape --ids"},
  };
  for (const auto& [p, flags] : cases) {
    int rc_ref = 0, rc_ours = 0;
    const std::string args = " -m " + vocab + " -p " + shell_quote(p) + " " + flags;
    const std::string ref =
        run("{ " + bin + "/llama-tokenize --log-disable" + args + " 2>/dev/null; }", &rc_ref);
    const std::string ours = run(test::cli_path() + " tokenize" + args, &rc_ours);
    ASSERT_EQ(rc_ref, 0) << p << " " << flags;
    EXPECT_EQ(rc_ours, 0);
    EXPECT_EQ(ours, ref) << "prompt '" << p << "' flags '" << flags << "'";
  }
}

}  // namespace
}  // namespace boltrt
