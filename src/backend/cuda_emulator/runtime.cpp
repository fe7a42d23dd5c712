// The emulated CUDA runtime: device profiles, memory, streams, events, graphs and errors, with
// the semantics of ../shared/docs/cuda-emulation.md §2.10-2.15:
//   - device memory: every cudaMalloc is its own heap block (so AddressSanitizer sees overruns),
//     filled with 0xFF (NaN as f32 and f16) so reads of never-written memory show up; sizes are
//     accounted against the selected profile (cudaErrorMemoryAllocation past it);
//   - work is queued per stream and run later by the device thread, in stream order; the legacy
//     default stream waits for, and is waited for by, every blocking stream; non-blocking streams
//     are ordered only by themselves (the device picks among ready streams in a seeded order);
//   - copies: pinned memory is read or written when the copy runs; pageable H2D sources are
//     staged at the call (cudaMemcpy may return before the copy lands), D2H into pageable memory
//     waits; a host read before synchronising sees what was there before;
//   - capture: work on a capturing stream is recorded, kernel nodes with the argument values of
//     capture time; synchronising, allocating or using the legacy stream from the capturing
//     thread is an error that invalidates the capture; cudaGraphLaunch replays the nodes;
//   - errors: a per-host-thread last error; kernel faults (the emulator's findings) are sticky.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "backend/cuda_emulator/emu_internal.h"
#include "util/error.h"

struct CUstream_st {
  bool non_blocking = false;
  bool legacy = false;
  // capture
  bool capturing = false;
  bool invalidated = false;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id capture_thread;
  CUgraph_st* graph = nullptr;
};

struct CUgraph_st {
  std::vector<std::function<void()>> nodes;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> nodes;
};
struct CUevent_st {
  bool timing = true;
  bool recorded = false;
  std::shared_ptr<std::atomic<bool>> done;
  std::shared_ptr<double> time_ms;
};

