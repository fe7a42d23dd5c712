#include "eval/task.h"

#include <fstream>
#include <sstream>
#include <unordered_set>

#include "batch/request.h"
#include "util/error.h"

namespace boltrt::eval {
namespace {

using json = nlohmann::ordered_json;

}  // namespace

Task make_task(json object, int64_t line_number) {
  if (!object.is_object()) fail("a task must be a JSON object, not {}", object.type_name());
  Task t;
  t.line = line_number;
  if (object.contains("category") && !object["category"].is_null()) {
    if (!object["category"].is_string() || object["category"].get<std::string>().empty())
      fail("field 'category' must be a non-empty string");
    t.category = object["category"].get<std::string>();
  }
  if (!object.contains("check") || object["check"].is_null()) fail("missing 'check'");
  t.check = parse_check(object["check"]);
  object.erase("check");
  object.erase("category");
  // The request part must be a valid batch line (same errors as `boltrt batch`).
  const batch::BatchRequest request = batch::parse_request(object.dump(), line_number);
  if (t.check.kind == Check::Kind::kToolCall && !request.tools)
    fail("check 'tool_call' needs 'tools' (and 'messages')");
  t.id = request.id;
  t.key = request.key;
  t.request = std::move(object);
  return t;
}

Task parse_task(std::string_view line, int64_t line_number) {
  size_t bad = 0;
  if (!batch::is_valid_utf8(line, &bad)) fail("invalid UTF-8 at byte {}", bad);
  json object;
  try {
    object = json::parse(line);
  } catch (const json::parse_error& e) {
    const std::string what = e.what();
    const size_t at = what.find("] ");
    fail("bad JSON: {}", at == std::string::npos ? what : what.substr(at + 2));
  }
  return make_task(std::move(object), line_number);
}

TaskFile parse_tasks(std::string_view text) {
  TaskFile file;
  std::unordered_set<std::string> seen;
  int64_t line_number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) {
      if (end == text.size()) break;
      continue;
    }
    try {
      Task t = parse_task(line, line_number);
      if (!seen.insert(t.key).second) fail("duplicate id {}", t.key);
      file.tasks.push_back(std::move(t));
    } catch (const Error& e) {
      file.errors.push_back({line_number, e.what()});
    }
    if (end == text.size()) break;
  }
  return file;
}

TaskFile read_tasks(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the task file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("{}: read error", path);
  return parse_tasks(ss.str());
}

void add_tasks(TaskFile& file, std::vector<Task> more) {
  std::unordered_set<std::string> seen;
  for (const Task& t : file.tasks) seen.insert(t.key);
  for (Task& t : more) {
    if (!seen.insert(t.key).second) {
      file.errors.push_back({t.line, "duplicate id " + t.key});
      continue;
    }
    file.tasks.push_back(std::move(t));
  }
}

}  // namespace boltrt::eval
