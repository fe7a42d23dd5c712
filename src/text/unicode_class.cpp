#include "text/unicode_class.h"

#include <algorithm>
#include <iterator>

namespace boltrt::text {

namespace {

struct Run {
  uint32_t first;
  uint8_t cls;
};

constexpr Run kRuns[] = {
#include "text/unicode_categories.inc"
};

}  // namespace

CharClass char_class(uint32_t cp) {
  if (cp < 0x80) {  // the common case, without a search
    if (cp >= '0' && cp <= '9') return CharClass::kNumber;
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return CharClass::kLetter;
    return CharClass::kOther;
  }
  if (cp > 0x10FFFF) return CharClass::kOther;
  // The last run that starts at or before cp.
  const Run* it = std::upper_bound(std::begin(kRuns), std::end(kRuns), cp,
                                   [](uint32_t c, const Run& r) { return c < r.first; });
  return static_cast<CharClass>(std::prev(it)->cls);
}

bool is_unicode_space(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return false;
  }
}

}  // namespace boltrt::text
