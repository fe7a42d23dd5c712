#include "generate/text_stream.h"

#include <algorithm>

namespace boltrt {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool is_continuation(unsigned char b, unsigned char low = 0x80, unsigned char high = 0xBF) {
  return b >= low && b <= high;
}

}  // namespace

size_t decode_utf8_replacing(std::string_view bytes, bool final, std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead < 0x80) {
      out.push_back(static_cast<char>(lead));
      ++i;
      continue;
    }
    // Length of the sequence and the allowed range of its second byte (which excludes
    // overlong forms, surrogates and code points above U+10FFFF).
    size_t length = 0;
    unsigned char second_low = 0x80, second_high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) second_low = 0xA0;
      if (lead == 0xED) second_high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) second_low = 0x90;
      if (lead == 0xF4) second_high = 0x8F;
    }
    if (length == 0) {  // stray continuation byte or a byte that never starts a character
      out += kReplacement;
      ++i;
      continue;
    }
    size_t valid = 1;  // bytes of this sequence that are valid so far
    while (valid < length && i + valid < bytes.size()) {
      const auto b = static_cast<unsigned char>(bytes[i + valid]);
      const bool ok = valid == 1 ? is_continuation(b, second_low, second_high) : is_continuation(b);
      if (!ok) break;
      ++valid;
    }
    if (valid == length) {
      out.append(bytes.substr(i, length));
      i += length;
    } else if (i + valid == bytes.size() && !final) {
      return i;  // unfinished character: wait for the next token
    } else {
      out += kReplacement;  // the maximal invalid subpart becomes one U+FFFD
      i += valid;
    }
  }
  return i;
}

TextStream::TextStream(std::vector<std::string> stop_strings) {
  for (auto& s : stop_strings) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string TextStream::push(std::string_view bytes) {
  if (stopped_) return {};
  undecoded_.append(bytes);
  const size_t used = decode_utf8_replacing(undecoded_, false, held_);
  undecoded_.erase(0, used);
  return release_checked(false);
}

std::string TextStream::finish() {
  if (stopped_) return {};
  decode_utf8_replacing(undecoded_, true, held_);
  undecoded_.clear();
  return release_checked(true);
}

// Releases held_ up to the first stop string (and stops), or up to the longest suffix that is
// still the start of some stop string (kept for the next token) — all of it when final.
std::string TextStream::release_checked(bool final) {
  size_t first_match = std::string::npos;
  for (const auto& stop : stops_) {
    const size_t at = held_.find(stop);
    if (at != std::string::npos && (first_match == std::string::npos || at < first_match)) {
      first_match = at;
      matched_stop_ = stop;
    }
  }
  std::string out;
  if (first_match != std::string::npos) {
    out = held_.substr(0, first_match);
    held_.clear();
    stopped_ = true;
  } else {
    size_t keep = 0;
    if (!final) {
      for (const auto& stop : stops_) {
        const size_t longest = std::min(stop.size() - 1, held_.size());
        for (size_t n = longest; n > keep; --n) {
          if (std::string_view(held_).substr(held_.size() - n) ==
              std::string_view(stop).substr(0, n)) {
            keep = n;
            break;
          }
        }
      }
    }
    out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
  }
  released_ += out;
  return out;
}

}  // namespace boltrt
