// Unicode facts the byte-level BPE pre-tokenizers need: a code point's coarse general category
// (letter \p{L}, mark \p{M}, number \p{N}, or other) and the White_Space property. The category
// table is generated (tools/unicode/gen_categories.cpp) at the Unicode version llama.cpp uses.
#pragma once
#include <cstdint>

namespace boltrt::text {

enum class CharClass : uint8_t { kOther = 0, kLetter = 1, kMark = 2, kNumber = 3 };

// Any value is accepted; code points above U+10FFFF are kOther.
CharClass char_class(uint32_t cp);

// Unicode's White_Space property (tab..CR, space, NEL, NBSP, the U+2000 block, ...).
bool is_unicode_space(uint32_t cp);

}  // namespace boltrt::text
