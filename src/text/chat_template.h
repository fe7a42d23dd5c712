// Chat prompts for Gemma 4 (gemma4.md §9) and Qwen3.5 (qwen35.md §9), rendered byte for byte as
// the model's own Jinja template (tokenizer.chat_template) renders them, and the parsers that
// split a model's output into reasoning, content and tool calls as llama.cpp's parsers do.
//
// Typical use:
//   ChatTemplate tmpl = ChatTemplate::for_tokenizer(tokenizer);   // warns on unknown templates
//   ChatPrompt p = tmpl.render(messages, tools, {.enable_thinking = false});
//   ids = tokenizer.encode_with_literals(p.text, p.literal);  // adds <bos>; message text stays
//   text
//   ... generate `out` ...
//   ParsedOutput r = parse_gemma4_output(out, p.generation_prompt, tools);
#pragma once
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace boltrt::text {

class Tokenizer;
using Json = nlohmann::ordered_json;

// One function call, as in OpenAI's API: `arguments` is JSON text (normally an object).
struct ToolCall {
  std::string name;
  std::string arguments;
  std::string id;  // optional; matches a tool message's tool_call_id
};

struct ChatMessage {
  // "system", "developer", "user", "assistant" (written "model" in the prompt) or "tool".
  std::string role;
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant messages
  std::string tool_call_id;          // tool messages
  // Gemma 4's template never shows it; Qwen3.5's shows it in the current agentic turn (empty =
  // absent: then a "<think>...</think>" in `content` is taken instead, as the template does).
  std::string reasoning_content;
};

// Messages and tools in OpenAI chat-completions JSON (content may be a string or a list of
// {"type":"text","text":...} parts, which are joined with "\n" as llama.cpp does).
std::vector<ChatMessage> messages_from_json(const Json& messages);

struct ChatOptions {
  bool add_generation_prompt = true;
  // Gemma 4: thinking on, <|think|> opens the system turn; off, the template pre-fills an empty
  // thought channel so the model answers directly. Qwen3.5: the generation prompt opens
  // "<think>\n" (on) or writes an empty "<think>\n\n</think>\n\n" (off).
  bool enable_thinking = false;
};

struct ChatPrompt {
  // The prompt text without the leading <bos> (the tokenizer adds it: encode with
  // add_special = true and parse_special = true).
  std::string text;
  // The part of `text` the generation prompt added (e.g. "<|turn>model\n"); the output parser
  // reads the model's output as a continuation of it.
  std::string generation_prompt;
  // Byte ranges [begin, end) of `text` that hold message and tool text (contents, names,
  // arguments), sorted and disjoint: tokenize with Tokenizer::encode_with_literals so that only
  // the template's own markers become control tokens.
  std::vector<std::pair<size_t, size_t>> literal;
};

enum class ChatFormat {
  kNone,    // the file has no chat template: plain completion
  kGemma4,  // Gemma 4 turns, thinking, tools
  kQwen35,  // Qwen3.5: ChatML turns, <think> blocks, XML tool calls (<function=...>)
};

class ChatTemplate {
 public:
  // The format for a model: Gemma 4 when its tokenizer.chat_template is Gemma 4's (recognised by
  // its tool-call marker), Qwen3.5 when it is a ChatML template with Qwen's XML tool calls
  // ("<tool_call>", "<function=", "<parameter=", as llama.cpp recognises it), Gemma 4 with a
  // warning in *warning when the template is some other one, kNone when the file has no
  // template.
  static ChatTemplate for_tokenizer(const Tokenizer& tokenizer, std::string* warning = nullptr);
  static ChatTemplate for_source(std::string_view template_source, std::string* warning = nullptr);
  explicit ChatTemplate(ChatFormat format = ChatFormat::kGemma4) : format_(format) {}

  ChatFormat format() const { return format_; }
  // `tools`: a JSON array of OpenAI tool objects ({"type":"function","function":{...}}) or null.
  // Throws boltrt::Error (one line) for malformed messages, or for kNone.
  ChatPrompt render(const std::vector<ChatMessage>& messages, const Json& tools = Json(),
                    const ChatOptions& options = {}) const;

 private:
  ChatFormat format_;
};

// What a model wrote, split up. Mirrors llama.cpp's Gemma 4 parser (PEG_GEMMA4 with
// reasoning_format = deepseek): thought-channel text goes to `reasoning`, tool calls of the
// declared tools to `tool_calls` (arguments as compact JSON text), the rest to `content`.
struct ParsedOutput {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  // False when the text does not fit the format at all (llama.cpp throws then); `content` then
  // holds the whole output unchanged.
  bool well_formed = true;
};

struct ParseOptions {
  bool parallel_tool_calls = true;  // accept more than one call
};

ParsedOutput parse_gemma4_output(std::string_view output, std::string_view generation_prompt,
                                 const Json& tools = Json(), const ParseOptions& options = {});

// Qwen3.5's output (qwen35.md §9.3): <think> reasoning, then content, then XML tool calls of the
// declared tools with typed arguments (see chat_parser_qwen35.cpp for the rules and where they
// keep text that llama.cpp drops).
ParsedOutput parse_qwen35_output(std::string_view output, std::string_view generation_prompt,
                                 const Json& tools = Json(), const ParseOptions& options = {});

// How a format marks a thought, as text (the tokens are found by this text): Gemma 4's
// "<|channel>" + "thought\n" ... "<channel|>" (also kNone: a vocabulary may carry the markers
// without a template), Qwen3.5's "<think>" + "\n" ... "</think>".
struct ThoughtMarkerText {
  std::string open, label, close;
};
ThoughtMarkerText thought_markers(ChatFormat format);
// The formats that have thought markers, in the order a vocabulary is matched against them (the
// first whose markers are tokens wins), so that callers need not name a format.
std::span<const ChatFormat> formats_with_thoughts();

// The output parser of `format` (kNone: everything is content).
ParsedOutput parse_output(ChatFormat format, std::string_view output,
                          std::string_view generation_prompt, const Json& tools = Json(),
                          const ParseOptions& options = {});

}  // namespace boltrt::text
