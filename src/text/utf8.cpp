#include "text/utf8.h"

namespace boltrt::text {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp <= 0x7F) {
    out.push_back(static_cast<char>(cp));
  } else if (cp <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

constexpr uint32_t kReplacement = 0xFFFD;

bool is_continuation(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

// Decodes one sequence by bit pattern only, as llama.cpp does. Returns its length, or 0 when
// the bytes at `i` do not form one (or it decodes above U+10FFFF).
size_t decode_loose(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t c = b(0);
  const size_t left = s.size() - i;
  if (!(c & 0x80)) {
    *cp = c;
    return 1;
  }
  if (!(c & 0x40)) return 0;
  if (!(c & 0x20)) {
    if (left < 2 || !is_continuation(b(1))) return 0;
    *cp = (uint32_t(c & 0x1F) << 6) | (b(1) & 0x3F);
    return 2;
  }
  if (!(c & 0x10)) {
    if (left < 3 || !is_continuation(b(1)) || !is_continuation(b(2))) return 0;
    *cp = (uint32_t(c & 0x0F) << 12) | (uint32_t(b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    return 3;
  }
  if (!(c & 0x08)) {
    if (left < 4 || !is_continuation(b(1)) || !is_continuation(b(2)) || !is_continuation(b(3))) {
      return 0;
    }
    *cp = (uint32_t(c & 0x07) << 18) | (uint32_t(b(1) & 0x3F) << 12) |
          (uint32_t(b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    return *cp <= 0x10FFFF ? 4 : 0;
  }
  return 0;
}

// Strict decoding: length of the valid sequence at `i` (0 if none), and in *prefix the number
// of bytes that are a valid-so-far prefix of some sequence (>= 1 when the return is 0 and the
// byte could start a sequence, used to find maximal invalid subparts).
size_t strict_length(std::string_view s, size_t i, size_t* prefix) {
  const uint8_t c = static_cast<uint8_t>(s[i]);
  *prefix = 0;
  if (c < 0x80) return 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  size_t k = 1;
  for (; k < need && i + k < s.size(); ++k) {
    const uint8_t b = static_cast<uint8_t>(s[i + k]);
    const uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) break;
  }
  if (k == need) return need;
  *prefix = k;
  return 0;
}

}  // namespace

std::string normalize_utf8_like_llama(std::string_view in) {
  std::string out;
  out.reserve(in.size() + in.size() / 4);
  for (size_t i = 0; i < in.size();) {
    uint32_t cp = 0;
    const size_t n = decode_loose(in, i, &cp);
    if (n == 0) {
      append_utf8(out, kReplacement);
      i += 1;
    } else {
      append_utf8(out, cp);
      i += n;
    }
  }
  return out;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t prefix;
    const size_t n = strict_length(s, i, &prefix);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

size_t incomplete_utf8_tail(std::string_view s) {
  const size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = s.size(); i > start; --i) {
    const uint8_t c = static_cast<uint8_t>(s[i - 1]);
    if (is_continuation(c)) continue;
    // `c` is the last non-continuation byte: an incomplete tail only if it leads a longer
    // sequence whose bytes so far are all valid.
    size_t prefix;
    const size_t n = strict_length(s, i - 1, &prefix);
    if (n == 0 && prefix == s.size() - (i - 1)) return prefix;
    return 0;
  }
  return 0;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t prefix;
    const size_t n = strict_length(s, i, &prefix);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      append_utf8(out, kReplacement);
      i += prefix > 0 ? prefix : 1;
    }
  }
  return out;
}

}  // namespace boltrt::text
