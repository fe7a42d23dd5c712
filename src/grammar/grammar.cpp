// GBNF parser and compiler (grammar.h). The parser reads llama.cpp's syntax into per-rule
// alternatives of items (literals, classes, rule references, tokens), rewrites postfix
// repetitions into helper rules, and lowers everything to byte-level elements.
#include "grammar/grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include "util/error.h"

namespace boltrt::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive code point ranges

// Sorted, merged, surrogates removed.
Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges merged;
  for (auto [lo, hi] : r) {
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.push_back({lo, hi});
    }
  }
  Ranges out;
  for (auto [lo, hi] : merged) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) out.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) out.push_back({0xE000, hi});
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalize(out);
}

int utf8_length(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

void encode(uint32_t cp, uint8_t* out) {
  const int n = utf8_length(cp);
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
}

// A code point range as UTF-8 byte-range sequences: every sequence has the same length and
// each of its positions is a contiguous byte range (the classic split of a range at the points
// where the continuation bytes stop being full).
using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;
void split_utf8(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  static constexpr uint32_t kBounds[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t b : kBounds) {
    if (lo <= b && hi > b) {
      split_utf8(lo, b, out);
      split_utf8(b + 1, hi, out);
      return;
    }
  }
  const int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8(lo, lo | m, out);
        split_utf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_utf8(lo, (hi & ~m) - 1, out);
        split_utf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], z[4];
  encode(lo, a);
  encode(hi, z);
  ByteSeq seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], z[i]});
  out.push_back(std::move(seq));
}

ByteSet byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s{};
  for (int b = lo; b <= hi; ++b) s[static_cast<size_t>(b) >> 6] |= uint64_t{1} << (b & 63);
  return s;
}

// ---- parse tree -------------------------------------------------------------------------------

