// The device-skip preamble of the CUDA tests in one place: CUDA tests SKIP (a skip is not a
// pass; CI has no GPU) with the reason when the build has no CUDA or no usable device exists.
//   void SetUp() override { BOLTRT_SKIP_WITHOUT_CUDA_DEVICE(); }
#pragma once
#include <gtest/gtest.h>

#include <string>

namespace boltrt::test {

// True when the build has CUDA and device 0 is usable; otherwise false with the reason in *why
// ("built without CUDA (...)" or "no usable CUDA device: ...").
bool cuda_device_usable(std::string* why);

}  // namespace boltrt::test

// GTEST_SKIP returns from the calling function (SetUp or a TEST body).
#define BOLTRT_SKIP_WITHOUT_CUDA_DEVICE()                           \
  do {                                                              \
    std::string boltrt_skip_reason;                                 \
    if (!::boltrt::test::cuda_device_usable(&boltrt_skip_reason)) { \
      GTEST_SKIP() << boltrt_skip_reason;                           \
    }                                                               \
  } while (false)
