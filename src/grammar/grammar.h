// Grammar — the compiled form of a context-free grammar that constrains generated text (issue 18,
// shared/docs/structured-output.md §5, §9).
//
// Front-ends: GBNF text (llama.cpp's syntax, parse_gbnf()) and JSON Schema (json_schema.h, which
// emits GBNF). The compiled form is byte-level: every character class over Unicode code points
// is rewritten into alternatives of UTF-8 byte-range sequences, so the matcher walks bytes, a
// token that ends inside a character (Gemma 4's byte-fallback tokens) simply leaves the matcher
// inside that character's byte sequence, and no grammar can produce invalid UTF-8 (surrogates
// are never part of a class).
//
// Shape: rules[r] lists the start offsets (into `elements`) of the alternatives of rule r; each
// alternative is a run of elements ended by an kEnd element. Repetitions are rewritten into
// helper rules (`S*` -> `R ::= S R | ""`, `S{m,n}` -> m copies of S and a right-recursive chain
// of n - m optional copies), so every rule is a plain choice of sequences. Left recursion (also
// through nullable prefixes) is rejected at compile time: it would make the matcher loop.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace boltrt::grammar {

// Limits that keep a hostile grammar from exhausting memory or time (a clear boltrt::Error
// instead). llama.cpp uses 2000 for repetition counts as well.
inline constexpr int64_t kMaxRepetition = 2000;
inline constexpr size_t kMaxElements = 4u << 20;  // compiled elements of one grammar

enum class ElementKind : uint8_t {
  kEnd,           // end of an alternative
  kBytes,         // one byte in the 256-bit set byte_sets[value]
  kRule,          // a reference to rule `value`
  kToken,         // exactly the token with id `value` (an atomic, e.g. special, token)
  kNotToken,      // any one text token except the token with id `value`
  kTokenText,     // like kToken, but the token is named by its text token_texts[value] (resolved
                  // against a vocabulary when the grammar is bound to one)
  kNotTokenText,  // like kNotToken, the token named by its text token_texts[value]
};

struct Element {
  ElementKind kind;
  uint32_t value;
};

using ByteSet = std::array<uint64_t, 4>;  // bit b set: byte b allowed

inline bool byte_in(const ByteSet& set, uint8_t b) {
  return (set[b >> 6] >> (b & 63)) & 1u;
}

class Grammar {
 public:
  std::vector<Element> elements;
  std::vector<std::vector<uint32_t>> rules;  // alternatives' start offsets per rule
  std::vector<std::string> rule_names;       // for messages and dumps
  std::vector<ByteSet> byte_sets;
  std::vector<std::string> token_texts;  // texts of <...> token references
  uint32_t root = 0;

  // A readable dump of the compiled rules (byte sets as ranges), for tests and debugging.
  std::string dump() const;
};

// Parses GBNF text (shared/docs/structured-output.md §5.1) and compiles it; the start symbol is
// `root`. Throws boltrt::Error "grammar: LINE:COL: what is wrong" for malformed text and
// "grammar: ..." for undefined rules, a missing root, left recursion and exceeded limits.
std::shared_ptr<const Grammar> parse_gbnf(std::string_view text, std::string_view root = "root");

// parse_gbnf() through a process-wide cache keyed by the text (compiled grammars are immutable,
// so requests that send the same grammar or schema share one, and its matcher caches).
std::shared_ptr<const Grammar> cached_gbnf(std::string_view text);

// `text` as a GBNF string literal ("..." with the escapes the parser reads back).
std::string gbnf_literal(std::string_view text);

// Decodes one UTF-8 code point at text[*pos] strictly (no overlongs, surrogates or values above
// U+10FFFF); returns -1 on invalid input (and leaves *pos unchanged).
int32_t decode_utf8(std::string_view text, size_t* pos);

}  // namespace boltrt::grammar
