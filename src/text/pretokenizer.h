// Pre-tokenization for byte-level BPE vocabularies (tokenizer.ggml.model = "gpt2"): the text is
// cut into pre-tokens by a pattern, each pre-token's UTF-8 bytes are mapped to GPT-2's printable
// alphabet, and BPE merges run inside each pre-token.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace boltrt::text {

// Qwen3.5's pattern (tokenizer.ggml.pre = "qwen35"), as llama.cpp applies it (qwen35.md §8.2):
// contractions ('s 't 're 've 'm 'll 'd, any case); one optional character that is not CR, LF,
// a letter or a digit followed by a run of letters and combining marks; a single digit; an
// optional space, a run of other non-space characters, then any CR/LF; whitespace up to its last
// CR/LF; a whitespace run but its last character when a non-space follows; any whitespace run.
// Appends the length in code points of each pre-token of `cps` to `lengths`.
void split_qwen35(std::span<const uint32_t> cps, std::vector<uint32_t>& lengths);

// GPT-2's byte-to-character mapping: bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for
// themselves, the other 68 for U+0100.. in byte order (so ' ' is "Ġ", '\n' is "Ċ").
uint32_t byte_to_level_char(uint8_t byte);
// The inverse, or -1 when `cp` is not one of the 256 characters.
int level_char_to_byte(uint32_t cp);

}  // namespace boltrt::text
