// Embedding boltrt: load a model, ask one question in its chat format, stream the answer.
//   embed MODEL.gguf [QUESTION]
#include <boltrt/boltrt.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [QUESTION]\n", argv[0]);
    return 2;
  }
  try {
    boltrt::ModelOptions options;
    options.context = 2048;
    auto model = boltrt::Model::load(argv[1], options);
    boltrt::Session session(model);

    boltrt::Request request;
    request.messages.push_back(
        boltrt::Message::text("user", argc > 2 ? argv[2] : "Write one sentence about the sea."));
    request.max_tokens = 64;
    const boltrt::Result result = session.generate(request, [](const boltrt::TokenInfo& token) {
      if (!token.reasoning) std::fwrite(token.text.data(), 1, token.text.size(), stdout);
      std::fflush(stdout);
      return true;  // false would stop generating
    });
    std::printf("\n[%lld tokens, %.1f tokens/s, %s]\n",
                static_cast<long long>(result.stats.generated_tokens),
                result.stats.tokens_per_second, boltrt::to_string(result.finish_reason));
  } catch (const boltrt::Error& e) {
    std::fprintf(stderr, "embed: %s\n", e.what());
    return 1;
  }
}
