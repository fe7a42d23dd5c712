// A small PEG (parsing expression grammar) engine with "lenient" end-of-input handling, used to
// parse model output the way llama.cpp's chat parsers do. Results are FAIL, OK, or MORE: the
// input ended in the middle of a match, which counts as a partial success (a model's output can
// stop anywhere). Rules and tags leave nodes in an AST that the caller walks afterwards.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace boltrt::text::peg {

enum class Status { kFail, kOk, kMore };

struct Node {
  std::string rule;  // set by rule()
  std::string tag;   // set by tag()
  size_t begin = 0, end = 0;
  bool partial = false;  // the match ran into the end of the input
  std::vector<int> children;
};

struct Context {
  std::string_view input;
  std::vector<Node> nodes;
};

struct Result {
  Status status = Status::kFail;
  size_t begin = 0, end = 0;
  std::vector<int> nodes;
  bool fail() const { return status == Status::kFail; }
};

using Parser = std::shared_ptr<const std::function<Result(Context&, size_t)>>;

Parser literal(std::string text);
Parser sequence(std::vector<Parser> parts);
Parser choice(std::vector<Parser> alternatives);
Parser repeat(Parser p, int min_count, int max_count);  // max_count -1: unbounded
inline Parser optional(Parser p) {
  return repeat(std::move(p), 0, 1);
}
inline Parser zero_or_more(Parser p) {
  return repeat(std::move(p), 0, -1);
}
inline Parser one_or_more(Parser p) {
  return repeat(std::move(p), 1, -1);
}
Parser peek(Parser p);    // &p: match without consuming
Parser negate(Parser p);  // !p
Parser space();           // ASCII whitespace, any amount
// Everything up to the first delimiter (or up to a delimiter prefix that the input ends in).
Parser until(std::vector<std::string> delimiters);
// 1..max code points accepted by `accept` (max -1: unbounded), at least min_count.
Parser chars(std::function<bool(uint32_t)> accept, int min_count, int max_count);
Parser json_number();
Parser rule(std::string name, Parser p);  // AST node with a rule name
Parser tag(std::string name, Parser p);   // AST node with a tag
Parser atomic(Parser p);                  // partial matches leave no nodes behind
// A reference to a parser defined later (for recursive grammars).
struct Forward {
  std::shared_ptr<Parser> target = std::make_shared<Parser>();
  Parser get() const;
};

inline Result parse(const Parser& p, Context& ctx, size_t pos) {
  return (*p)(ctx, pos);
}

}  // namespace boltrt::text::peg
