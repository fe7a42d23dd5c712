#include "grammar/token_vocabulary.h"

#include <mutex>

#include "text/tokenizer.h"

namespace boltrt::grammar {

std::shared_ptr<const TokenVocabulary> vocabulary_of(const text::Tokenizer& tokenizer) {
  const int32_t n = tokenizer.n_vocab();
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<bool> atomic(static_cast<size_t>(n));
  constexpr uint32_t kAtomic =
      text::kAttrControl | text::kAttrUserDefined | text::kAttrUnused | text::kAttrUnknown;
  for (int32_t id = 0; id < n; ++id) {
    pieces[static_cast<size_t>(id)] = tokenizer.piece(id, /*special=*/true);
    atomic[static_cast<size_t>(id)] = (tokenizer.attr(id) & kAtomic) != 0;
  }
  return std::make_shared<TokenVocabulary>(std::move(pieces), std::move(atomic),
                                           tokenizer.eog_tokens());
}

std::function<std::shared_ptr<const TokenVocabulary>()> lazy_vocabulary_of(
    const text::Tokenizer& tokenizer) {
  struct Lazy {
    std::once_flag once;
    std::shared_ptr<const TokenVocabulary> vocab;
  };
  auto lazy = std::make_shared<Lazy>();
  const text::Tokenizer* t = &tokenizer;
  return [lazy, t] {
    std::call_once(lazy->once, [&] { lazy->vocab = vocabulary_of(*t); });
    return lazy->vocab;
  };
}

}  // namespace boltrt::grammar
