#include "grammar/regex.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "util/error.h"

namespace boltrt::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr uint32_t kMaxCp = 0x10FFFF;
constexpr size_t kMaxNfaStates = 20000;
constexpr size_t kMaxProductStates = 60000;

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  Ranges clean;  // no surrogates: they are not characters a JSON string can hold
  for (auto [lo, hi] : out) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      clean.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) clean.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) clean.push_back({0xE000, hi});
  }
  return clean;
}

Ranges complement(const Ranges& in) {
  const Ranges r = normalize(in);
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCp) out.push_back({next, kMaxCp});
  return normalize(out);
}

Ranges intersect(const Ranges& a, const Ranges& b) {
  Ranges out;
  for (auto [alo, ahi] : a) {
    for (auto [blo, bhi] : b) {
      const uint32_t lo = std::max(alo, blo), hi = std::min(ahi, bhi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  }
  return normalize(out);
}

Ranges digits() {
  return {{'0', '9'}};
}
Ranges word() {
  return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
}
Ranges space() {  // ECMA-262 WhiteSpace and LineTerminator
  return normalize({{'\t', '\r'},
                    {' ', ' '},
                    {0xA0, 0xA0},
                    {0x1680, 0x1680},
                    {0x2000, 0x200A},
                    {0x2028, 0x2029},
                    {0x202F, 0x202F},
                    {0x205F, 0x205F},
                    {0x3000, 0x3000},
                    {0xFEFF, 0xFEFF}});
}

struct Node {
  enum Kind { kSet, kConcat, kAlt, kRepeat, kStart, kEnd } kind;
  Ranges set;
  std::vector<std::unique_ptr<Node>> children;
  int64_t min = 0, max = -1;  // kRepeat; max -1: unbounded
};
using NodePtr = std::unique_ptr<Node>;

NodePtr make(Node::Kind kind) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  return n;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view p) : p_(p) {}

  NodePtr parse() {
    NodePtr n = parse_alt();
    if (pos_ < p_.size()) fail_here("unbalanced ')'");
    return n;
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail_here(fmt::format_string<Args...> format, Args&&... args) const {
    throw Error(fmt::format("pattern '{}': {} (at character {})", p_,
                            fmt::format(format, std::forward<Args>(args)...), pos_ + 1));
  }
  bool more() const { return pos_ < p_.size(); }
  char peek() const { return more() ? p_[pos_] : '\0'; }

  uint32_t next_cp() {
    const int32_t cp = decode_utf8(p_, &pos_);
    if (cp < 0) fail_here("invalid UTF-8");
    return static_cast<uint32_t>(cp);
  }

  NodePtr parse_alt() {
    NodePtr first = parse_concat();
    if (peek() != '|') return first;
    NodePtr alt = make(Node::kAlt);
    alt->children.push_back(std::move(first));
    while (peek() == '|') {
      ++pos_;
      alt->children.push_back(parse_concat());
    }
    return alt;
  }

  NodePtr parse_concat() {
    NodePtr seq = make(Node::kConcat);
    while (more() && peek() != '|' && peek() != ')') seq->children.push_back(parse_repeat());
    return seq;
  }

  int64_t parse_count() {
    const size_t start = pos_;
    int64_t v = 0;
    while (more() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 100000) fail_here("repetition count too large");
      ++pos_;
    }
    if (pos_ == start) return -1;
    return v;
  }

  NodePtr parse_repeat() {
    NodePtr atom = parse_atom();
    while (more()) {
      const char c = peek();
      int64_t min, max;
      if (c == '*') {
        min = 0, max = -1;
        ++pos_;
      } else if (c == '+') {
        min = 1, max = -1;
        ++pos_;
      } else if (c == '?') {
        min = 0, max = 1;
        ++pos_;
      } else if (c == '{') {
        const size_t save = pos_;
        ++pos_;
        min = parse_count();
        if (min < 0) {  // a literal '{' (ECMA annex B)
          pos_ = save;
          break;
        }
        max = min;
        if (peek() == ',') {
          ++pos_;
          max = parse_count();  // -1: unbounded
        }
        if (peek() != '}') fail_here("expected '}}' to close a repetition");
        ++pos_;
        if (max >= 0 && max < min) fail_here("repetition {{{},{}}} has max < min", min, max);
      } else {
        break;
      }
      if (atom->kind == Node::kStart || atom->kind == Node::kEnd) {
        fail_here("a quantifier cannot follow an anchor");
      }
      if (peek() == '?') ++pos_;  // lazy: same language
      if (peek() == '+') fail_here("possessive quantifiers are not supported");
      NodePtr rep = make(Node::kRepeat);
      rep->min = min;
      rep->max = max;
      rep->children.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  // An escape after '\' (pos_ at the escaped character): a single code point or a class.
  Ranges parse_escape(bool in_class) {
    if (!more()) fail_here("pattern ends with '\\'");
    const size_t escape_at = pos_ - 1;  // the backslash, for messages
    const char e = peek();
    ++pos_;
    switch (e) {
      case 'd':
        return digits();
      case 'D':
        return complement(digits());
      case 'w':
        return word();
      case 'W':
        return complement(word());
      case 's':
        return space();
      case 'S':
        return complement(space());
      case 'n':
        return {{'\n', '\n'}};
      case 't':
        return {{'\t', '\t'}};
      case 'r':
        return {{'\r', '\r'}};
      case 'f':
        return {{'\f', '\f'}};
      case 'v':
        return {{'\v', '\v'}};
      case '0':
        return {{0, 0}};
      case 'b':
        if (in_class) return {{8, 8}};
        fail_here("word boundaries (\\b) are not supported");
      case 'B':
        fail_here("word boundaries (\\B) are not supported");
      case 'x':
      case 'u': {
        const size_t n = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (size_t i = 0; i < n; ++i) {
          const char h = peek();
          int d = (h >= '0' && h <= '9')   ? h - '0'
                  : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                  : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                           : -1;
          if (d < 0) fail_here("\\{} needs {} hex digits", e, n);
          v = v * 16 + static_cast<uint32_t>(d);
          ++pos_;
        }
        return {{v, v}};
      }
      default:
        if (e >= '1' && e <= '9') {
          pos_ = escape_at;
          fail_here("backreferences are not supported");
        }
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          pos_ = escape_at;
          fail_here("unknown escape '\\{}'", e);
        }
        --pos_;
        {
          const uint32_t cp = next_cp();
          return {{cp, cp}};
        }
    }
  }

  NodePtr parse_atom() {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        ++pos_;
        if (peek() == ':') {
          ++pos_;
        } else if (peek() == '<' && pos_ + 1 < p_.size() && p_[pos_ + 1] != '=' &&
                   p_[pos_ + 1] != '!') {
          while (more() && peek() != '>') ++pos_;  // a named group: the name is dropped
          if (!more()) fail_here("unterminated group name");
          ++pos_;
        } else {
          fail_here("lookarounds are not supported");
        }
      }
      if (++depth_ > 256) fail_here("groups nested deeper than 256");
      NodePtr inner = parse_alt();
      --depth_;
      if (peek() != ')') fail_here("missing ')'");
      ++pos_;
      return inner;
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      NodePtr n = make(Node::kSet);
      n->set = complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});
      return n;
    }
    if (c == '^') {
      ++pos_;
      return make(Node::kStart);
    }
    if (c == '$') {
      ++pos_;
      return make(Node::kEnd);
    }
    if (c == '*' || c == '+' || c == '?') fail_here("'{}' has nothing to repeat", c);
    NodePtr n = make(Node::kSet);
    if (c == '\\') {
      ++pos_;
      n->set = normalize(parse_escape(false));
    } else {
      const uint32_t cp = next_cp();
      n->set = normalize({{cp, cp}});
    }
    return n;
  }

  NodePtr parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^') {
      negate = true;
      ++pos_;
    }
    Ranges ranges;
    bool first = true;
    while (true) {
      if (!more()) fail_here("unterminated character class");
      if (peek() == ']' && !first) break;
      first = false;
      Ranges lo_set;
      if (peek() == '\\') {
        ++pos_;
        lo_set = parse_escape(true);
      } else {
        const uint32_t cp = next_cp();
        lo_set = {{cp, cp}};
      }
      if (peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        Ranges hi_set;
        if (peek() == '\\') {
          ++pos_;
          hi_set = parse_escape(true);
        } else {
          const uint32_t cp = next_cp();
          hi_set = {{cp, cp}};
        }
        if (lo_set.size() != 1 || hi_set.size() != 1 || lo_set[0].first != lo_set[0].second ||
            hi_set[0].first != hi_set[0].second) {
          fail_here("a class range needs single characters at both ends");
        }
        if (hi_set[0].first < lo_set[0].first) fail_here("reversed class range");
        ranges.push_back({lo_set[0].first, hi_set[0].first});
      } else {
        ranges.insert(ranges.end(), lo_set.begin(), lo_set.end());
      }
    }
    ++pos_;  // ']'
    NodePtr n = make(Node::kSet);
    n->set = negate ? complement(ranges) : normalize(ranges);
    return n;
  }

  std::string_view p_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// ---- NFA ----