namespace boltrt::emu {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

const Settings& settings() {
  static const Settings s = [] {
    Settings r;
    const std::string sched = env("BOLTRT_EMU_SCHEDULE");
    if (sched == "reverse") r.schedule = Schedule::kReverse;
    if (sched == "shuffle") r.schedule = Schedule::kShuffle;
    if (env("BOLTRT_EMU_RACECHECK") == "0") r.racecheck = false;
    if (env("BOLTRT_EMU_RACECHECK") == "all") r.racecheck_all = true;
    if (const std::string w = env("BOLTRT_EMU_WORKERS"); !w.empty()) {
      r.workers = std::clamp(std::atoi(w.c_str()), 1, 64);
    }
    r.abort_on_finding = env("BOLTRT_EMU_ABORT") == "1";
    return r;
  }();
  return s;
}

// ---- device profiles --------------------------------------------------------------------------
const std::vector<DeviceProfile>& device_profiles() {
  // Sizes from ../shared/docs/cuda-emulation.md §7; memory clock x bus width gives the quoted
  // bandwidth (2 x clock x bus / 8). reserved_bytes: the driver context of a discrete GPU; on
  // the Jetson the OS and its services, which share the 8 GB.
  static const std::vector<DeviceProfile> profiles = [] {
    std::vector<DeviceProfile> v;
    auto add = [&](DeviceProfile p) { v.push_back(std::move(p)); };
    const size_t MiB = 1024 * 1024;
    add({"h200", "NVIDIA H200 (emulated)", 9, 0, 132, 143771 * MiB, 500 * MiB, 3125000, 6144,
         50 * 1024 * 1024, 48 * 1024, 227 * 1024, 228 * 1024, 2048, false});
    add({"h100", "NVIDIA H100 80GB HBM3 (emulated)", 9, 0, 132, 81559 * MiB, 500 * MiB, 2619000,
         5120, 50 * 1024 * 1024, 48 * 1024, 227 * 1024, 228 * 1024, 2048, false});
    add({"rtx5070", "NVIDIA GeForce RTX 5070 (emulated)", 12, 0, 48, 12227 * MiB, 400 * MiB,
         14000000, 192, 48 * 1024 * 1024, 48 * 1024, 99 * 1024, 100 * 1024, 1536, false});
    add({"rtx4090", "NVIDIA GeForce RTX 4090 (emulated)", 8, 9, 128, 24256 * MiB, 400 * MiB,
         10501000, 384, 72 * 1024 * 1024, 48 * 1024, 99 * 1024, 100 * 1024, 1536, false});
    add({"orin-nano", "NVIDIA Jetson Orin Nano 8GB (emulated)", 8, 7, 8, 7620 * MiB, 1400 * MiB,
         2125000, 128, 2 * 1024 * 1024, 48 * 1024, 163 * 1024, 164 * 1024, 1536, true});
    return v;
  }();
  return profiles;
}

namespace {

struct DeviceState {
  std::mutex mutex;
  bool selected = false;
  bool present = true;
  DeviceProfile profile;
  size_t external = 0;
  size_t allocated = 0;
  std::map<uintptr_t, Allocation> allocations;  // by base
  std::map<const void*, int> max_dynamic_shared;
  std::vector<std::string> findings;
};

DeviceState& dev() {
  static DeviceState* d = new DeviceState;  // outlives static destructors of other objects
  return *d;
}

void select_locked(DeviceState& d, const std::string& key) {
  d.selected = true;
  d.present = key != "none";
  const std::string want = key.empty() || key == "none" ? "h200" : key;
  for (const DeviceProfile& p : device_profiles()) {
    if (p.key == want) {
      d.profile = p;
      return;
    }
  }
  std::fprintf(stderr,
               "boltrt-emu: unknown BOLTRT_EMU_DEVICE '%s' (h200, h100, rtx5070, "
               "rtx4090, orin-nano, none); using h200\n",
               key.c_str());
  d.profile = device_profiles().front();
}

DeviceState& device() {
  DeviceState& d = dev();
  std::lock_guard lock(d.mutex);
  if (!d.selected) select_locked(d, env("BOLTRT_EMU_DEVICE"));
  return d;
}

thread_local cudaError_t tl_last_error = cudaSuccess;
std::atomic<int> g_sticky{cudaSuccess};

}  // namespace

const DeviceProfile& current_profile() {
  return device().profile;
}

void select_device(const std::string& key) {
  DeviceState& d = dev();
  std::lock_guard lock(d.mutex);
  select_locked(d, key);
}

void set_external_usage(size_t bytes) {
  DeviceState& d = device();
  std::lock_guard lock(d.mutex);
  d.external = bytes;
}

cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) tl_last_error = e;
  return e;
}

cudaError_t sticky_error() {
  return static_cast<cudaError_t>(g_sticky.load());
}

void report_finding(const std::string& kernel, const std::string& what, cudaError_t code) {
  const std::string line = kernel + ": " + what;
  {
    DeviceState& d = dev();
    std::lock_guard lock(d.mutex);
    d.findings.push_back(line);
  }
  std::fprintf(stderr, "boltrt-emu: %s\n", line.c_str());
  int expected = cudaSuccess;
  g_sticky.compare_exchange_strong(expected, code);
  if (settings().abort_on_finding) std::abort();
}

std::vector<std::string> findings() {
  DeviceState& d = dev();
  std::lock_guard lock(d.mutex);
  return d.findings;
}

bool find_allocation(const void* p, size_t bytes, Allocation* out) {
  DeviceState& d = dev();
  std::lock_guard lock(d.mutex);
  const auto u = reinterpret_cast<uintptr_t>(p);
  auto it = d.allocations.upper_bound(u);
  if (it == d.allocations.begin()) return false;
  --it;
  const Allocation& a = it->second;
  if (u < a.base || u + bytes > a.base + a.size) return false;
  if (out) *out = a;
  return true;
}

size_t shared_limit_for(const void* fn) {
  DeviceState& d = device();
  std::lock_guard lock(d.mutex);
  return d.max_dynamic_shared.count(fn) ? d.profile.shared_per_block_optin
                                        : d.profile.shared_per_block;
}

cudaError_t func_set_max_dynamic_shared(const void* fn, int bytes) {
  DeviceState& d = device();
  std::lock_guard lock(d.mutex);
  if (bytes < 0 || static_cast<size_t>(bytes) > d.profile.shared_per_block_optin) {
    return set_error(cudaErrorInvalidValue);
  }
  d.max_dynamic_shared[fn] = bytes;
  return cudaSuccess;
}

