#include "text/peg.h"

#include <cctype>

namespace boltrt::text::peg {

namespace {

enum class Utf8 { kOk, kIncomplete, kInvalid };

// One code point by bit pattern; a sequence cut off by the end of the input is "incomplete".
Utf8 decode(std::string_view s, size_t at, uint32_t* cp, size_t* len) {
  if (at >= s.size()) return Utf8::kIncomplete;
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[at + k]); };
  const auto cont = [&](size_t k) { return (b(k) & 0xC0) == 0x80; };
  const uint8_t c = b(0);
  if (!(c & 0x80)) {
    *cp = c;
    *len = 1;
    return Utf8::kOk;
  }
  if (!(c & 0x40)) return Utf8::kInvalid;
  size_t n;
  uint32_t v;
  if (!(c & 0x20)) {
    n = 2;
    v = c & 0x1F;
  } else if (!(c & 0x10)) {
    n = 3;
    v = c & 0x0F;
  } else if (!(c & 0x08)) {
    n = 4;
    v = c & 0x07;
  } else {
    return Utf8::kInvalid;
  }
  if (at + n - 1 >= s.size()) return Utf8::kIncomplete;
  for (size_t k = 1; k < n; ++k) {
    if (!cont(k)) return Utf8::kInvalid;
    v = (v << 6) | (b(k) & 0x3F);
  }
  *cp = v;
  *len = n;
  return Utf8::kOk;
}

Parser make(std::function<Result(Context&, size_t)> f) {
  return std::make_shared<const std::function<Result(Context&, size_t)>>(std::move(f));
}

Result ok(size_t b, size_t e, std::vector<int> nodes = {}) {
  return {Status::kOk, b, e, std::move(nodes)};
}
Result more(size_t b, size_t e, std::vector<int> nodes = {}) {
  return {Status::kMore, b, e, std::move(nodes)};
}
Result failed(size_t b, size_t e) {
  return {Status::kFail, b, e, {}};
}

void append(std::vector<int>& to, const std::vector<int>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

enum class Match { kNone, kPartial, kComplete };

// Does one of `delims` (as code points) start at `pos`? kPartial: the input ends (or stops
// being valid UTF-8) inside a delimiter.
Match check_at(std::string_view s, size_t pos, const std::vector<std::vector<uint32_t>>& delims) {
  std::vector<bool> alive(delims.size(), true);
  size_t depth = 0;
  while (pos < s.size()) {
    uint32_t cp;
    size_t len;
    if (decode(s, pos, &cp, &len) != Utf8::kOk) break;
    bool any = false;
    for (size_t d = 0; d < delims.size(); ++d) {
      if (!alive[d]) continue;
      if (depth < delims[d].size() && delims[d][depth] == cp) {
        any = true;
        if (depth + 1 == delims[d].size()) return Match::kComplete;
      } else {
        alive[d] = false;
      }
    }
    if (!any) return Match::kNone;
    ++depth;
    pos += len;
  }
  return depth > 0 ? Match::kPartial : Match::kNone;
}

}  // namespace

Parser literal(std::string text) {
  return make([text = std::move(text)](Context& ctx, size_t start) {
    size_t pos = start;
    for (char c : text) {
      if (pos >= ctx.input.size()) return more(start, pos);
      if (ctx.input[pos] != c) return failed(start, start);
      ++pos;
    }
    return ok(start, pos);
  });
}

Parser sequence(std::vector<Parser> parts) {
  return make([parts = std::move(parts)](Context& ctx, size_t start) {
    size_t pos = start;
    std::vector<int> nodes;
    for (const Parser& p : parts) {
      Result r = parse(p, ctx, pos);
      if (r.fail()) return failed(start, r.end);
      append(nodes, r.nodes);
      if (r.status == Status::kMore) return more(start, r.end, std::move(nodes));
      pos = r.end;
    }
    return ok(start, pos, std::move(nodes));
  });
}

Parser choice(std::vector<Parser> alternatives) {
  return make([alternatives = std::move(alternatives)](Context& ctx, size_t start) {
    for (const Parser& p : alternatives) {
      Result r = parse(p, ctx, start);
      if (!r.fail()) return r;
    }
    return failed(start, start);
  });
}

Parser repeat(Parser p, int min_count, int max_count) {
  return make([p = std::move(p), min_count, max_count](Context& ctx, size_t start) {
    size_t pos = start;
    int count = 0;
    std::vector<int> nodes;
    while (max_count == -1 || count < max_count) {
      if (pos >= ctx.input.size()) break;
      Result r = parse(p, ctx, pos);
      if (r.status == Status::kOk) {
        if (r.end == pos) break;  // an empty match would loop forever
        append(nodes, r.nodes);
        pos = r.end;
        ++count;
        continue;
      }
      if (r.status == Status::kMore) {
        append(nodes, r.nodes);
        return more(start, r.end, std::move(nodes));
      }
      break;
    }
    if (min_count > 0 && count < min_count) {
      if (pos >= ctx.input.size()) return more(start, pos, std::move(nodes));
      return failed(start, pos);
    }
    return ok(start, pos, std::move(nodes));
  });
}

