// boltrt::Error — the one exception type the engine throws for bad input and failed resources.
// Its message is a single line that names the thing that is wrong (file, field, byte offset,
// tensor name, ...). The CLI prints it as "boltrt: error: <message>" and exits non-zero.
#pragma once
#include <fmt/format.h>

#include <boltrt/error.h>

#include <stdexcept>
#include <string>

namespace boltrt {

// The class itself is public (include/boltrt/error.h): library users catch the same type.

// fail("{}: tensor '{}' has shape {}", path, name, shape) — format and throw.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace boltrt