struct Nfa {
  struct State {
    std::vector<int> eps;
    std::vector<std::pair<Ranges, int>> edges;
  };
  std::vector<State> states;
  std::string pattern;

  int add() {
    if (states.size() >= kMaxNfaStates) {
      fail("pattern '{}': more than {} automaton states (counted repetitions too large)", pattern,
           kMaxNfaStates);
    }
    states.emplace_back();
    return static_cast<int>(states.size()) - 1;
  }

  // Returns (start, end) of a fragment for `n`.
  std::pair<int, int> build(const Node& n) {
    switch (n.kind) {
      case Node::kSet: {
        const int s = add(), e = add();
        if (!n.set.empty()) states[static_cast<size_t>(s)].edges.push_back({n.set, e});
        return {s, e};
      }
      case Node::kConcat: {
        const int s = add();
        int cur = s;
        for (const auto& c : n.children) {
          if (c->kind == Node::kStart || c->kind == Node::kEnd) {
            fail("pattern '{}': anchors (^ $) are only supported at the start and the end",
                 pattern);
          }
          auto [cs, ce] = build(*c);
          states[static_cast<size_t>(cur)].eps.push_back(cs);
          cur = ce;
        }
        return {s, cur};
      }
      case Node::kAlt: {
        const int s = add(), e = add();
        for (const auto& c : n.children) {
          auto [cs, ce] = build(*c);
          states[static_cast<size_t>(s)].eps.push_back(cs);
          states[static_cast<size_t>(ce)].eps.push_back(e);
        }
        return {s, e};
      }
      case Node::kRepeat: {
        const int s = add();
        int cur = s;
        for (int64_t i = 0; i < n.min; ++i) {
          auto [cs, ce] = build(*n.children[0]);
          states[static_cast<size_t>(cur)].eps.push_back(cs);
          cur = ce;
        }
        if (n.max < 0) {
          auto [cs, ce] = build(*n.children[0]);
          const int e = add();
          states[static_cast<size_t>(cur)].eps.push_back(cs);
          states[static_cast<size_t>(cur)].eps.push_back(e);
          states[static_cast<size_t>(ce)].eps.push_back(cs);
          states[static_cast<size_t>(ce)].eps.push_back(e);
          return {s, e};
        }
        const int e = add();
        for (int64_t i = n.min; i < n.max; ++i) {
          auto [cs, ce] = build(*n.children[0]);
          states[static_cast<size_t>(cur)].eps.push_back(cs);
          states[static_cast<size_t>(cur)].eps.push_back(e);
          cur = ce;
        }
        states[static_cast<size_t>(cur)].eps.push_back(e);
        return {s, e};
      }
      case Node::kStart:
      case Node::kEnd:
        fail("pattern '{}': anchors (^ $) are only supported at the start and the end", pattern);
    }
    return {0, 0};
  }
};

