#include "generate/chat_loop.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "generate/reply_splitter.h"
#include "generate/speculative.h"
#include "util/error.h"

namespace boltrt {
namespace {

constexpr const char* kHelp =
    "commands:\n"
    "  /help            this list\n"
    "  /exit, /quit     leave (also Ctrl-D; Ctrl-C stops an answer)\n"
    "  /reset           forget the conversation (the system prompt stays)\n"
    "  /system [TEXT]   set the system prompt (no TEXT: remove it)\n"
    "  /think on|off    switch the model's reasoning\n"
    "  /stats           token counts and speed of the last answer\n"
    "  /save FILE       write the conversation as JSON\n"
    "  /load FILE       read a conversation written by /save\n"
    "a line ending in '\\' continues on the next line\n";

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

}  // namespace

ChatLoop::ChatLoop(TextModel& text, Generator& generator, ChatOptions options, std::ostream& out,
                   std::ostream& err)
    : text_(text), generator_(generator), options_(std::move(options)), out_(out), err_(err) {}

void ChatLoop::run(const std::function<std::optional<std::string>(const char*)>& read_line,
                   const char* prompt) {
  std::string pending;
  while (!exit_) {
    std::optional<std::string> line = read_line(pending.empty() ? prompt : "... ");
    if (!line) break;
    if (!line->empty() && line->back() == '\r') line->pop_back();
    if (!line->empty() && line->back() == '\\') {
      pending += line->substr(0, line->size() - 1);
      pending += '\n';
      continue;
    }
    pending += *line;
    std::string input;
    input.swap(pending);
    if (!handle(input)) break;
  }
}

bool ChatLoop::handle(const std::string& input) {
  const std::string text = trim(input);
  if (text.empty()) return true;
  if (text.front() == '/') {
    const auto space = text.find(' ');
    command(text.substr(0, space), space == std::string::npos ? "" : trim(text.substr(space)));
  } else {
    answer(text);
  }
  return !exit_;
}

void ChatLoop::command(const std::string& name, const std::string& argument) {
  if (name == "/exit" || name == "/quit") {
    exit_ = true;
  } else if (name == "/help") {
    out_ << kHelp;
  } else if (name == "/reset") {
    history_.clear();
    out_ << "(conversation cleared)\n";
  } else if (name == "/system") {
    options_.system = argument;
    out_ << (argument.empty() ? "(system prompt removed)\n" : "(system prompt set)\n");
  } else if (name == "/think") {
    if (argument != "on" && argument != "off") {
      err_ << "error: /think takes on or off\n";
    } else {
      options_.thinking = argument == "on";
      out_ << "(thinking " << argument << ")\n";
    }
  } else if (name == "/stats") {
    print_stats();
  } else if (name == "/save" || name == "/load") {
    if (argument.empty()) {
      err_ << "error: " << name << " needs a file name\n";
      return;
    }
    try {
      if (name == "/save") {
        save(argument);
        out_ << "(saved " << history_.size() << " messages to " << argument << ")\n";
      } else {
        load(argument);
        out_ << "(loaded " << history_.size() << " messages from " << argument << ")\n";
      }
    } catch (const std::exception& e) {
      err_ << "error: " << e.what() << "\n";
    }
  } else {
    err_ << "error: unknown command " << name << " (try /help)\n";
  }
  out_.flush();
}

void ChatLoop::answer(const std::string& user_text) {
  std::vector<ChatMessage> messages;
  if (!options_.system.empty()) messages.push_back({"system", options_.system});
  messages.insert(messages.end(), history_.begin(), history_.end());
  messages.push_back({"user", user_text});

  std::vector<int32_t> prompt;
  if (text_.has_chat_template()) {
    prompt = text_.tokenize_chat(messages, options_.thinking);
  } else {  // plain completion: the conversation is one running text
    std::string prompt_text;
    for (const auto& m : messages) prompt_text += m.content + "\n";
    prompt = text_.tokenize(prompt_text, true);
  }
  const auto markers = text_.reasoning_markers();
  ReplySplitter splitter(markers, ReplySplitter::prompt_opens_reasoning(prompt, markers));

  bool dimmed = false;  // inside an ANSI "dim" span
  auto set_dim = [&](bool on) {
    if (on != dimmed) out_ << (on ? "\033[2m" : "\033[0m");
    dimmed = on;
  };
  bool after_reasoning = false;  // reasoning was shown and no content yet: start a new line
  auto show = [&](const std::vector<ReplySplitter::Piece>& pieces) {
    for (const auto& piece : pieces) {
      const bool reasoning = piece.channel == ReplySplitter::Channel::kReasoning;
      if (reasoning && options_.reasoning == ReasoningDisplay::kHide) continue;
      set_dim(reasoning && options_.reasoning == ReasoningDisplay::kDim);
      if (!reasoning && after_reasoning) out_ << "\n";
      after_reasoning = reasoning;
      out_ << piece.text;
    }
    if (!pieces.empty()) out_.flush();
  };

  GenerationOptions generation;
  generation.max_tokens = options_.max_tokens;
  generation.stop_strings = options_.stop_strings;
  generation.ignore_end_of_generation = options_.ignore_end_of_generation;
  generation.cancel = &cancel_;
  std::unique_ptr<TokenController> controller;
  if (options_.make_controller) controller = options_.make_controller();
  generation.controller = controller.get();
  generation.on_token = [&](const TokenEvent& event) {
    show(splitter.push(event.token, event.piece));
    return true;
  };

  cancel_ = false;
  answering_ = true;
  GenerationResult result;
  try {
    result = generator_.generate(prompt, generation);
  } catch (const Error& e) {
    answering_ = false;
    set_dim(false);
    out_.flush();
    err_ << "error: " << e.what() << "\n";
    return;
  }
  answering_ = false;
  show(splitter.finish());
  set_dim(false);
  out_ << "\n";
  if (result.finish_reason == FinishReason::kCancelled) out_ << "(stopped)\n";
  out_.flush();

  if (result.finish_reason == FinishReason::kStopString) splitter.truncate_at(result.stop_string);
  history_.push_back({"user", user_text});
  history_.push_back({"assistant", trim(splitter.content())});
  total_prompt_ += result.stats.n_prompt_evaluated;
  total_generated_ += result.stats.n_tokens;
  draft_totals_ += result.stats.draft;
  ++turns_;
  last_ = std::move(result);
}

void ChatLoop::print_stats() {
  if (!last_) {
    out_ << "(no answer yet)\n";
    return;
  }
  const GenerationStats& s = last_->stats;
  out_ << fmt::format(
      "last answer: prompt {} tokens ({} evaluated, {:.1f} tokens/s), {} tokens generated, "
      "first token after {:.1f} ms, {:.2f} tokens/s, finish: {}\n"
      "session: {} answers, {} prompt tokens evaluated, {} tokens generated, {} tokens cached\n",
      s.n_prompt_tokens, s.n_prompt_evaluated, s.prompt_tokens_per_second, s.n_tokens, s.ttft_ms,
      s.tokens_per_second, to_string(last_->finish_reason), turns_, total_prompt_, total_generated_,
      generator_.cached_tokens().size());
  if (generator_.drafter() != nullptr) {
    out_ << "last answer " << format_speculative_stats(s.draft, s.tokens_per_second) << "\n"
         << "session " << format_speculative_stats(draft_totals_, -1) << "\n";
  }
}

void ChatLoop::save(const std::string& path) const {
  nlohmann::json doc;
  doc["system"] = options_.system;
  doc["thinking"] = options_.thinking;
  doc["messages"] = nlohmann::json::array();
  for (const auto& m : history_)
    doc["messages"].push_back({{"role", m.role}, {"content", m.content}});
  std::ofstream file(path);
  if (!file) fail("{}: cannot write", path);
  file << doc.dump(2) << "\n";
  if (!file) fail("{}: write failed", path);
}

void ChatLoop::load(const std::string& path) {
  std::ifstream file(path);
  if (!file) fail("{}: cannot open", path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not a saved conversation: {}", path, e.what());
  }
  std::vector<ChatMessage> messages;
  if (!doc.is_object() || !doc.contains("messages") || !doc["messages"].is_array()) {
    fail("{}: not a saved conversation (no \"messages\" array)", path);
  }
  for (const auto& m : doc["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      fail("{}: a message lacks a string \"role\" or \"content\"", path);
    }
    const std::string role = m["role"].get<std::string>();
    if (role != "user" && role != "assistant") fail("{}: unknown role \"{}\"", path, role);
    messages.push_back({role, m["content"].get<std::string>()});
  }
  if (doc.contains("system") && doc["system"].is_string()) options_.system = doc["system"];
  if (doc.contains("thinking") && doc["thinking"].is_boolean()) options_.thinking = doc["thinking"];
  history_ = std::move(messages);
}

}  // namespace boltrt
