// Controls of the CUDA emulator (-DBOLTRT_CUDA_EMULATOR=ON) for tests, benchmarks and the CLI's
// load line. Everything here is also settable from the environment, read once at first use:
//   BOLTRT_EMU_DEVICE=h200|h100|rtx5070|rtx4090|orin-nano|none   device profile (default h200)
//   BOLTRT_EMU_SCHEDULE=forward|reverse|shuffle                    order of a block's threads
//   BOLTRT_EMU_RACECHECK=0|1|all  run launches again under a second schedule and compare: the
//                                 first 2 of each kernel and launch shape and every 32nd after
//                                 (1, the default), every launch (all), or none (0)
//   BOLTRT_EMU_WORKERS=N          OS threads that run blocks (default 2)
//   BOLTRT_EMU_ABORT=1            abort at the first finding (for a debugger)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace boltrt::emu {

struct DeviceProfile {
  std::string key;   // "h200"
  std::string name;  // "NVIDIA H200 (emulated)"
  int major = 9, minor = 0;
  int sm_count = 132;
  size_t total_bytes = 0;
  size_t reserved_bytes = 0;  // taken at start (driver context; on Jetson the OS's share)
  int memory_clock_khz = 0, bus_width_bits = 0;
  int l2_bytes = 0;
  size_t shared_per_block = 48 * 1024;  // default (portable) limit per block
  size_t shared_per_block_optin = 0;    // cudaFuncSetAttribute maximum
  size_t shared_per_sm = 0;
  int max_threads_per_sm = 2048;
  bool integrated = false;
};

// The known profiles, and the one in use (selectable until the first CUDA call; tests call
// select_device before touching the device).
const std::vector<DeviceProfile>& device_profiles();
const DeviceProfile& current_profile();
void select_device(const std::string& key);  // "none": no device at all
// Pretend `bytes` of device memory are used by another process (memory-planning tests).
void set_external_usage(size_t bytes);

// Findings: every kernel fault, race, synchronisation or launch-limit error the emulator
// detected, each naming the kernel ("gemv_quant_kernel<...>: ..."). A finding also makes the
// device's error sticky, as a fault on hardware does.
std::vector<std::string> findings();
// Forgets findings and the sticky error, waits for the device and frees nothing (tests that
// provoke faults on purpose call it between cases).
void reset_faults();

// While held, the device thread starts no queued work (tests of asynchrony: what the host sees
// before it synchronises). Waiting for held work from the host deadlocks, so release first.
void hold_device(bool on);

// Per-launch statistics (traffic accounting): global-memory bytes requested by the kernel's
// loads and stores and 32-byte sectors touched per warp request, when the kernel objects were
// built with access instrumentation; zero otherwise.
struct KernelStats {
  std::string name;
  uint64_t launches = 0;
  uint64_t bytes_requested = 0;
  uint64_t sectors = 0;
};
std::vector<KernelStats> kernel_stats();
void clear_kernel_stats();

// One line for the CLI / API at load: "CUDA emulator: NVIDIA H200 (emulated), ...".
std::string describe();

}  // namespace boltrt::emu
