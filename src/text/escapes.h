// Backslash escapes in command-line text, as llama.cpp's tools process them by default
// (\n \r \t \' \" \\ and \xHH; any other backslash pair is kept as it is).
#pragma once
#include <string>
#include <string_view>

namespace boltrt::text {

std::string process_escapes(std::string_view in);

}  // namespace boltrt::text