// ---- the device thread: stream-ordered execution
// --------------------------------------------------
namespace {

struct Op {
  uint64_t seq = 0;
  CUstream_st* stream = nullptr;
  std::vector<std::shared_ptr<Op>> deps;
  std::function<void()> work;
  bool done = false;
};

class Executor {
 public:
  static Executor& get() {
    static Executor* e = new Executor;  // never destroyed: the device thread runs to exit
    return *e;
  }

  std::shared_ptr<Op> submit(CUstream_st* s, std::function<void()> work) {
    auto op = std::make_shared<Op>();
    op->work = std::move(work);
    op->stream = s;
    std::lock_guard lock(mutex_);
    op->seq = ++seq_;
    StreamTail& tail = tails_[s];
    if (tail.last) op->deps.push_back(tail.last);
    if (s->legacy) {
      for (auto& [other, t] : tails_) {
        if (other != s && !other->non_blocking && t.last) op->deps.push_back(t.last);
      }
      last_legacy_ = op;
    } else if (!s->non_blocking && last_legacy_) {
      op->deps.push_back(last_legacy_);
    }
    tail.last = op;
    pending_.push_back(op);
    cv_.notify_all();
    return op;
  }

  void wait(const std::shared_ptr<Op>& op) {
    if (!op) return;
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return op->done; });
  }

  void wait_stream(CUstream_st* s) {
    std::shared_ptr<Op> last;
    {
      std::lock_guard lock(mutex_);
      last = tails_[s].last;
    }
    wait(last);
  }

  void wait_all() {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return pending_.empty() && running_ == 0; });
  }

  bool stream_idle(CUstream_st* s) {
    std::lock_guard lock(mutex_);
    auto it = tails_.find(s);
    return it == tails_.end() || !it->second.last || it->second.last->done;
  }

  void forget(CUstream_st* s) {
    std::lock_guard lock(mutex_);
    tails_.erase(s);
  }

  void hold(bool on) {
    std::lock_guard lock(mutex_);
    hold_ = on;
    cv_.notify_all();
  }

 private:
  struct StreamTail {
    std::shared_ptr<Op> last;
  };

  Executor() : thread_([this] { loop(); }) { thread_.detach(); }

  static bool ready(const Op& op) {
    for (const auto& d : op.deps) {
      if (!d->done) return false;
    }
    return true;
  }

  void loop() {
    std::mt19937_64 rng(0x5EEDu);
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return !pending_.empty() && !hold_; });
      // Among the ops whose dependencies are done, take one in a seeded order: independent
      // streams really do interleave.
      std::vector<size_t> candidates;
      for (size_t i = 0; i < pending_.size(); ++i) {
        if (ready(*pending_[i])) candidates.push_back(i);
      }
      if (candidates.empty()) {
        cv_.wait(lock);
        continue;
      }
      const size_t pick = candidates[rng() % candidates.size()];
      std::shared_ptr<Op> op = pending_[pick];
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(pick));
      ++running_;
      lock.unlock();
      if (sticky_error() == cudaSuccess) op->work();
      op->work = nullptr;
      lock.lock();
      op->done = true;
      op->deps.clear();
      --running_;
      done_cv_.notify_all();
      cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::shared_ptr<Op>> pending_;
  std::map<CUstream_st*, StreamTail> tails_;
  std::shared_ptr<Op> last_legacy_;
  uint64_t seq_ = 0;
  int running_ = 0;
  bool hold_ = false;
  std::thread thread_;
};

CUstream_st* legacy_stream() {
  static CUstream_st* s = [] {
    auto* st = new CUstream_st;
    st->legacy = true;
    return st;
  }();
  return s;
}

CUstream_st* resolve(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy ? legacy_stream() : s;
}

std::mutex g_streams_mutex;
std::set<CUstream_st*> g_streams;  // created and not destroyed

