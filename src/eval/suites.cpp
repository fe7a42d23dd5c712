#include "eval/suites.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <random>

#include "util/error.h"

namespace boltrt::eval {
namespace {

using json = nlohmann::ordered_json;

// Portable draws from a std::mt19937 (whose output sequence the standard fixes).
class Rng {
 public:
  explicit Rng(uint32_t seed) : engine_(seed) {}
  // Uniform in [0, n) (the tiny modulo bias does not matter here).
  size_t below(size_t n) { return static_cast<size_t>(engine_() % n); }
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<size_t>(hi - lo + 1)));
  }
  template <class T, size_t N>
  const T& pick(const std::array<T, N>& items) {
    return items[below(N)];
  }

 private:
  std::mt19937 engine_;
};

constexpr std::array<const char*, 12> kCities = {"Oslo",  "Lima",   "Nairobi", "Osaka",
                                                 "Perth", "Quito",  "Dakar",   "Porto",
                                                 "Hanoi", "Zagreb", "Tunis",   "Cusco"};
constexpr std::array<const char*, 6> kCurrencies = {"EUR", "USD", "JPY", "GBP", "CHF", "INR"};
constexpr std::array<const char*, 6> kLabels = {"gym", "meeting", "pills", "bus", "call", "tea"};

json function(const char* name, const char* description, json properties, json required) {
  return {
      {"type", "function"},
      {"function",
       {{"name", name},
        {"description", description},
        {"parameters", {{"type", "object"}, {"properties", properties}, {"required", required}}}}}};
}

json weather_tool() {
  return function("get_weather", "Weather forecast for a city",
                  {{"city", {{"type", "string"}}},
                   {"days", {{"type", "integer"}, {"minimum", 1}, {"maximum", 14}}},
                   {"units", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}},
                  {"city", "days", "units"});
}
json currency_tool() {
  return function("convert_currency", "Convert an amount of money",
                  {{"amount", {{"type", "number"}}},
                   {"from", {{"type", "string"}}},
                   {"to", {{"type", "string"}}}},
                  {"amount", "from", "to"});
}
json alarm_tool() {
  return function("set_alarm", "Set an alarm",
                  {{"hour", {{"type", "integer"}, {"minimum", 0}, {"maximum", 23}}},
                   {"minute", {{"type", "integer"}, {"minimum", 0}, {"maximum", 59}}},
                   {"label", {{"type", "string"}}},
                   {"repeat", {{"type", "boolean"}}}},
                  {"hour", "minute", "label", "repeat"});
}

// One call of a random tool: (tool index, the request sentence, expected arguments).
struct Call {
  int tool;
  std::string ask;
  json arguments;
};

Call random_call(Rng& rng, int tool) {
  if (tool == 0) {
    const std::string city = rng.pick(kCities);
    const int64_t days = rng.between(1, 7);
    const bool f = rng.below(2) == 1;
    return {0,
            fmt::format("the {}-day weather forecast for {} in {}", days, city,
                        f ? "fahrenheit" : "celsius"),
            {{"city", city}, {"days", days}, {"units", f ? "fahrenheit" : "celsius"}}};
  }
  if (tool == 1) {
    const double amount = static_cast<double>(rng.between(1, 999)) + 0.25 * rng.between(0, 3);
    const std::string from = rng.pick(kCurrencies);
    std::string to = rng.pick(kCurrencies);
    if (to == from) to = from == "EUR" ? "USD" : "EUR";
    return {1,
            fmt::format("converting {} {} to {}", amount, from, to),
            {{"amount", amount}, {"from", from}, {"to", to}}};
  }
  const int64_t hour = rng.between(0, 23), minute = rng.between(0, 11) * 5;
  const std::string label = rng.pick(kLabels);
  const bool repeat = rng.below(2) == 1;
  return {2,
          fmt::format("a {} alarm at {:02}:{:02} labelled \"{}\"", repeat ? "daily" : "one-time",
                      hour, minute, label),
          {{"hour", hour}, {"minute", minute}, {"label", label}, {"repeat", repeat}}};
}

json tool_by_index(int i) {
  return i == 0 ? weather_tool() : i == 1 ? currency_tool() : alarm_tool();
}
const char* tool_name(int i) {
  return i == 0 ? "get_weather" : i == 1 ? "convert_currency" : "set_alarm";
}