struct Item {
  enum Kind { kLiteral, kClass, kRef, kToken, kNotToken, kTokenText, kNotTokenText };
  explicit Item(Kind k) : kind(k) {}
  Kind kind;
  uint32_t value = 0;
  std::vector<uint32_t> code_points;  // kLiteral
  Ranges ranges;                      // kClass (normalized, not negated)
};
using Sequence = std::vector<Item>;
using Alternatives = std::vector<Sequence>;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::shared_ptr<Grammar> parse(std::string_view root_name) {
    skip_ws(true);
    while (pos_ < text_.size()) parse_rule();
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (!defined_[r]) {
        fail("grammar: {}: undefined rule '{}'", where(first_use_[r]), names_[r]);
      }
    }
    const auto root = ids_.find(std::string(root_name));
    if (root == ids_.end()) fail("grammar: no '{}' rule (the start symbol)", root_name);
    return lower(root->second);
  }

 private:
  // ---- text helpers ----
  std::string where(size_t at) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else if ((static_cast<uint8_t>(text_[i]) & 0xC0) != 0x80) {
        ++col;
      }
    }
    return fmt::format("{}:{}", line, col);
  }
  template <typename... Args>
  [[noreturn]] void fail_at(size_t at, fmt::format_string<Args...> format, Args&&... args) const {
    throw Error(fmt::format("grammar: {}: {}", where(at),
                            fmt::format(format, std::forward<Args>(args)...)));
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void skip_ws(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else {
        break;
      }
    }
  }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  }
  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && name_char(peek())) ++pos_;
    if (pos_ == start) fail_at(start, "expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }
  uint32_t rule_id(const std::string& name, size_t used_at) {
    auto [it, inserted] = ids_.try_emplace(name, static_cast<uint32_t>(rules_.size()));
    if (inserted) {
      rules_.emplace_back();
      names_.push_back(name);
      defined_.push_back(false);
      first_use_.push_back(used_at);
    }
    return it->second;
  }
  uint32_t new_helper(const std::string& base, Alternatives alts) {
    const uint32_t id = static_cast<uint32_t>(rules_.size());
    rules_.push_back(std::move(alts));
    names_.push_back(fmt::format("{}-{}", base, id));
    defined_.push_back(true);
    first_use_.push_back(pos_);
    return id;
  }

  uint32_t parse_hex(size_t digits, size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      const char c = peek();
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        fail_at(at, "hex escape needs exactly {} hex digits", digits);
      }
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }
  // One character of a string literal or class (escapes decoded).
  uint32_t parse_char() {
    const size_t at = pos_;
    if (at_end()) fail_at(at, "unexpected end of grammar");
    if (peek() == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      uint32_t cp = 0;
      switch (e) {
        case 'x':
          cp = parse_hex(2, at);
          break;
        case 'u':
          cp = parse_hex(4, at);
          break;
        case 'U':
          cp = parse_hex(8, at);
          break;
        case 't':
          return '\t';
        case 'r':
          return '\r';
        case 'n':
          return '\n';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
          return static_cast<uint8_t>(e);
        default:
          fail_at(at, "unknown escape '\\{}'", e == '\0' ? std::string() : std::string(1, e));
      }
      if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
        fail_at(at, "escape U+{:X} is not a Unicode scalar value", cp);
      }
      return cp;
    }
    const int32_t cp = decode_utf8(text_, &pos_);
    if (cp < 0) fail_at(at, "invalid UTF-8 in the grammar text");
    return static_cast<uint32_t>(cp);
  }

  uint64_t parse_int() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > (uint64_t{1} << 40)) fail_at(start, "number too large");
      ++pos_;
    }
    if (pos_ == start) fail_at(start, "expected a number");
    return v;
  }

  // ---- rules ----
  void parse_rule() {
    const size_t at = pos_;
    const std::string name = parse_name();
    skip_ws(false);
    if (text_.substr(pos_, 3) != "::=") fail_at(pos_, "expected '::=' after rule name '{}'", name);
    pos_ += 3;
    skip_ws(true);
    const uint32_t id = rule_id(name, at);
    if (defined_[id]) fail_at(at, "rule '{}' is defined twice", name);
    defined_[id] = true;
    Alternatives alts = parse_alternates(name, false);
    rules_[id] = std::move(alts);
    if (!at_end()) {
      if (peek() == '\r' && peek(1) == '\n') {
        pos_ += 2;
      } else if (peek() == '\n' || peek() == '\r') {
        ++pos_;
      } else {
        fail_at(pos_, "expected the end of rule '{}' (a newline), found '{}'", name, peek());
      }
    }
    skip_ws(true);
  }

  Alternatives parse_alternates(const std::string& rule, bool nested) {
    Alternatives alts;
    alts.push_back(parse_sequence(rule, nested));
    while (peek() == '|') {
      ++pos_;
      skip_ws(true);
      alts.push_back(parse_sequence(rule, nested));
    }
    return alts;
  }

  Sequence parse_sequence(const std::string& rule, bool nested) {
    Sequence seq;
    while (!at_end()) {
      const char c = peek();
      const size_t at = pos_;
      if (c == '"') {
        ++pos_;
        Item item{Item::kLiteral};
        while (true) {
          if (at_end() || peek() == '\n' || peek() == '\r') fail_at(at, "unterminated string");
          if (peek() == '"') break;
          item.code_points.push_back(parse_char());
        }
        ++pos_;
        seq.push_back(std::move(item));
      } else if (c == '[') {
        ++pos_;
        bool negate = false;
        if (peek() == '^') {
          negate = true;
          ++pos_;
        }
        Ranges ranges;
        while (true) {
          if (at_end() || peek() == '\n' || peek() == '\r') {
            fail_at(at, "unterminated character class");
          }
          if (peek() == ']') break;
          const uint32_t lo = parse_char();
          uint32_t hi = lo;
          if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
            ++pos_;
            const size_t hi_at = pos_;
            hi = parse_char();
            if (hi < lo) fail_at(hi_at, "character range U+{:X}-U+{:X} is reversed", lo, hi);
          }
          ranges.push_back({lo, hi});
        }
        ++pos_;
        Item item{Item::kClass};
        item.ranges = negate ? complement(normalize(ranges)) : normalize(ranges);
        seq.push_back(std::move(item));
      } else if (c == '.') {
        ++pos_;
        Item item{Item::kClass};
        item.ranges = normalize({{0, kMaxCodePoint}});
        seq.push_back(std::move(item));
      } else if (c == '<' || (c == '!' && peek(1) == '<')) {
        const bool negate = c == '!';
        if (negate) ++pos_;
        seq.push_back(parse_token(negate));
      } else if (c == '!') {
        fail_at(at, "'!' must be followed by a token (<...>)");
      } else if (name_char(c)) {
        const std::string name = parse_name();
        skip_ws(false);
        if (text_.substr(pos_, 3) == "::=") fail_at(at, "missing newline before rule '{}'", name);
        Item item{Item::kRef};
        item.value = rule_id(name, at);
        seq.push_back(std::move(item));
      } else if (c == '(') {
        ++pos_;
        skip_ws(true);
        if (++depth_ > kMaxNesting) fail_at(at, "groups nested deeper than {}", kMaxNesting);
        Alternatives inner = parse_alternates(rule, true);
        --depth_;
        if (peek() != ')') fail_at(at, "unclosed '('");
        ++pos_;
        Item item{Item::kRef};
        item.value = new_helper(rule, std::move(inner));
        seq.push_back(std::move(item));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (seq.empty()) fail_at(at, "'{}' has nothing to repeat", c);
        uint64_t min = 0, max = UINT64_MAX;
        ++pos_;
        if (c == '+') {
          min = 1;
        } else if (c == '?') {
          max = 1;
        } else if (c == '{') {
          skip_ws(false);
          min = parse_int();
          skip_ws(false);
          max = min;
          if (peek() == ',') {
            ++pos_;
            skip_ws(false);
            max = (peek() == '}') ? UINT64_MAX : parse_int();
            skip_ws(false);
          }
          if (peek() != '}') fail_at(at, "expected '}}' to close the repetition");
          ++pos_;
          if (max < min) fail_at(at, "repetition {{{},{}}} has max < min", min, max);
          if (min > static_cast<uint64_t>(kMaxRepetition)) {
            fail_at(at, "repetition count {} is over the limit of {}", min, kMaxRepetition);
          }
          if (max != UINT64_MAX && max > static_cast<uint64_t>(kMaxRepetition)) max = UINT64_MAX;
        }
        repeat(rule, seq, min, max);
      } else if (c == ')' || c == '|') {
        if (c == ')' && !nested) fail_at(at, "unexpected ')'");
        break;
      } else if (c == '\n' || c == '\r') {
        if (!nested) break;
        skip_ws(true);
        continue;
      } else {
        fail_at(at, "unexpected character '{}'", c);
      }
      skip_ws(nested);
    }
    return seq;
  }

  Item parse_token(bool negate) {
    const size_t at = pos_;
    ++pos_;  // '<'
    if (peek() == '[') {
      ++pos_;
      const uint64_t id = parse_int();
      if (id > INT32_MAX) fail_at(at, "token id {} is too large", id);
      if (peek() != ']' || peek(1) != '>') fail_at(at, "expected ']>' after the token id");
      pos_ += 2;
      Item item{negate ? Item::kNotToken : Item::kToken};
      item.value = static_cast<uint32_t>(id);
      return item;
    }
    const size_t close = text_.find('>', pos_);
    const size_t eol = text_.find_first_of("\r\n", pos_);
    if (close == std::string_view::npos || (eol != std::string_view::npos && eol < close)) {
      fail_at(at, "unterminated token reference '<...>'");
    }
    const std::string token(text_.substr(at, close + 1 - at));
    pos_ = close + 1;
    Item item{negate ? Item::kNotTokenText : Item::kTokenText};
    const auto found = std::find(token_texts_.begin(), token_texts_.end(), token);
    item.value = static_cast<uint32_t>(found - token_texts_.begin());
    if (found == token_texts_.end()) token_texts_.push_back(token);
    return item;
  }

  // Replaces the last item of `seq` by its repetition {min,max} (max UINT64_MAX: unbounded).
  void repeat(const std::string& rule, Sequence& seq, uint64_t min, uint64_t max) {
    Item x = std::move(seq.back());
    seq.pop_back();
    // A multi-element item is wrapped in a rule, so that each copy is one reference.
    if (x.kind == Item::kLiteral && x.code_points.size() != 1) {
      Item ref{Item::kRef};
      ref.value = new_helper(rule, {{x}});
      x = std::move(ref);
    }
    auto ref_to = [](uint32_t id) {
      Item r{Item::kRef};
      r.value = id;
      return r;
    };
    for (uint64_t i = 0; i < min; ++i) seq.push_back(x);
    if (max == UINT64_MAX) {
      // R ::= x R | ""
      const uint32_t star = new_helper(rule, {});
      rules_[star] = {{x, ref_to(star)}, {}};
      seq.push_back(ref_to(star));
      return;
    }
    // O_k ::= x O_{k-1} | ""   (O_1 ::= x | "")
    uint32_t chain = 0;
    bool have_chain = false;
    for (uint64_t k = 1; k <= max - min; ++k) {
      Sequence first{x};
      if (have_chain) first.push_back(ref_to(chain));
      chain = new_helper(rule, {std::move(first), {}});
      have_chain = true;
    }
    if (have_chain) seq.push_back(ref_to(chain));
  }

  // ---- lowering to byte-level elements ----
  uint32_t intern_set(const ByteSet& set) {
    auto [it, inserted] = set_ids_.try_emplace(set, static_cast<uint32_t>(g_->byte_sets.size()));
    if (inserted) g_->byte_sets.push_back(set);
    return it->second;
  }
  void emit(ElementKind kind, uint32_t value) {
    if (g_->elements.size() >= kMaxElements) {
      fail("grammar: more than {} compiled elements; simplify the grammar", kMaxElements);
    }
    g_->elements.push_back({kind, value});
  }
  void emit_code_point(uint32_t cp) {
    uint8_t bytes[4];
    encode(cp, bytes);
    for (int i = 0; i < utf8_length(cp); ++i) {
      emit(ElementKind::kBytes, intern_set(byte_range(bytes[i], bytes[i])));
    }
  }
  // A class: its single-byte part as one byte set, each multi-byte range split as a sequence.
  std::vector<std::vector<uint32_t>> class_sequences(const Ranges& ranges) {
    std::vector<ByteSeq> seqs;
    for (auto [lo, hi] : ranges) split_utf8(lo, hi, seqs);
    std::vector<std::vector<uint32_t>> out;
    ByteSet ascii{};
    bool have_ascii = false;
    for (const ByteSeq& s : seqs) {
      if (s.size() == 1) {
        const ByteSet r = byte_range(s[0].first, s[0].second);
        for (int w = 0; w < 4; ++w) ascii[w] |= r[w];
        have_ascii = true;
      }
    }
    if (have_ascii) out.push_back({intern_set(ascii)});
    for (const ByteSeq& s : seqs) {
      if (s.size() == 1) continue;
      std::vector<uint32_t> ids;
      for (auto [lo, hi] : s) ids.push_back(intern_set(byte_range(lo, hi)));
      out.push_back(std::move(ids));
    }
    return out;
  }
  void emit_item(const Item& item) {
    switch (item.kind) {
      case Item::kLiteral:
        for (uint32_t cp : item.code_points) emit_code_point(cp);
        return;
      case Item::kClass: {
        auto [it, inserted] = class_rules_.try_emplace(item.ranges, UINT32_MAX);
        if (inserted) {
          auto seqs = class_sequences(item.ranges);
          if (seqs.empty()) {
            // An empty class ([^\x00-\U0010FFFF]) matches nothing: a rule without alternatives
            // that can be entered is modelled by a byte set with no byte.
            seqs.push_back({intern_set(ByteSet{})});
          }
          if (seqs.size() == 1) {
            it->second = UINT32_MAX - 1;  // inline
            inline_classes_[item.ranges] = seqs[0];
          } else {
            it->second = static_cast<uint32_t>(g_->rules.size());
            pending_classes_.push_back({it->second, std::move(seqs)});
            g_->rules.emplace_back();
            g_->rule_names.push_back(fmt::format("class-{}", it->second));
          }
        }
        if (it->second == UINT32_MAX - 1) {
          for (uint32_t id : inline_classes_[item.ranges]) emit(ElementKind::kBytes, id);
        } else {
          emit(ElementKind::kRule, it->second);
        }
        return;
      }
      case Item::kRef:
        emit(ElementKind::kRule, item.value);
        return;
      case Item::kToken:
        emit(ElementKind::kToken, item.value);
        return;
      case Item::kNotToken:
        emit(ElementKind::kNotToken, item.value);
        return;
      case Item::kTokenText:
        emit(ElementKind::kTokenText, item.value);
        return;
      case Item::kNotTokenText:
        emit(ElementKind::kNotTokenText, item.value);
        return;
    }
  }

  std::shared_ptr<Grammar> lower(uint32_t root) {
    g_ = std::make_shared<Grammar>();
    g_->rules.resize(rules_.size());
    g_->rule_names = names_;
    g_->token_texts = token_texts_;
    g_->root = root;
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Sequence& seq : rules_[r]) {
        g_->rules[r].push_back(static_cast<uint32_t>(g_->elements.size()));
        for (const Item& item : seq) emit_item(item);
        emit(ElementKind::kEnd, 0);
      }
    }
    for (auto& [id, seqs] : pending_classes_) {
      for (const auto& seq : seqs) {
        g_->rules[id].push_back(static_cast<uint32_t>(g_->elements.size()));
        for (uint32_t set : seq) emit(ElementKind::kBytes, set);
        emit(ElementKind::kEnd, 0);
      }
    }
    check_left_recursion();
    return std::move(g_);
  }

  void check_left_recursion() {
    const Grammar& g = *g_;
    const size_t n = g.rules.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t start : g.rules[r]) {
          bool all = true;
          for (uint32_t p = start; g.elements[p].kind != ElementKind::kEnd; ++p) {
            const Element& e = g.elements[p];
            if (e.kind != ElementKind::kRule || !nullable[e.value]) {
              all = false;
              break;
            }
          }
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    // Edges r -> s when s can be entered before r consumed anything.
    std::vector<std::vector<uint32_t>> first(n);
    for (size_t r = 0; r < n; ++r) {
      for (uint32_t start : g.rules[r]) {
        for (uint32_t p = start; g.elements[p].kind == ElementKind::kRule; ++p) {
          first[r].push_back(g.elements[p].value);
          if (!nullable[g.elements[p].value]) break;
        }
      }
    }
    // Iterative DFS for a cycle.
    std::vector<uint8_t> color(n, 0);
    for (size_t s = 0; s < n; ++s) {
      if (color[s] != 0) continue;
      std::vector<std::pair<uint32_t, size_t>> stack{{static_cast<uint32_t>(s), 0}};
      color[s] = 1;
      while (!stack.empty()) {
        auto& [r, i] = stack.back();
        if (i < first[r].size()) {
          const uint32_t t = first[r][i++];
          if (color[t] == 1) {
            // Name the user's rule, not a helper, when the cycle runs through one.
            std::string name = g.rule_names[t];
            for (auto& [u, _] : stack) {
              if (ids_.contains(g.rule_names[u])) {
                name = g.rule_names[u];
                break;
              }
            }
            fail(
                "grammar: left recursion in rule '{}' (a rule that can reach itself before "
                "consuming any text)",
                name);
          }
          if (color[t] == 0) {
            color[t] = 1;
            stack.push_back({t, 0});
          }
        } else {
          color[r] = 2;
          stack.pop_back();
        }
      }
    }
  }

  static constexpr int kMaxNesting = 256;  // parenthesised groups inside each other
  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<Alternatives> rules_;
  std::vector<std::string> names_;
  std::vector<char> defined_;
  std::vector<size_t> first_use_;
  std::map<std::string, uint32_t> ids_;
  std::vector<std::string> token_texts_;

  std::shared_ptr<Grammar> g_;
  std::map<ByteSet, uint32_t> set_ids_;
  std::map<Ranges, uint32_t> class_rules_;
  std::map<Ranges, std::vector<uint32_t>> inline_classes_;
  std::vector<std::pair<uint32_t, std::vector<std::vector<uint32_t>>>> pending_classes_;
};

}  // namespace