// The capture the calling thread may not cross: its own ThreadLocal/Global capture, or any
// thread's Global capture (cudaStreamCaptureModeRelaxed bars nothing here).
CUstream_st* barring_capture() {
  std::lock_guard lock(g_streams_mutex);
  for (CUstream_st* s : g_streams) {
    if (!s->capturing || s->mode == cudaStreamCaptureModeRelaxed) continue;
    if (s->mode == cudaStreamCaptureModeGlobal || s->capture_thread == std::this_thread::get_id())
      return s;
  }
  return nullptr;
}

// An unsafe call during a capture: the capture is invalidated and the call fails.
cudaError_t unsafe_during_capture() {
  if (CUstream_st* s = barring_capture()) {
    s->invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  return cudaSuccess;
}

uint64_t g_launch_serial = 0;
std::mutex g_launch_mutex;

bool is_device(const void* p, size_t n) {
  Allocation a;
  return find_allocation(p, n, &a) && a.kind == MemKind::kDevice;
}
bool is_pinned(const void* p, size_t n) {
  Allocation a;
  return find_allocation(p, n, &a) && a.kind == MemKind::kPinned;
}
bool touches_device(const void* p) {
  Allocation a;
  return find_allocation(p, 1, &a) && a.kind == MemKind::kDevice;
}

double now_ms() {
  using namespace std::chrono;
  static const auto t0 = steady_clock::now();
  return duration<double, std::milli>(steady_clock::now() - t0).count();
}

}  // namespace

cudaError_t enqueue(cudaStream_t stream, std::function<void()> work) {
  CUstream_st* s = resolve(stream);
  if (s->capturing) {
    if (s->invalidated) return cudaErrorStreamCaptureInvalidated;
    if (s->mode != cudaStreamCaptureModeRelaxed &&
        s->capture_thread != std::this_thread::get_id()) {
      s->invalidated = true;
      return cudaErrorStreamCaptureWrongThread;
    }
    s->graph->nodes.push_back(std::move(work));
    return cudaSuccess;
  }
  if (s->legacy) {
    if (cudaError_t e = unsafe_during_capture(); e != cudaSuccess) return e;
  }
  Executor::get().submit(s, std::move(work));
  return cudaSuccess;
}

void launch(LaunchRequest&& r) {
  if (cudaError_t e = sticky_error(); e != cudaSuccess) {
    set_error(e);
    return;
  }
  DeviceState& d = device();
  const dim3 b = r.block, g = r.grid;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024 ||
      g.x == 0 || g.y == 0 || g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) {
    set_error(cudaErrorInvalidConfiguration);
    return;
  }
  if (const int bound = declared_launch_bounds(r.name); bound > 0 && threads > uint64_t(bound)) {
    set_error(cudaErrorLaunchOutOfResources);  // more threads than __launch_bounds__ allows
    return;
  }
  {
    std::lock_guard lock(d.mutex);
    const auto it = d.max_dynamic_shared.find(r.fn);
    const size_t max_dynamic = it != d.max_dynamic_shared.end() ? static_cast<size_t>(it->second)
                                                                : d.profile.shared_per_block;
    if (r.dynamic_shared > max_dynamic) {
      set_error(cudaErrorInvalidValue);
      return;
    }
  }
  // A kernel that dereferences a host pointer faults on the GPU (illegal address): pointer
  // arguments must be null or lie in device or pinned (mapped) memory.
  for (const PointerArg& p : r.pointers) {
    if (!p.ptr) continue;
    Allocation a;
    if (!find_allocation(p.ptr, 0, &a)) {
      report_finding(r.name,
                     fmt::format("argument {} ({}) is not device memory (a host pointer, or "
                                 "freed)",
                                 p.index, p.ptr),
                     cudaErrorIllegalAddress);
      set_error(cudaErrorIllegalAddress);
      return;
    }
  }
  auto launch = std::make_shared<KernelLaunch>();
  {
    std::lock_guard lock(g_launch_mutex);
    launch->serial = ++g_launch_serial;
  }
  launch->request = std::move(r);
  const cudaStream_t stream = launch->request.stream;
  if (cudaError_t e = enqueue(stream, [launch] { execute_kernel(*launch); }); e != cudaSuccess) {
    set_error(e);
  }
}

void hold_device(bool on) {
  Executor::get().hold(on);
}

