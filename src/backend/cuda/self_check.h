// The CUDA self-check (self_check.cpp): kernels on small shapes against double-precision CPU
// references. Quick (resolve_device, on a real GPU, the first time a process uses it) or full
// (`boltrt selftest --device cuda`, any device).
#pragma once
#include <string>
#include <vector>

namespace boltrt::cuda {

struct SelfCheckResult {
  std::string what;  // "gemv q4_K 96x512 batch 3"
  double relative_error = 0;
  double tolerance = 0;
  bool passed = false;
};

struct SelfCheckReport {
  std::vector<SelfCheckResult> results;
  double ms = 0;
  bool passed() const;
  std::string first_failure() const;  // empty when everything passed
};

// Throws boltrt::Error when a launch or copy fails (a device fault included).
SelfCheckReport self_check(bool full);

}  // namespace boltrt::cuda
