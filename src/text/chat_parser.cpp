// Splitting a Gemma 4 model's output into reasoning, content and tool calls, with the grammar
// llama.cpp uses for Gemma 4 (PEG_GEMMA4, reasoning extracted). The output is read as the
// continuation of the generation prompt, so a prompt that pre-filled an empty thought channel
// yields empty reasoning. Tool arguments become compact JSON text; numbers keep their digits.
#include <nlohmann/json.hpp>

#include "text/chat_template.h"
#include "text/peg.h"

namespace boltrt::text {

namespace {

using namespace peg;

const std::string kQuote = "<|\"|>";

std::string_view node_text(const Context& ctx, const Node& n) {
  if (n.begin >= ctx.input.size()) return {};
  return ctx.input.substr(n.begin, n.end - n.begin);
}

std::string escape_json_inner(std::string_view s) {
  std::string dumped;
  try {
    dumped = nlohmann::json(std::string(s)).dump();
  } catch (const nlohmann::json::exception&) {  // invalid UTF-8
    dumped = nlohmann::json(std::string(s))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return dumped.size() >= 2 ? dumped.substr(1, dumped.size() - 2) : dumped;
}

int find_tag(const Context& ctx, const Node& parent, std::string_view tag, int depth = 3) {
  for (int id : parent.children) {
    const Node& child = ctx.nodes[id];
    if (child.tag == tag) return id;
    if (depth > 1) {
      const int found = find_tag(ctx, child, tag, depth - 1);
      if (found >= 0) return found;
    }
  }
  return -1;
}

// Gemma 4 tool-call values to JSON text (partial values stay open, e.g. {"city":"Par).
std::string to_json(const Context& ctx, int id) {
  const Node& n = ctx.nodes[id];
  const std::string_view text = node_text(ctx, n);
  if (text.empty()) return "";
  const std::string& r = n.rule;
  if (r == "gemma4-number" || r == "gemma4-bool" || r == "gemma4-null") return std::string(text);
  if (r == "gemma4-string-content") return escape_json_inner(text);
  if (r == "gemma4-dict-key-name") return std::string(text);
  if (r == "gemma4-string") {
    std::string out = "\"";
    if (!n.children.empty()) {
      out += to_json(ctx, n.children[0]);
      if (!n.partial) out += '"';
    }
    return out;
  }
  if (r == "gemma4-dict-key") {
    std::string out = "\"";
    if (!n.children.empty()) out += escape_json_inner(to_json(ctx, n.children[0]));
    if (!n.partial) out += "\":";
    return out;
  }
  if (r == "gemma4-dict-kv") {
    std::string out;
    for (int c : n.children) out += to_json(ctx, c);
    return out;
  }
  if (r == "gemma4-array" || r == "gemma4-dict") {
    const bool dict = r == "gemma4-dict";
    std::string out(1, dict ? '{' : '[');
    for (size_t k = 0; k < n.children.size(); ++k) {
      if (k > 0) out += ',';
      out += to_json(ctx, n.children[k]);
    }
    if (!n.partial) out += dict ? '}' : ']';
    return out;
  }
  if (r == "gemma4-value") return n.children.empty() ? "" : to_json(ctx, n.children[0]);
  return "";
}

void collect(const Context& ctx, int id, ParsedOutput& out) {
  const Node& n = ctx.nodes[id];
  if (n.tag == "reasoning") {
    out.reasoning += node_text(ctx, n);
    return;
  }
  if (n.tag == "content") {
    out.content += node_text(ctx, n);
    return;
  }
  if (n.tag == "tool") {
    const int name = find_tag(ctx, n, "tool-name"), args = find_tag(ctx, n, "tool-args");
    if (name >= 0 && args >= 0 && !ctx.nodes[name].partial) {
      ToolCall call;
      call.name = std::string(node_text(ctx, ctx.nodes[name]));
      const Node& a = ctx.nodes[args];
      if (!a.children.empty()) call.arguments = to_json(ctx, a.children[0]);
      out.tool_calls.push_back(std::move(call));
    }
    return;
  }
  for (int c : n.children) collect(ctx, c, out);
}

// value_ref and dict_ref make the grammar recursive; the caller owns them and clears them
// afterwards to break the reference cycle.
Parser tool_call_grammar(const std::vector<std::string>& names, bool parallel, Forward& value_ref,
                         Forward& dict_ref) {
  auto ws = space();
  auto string_content = rule("gemma4-string-content", until({kQuote}));
  auto string = rule("gemma4-string", sequence({literal(kQuote), string_content, literal(kQuote)}));
  auto boolean =
      rule("gemma4-bool", rule("json-bool", choice({literal("true"), literal("false")})));
  auto null = rule("gemma4-null", rule("json-null", literal("null")));
  auto number = rule("gemma4-number", json_number());
  auto key = rule("gemma4-dict-key",
                  sequence({rule("gemma4-dict-key-name",
                                 chars([](uint32_t c) { return c != ':' && c != '}'; }, 1, -1)),
                            literal(":")}));
  auto kv = rule("gemma4-dict-kv", sequence({key, ws, value_ref.get()}));
  auto members = sequence({kv, zero_or_more(sequence({literal(","), ws, kv}))});
  *dict_ref.target = rule(
      "gemma4-dict",
      sequence({literal("{"), ws, choice({literal("}"), sequence({members, ws, literal("}")})})}));
  auto elements =
      sequence({value_ref.get(), zero_or_more(sequence({literal(","), ws, value_ref.get()}))});
  auto array = rule(
      "gemma4-array",
      sequence({literal("["), ws, choice({literal("]"), sequence({elements, ws, literal("]")})})}));
  *value_ref.target =
      rule("gemma4-value", choice({string, dict_ref.get(), array, number, boolean, null}));

  std::vector<Parser> tools;
  for (const std::string& name : names) {
    tools.push_back(rule(
        "tool-" + name,
        tag("tool",
            sequence({atomic(tag("tool-open", sequence({atomic(tag("tool-name", literal(name))),
                                                        peek(literal("{"))}))),
                      tag("tool-args", dict_ref.get())}))));
  }
  return rule("tool-call", repeat(sequence({literal("<|tool_call>call:"), choice(std::move(tools)),
                                            literal("<tool_call|>")}),
                                  0, parallel ? -1 : 1));
}

}  // namespace

ParsedOutput parse_gemma4_output(std::string_view output, std::string_view generation_prompt,
                                 const Json& tools, const ParseOptions& options) {
  std::vector<std::string> names;
  if (tools.is_array()) {
    for (const Json& t : tools) {
      if (t.is_object() && t.contains("function") && t["function"].is_object() &&
          t["function"].contains("name") && t["function"]["name"].is_string()) {
        names.push_back(t["function"]["name"].get<std::string>());
      }
    }
  }
  const std::string input = std::string(generation_prompt) + std::string(output);

  auto start = rule("start", optional(literal("<|turn>model\n")));
  auto thought_block =
      rule("thought", sequence({literal("<|channel>thought"), space(),
                                tag("reasoning", until({"<channel|>"})), literal("<channel|>")}));
  auto empty_channels = zero_or_more(sequence({literal("<|channel>"), negate(literal("thought"))}));
  auto thought = choice({sequence({peek(literal("<|channel>")), empty_channels, thought_block}),
                         negate(literal("<|channel>"))});
  Parser root;
  Forward value_ref, dict_ref;
  if (!names.empty()) {
    auto content =
        rule("content", tag("content", until({"<|channel>", "<channel|>", "<|tool_call>"})));
    auto message = rule("message", sequence({thought, content}));
    root =
        sequence({start, zero_or_more(message), rule("scan-to-toolcall", until({"<|tool_call>"})),
                  tool_call_grammar(names, options.parallel_tool_calls, value_ref, dict_ref)});
  } else {
    auto content = rule("content", tag("content", until({"<|channel>", "<channel|>"})));
    auto message = rule("message", sequence({thought, content}));
    root = sequence({start, one_or_more(message)});
  }

  Context ctx;
  ctx.input = input;
  const Result result = parse(root, ctx, 0);
  *value_ref.target = nullptr;
  *dict_ref.target = nullptr;
  ParsedOutput out;
  if (result.fail()) {
    out.well_formed = false;
    out.content = std::string(output);
    return out;
  }
  for (int id : result.nodes) collect(ctx, id, out);
  return out;
}

}  // namespace boltrt::text