void reset_faults() {
  Executor::get().wait_all();
  g_sticky.store(cudaSuccess);
  tl_last_error = cudaSuccess;
  DeviceState& d = dev();
  std::lock_guard lock(d.mutex);
  d.findings.clear();
}

std::string describe() {
  const DeviceProfile& p = current_profile();
  return fmt::format(
      "CUDA emulator: {} (sm_{}{}, {} SMs, {:.0f} MiB) — kernels run on the CPU, "
      "checked, not timed",
      p.name, p.major, p.minor, p.sm_count, static_cast<double>(p.total_bytes) / kMiB);
}

}  // namespace boltrt::emu

// ---- the runtime API
// ------------------------------------------------------------------------------
using namespace boltrt::emu;

namespace {

cudaError_t api(cudaError_t e) {
  return set_error(e);
}

}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return api(cudaErrorInvalidValue);
  *count = device().present ? 1 : 0;
  return device().present ? cudaSuccess : api(cudaErrorNoDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int index) {
  if (!prop) return api(cudaErrorInvalidValue);
  if (!device().present || index != 0) return api(cudaErrorInvalidDevice);
  const DeviceProfile& p = current_profile();
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "%s", p.name.c_str());
  prop->totalGlobalMem = p.total_bytes;
  prop->sharedMemPerBlock = p.shared_per_block;
  prop->sharedMemPerBlockOptin = p.shared_per_block_optin;
  prop->sharedMemPerMultiprocessor = p.shared_per_sm;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = p.major;
  prop->minor = p.minor;
  prop->multiProcessorCount = p.sm_count;
  prop->l2CacheSize = p.l2_bytes;
  prop->maxThreadsPerMultiProcessor = p.max_threads_per_sm;
  prop->integrated = p.integrated;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int index) {
  if (!value) return api(cudaErrorInvalidValue);
  if (!device().present || index != 0) return api(cudaErrorInvalidDevice);
  const DeviceProfile& p = current_profile();
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(p.shared_per_block);
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = p.sm_count;
      break;
    case cudaDevAttrMemoryClockRate:
      *value = p.memory_clock_khz;
      break;
    case cudaDevAttrGlobalMemoryBusWidth:
      *value = p.bus_width_bits;
      break;
    case cudaDevAttrL2CacheSize:
      *value = p.l2_bytes;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = p.major;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = p.minor;
      break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = static_cast<int>(p.shared_per_sm);
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.shared_per_block_optin);
      break;
    default:
      return api(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int index) {
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  if (!device().present || index != 0) return api(cudaErrorInvalidDevice);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* index) {
  if (!index) return api(cudaErrorInvalidValue);
  *index = 0;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  DeviceState& d = device();
  if (!d.present) return api(cudaErrorNoDevice);
  std::lock_guard lock(d.mutex);
  const size_t used = d.profile.reserved_bytes + d.external + d.allocated;
  if (free_bytes) *free_bytes = used >= d.profile.total_bytes ? 0 : d.profile.total_bytes - used;
  if (total_bytes) *total_bytes = d.profile.total_bytes;
  return cudaSuccess;
}