json tool_task(const std::string& id, const std::string& category, json tools,
               const std::string& ask, const std::vector<Call>& calls) {
  json expected = json::array();
  for (const Call& c : calls)
    expected.push_back({{"name", tool_name(c.tool)}, {"arguments", c.arguments}});
  return {{"id", id},
          {"category", category},
          {"messages", {{{"role", "user"}, {"content", ask}}}},
          {"tools", std::move(tools)},
          {"tool_choice", "required"},
          {"max_tokens", 128},
          {"check", {{"type", "tool_call"}, {"calls", expected}}}};
}

std::vector<Task> tool_calling(const SuiteOptions& o) {
  Rng rng(o.seed);
  std::vector<Task> tasks;
  for (int i = 0; i < o.count; ++i) {
    const Call c = random_call(rng, static_cast<int>(rng.below(3)));
    tasks.push_back(make_task(tool_task(fmt::format("tool-single-{}", i), "tool-single",
                                        json::array({tool_by_index(c.tool)}),
                                        "Please call the tool for " + c.ask + ".", {c}),
                              0));
  }
  for (int i = 0; i < o.count; ++i) {
    const Call c = random_call(rng, static_cast<int>(rng.below(3)));
    tasks.push_back(
        make_task(tool_task(fmt::format("tool-multiple-{}", i), "tool-multiple",
                            json::array({weather_tool(), currency_tool(), alarm_tool()}),
                            "Use the right tool for " + c.ask + ".", {c}),
                  0));
  }
  for (int i = 0; i < o.count; ++i) {
    const Call a = random_call(rng, static_cast<int>(rng.below(3)));
    Call b = random_call(rng, static_cast<int>(rng.below(3)));
    while (b.arguments == a.arguments) b = random_call(rng, b.tool);
    json tools = json::array({tool_by_index(a.tool)});
    if (b.tool != a.tool) tools.push_back(tool_by_index(b.tool));
    tasks.push_back(make_task(
        tool_task(fmt::format("tool-parallel-{}", i), "tool-parallel", tools,
                  "Make two tool calls at once: one for " + a.ask + ", and one for " + b.ask + ".",
                  {a, b}),
        0));
  }
  return tasks;
}

constexpr std::array<const char*, 10> kSubjects = {
    "The river",     "A farmer",       "The old library",   "Every morning the baker",
    "The committee", "A small boat",   "The mountain road", "Our neighbour",
    "The orchestra", "A quiet village"};
constexpr std::array<const char*, 10> kVerbs = {"watched",  "carried", "remembered", "painted",
                                                "followed", "counted", "repaired",   "described",
                                                "visited",  "ignored"};
constexpr std::array<const char*, 10> kObjects = {
    "the grey clouds over the hills", "a basket of green apples",
    "the long winter evenings",       "the wooden fence by the gate",
    "a map of the northern coast",    "the bells of the tower",
    "a letter from a distant cousin", "the lanterns along the harbour",
    "the first snow of the year",     "a song about the sea"};
constexpr std::array<const char*, 8> kKeys = {"amber",  "cobalt", "falcon", "juniper",
                                              "marble", "orchid", "tundra", "willow"};

std::string filler_sentence(Rng& rng) {
  return fmt::format("{} {} {}. ", rng.pick(kSubjects), rng.pick(kVerbs), rng.pick(kObjects));
}

