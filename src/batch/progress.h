// A one-line progress bar for stderr: done/total, requests/s, tokens/s and ETA, redrawn in place.
#pragma once
#include <cstdint>
#include <string>

namespace boltrt::batch {

// The text of the bar (without "\r"), e.g.
// "[##########          ]  50/100  2.5 req/s  310 tok/s  ETA 0:20". `width` is the bar's.
std::string format_progress(int64_t done, int64_t total, double seconds, int64_t tokens,
                            int width = 24);

}  // namespace boltrt::batch
