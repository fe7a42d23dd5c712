#include "eval/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

namespace boltrt::eval {
namespace {

using json = nlohmann::ordered_json;

constexpr std::array<const char*, 8> kColors = {"#3366cc", "#dc3912", "#109618", "#ff9900",
                                                "#990099", "#0099c6", "#dd4477", "#66aa00"};

const char* color(size_t i) {
  return kColors[i % kColors.size()];
}

std::string label(const json& m) {
  std::string l = m["model"].get<std::string>();
  if (!m["reasoning_budget"].is_null()) l += " @ budget " + m["reasoning_budget"].dump();
  return l;
}

// The model file's name instead of its path (plots have little room), with the budget.
std::string short_label(const json& m) {
  std::string l = std::filesystem::path(m["model"].get<std::string>()).filename().string();
  if (!m["reasoning_budget"].is_null()) l += " @ " + m["reasoning_budget"].dump();
  return l;
}

std::string num(double x) {
  return fmt::format("{:.1f}", x);
}

// Accuracy by category: one group of bars per category, one bar per run, 95 % whiskers.
std::string category_plot(const json& models) {
  std::vector<std::string> categories;
  for (const json& m : models)
    for (const auto& [name, c] : m["categories"].items())
      if (std::find(categories.begin(), categories.end(), name) == categories.end())
        categories.push_back(name);
  const double left = 160, width = 480, bar = 14;
  const double group = bar * static_cast<double>(models.size()) + 10;
  const double height = 30 + group * static_cast<double>(categories.size()) + 30;
  std::string svg = fmt::format(
      "<svg width='{}' height='{}' role='img' "
      "aria-label='accuracy by category'>\n",
      left + width + 60, height);
  for (int t = 0; t <= 4; ++t) {
    const double x = left + width * t / 4.0;
    svg += fmt::format(
        "<line x1='{0}' y1='20' x2='{0}' y2='{1}' stroke='#ddd'/><text x='{0}' y='{2}' "
        "font-size='11' text-anchor='middle'>{3}%</text>\n",
        x, height - 25, height - 10, t * 25);
  }
  for (size_t ci = 0; ci < categories.size(); ++ci) {
    const double y0 = 25 + group * static_cast<double>(ci);
    svg += fmt::format("<text x='{}' y='{}' font-size='12' text-anchor='end'>{}</text>\n", left - 6,
                       y0 + group / 2, html_escape(categories[ci]));
    for (size_t mi = 0; mi < models.size(); ++mi) {
      const json& cats = models[mi]["categories"];
      if (!cats.contains(categories[ci])) continue;
      const json& c = cats[categories[ci]];
      const double y = y0 + bar * static_cast<double>(mi);
      const double acc = c["accuracy"].get<double>();
      svg += fmt::format(
          "<rect x='{}' y='{}' width='{}' height='{}' fill='{}'><title>{}: {}/{}</title></rect>\n",
          left, y, width * acc, bar - 2, color(mi), html_escape(label(models[mi])),
          c["passed"].get<int64_t>(), c["total"].get<int64_t>());
      svg += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#000'/>\n",
                         left + width * c["ci95"][0].get<double>(), y + bar / 2 - 1,
                         left + width * c["ci95"][1].get<double>(), y + bar / 2 - 1);
    }
  }
  return svg + "</svg>\n";
}

// Accuracy (or mean tokens) against the reasoning budget, one line per model.
std::string budget_plot(const json& models, bool tokens) {
  std::map<std::string, std::vector<std::pair<int64_t, double>>> lines;
  std::set<int64_t> budgets;
  double top = tokens ? 1 : 1;
  for (const json& m : models) {
    if (m["reasoning_budget"].is_null()) continue;
    const int64_t b = m["reasoning_budget"].get<int64_t>();
    const double y =
        tokens ? m["tokens"]["generated_mean"].get<double>() : m["accuracy"].get<double>();
    lines[std::filesystem::path(m["model"].get<std::string>()).filename().string()].emplace_back(b,
                                                                                                 y);
    budgets.insert(b);
    top = std::max(top, y);
  }
  if (budgets.empty())
    return "<p class='note'>No reasoning budget was set (give --reasoning-budget 0,128,512 or "
           "--suite budget).</p>\n";
  // Budgets in order, unlimited (-1) last.
  std::vector<int64_t> xs;
  for (const int64_t b : budgets)
    if (b >= 0) xs.push_back(b);
  if (budgets.contains(-1)) xs.push_back(-1);
  const double left = 60, width = 420, plot_h = 200, top_y = 20;
  auto x_of = [&](int64_t b) {
    const auto i = static_cast<double>(std::find(xs.begin(), xs.end(), b) - xs.begin());
    return xs.size() == 1 ? left + width / 2
                          : left + width * i / static_cast<double>(xs.size() - 1);
  };
  auto y_of = [&](double v) { return top_y + plot_h - plot_h * v / top; };
  std::string svg = fmt::format(
      "<svg width='{}' height='{}' role='img' "
      "aria-label='{} against the reasoning budget'>\n",
      left + width + 220, top_y + plot_h + 45, tokens ? "tokens" : "accuracy");
  for (int t = 0; t <= 4; ++t) {
    const double v = top * t / 4.0;
    svg += fmt::format(
        "<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='#ddd'/><text x='{3}' y='{4}' "
        "font-size='11' text-anchor='end'>{5}</text>\n",
        left, y_of(v), left + width, left - 4, y_of(v) + 4,
        tokens ? num(v) : fmt::format("{:.0f}%", v * 100));
  }
  for (const int64_t b : xs)
    svg +=
        fmt::format("<text x='{}' y='{}' font-size='11' text-anchor='middle'>{}</text>\n", x_of(b),
                    top_y + plot_h + 18, b < 0 ? std::string("unlimited") : std::to_string(b));
  svg += fmt::format(
      "<text x='{}' y='{}' font-size='11' text-anchor='middle'>reasoning budget "
      "(tokens)</text>\n",
      left + width / 2, top_y + plot_h + 38);
  size_t li = 0;
  for (auto& [model, points] : lines) {
    std::sort(points.begin(), points.end(),
              [&](const auto& a, const auto& b) { return x_of(a.first) < x_of(b.first); });
    std::string path;
    for (const auto& [b, v] : points)
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", x_of(b), y_of(v));
    svg +=
        fmt::format("<path d='{}' fill='none' stroke='{}' stroke-width='2'/>\n", path, color(li));
    for (const auto& [b, v] : points)
      svg += fmt::format(
          "<circle cx='{:.1f}' cy='{:.1f}' r='3.5' fill='{}'><title>{}</title>"
          "</circle>\n",
          x_of(b), y_of(v), color(li), tokens ? num(v) : num(v * 100) + "%");
    svg +=
        fmt::format("<text x='{}' y='{}' font-size='12' fill='{}'>{}</text>\n", left + width + 12,
                    top_y + 14 + 16 * static_cast<double>(li), color(li), html_escape(model));
    ++li;
  }
  return svg + "</svg>\n";
}

// One strip per run: every task's value as a dot, p50 and p95 as ticks.
std::string latency_plot(const json& models, const char* field, const char* p50, const char* p95,
                         const char* unit) {
  double top = 0;
  for (const json& m : models)
    for (const json& t : m["tasks"]) top = std::max(top, t[field].get<double>());
  if (top <= 0) top = 1;
  const double left = 260, width = 420, row = 26;
  const double height = 20 + row * static_cast<double>(models.size()) + 30;
  std::string svg = fmt::format(
      "<svg width='{}' height='{}' role='img' "
      "aria-label='{} distribution'>\n",
      left + width + 30, height, unit);
  for (int t = 0; t <= 4; ++t) {
    const double x = left + width * t / 4.0;
    svg += fmt::format(
        "<line x1='{0}' y1='15' x2='{0}' y2='{1}' stroke='#ddd'/><text x='{0}' y='{2}' "
        "font-size='11' text-anchor='middle'>{3}</text>\n",
        x, height - 25, height - 10, num(top * t / 4.0));
  }
  for (size_t mi = 0; mi < models.size(); ++mi) {
    const json& m = models[mi];
    const double y = 20 + row * static_cast<double>(mi) + row / 2;
    svg += fmt::format("<text x='{}' y='{}' font-size='12' text-anchor='end'>{}</text>\n", left - 6,
                       y + 4, html_escape(short_label(m)));
    for (const json& t : m["tasks"]) {
      const double v = t[field].get<double>();
      if (t.contains("error") || v <= 0) continue;
      svg += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}' fill-opacity='0.5'/>\n",
                         left + width * v / top, y, color(mi));
    }
    for (const char* p : {p50, p95}) {
      const double v = m["latency"][p].get<double>();
      svg += fmt::format(
          "<line x1='{0:.1f}' y1='{1}' x2='{0:.1f}' y2='{2}' stroke='#000' stroke-width='2'>"
          "<title>{3} {4}</title></line>\n",
          left + width * v / top, y - 9, y + 9, p, num(v));
    }
  }
  return svg + "</svg>\n";
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string report_html(const json& report) {
  const json& models = report["models"];
  std::string h =
      "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
      "<title>boltrt eval report</title>\n<style>\n"
      "body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
      "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;"
      "font-size:13px;text-align:left;vertical-align:top}th{background:#f3f3f3}"
      ".pass{color:#107010}.fail{color:#b01010}.note{color:#666}"
      "td.out{max-width:520px;white-space:pre-wrap;word-break:break-word;font-family:monospace}"
      "\n</style>\n</head>\n<body>\n<h1>boltrt eval</h1>\n";
  h += "<h2>Summary</h2>\n<table>\n<tr><th>run</th><th>accuracy</th><th>95% CI</th><th>n</th>"
       "<th>errors</th><th>generated tokens (mean)</th><th>reasoning tokens (mean)</th>"
       "<th>TTFT p50 / p95 (ms)</th><th>decode tok/s p50 / p95</th></tr>\n";
  for (const json& m : models) {
    const json& lat = m["latency"];
    h += fmt::format(
        "<tr><td>{}</td><td>{:.1f}%</td><td>{:.1f}% – {:.1f}%</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{} / {}</td><td>{} / {}</td></tr>\n",
        html_escape(label(m)), m["accuracy"].get<double>() * 100, m["ci95"][0].get<double>() * 100,
        m["ci95"][1].get<double>() * 100, m["total"].get<int64_t>(), m["errors"].get<int64_t>(),
        num(m["tokens"]["generated_mean"].get<double>()),
        num(m["tokens"]["reasoning_mean"].get<double>()), num(lat["ttft_ms_p50"].get<double>()),
        num(lat["ttft_ms_p95"].get<double>()), num(lat["decode_tps_p50"].get<double>()),
        num(lat["decode_tps_p95"].get<double>()));
  }
  h += "</table>\n<p>";
  for (size_t i = 0; i < models.size(); ++i)
    h += fmt::format("<span style='color:{}'>&#9632;</span> {}&nbsp;&nbsp; ", color(i),
                     html_escape(label(models[i])));
  h += "</p>\n<h2>Accuracy by category</h2>\n" + category_plot(models);
  h += "<h2>Accuracy against the reasoning budget</h2>\n" + budget_plot(models, false);
  h += "<h2>Generated tokens against the reasoning budget</h2>\n" + budget_plot(models, true);
  h += "<h2>Time to first token (ms)</h2>\n" +
       latency_plot(models, "ttft_ms", "ttft_ms_p50", "ttft_ms_p95", "ms");
  h += "<h2>Decode tokens/s</h2>\n" +
       latency_plot(models, "decode_tps", "decode_tps_p50", "decode_tps_p95", "tok/s");
  const json& dis = report["disagreements"];
  h += fmt::format("<h2>Disagreements ({})</h2>\n", dis.size());
  if (!dis.empty()) {
    h += "<table>\n<tr><th>task</th>";
    for (const json& m : models) h += "<th>" + html_escape(label(m)) + "</th>";
    h += "</tr>\n";
    for (const json& d : dis) {
      h += "<tr><td>" + html_escape(d["id"].dump()) + "</td>";
      for (const json& m : models) {
        const std::string l = label(m);
        const bool p = d["passed"].contains(l) && d["passed"][l].get<bool>();
        h += p ? "<td class='pass'>pass</td>" : "<td class='fail'>fail</td>";
      }
      h += "</tr>\n";
    }
    h += "</table>\n";
  }
  h += "<h2>Tasks</h2>\n";
  for (const json& m : models) {
    h += "<details><summary>" + html_escape(label(m)) +
         "</summary>\n<table>\n<tr><th>id</th>"
         "<th>category</th><th>result</th><th>output</th><th>tokens</th><th>TTFT ms</th></tr>\n";
    for (const json& t : m["tasks"]) {
      std::string out = t["output"].get<std::string>();
      if (t.contains("tool_calls")) {
        if (!out.empty()) out += '\n';
        out += t["tool_calls"].dump();
      }
      const std::string why =
          t.contains("detail") ? " — " + t["detail"].get<std::string>() : std::string();
      h += fmt::format(
          "<tr><td>{}</td><td>{}</td><td class='{}'>{}{}</td><td class='out'>{}</td><td>{} + {}"
          "</td><td>{}</td></tr>\n",
          html_escape(t["id"].dump()), html_escape(t["category"].get<std::string>()),
          t["passed"].get<bool>() ? "pass" : "fail", t["passed"].get<bool>() ? "pass" : "fail",
          html_escape(why), html_escape(out), t["tokens"]["generated"].get<int64_t>(),
          t["tokens"]["reasoning"].get<int64_t>(), num(t["ttft_ms"].get<double>()));
    }
    h += "</table>\n</details>\n";
  }
  const json& skipped = report["skipped"];
  if (!skipped.empty()) {
    h += "<h2>Skipped task lines</h2>\n<ul>\n";
    for (const json& s : skipped)
      h += fmt::format("<li>line {}: {}</li>\n", s["line"].get<int64_t>(),
                       html_escape(s["error"].get<std::string>()));
    h += "</ul>\n";
  }
  return h + "</body>\n</html>\n";
}

}  // namespace boltrt::eval