std::vector<Task> needle(const SuiteOptions& o) {
  if (!o.count_tokens) fail("suite needle needs the model's tokenizer");
  if (o.lengths.empty() || o.depths.empty()) fail("suite needle needs --lengths and --depths");
  for (const double d : o.depths)
    if (!(d >= 0 && d <= 1)) fail("--depths: {} is not in [0, 1]", d);
  std::vector<int64_t> lengths;
  for (const int64_t l : o.lengths) {
    if (l < 64) fail("--lengths: {} is below 64 tokens", l);
    const int64_t clipped = std::min(l, o.max_length);
    if (std::find(lengths.begin(), lengths.end(), clipped) == lengths.end())
      lengths.push_back(clipped);
  }
  Rng rng(o.seed);
  std::vector<Task> tasks;
  const std::string question_tail = " Answer with the number only.";
  for (const int64_t length : lengths) {
    for (const double depth : o.depths) {
      for (int k = 0; k < o.count; ++k) {
        // Alternate one needle and one among three keys.
        const int n_keys = k % 2 == 0 ? 1 : 3;
        std::vector<std::pair<std::string, int64_t>> keys;
        while (static_cast<int>(keys.size()) < n_keys) {
          const std::string key = rng.pick(kKeys);
          bool taken = false;
          for (const auto& [name, value] : keys) taken = taken || name == key;
          if (!taken) keys.emplace_back(key, rng.between(1000000, 9999999));
        }
        const auto& [target, number] = keys[rng.below(keys.size())];
        const std::string question =
            fmt::format("\nWhat is the special magic number for {} mentioned in the text above?{}",
                        target, question_tail);
        // Fill to the length: sentences until the token count reaches it (counted in chunks).
        std::vector<std::string> sentences;
        const int64_t fixed = o.count_tokens(question) + 48 * n_keys + 16;
        int64_t tokens = 0;
        while (tokens + fixed < length) {
          std::string chunk;
          for (int s = 0; s < 8; ++s) {
            sentences.push_back(filler_sentence(rng));
            chunk += sentences.back();
          }
          tokens += o.count_tokens(chunk);
        }
        while (tokens + fixed > length && !sentences.empty()) {
          tokens -= o.count_tokens(sentences.back());
          sentences.pop_back();
        }
        // Needles: the target at `depth`, distractors at other depths.
        for (size_t i = 0; i < keys.size(); ++i) {
          const bool is_target = keys[i].first == target;
          const double at = is_target ? depth : static_cast<double>(rng.below(101)) / 100.0;
          const auto pos = static_cast<size_t>(at * static_cast<double>(sentences.size()));
          sentences.insert(sentences.begin() + static_cast<std::ptrdiff_t>(pos),
                           fmt::format("The special magic number for {} is {}. ", keys[i].first,
                                       keys[i].second));
        }
        std::string haystack;
        for (const auto& s : sentences) haystack += s;
        const std::string id =
            fmt::format("needle-{}-d{}-{}", length, static_cast<int>(depth * 100 + 0.5), k);
        json task = {{"id", id},
                     {"category", fmt::format("needle-{}", length)},
                     {"messages", {{{"role", "user"}, {"content", haystack + question}}}},
                     {"max_tokens", 16},
                     {"check", {{"type", "contains"}, {"value", std::to_string(number)}}}};
        tasks.push_back(make_task(std::move(task), 0));
      }
    }
  }
  return tasks;
}

std::vector<Task> budget(const SuiteOptions& o) {
  Rng rng(o.seed);
  std::vector<Task> tasks;
  constexpr std::array<const char*, 4> kItems = {"pens", "apples", "stamps", "marbles"};
  for (int i = 0; i < o.count; ++i) {
    const int64_t boxes = rng.between(2, 9), per_box = rng.between(3, 12),
                  removed = rng.between(1, 20), added = rng.between(1, 9);
    const std::string item = rng.pick(kItems);
    const int64_t answer = boxes * per_box - removed + added;
    json task = {
        {"id", fmt::format("budget-{}", i)},
        {"category", "arithmetic"},
        {"messages",
         {{{"role", "user"},
           {"content",
            fmt::format("A crate has {} boxes with {} {} each. {} {} are taken out and {} are "
                        "put back in. How many {} are in the crate now? End with the number.",
                        boxes, per_box, item, removed, item, added, item)}}}},
        {"max_tokens", 512},
        {"reasoning", "on"},
        {"check", {{"type", "numeric"}, {"value", answer}}}};
    tasks.push_back(make_task(std::move(task), 0));
  }
  return tasks;
}

}  // namespace

const std::vector<std::string>& suite_names() {
  static const std::vector<std::string> names = {"tool-calling", "needle", "budget"};
  return names;
}

std::vector<Task> make_suite(const std::string& name, const SuiteOptions& options) {
  if (options.count < 1) fail("--suite-size must be at least 1");
  if (name == "tool-calling") return tool_calling(options);
  if (name == "needle") return needle(options);
  if (name == "budget") return budget(options);
  fail("unknown suite '{}' (tool-calling, needle, budget)", name);
}

}  // namespace boltrt::eval