Parser peek(Parser p) {
  return make([p = std::move(p)](Context& ctx, size_t start) {
    Result r = parse(p, ctx, start);
    return Result{r.status, start, start, {}};
  });
}

Parser negate(Parser p) {
  return make([p = std::move(p)](Context& ctx, size_t start) {
    Result r = parse(p, ctx, start);
    if (r.status == Status::kOk) return failed(start, start);
    if (r.status == Status::kMore) return more(start, start);
    return ok(start, start);
  });
}

Parser space() {
  return make([](Context& ctx, size_t start) {
    size_t pos = start;
    while (pos < ctx.input.size() && std::isspace(static_cast<unsigned char>(ctx.input[pos])))
      ++pos;
    return ok(start, pos);
  });
}

Parser until(std::vector<std::string> delimiters) {
  std::vector<std::vector<uint32_t>> delims;
  for (const std::string& d : delimiters) {
    std::vector<uint32_t> cps;
    for (size_t at = 0; at < d.size();) {
      uint32_t cp = 0;
      size_t len = 1;
      if (decode(d, at, &cp, &len) != Utf8::kOk) cp = static_cast<uint8_t>(d[at]), len = 1;
      cps.push_back(cp);
      at += len;
    }
    delims.push_back(std::move(cps));
  }
  return make([delims = std::move(delims)](Context& ctx, size_t start) {
    size_t pos = start, last_valid = start;
    while (pos < ctx.input.size()) {
      uint32_t cp;
      size_t len;
      const Utf8 u = decode(ctx.input, pos, &cp, &len);
      if (u == Utf8::kIncomplete) return more(start, last_valid);
      if (u == Utf8::kInvalid) return failed(start, start);
      if (!delims.empty() && check_at(ctx.input, pos, delims) != Match::kNone)
        return ok(start, pos);
      pos += len;
      last_valid = pos;
    }
    if (last_valid == ctx.input.size()) return more(start, last_valid);
    return ok(start, last_valid);
  });
}

Parser chars(std::function<bool(uint32_t)> accept, int min_count, int max_count) {
  return make([accept = std::move(accept), min_count, max_count](Context& ctx, size_t start) {
    size_t pos = start;
    int count = 0;
    while (max_count == -1 || count < max_count) {
      uint32_t cp;
      size_t len;
      const Utf8 u = decode(ctx.input, pos, &cp, &len);
      if (u == Utf8::kIncomplete) {
        if (count >= min_count) return ok(start, pos);
        return more(start, pos);
      }
      if (u == Utf8::kInvalid) {
        if (count >= min_count) return ok(start, pos);
        return failed(start, start);
      }
      if (!accept(cp)) break;
      pos += len;
      ++count;
    }
    if (count < min_count) {
      if (pos >= ctx.input.size()) return more(start, pos);
      return failed(start, pos);
    }
    return ok(start, pos);
  });
}

Parser json_number() {
  auto digit = [](uint32_t c) { return c >= '0' && c <= '9'; };
  auto digits = chars(digit, 1, -1);
  auto int_part =
      choice({literal("0"), sequence({chars([](uint32_t c) { return c >= '1' && c <= '9'; }, 1, 1),
                                      chars(digit, 0, -1)})});
  auto frac = sequence({literal("."), digits});
  auto exp =
      sequence({choice({literal("e"), literal("E")}),
                optional(chars([](uint32_t c) { return c == '+' || c == '-'; }, 1, 1)), digits});
  // Commit a number only when the next character cannot extend it.
  auto no_continuation = negate(chars(
      [](uint32_t c) {
        return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
      },
      1, 1));
  return rule("json-number", sequence({optional(literal("-")), int_part, optional(frac),
                                       optional(exp), no_continuation}));
}

namespace {
Parser node_maker(std::string name, bool is_rule, Parser p) {
  return make([name = std::move(name), is_rule, p = std::move(p)](Context& ctx, size_t start) {
    Result r = parse(p, ctx, start);
    if (r.fail()) return r;
    Node n;
    (is_rule ? n.rule : n.tag) = name;
    n.begin = r.begin;
    n.end = r.end;
    n.partial = r.status == Status::kMore;
    n.children = std::move(r.nodes);
    ctx.nodes.push_back(std::move(n));
    return Result{r.status, r.begin, r.end, {static_cast<int>(ctx.nodes.size() - 1)}};
  });
}
}  // namespace

Parser rule(std::string name, Parser p) {
  return node_maker(std::move(name), true, std::move(p));
}
Parser tag(std::string name, Parser p) {
  return node_maker(std::move(name), false, std::move(p));
}

Parser atomic(Parser p) {
  return make([p = std::move(p)](Context& ctx, size_t start) {
    Result r = parse(p, ctx, start);
    if (r.status == Status::kMore) r.nodes.clear();
    return r;
  });
}

Parser Forward::get() const {
  return make([target = target](Context& ctx, size_t start) { return parse(*target, ctx, start); });
}

}  // namespace boltrt::text::peg