int32_t decode_utf8(std::string_view s, size_t* pos) {
  const size_t i = *pos;
  if (i >= s.size()) return -1;
  const uint8_t b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  }
  int n;
  uint32_t cp;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return -1;
  }
  if (i + static_cast<size_t>(n) > s.size()) return -1;
  for (int k = 1; k < n; ++k) {
    const uint8_t b = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
    if ((b & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (utf8_length(cp) != n || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  *pos = i + static_cast<size_t>(n);
  return static_cast<int32_t>(cp);
}

std::shared_ptr<const Grammar> parse_gbnf(std::string_view text, std::string_view root) {
  Parser parser(text);
  return parser.parse(root);
}

std::shared_ptr<const Grammar> cached_gbnf(std::string_view text) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<const Grammar>> cache;
  constexpr size_t kMaxEntries = 64;
  {
    std::lock_guard lock(mutex);
    const auto it = cache.find(std::string(text));
    if (it != cache.end()) return it->second;
  }
  auto compiled = parse_gbnf(text);
  std::lock_guard lock(mutex);
  if (cache.size() >= kMaxEntries) cache.clear();
  cache.emplace(std::string(text), compiled);
  return compiled;
}

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out += fmt::format("\\x{:02X}", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out += '"';
  return out;
}

std::string Grammar::dump() const {
  auto set_text = [&](const ByteSet& set) {
    std::string out = "[";
    for (int b = 0; b < 256;) {
      if (!byte_in(set, static_cast<uint8_t>(b))) {
        ++b;
        continue;
      }
      int e = b;
      while (e + 1 < 256 && byte_in(set, static_cast<uint8_t>(e + 1))) ++e;
      out += e == b ? fmt::format("{:02X}", b) : fmt::format("{:02X}-{:02X}", b, e);
      out += ' ';
      b = e + 1;
    }
    if (out.size() > 1) out.pop_back();
    return out + "]";
  };
  std::string out;
  for (size_t r = 0; r < rules.size(); ++r) {
    out += rule_names[r] + " ::=";
    for (size_t a = 0; a < rules[r].size(); ++a) {
      if (a > 0) out += " |";
      for (uint32_t p = rules[r][a]; elements[p].kind != ElementKind::kEnd; ++p) {
        const Element& e = elements[p];
        out += ' ';
        switch (e.kind) {
          case ElementKind::kBytes:
            out += set_text(byte_sets[e.value]);
            break;
          case ElementKind::kRule:
            out += rule_names[e.value];
            break;
          case ElementKind::kToken:
            out += fmt::format("<[{}]>", e.value);
            break;
          case ElementKind::kNotToken:
            out += fmt::format("!<[{}]>", e.value);
            break;
          case ElementKind::kTokenText:
            out += token_texts[e.value];
            break;
          case ElementKind::kNotTokenText:
            out += "!" + token_texts[e.value];
            break;
          case ElementKind::kEnd:
            break;
        }
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace boltrt::grammar
