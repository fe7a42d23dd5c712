// UTF-8 helpers shared by the tokenizers, the detokenizer and the chat code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace boltrt::text {

// Length of the UTF-8 sequence that starts with `lead`, judged by its top four bits only
// (0xxx -> 1, 10xx -> 1, 110x -> 2, 1110 -> 3, 1111 -> 4). This is how llama.cpp cuts text into
// "characters" before BPE/SentencePiece merging, including for invalid input.
inline size_t utf8_lead_length(uint8_t lead) {
  static constexpr uint8_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLength[lead >> 4];
}

// Appends the UTF-8 encoding of `cp` (any value up to 0x10FFFF, surrogates included) to `out`.
void append_utf8(std::string& out, uint32_t cp);

// Rewrites `in` the way llama.cpp's codepoint round trip does before BPE: every well-formed-
// looking sequence is decoded by its bit pattern (overlong forms and surrogates are accepted and
// re-encoded canonically, e.g. C0 80 becomes 00) and every byte that does not start such a
// sequence becomes U+FFFD. Sequences that decode above U+10FFFF (F4 90.., F5-F7 leads) make
// llama.cpp throw; here their lead byte becomes U+FFFD and decoding resumes at the next byte.
std::string normalize_utf8_like_llama(std::string_view in);

// True when `s` is strictly valid UTF-8 (no overlongs, surrogates or values above U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Number of bytes at the end of `s` that form the beginning of a UTF-8 sequence which could
// still be completed by more bytes (0..3). Used by streaming decoders to hold them back.
size_t incomplete_utf8_tail(std::string_view s);

// Strictly valid UTF-8 copy of `s`: each maximal invalid subsequence becomes U+FFFD.
std::string sanitize_utf8(std::string_view s);

}  // namespace boltrt::text