NodePtr any_star() {
  NodePtr set = make(Node::kSet);
  set->set = normalize({{0, kMaxCp}});
  NodePtr rep = make(Node::kRepeat);
  rep->min = 0;
  rep->max = -1;
  rep->children.push_back(std::move(set));
  return rep;
}

// A top-level branch with its anchors replaced: no '^' -> any text before, no '$' -> after.
NodePtr anchor_branch(NodePtr branch) {
  if (branch->kind != Node::kConcat) {
    NodePtr seq = make(Node::kConcat);
    seq->children.push_back(std::move(branch));
    branch = std::move(seq);
  }
  auto& c = branch->children;
  const bool start = !c.empty() && c.front()->kind == Node::kStart;
  if (start) c.erase(c.begin());
  const bool end = !c.empty() && c.back()->kind == Node::kEnd;
  if (end) c.pop_back();
  if (!start) c.insert(c.begin(), any_star());
  if (!end) c.push_back(any_star());
  return branch;
}

std::string class_char(uint32_t cp) {
  if (cp >= 0x21 && cp <= 0x7E && cp != '\\' && cp != ']' && cp != '[' && cp != '-' && cp != '^' &&
      cp != '"') {
    return std::string(1, static_cast<char>(cp));
  }
  if (cp <= 0xFF) return fmt::format("\\x{:02X}", cp);
  if (cp <= 0xFFFF) return fmt::format("\\u{:04X}", cp);
  return fmt::format("\\U{:08X}", cp);
}

