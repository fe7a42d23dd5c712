#include "support/cuda_skip.h"

#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

namespace boltrt::test {

bool cuda_device_usable(std::string* why) {
#if !defined(BOLTRT_HAVE_CUDA)
  *why = "built without CUDA (configure with -DBOLTRT_CUDA=ON)";
  return false;
#else
  std::string reason;
  if (cuda::probe_device(0, &reason)) return true;
  *why = "no usable CUDA device: " + reason;
  return false;
#endif
}

}  // namespace boltrt::test
