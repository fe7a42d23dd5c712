#include "text/pretokenizer.h"

#include "text/unicode_class.h"

namespace boltrt::text {

namespace {

uint32_t ascii_lower(uint32_t c) {
  return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

bool stands_for_itself(uint32_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

}  // namespace

void split_qwen35(std::span<const uint32_t> cps, std::vector<uint32_t>& lengths) {
  const size_t n = cps.size();
  auto cls = [&](size_t i) { return char_class(cps[i]); };
  auto word_char = [&](size_t i) {
    if (i >= n) return false;
    const CharClass c = cls(i);
    return c == CharClass::kLetter || c == CharClass::kMark;
  };
  auto space = [&](size_t i) { return i < n && is_unicode_space(cps[i]); };
  auto newline = [&](size_t i) { return i < n && (cps[i] == '\r' || cps[i] == '\n'); };

  size_t pos = 0;
  auto emit = [&](size_t end) {
    lengths.push_back(static_cast<uint32_t>(end - pos));
    pos = end;
  };
  while (pos < n) {
    const uint32_t c = cps[pos];
    const bool digit = cls(pos) == CharClass::kNumber;
    if (c == '\'' && pos + 1 < n) {
      const uint32_t a = ascii_lower(cps[pos + 1]);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(pos + 2);
        continue;
      }
      if (pos + 2 < n) {
        const uint32_t b = ascii_lower(cps[pos + 2]);
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
          emit(pos + 3);
          continue;
        }
      }
    }
    if (c != '\r' && c != '\n' && !digit && (word_char(pos) || word_char(pos + 1))) {
      size_t end = pos + 1;
      while (word_char(end)) ++end;
      emit(end);
      continue;
    }
    if (digit) {
      emit(pos + 1);
      continue;
    }
    const size_t first = c == ' ' ? pos + 1 : pos;
    if (first < n && !space(first) && cls(first) == CharClass::kOther) {
      size_t end = first + 1;
      while (end < n && !space(end) && cls(end) == CharClass::kOther) ++end;
      while (newline(end)) ++end;
      emit(end);
      continue;
    }
    size_t run = 0, after_last_newline = 0;
    while (space(pos + run)) {
      if (newline(pos + run)) after_last_newline = pos + run + 1;
      ++run;
    }
    if (after_last_newline > 0) {
      emit(after_last_newline);
    } else if (run > 1 && pos + run < n) {
      emit(pos + run - 1);  // leave the last space to the word that follows
    } else {
      emit(pos + (run > 0 ? run : 1));
    }
  }
}

uint32_t byte_to_level_char(uint8_t byte) {
  if (stands_for_itself(byte)) return byte;
  uint32_t k = 0;  // rank of `byte` among the bytes that do not stand for themselves
  for (uint32_t b = 0; b < byte; ++b) k += stands_for_itself(b) ? 0 : 1;
  return 0x100 + k;
}

int level_char_to_byte(uint32_t cp) {
  if (cp < 0x100) return stands_for_itself(cp) ? static_cast<int>(cp) : -1;
  if (cp >= 0x100 + 68) return -1;
  uint32_t k = cp - 0x100;
  for (uint32_t b = 0; b < 256; ++b) {
    if (stands_for_itself(b)) continue;
    if (k-- == 0) return static_cast<int>(b);
  }
  return -1;
}

}  // namespace boltrt::text