std::string raw_char_class(const Ranges& set) {
  std::string cls = "[";
  for (auto [lo, hi] : set) {
    cls += class_char(lo);
    if (hi != lo) {
      cls += '-';
      cls += class_char(hi);
    }
  }
  return cls + "]";
}

}  // namespace

std::string json_char_group(const Ranges& ranges_in) {
  const Ranges ranges = normalize(ranges_in);
  const Ranges special = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  const Ranges raw = intersect(ranges, complement(special));
  std::vector<std::string> alts;
  if (!raw.empty()) {
    std::string cls = "[";
    for (auto [lo, hi] : raw) {
      cls += class_char(lo);
      if (hi != lo) {
        cls += '-';
        cls += class_char(hi);
      }
    }
    alts.push_back(cls + "]");
  }
  for (auto [lo, hi] : intersect(ranges, special)) {
    for (uint32_t cp = lo; cp <= hi; ++cp) {
      switch (cp) {
        case '"':
          alts.push_back("\"\\\\\\\"\"");
          break;
        case '\\':
          alts.push_back("\"\\\\\\\\\"");
          break;
        case '\n':
          alts.push_back("\"\\\\n\"");
          break;
        case '\r':
          alts.push_back("\"\\\\r\"");
          break;
        case '\t':
          alts.push_back("\"\\\\t\"");
          break;
        case '\b':
          alts.push_back("\"\\\\b\"");
          break;
        case '\f':
          alts.push_back("\"\\\\f\"");
          break;
        default:
          alts.push_back(fmt::format("\"\\\\u{:04x}\"", cp));
      }
    }
  }
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

std::string regex_body_rules(std::string_view pattern, int64_t min_length, int64_t max_length,
                             const std::string& prefix, std::string& rules, bool raw) {
  NodePtr tree = RegexParser(pattern).parse();
  // Anchors per top-level branch.
  NodePtr top = make(Node::kAlt);
  if (tree->kind == Node::kAlt) {
    for (auto& b : tree->children) top->children.push_back(anchor_branch(std::move(b)));
  } else {
    top->children.push_back(anchor_branch(std::move(tree)));
  }
  Nfa nfa;
  nfa.pattern = std::string(pattern);
  const auto [start, final_state] = nfa.build(*top);
  const size_t n = nfa.states.size();

  // Epsilon closures.
  std::vector<std::vector<int>> closure(n);
  for (size_t s = 0; s < n; ++s) {
    std::vector<char> seen(n, 0);
    std::vector<int> work{static_cast<int>(s)};
    seen[s] = 1;
    while (!work.empty()) {
      const int q = work.back();
      work.pop_back();
      closure[s].push_back(q);
      for (int t : nfa.states[static_cast<size_t>(q)].eps) {
        if (!seen[static_cast<size_t>(t)]) {
          seen[static_cast<size_t>(t)] = 1;
          work.push_back(t);
        }
      }
    }
  }
  // Epsilon-free: accepting(s), edges(s) merged per target.
  std::vector<char> accepting(n, 0);
  std::vector<std::map<int, Ranges>> edges(n);
  for (size_t s = 0; s < n; ++s) {
    for (int q : closure[s]) {
      if (q == final_state) accepting[s] = 1;
      for (const auto& [set, t] : nfa.states[static_cast<size_t>(q)].edges) {
        Ranges& r = edges[s][t];
        r.insert(r.end(), set.begin(), set.end());
      }
    }
    for (auto& [t, r] : edges[s]) {
      r = normalize(r);
      if (raw) r = intersect(r, complement({{'<', '<'}, {0, 0}}));
    }
  }

  // Product with the length counter: (state, count). count saturates at min_length when there
  // is no maximum.
  const bool bounded = max_length >= 0;
  const int64_t cap = bounded ? max_length : min_length;
  auto key = [&](int s, int64_t c) { return static_cast<int64_t>(s) * (cap + 1) + c; };
  std::map<int64_t, std::vector<std::pair<std::string, int64_t>>> out_edges;  // key -> (group, key)
  std::map<int64_t, bool> final_of;
  std::vector<std::pair<int, int64_t>> work{{start, 0}};
  std::set<int64_t> seen{key(start, 0)};
  std::map<const Ranges*, std::string> group_cache;
  while (!work.empty()) {
    auto [s, c] = work.back();
    work.pop_back();
    const int64_t k = key(s, c);
    final_of[k] = accepting[static_cast<size_t>(s)] && c >= min_length;
    auto& list = out_edges[k];
    for (const auto& [t, set] : edges[static_cast<size_t>(s)]) {
      if (set.empty()) continue;
      if (bounded && c + 1 > max_length) continue;
      const int64_t nc = bounded ? c + 1 : std::min(c + 1, cap);
      const int64_t nk = key(t, nc);
      auto [it, inserted] = group_cache.try_emplace(&set, std::string());
      if (inserted) it->second = raw ? raw_char_class(set) : json_char_group(set);
      list.push_back({it->second, nk});
      if (seen.insert(nk).second) {
        if (seen.size() > kMaxProductStates) {
          fail("pattern '{}' with length bounds {}..{} needs more than {} states", pattern,
               min_length, max_length, kMaxProductStates);
        }
        work.push_back({t, nc});
      }
    }
  }
  // Productive states: those that reach a final one.
  std::set<int64_t> productive;
  for (auto& [k, f] : final_of) {
    if (f) productive.insert(k);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [k, list] : out_edges) {
      if (productive.contains(k)) continue;
      for (auto& [g, nk] : list) {
        if (productive.contains(nk)) {
          productive.insert(k);
          changed = true;
          break;
        }
      }
    }
  }
  const int64_t start_key = key(start, 0);
  if (!productive.contains(start_key)) {
    fail("pattern '{}' admits no string of length {}..{}", pattern, min_length,
         max_length < 0 ? std::string("unbounded") : std::to_string(max_length));
  }
  std::map<int64_t, std::string> names;
  auto name_of = [&](int64_t k) {
    auto [it, inserted] = names.try_emplace(k, std::string());
    if (inserted) it->second = fmt::format("{}-{}", prefix, names.size() - 1);
    return it->second;
  };
  const std::string entry = name_of(start_key);
  std::vector<int64_t> order{start_key};
  std::set<int64_t> emitted{start_key};
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t k = order[i];
    std::vector<std::string> alts;
    for (auto& [g, nk] : out_edges[k]) {
      if (!productive.contains(nk)) continue;
      alts.push_back(g + " " + name_of(nk));
      if (emitted.insert(nk).second) order.push_back(nk);
    }
    if (final_of[k]) alts.push_back("\"\"");
    std::string line = name_of(k) + " ::=";
    for (size_t a = 0; a < alts.size(); ++a) line += (a ? " | " : " ") + alts[a];
    rules += line + "\n";
  }
  return entry;
}

}  // namespace boltrt::grammar
