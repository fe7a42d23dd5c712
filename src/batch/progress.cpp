#include "batch/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace boltrt::batch {
namespace {

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

std::string format_progress(int64_t done, int64_t total, double seconds, int64_t tokens,
                            int width) {
  const double fraction = total > 0 ? std::clamp(double(done) / double(total), 0.0, 1.0) : 1.0;
  const int filled = static_cast<int>(fraction * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), ' ');
  const double rate = seconds > 0 ? done / seconds : 0;
  const double token_rate = seconds > 0 ? tokens / seconds : 0;
  const std::string eta =
      done >= total ? "done" : (rate > 0 ? format_duration((total - done) / rate) : "--:--");
  return fmt::format("[{}] {}/{}  {:.2f} req/s  {:.0f} tok/s  ETA {}", bar, done, total, rate,
                     token_rate, eta);
}

}  // namespace boltrt::batch
