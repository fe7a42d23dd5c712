// Internals shared by the emulator's runtime (runtime.cpp: memory, streams, graphs, events,
// errors), its block scheduler (scheduler.cpp: fibers, barriers, warp collectives, shared
// memory) and cuBLAS (cublas.cpp).
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda_emulator/emulator.h"

namespace boltrt::emu {

// ---- settings (environment, read once) ------------------------------------------------------
enum class Schedule { kForward, kReverse, kShuffle };
struct Settings {
  Schedule schedule = Schedule::kForward;
  bool racecheck = true;
  bool racecheck_all = false;  // every launch, not a sample
  int workers = 2;
  bool abort_on_finding = false;
};
const Settings& settings();

// ---- errors -----------------------------------------------------------------------------------
// Sets this host thread's last error and returns `e` (cudaGetLastError returns and clears it).
cudaError_t set_error(cudaError_t e);
// The device's sticky error (a kernel fault), cudaSuccess while there is none.
cudaError_t sticky_error();
// A finding: recorded, printed on stderr as "boltrt-emu: <kernel>: <what>", and the device's
// error becomes sticky with `code`.
void report_finding(const std::string& kernel, const std::string& what,
                    cudaError_t code = cudaErrorLaunchFailure);

// ---- memory -----------------------------------------------------------------------------------
enum class MemKind { kDevice, kPinned };
struct Allocation {
  uintptr_t base = 0;
  size_t size = 0;
  MemKind kind = MemKind::kDevice;
};
// The allocation that holds [p, p + bytes), if any.
bool find_allocation(const void* p, size_t bytes, Allocation* out);

// ---- kernel execution (scheduler.cpp) -----------------------------------------------------------
struct KernelLaunch {
  LaunchRequest request;
  uint64_t serial = 0;  // launch number: seeds the schedules
};
// Runs every block of the launch (on the device's worker threads), with the race check's
// second schedule when enabled. Called by the stream executor.
void execute_kernel(const KernelLaunch& launch);
int declared_launch_bounds(const char* name);  // 0 when the kernel declared none
void record_stats(const std::string& name, uint64_t bytes, uint64_t sectors);

// ---- streams (runtime.cpp) ----------------------------------------------------------------------
// Queues `work` on `stream` (nullptr / cudaStreamLegacy: the legacy default stream) or appends it
// to the stream's graph while it captures. Returns cudaSuccess or the error to report.
cudaError_t enqueue(cudaStream_t stream, std::function<void()> work);

}  // namespace boltrt::emu
