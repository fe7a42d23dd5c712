// libFuzzer entry point for the grammar front-ends: the input is tried as GBNF text and as a
// JSON Schema (the first byte picks which, so the corpus can specialise). Either it compiles or
// it throws one boltrt::Error; every other outcome (crash, sanitizer report, other exception,
// hang) is a bug. A grammar that compiles is then bound to a small byte vocabulary and driven
// with the rest of the input as text, with masks computed along the way, so the matcher sees
// every grammar the parser accepts.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "util/error.h"

namespace {

std::shared_ptr<const boltrt::grammar::TokenVocabulary> byte_vocab() {
  static const auto vocab = [] {
    std::vector<std::string> pieces;
    std::vector<bool> atomic;
    for (int b = 0; b < 256; ++b) {
      pieces.push_back(std::string(1, static_cast<char>(b)));
      atomic.push_back(false);
    }
    for (const char* s : {"{\"", "\":", "true", "<|\"|>", "<eos>"}) {
      pieces.push_back(s);
      atomic.push_back(pieces.back()[0] == '<');
    }
    return std::make_shared<boltrt::grammar::TokenVocabulary>(
        pieces, atomic, std::vector<int32_t>{static_cast<int32_t>(pieces.size()) - 1});
  }();
  return vocab;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  // The text after the first NUL byte (if any) drives the matcher.
  const size_t split = input.find('\0');
  const std::string_view source = input.substr(0, split);
  const std::string_view drive = split == std::string_view::npos ? "" : input.substr(split + 1);
  try {
    const std::string gbnf =
        (data[0] & 1) ? boltrt::grammar::json_schema_to_gbnf(source) : std::string(source);
    auto grammar = boltrt::grammar::parse_gbnf(gbnf);
    auto engine = std::make_shared<boltrt::grammar::Engine>(grammar, byte_vocab());
    boltrt::grammar::Matcher m(engine);
    std::vector<uint32_t> mask;
    for (size_t i = 0; i < drive.size() && i < 256; ++i) {
      m.fill_mask(mask);
      m.accept(static_cast<uint8_t>(drive[i]));
      if (i % 7 == 6) m.rollback(m.tokens_accepted() / 2);
    }
    (void)m.is_accepting();
  } catch (const boltrt::Error&) {
  }
  return 0;
}
