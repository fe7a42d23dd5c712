#include "text/escapes.h"

namespace boltrt::text {

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::string process_escapes(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\' || i + 1 >= in.size()) {
      out.push_back(in[i]);
      continue;
    }
    const char c = in[++i];
    switch (c) {
      case 'n':
        out.push_back('\n');
        continue;
      case 'r':
        out.push_back('\r');
        continue;
      case 't':
        out.push_back('\t');
        continue;
      case '\'':
        out.push_back('\'');
        continue;
      case '"':
        out.push_back('"');
        continue;
      case '\\':
        out.push_back('\\');
        continue;
      case 'x': {
        // Two characters read the way llama.cpp reads them (strtol base 16, both consumed): two
        // hex digits, or a hex digit after a space or sign ("\x 1", "\x-1" are accepted there).
        if (i + 2 < in.size()) {
          const char a = in[i + 1], b = in[i + 2];
          const int hb = hex_value(b);
          bool accepted = true;
          int value = 0;
          if (hex_value(a) >= 0 && hb >= 0) {
            value = hex_value(a) * 16 + hb;
          } else if (hb >= 0 && (a == ' ' || (a >= '\t' && a <= '\r') || a == '+')) {
            value = hb;
          } else if (hb >= 0 && a == '-') {
            value = -hb;
          } else {
            accepted = false;
          }
          if (accepted) {
            out.push_back(static_cast<char>(value));
            i += 2;
            continue;
          }
        }
        break;
      }
      default:
        break;
    }
    out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace boltrt::text
