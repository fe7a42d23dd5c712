// The HTML form of a `boltrt eval` report (report.h's JSON): one self-contained page — inline
// CSS and SVG, no scripts, no external resources — with the summary table, accuracy by category
// (bars with 95 % intervals), accuracy and tokens against the reasoning budget (one line per
// model, when a run has a budget), latency distributions (time to first token and decode
// tokens/s per task, p50 and p95 marked), the disagreements and every task's row.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace boltrt::eval {

std::string report_html(const nlohmann::ordered_json& report);

// Text escaped for HTML element content and attribute values.
std::string html_escape(const std::string& text);

}  // namespace boltrt::eval
