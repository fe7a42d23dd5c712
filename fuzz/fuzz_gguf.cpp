// libFuzzer entry point for the GGUF reader: any input must either parse or throw one
// boltrt::Error; every other outcome (crash, sanitizer report, other exception, hang) is a bug.
// After a successful parse, every value and every tensor's first and last byte is touched so
// ASan sees any out-of-mapping pointer.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/gguf.h"
#include "util/error.h"

namespace {

uint64_t touch(const boltrt::gguf::Value& v) {
  uint64_t h = static_cast<uint64_t>(v.type);
  if (const auto* a = v.as_array()) {
    for (const auto& e : a->items) h += touch(e);
  } else if (const auto* s = v.as_string()) {
    h += s->size();
  } else if (auto i = v.as_int()) {
    h += static_cast<uint64_t>(*i);
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = boltrt::gguf::File::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
    volatile uint64_t sink = 0;
    for (const auto& kv : f->metadata()) {
      sink = sink + touch(kv.value);
      if (f->find(kv.key) == nullptr) __builtin_trap();
    }
    for (const auto& t : f->tensors()) {
      if (f->find_tensor(t.name) != &t) __builtin_trap();
      if (t.nbytes > 0) {
        const uint8_t* p = f->tensor_data(t);
        sink = sink + p[0] + p[t.nbytes - 1];
      }
    }
    (void)f->architecture();
  } catch (const boltrt::Error&) {
  }
  return 0;
}