namespace {

cudaError_t allocate(void** ptr, size_t bytes, MemKind kind) {
  if (!ptr) return api(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  if (cudaError_t e = unsafe_during_capture(); e != cudaSuccess) return api(e);
  DeviceState& d = device();
  if (!d.present) return api(cudaErrorNoDevice);
  if (bytes == 0) return cudaSuccess;
  if (kind == MemKind::kDevice) {
    std::lock_guard lock(d.mutex);
    const size_t used = d.profile.reserved_bytes + d.external + d.allocated;
    if (used + bytes > d.profile.total_bytes) return api(cudaErrorMemoryAllocation);
  }
  void* p = nullptr;
  if (posix_memalign(&p, 256, bytes) != 0 || !p) return api(cudaErrorMemoryAllocation);
  std::memset(p, 0xFF, bytes);  // never-written memory reads as NaN
  std::lock_guard lock(d.mutex);
  d.allocations[reinterpret_cast<uintptr_t>(p)] =
      Allocation{reinterpret_cast<uintptr_t>(p), bytes, kind};
  if (kind == MemKind::kDevice) d.allocated += bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t release(void* ptr, MemKind kind) {
  if (!ptr) return cudaSuccess;
  if (cudaError_t e = unsafe_during_capture(); e != cudaSuccess) return api(e);
  Executor::get().wait_all();  // cudaFree synchronises: nothing in flight uses it afterwards
  DeviceState& d = device();
  {
    std::lock_guard lock(d.mutex);
    auto it = d.allocations.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == d.allocations.end() || it->second.kind != kind) {
      return api(kind == MemKind::kDevice ? cudaErrorInvalidDevicePointer : cudaErrorInvalidValue);
    }
    if (kind == MemKind::kDevice) d.allocated -= it->second.size;
    d.allocations.erase(it);
  }
  std::free(ptr);
  return cudaSuccess;
}

// Which direction a copy really is, from the pointers; error when `kind` contradicts them.
cudaError_t classify(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                     cudaMemcpyKind* out) {
  const bool dst_dev = touches_device(dst), src_dev = touches_device(src);
  cudaMemcpyKind real = dst_dev ? (src_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                : (src_dev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  if (kind != cudaMemcpyDefault && kind != real) return cudaErrorInvalidValue;
  if ((dst_dev && !is_device(dst, bytes)) || (src_dev && !is_device(src, bytes))) {
    return cudaErrorInvalidValue;  // runs past the end of its allocation
  }
  *out = real;
  return cudaSuccess;
}

// Copy work for the device thread; pageable host sources are staged now (the call has copied
// them when it returns), pinned ones are read when the copy runs.
std::function<void()> copy_work(void* dst, const void* src, size_t bytes, bool stage) {
  if (stage) {
    auto staged = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(src),
                                                         static_cast<const uint8_t*>(src) + bytes);
    return [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); };
  }
  return [dst, src, bytes] { std::memmove(dst, src, bytes); };
}

}  // namespace

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  return allocate(ptr, bytes, MemKind::kDevice);
}
cudaError_t cudaFree(void* ptr) {
  return release(ptr, MemKind::kDevice);
}
cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  return allocate(ptr, bytes, MemKind::kPinned);
}
cudaError_t cudaFreeHost(void* ptr) {
  return release(ptr, MemKind::kPinned);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  if (bytes == 0) return cudaSuccess;
  cudaMemcpyKind real;
  if (cudaError_t e = classify(dst, src, bytes, kind, &real); e != cudaSuccess) return api(e);
  if (real == cudaMemcpyHostToHost) {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  if (cudaError_t e = unsafe_during_capture(); e != cudaSuccess) return api(e);
  Executor& ex = Executor::get();
  CUstream_st* s = legacy_stream();
  if (real == cudaMemcpyHostToDevice && !is_pinned(src, bytes)) {
    // Pageable source: staged, and the call returns before the DMA lands (§2.11 case 1).
    ex.wait_stream(s);
    ex.submit(s, copy_work(dst, src, bytes, true));
    return api(sticky_error());
  }
  auto op = ex.submit(s, copy_work(dst, src, bytes, false));
  if (real != cudaMemcpyDeviceToDevice) ex.wait(op);
  return api(sticky_error());
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  if (bytes == 0) return cudaSuccess;
  cudaMemcpyKind real;
  if (cudaError_t e = classify(dst, src, bytes, kind, &real); e != cudaSuccess) return api(e);
  if (real == cudaMemcpyHostToHost) {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  CUstream_st* s = resolve(stream);
  const bool pageable_src = real == cudaMemcpyHostToDevice && !is_pinned(src, bytes);
  const bool pageable_dst = real == cudaMemcpyDeviceToHost && !is_pinned(dst, bytes);
  if (s->capturing && (pageable_src || pageable_dst)) {
    s->invalidated = true;  // only pinned and device memory are captured (§2.13)
    return api(cudaErrorStreamCaptureUnsupported);
  }
  if (cudaError_t e = enqueue(s, copy_work(dst, src, bytes, pageable_src)); e != cudaSuccess) {
    return api(e);
  }
  // A D2H copy into pageable memory is synchronous (§2.11, async case 1).
  if (pageable_dst) Executor::get().wait_stream(s);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  if (bytes == 0) return cudaSuccess;
  if (!is_device(dst, bytes)) return api(cudaErrorInvalidValue);
  if (cudaError_t e = enqueue(stream, [=] { std::memset(dst, value, bytes); }); e != cudaSuccess) {
    return api(e);
  }
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (cudaError_t e = cudaMemsetAsync(dst, value, bytes, nullptr); e != cudaSuccess) return e;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t e = unsafe_during_capture(); e != cudaSuccess) return api(e);
  Executor::get().wait_all();
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  return cudaSuccess;
}

cudaError_t cudaDeviceReset() {
  Executor::get().wait_all();
  return cudaSuccess;  // sticky faults stay: only a new process recovers (as on hardware)
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (!stream) return api(cudaErrorInvalidValue);
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  auto* s = new CUstream_st;
  s->non_blocking = (flags & cudaStreamNonBlocking) != 0;
  std::lock_guard lock(g_streams_mutex);
  g_streams.insert(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream || stream == cudaStreamLegacy) return api(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard lock(g_streams_mutex);
    if (!g_streams.erase(stream)) return api(cudaErrorInvalidResourceHandle);
  }
  // Returns at once on hardware and releases the stream when it drains; here it drains first.
  Executor::get().wait_stream(stream);
  Executor::get().forget(stream);
  delete stream;
  return cudaSuccess;
}

namespace {
// Synchronising with or querying a capturing stream is illegal and invalidates the capture.
bool invalidate_if_capturing(CUstream_st* s) {
  if (!s->capturing) return false;
  s->invalidated = true;
  return true;
}
}  // namespace

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  CUstream_st* s = resolve(stream);
  if (invalidate_if_capturing(s)) return api(cudaErrorStreamCaptureUnsupported);
  if (cudaError_t e = s->legacy ? unsafe_during_capture() : cudaSuccess; e != cudaSuccess) {
    return api(e);
  }
  Executor::get().wait_stream(s);
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  CUstream_st* s = resolve(stream);
  if (invalidate_if_capturing(s)) return api(cudaErrorStreamCaptureUnsupported);
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  return Executor::get().stream_idle(s) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (!event) return api(cudaErrorInvalidResourceHandle);
  if (!event->recorded) return cudaSuccess;
  auto done = event->done;
  return api(enqueue(stream, [done] {
    while (!done->load()) std::this_thread::yield();
  }));
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (!status) return api(cudaErrorInvalidValue);
  CUstream_st* s = resolve(stream);
  *status = !s->capturing    ? cudaStreamCaptureStatusNone
            : s->invalidated ? cudaStreamCaptureStatusInvalidated
                             : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (!event) return api(cudaErrorInvalidValue);
  auto* e = new CUevent_st;
  e->timing = (flags & cudaEventDisableTiming) == 0;
  e->done = std::make_shared<std::atomic<bool>>(false);
  e->time_ms = std::make_shared<double>(0.0);
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return api(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return api(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto time = std::make_shared<double>(0.0);
  event->done = done;
  event->time_ms = time;
  event->recorded = true;
  return api(enqueue(stream, [done, time] {
    *time = now_ms();
    done->store(true);
  }));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return api(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = unsafe_during_capture(); e != cudaSuccess) return api(e);
  if (event->recorded) {
    while (!event->done->load()) {
      if (sticky_error() != cudaSuccess) break;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return api(cudaErrorInvalidResourceHandle);
  return !event->recorded || event->done->load() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return api(cudaErrorInvalidValue);
  if (!start->recorded || !end->recorded || !start->timing || !end->timing) {
    return api(cudaErrorInvalidResourceHandle);
  }
  if (!start->done->load() || !end->done->load()) return cudaErrorNotReady;  // not a last error
  *ms = static_cast<float>(*end->time_ms - *start->time_ms);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (stream == nullptr || stream == cudaStreamLegacy)
    return api(cudaErrorStreamCaptureUnsupported);
  if (stream->capturing) return api(cudaErrorInvalidValue);  // already capturing
  stream->capturing = true;
  stream->invalidated = false;
  stream->mode = mode;
  stream->capture_thread = std::this_thread::get_id();
  stream->graph = new CUgraph_st;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!graph) return api(cudaErrorInvalidValue);
  *graph = nullptr;
  if (stream == nullptr || stream == cudaStreamLegacy || !stream->capturing) {
    return api(cudaErrorStreamCaptureUnmatched);
  }
  if (stream->mode != cudaStreamCaptureModeRelaxed &&
      stream->capture_thread != std::this_thread::get_id()) {
    return api(cudaErrorStreamCaptureWrongThread);
  }
  stream->capturing = false;
  CUgraph_st* g = stream->graph;
  stream->graph = nullptr;
  if (stream->invalidated) {
    delete g;
    stream->invalidated = false;
    return api(cudaErrorStreamCaptureInvalidated);
  }
  *graph = g;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!exec || !graph) return api(cudaErrorInvalidValue);
  auto* e = new CUgraphExec_st;
  e->nodes = graph->nodes;  // independent of the graph, which may be destroyed now
  *exec = e;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return api(cudaErrorInvalidValue);
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return api(e);
  // One op for the whole graph: its nodes run in capture order, one launch of an exec at a time.
  return api(enqueue(stream, [exec] {
    for (const auto& node : exec->nodes) {
      if (sticky_error() != cudaSuccess) return;
      node();
    }
  }));
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (exec) Executor::get().wait_all();  // a pending launch may still run it
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return e;
  const cudaError_t e = tl_last_error;
  tl_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return e;
  return tl_last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define BOLTRT_EMU_NAME(e) \
  case e:                  \
    return #e;
    BOLTRT_EMU_NAME(cudaSuccess)
    BOLTRT_EMU_NAME(cudaErrorInvalidValue)
    BOLTRT_EMU_NAME(cudaErrorMemoryAllocation)
    BOLTRT_EMU_NAME(cudaErrorInitializationError)
    BOLTRT_EMU_NAME(cudaErrorInvalidConfiguration)
    BOLTRT_EMU_NAME(cudaErrorInvalidDevicePointer)
    BOLTRT_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    BOLTRT_EMU_NAME(cudaErrorNoDevice)
    BOLTRT_EMU_NAME(cudaErrorInvalidDevice)
    BOLTRT_EMU_NAME(cudaErrorInvalidResourceHandle)
    BOLTRT_EMU_NAME(cudaErrorNotReady)
    BOLTRT_EMU_NAME(cudaErrorIllegalAddress)
    BOLTRT_EMU_NAME(cudaErrorLaunchOutOfResources)
    BOLTRT_EMU_NAME(cudaErrorLaunchTimeout)
    BOLTRT_EMU_NAME(cudaErrorAssert)
    BOLTRT_EMU_NAME(cudaErrorHardwareStackError)
    BOLTRT_EMU_NAME(cudaErrorIllegalInstruction)
    BOLTRT_EMU_NAME(cudaErrorMisalignedAddress)
    BOLTRT_EMU_NAME(cudaErrorLaunchFailure)
    BOLTRT_EMU_NAME(cudaErrorStreamCaptureUnsupported)
    BOLTRT_EMU_NAME(cudaErrorStreamCaptureInvalidated)
    BOLTRT_EMU_NAME(cudaErrorStreamCaptureMerge)
    BOLTRT_EMU_NAME(cudaErrorStreamCaptureUnmatched)
    BOLTRT_EMU_NAME(cudaErrorStreamCaptureUnjoined)
    BOLTRT_EMU_NAME(cudaErrorStreamCaptureIsolation)
    BOLTRT_EMU_NAME(cudaErrorStreamCaptureImplicit)
    BOLTRT_EMU_NAME(cudaErrorCapturedEvent)
    BOLTRT_EMU_NAME(cudaErrorStreamCaptureWrongThread)
    BOLTRT_EMU_NAME(cudaErrorUnknown)
#undef BOLTRT_EMU_NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  // The toolkit's descriptions (driver_types.h), for the codes the emulator returns.
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources:
      return "too many resources requested for launch";
    case cudaErrorMisalignedAddress:
      return "misaligned address";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched:
      return "capture was not initiated in this stream";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
    default:
      return cudaGetErrorName(error);
  }
}
