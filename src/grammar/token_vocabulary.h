// The matcher's view of a tokenizer's vocabulary (grammar::TokenVocabulary from a
// text::Tokenizer): pieces with special tokens rendered, atomic = control, user-defined, unused
// and unknown tokens (byte tokens stay text), and the tokenizer's end-of-generation ids.
#pragma once
#include <functional>
#include <memory>

#include "grammar/matcher.h"

namespace boltrt::text {
class Tokenizer;
}

namespace boltrt::grammar {

std::shared_ptr<const TokenVocabulary> vocabulary_of(const text::Tokenizer& tokenizer);

// A function that builds vocabulary_of(tokenizer) on its first call (a few hundred ms for
// 262,144 tokens) and returns the same one afterwards, from any thread; copies share it.
// `tokenizer` must outlive every copy.
std::function<std::shared_ptr<const TokenVocabulary>()> lazy_vocabulary_of(
    const text::Tokenizer& tokenizer);

}  // namespace boltrt::grammar
