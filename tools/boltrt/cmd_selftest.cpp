// boltrt selftest [--device cuda] [--quick]
// Runs the CUDA kernels on small shapes against double-precision CPU references (every weight
// type, F16 and Q8_0 KV caches; --quick: the subset checked when a process first uses a GPU)
// and prints one line per check. Exit 0 when all pass, 1 on a mismatch or a device error.
// Works on a real GPU and on the CUDA emulator (-DBOLTRT_CUDA_EMULATOR=ON).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "backend/device.h"
#include "command.h"
#include "util/error.h"
#if defined(BOLTRT_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/self_check.h"
#endif

namespace boltrt::cli {
namespace {

struct SelftestArgs {
  std::string device = "cuda";
  bool quick = false;
};

void run(const SelftestArgs& args) {
  if (args.device != "cuda") fail("selftest checks the CUDA kernels: --device cuda");
#if defined(BOLTRT_HAVE_CUDA)
  const std::string why = cuda_unavailable_reason();
  if (!why.empty()) fail("no usable CUDA device: {}", why);
  std::string reason;
  const auto info = cuda::probe_device(0, &reason);
  if (!info) fail("no usable CUDA device: {}", reason);
  fmt::print("device: {} (sm_{}{})\n", info->name, info->compute_major, info->compute_minor);
  const cuda::SelfCheckReport report = cuda::self_check(/*full=*/!args.quick);
  for (const cuda::SelfCheckResult& r : report.results) {
    fmt::print("{}  {:<52} relative error {:.2e} (limit {:.0e})\n", r.passed ? "ok  " : "FAIL",
               r.what, r.relative_error, r.tolerance);
  }
  const size_t failed =
      static_cast<size_t>(std::count_if(report.results.begin(), report.results.end(),
                                        [](const cuda::SelfCheckResult& r) { return !r.passed; }));
  fmt::print("{} checks, {} failed, {:.0f} ms\n", report.results.size(), failed, report.ms);
  std::fflush(stdout);
  if (failed) exit_with(1);
#else
  fail("{}", cuda_unavailable_reason());
#endif
}

void setup(CLI::App& sub) {
  auto args = std::make_shared<SelftestArgs>();
  sub.add_option("--device", args->device, "the device to check (cuda)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cuda"}));
  sub.add_flag("--quick", args->quick, "only the checks run when a process first uses a GPU");
  sub.callback([args] { run(*args); });
}

}  // namespace

BOLTRT_COMMAND(selftest, "Check the CUDA kernels against CPU references on small shapes", setup);

}  // namespace boltrt::cli
