// Tokenizer speed: vocabulary load, encoding ~1 MB of mixed text, decoding it again.
//   bench_tokenizer [VOCAB.gguf] [TEXT_FILE]
// Run from the repository root. Defaults: tests/data/vocab/ggml-vocab-gemma-4.gguf and a built-in
// multilingual text repeated to 1 MiB. Prints milliseconds; no assertions (speed is reported, not
// tested).
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>

#include "gguf/gguf.h"
#include "text/tokenizer.h"

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string sample_text() {
  const char* parts[] = {
      "The quick brown fox jumps over the lazy dog. It's 5 o'clock, isn't it?\n",
      "Größenwahn ist überall. Où est la bibliothèque ? ¿Dónde está el baño?\n",
      "Съешь же ещё этих мягких французских булок. Καλημέρα, τι κάνεις;\n",
      "你好，你今天怎么样？こんにちは、お元気ですか？안녕하세요, 잘 지내세요?\n",
      "नमस्ते, आप कैसे हैं? مرحبا، كيف حالك؟ שלום, מה שלומך? สวัสดีครับ\n",
      "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n",
      "👩‍💻 👨‍👩‍👧‍👦 🇺🇸🇯🇵 ❤️ 1️⃣   \t\t  \n\n\n",
  };
  std::string text;
  while (text.size() < (1u << 20)) {
    for (const char* p : parts) text += p;
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace boltrt;
  const std::string vocab = argc > 1 ? argv[1] : "tests/data/vocab/ggml-vocab-gemma-4.gguf";
  std::string text = sample_text();
  if (argc > 2) {
    std::ifstream in(argv[2], std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    const auto file = gguf::File::open(vocab);
    const double gguf_ms = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    const auto tok = text::Tokenizer::from_gguf(*file);
    const double build_ms = ms_since(t0);
    fmt::print("vocabulary: {} tokens; gguf open {:.1f} ms, tokenizer build {:.1f} ms\n",
               tok->n_vocab(), gguf_ms, build_ms);
    for (int rep = 0; rep < 3; ++rep) {
      t0 = std::chrono::steady_clock::now();
      const auto ids = tok->encode(text, true, true);
      const double enc_ms = ms_since(t0);
      t0 = std::chrono::steady_clock::now();
      const std::string back = tok->decode(ids);
      const double dec_ms = ms_since(t0);
      fmt::print("encode {} bytes -> {} tokens: {:.1f} ms ({:.1f} MB/s); decode {:.1f} ms\n",
                 text.size(), ids.size(), enc_ms, text.size() / enc_ms / 1e3, dec_ms);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_tokenizer: {}\n", e.what());
    return 1;
  }
  return 0;
}
