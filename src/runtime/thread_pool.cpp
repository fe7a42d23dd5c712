#include "runtime/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace boltrt {

int physical_core_count() {
  // Count distinct (physical id, core id) pairs; fall back to hardware_concurrency.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int physical = 0, core = -1;
  while (std::getline(cpuinfo, line)) {
    auto value = [&] { return std::atoi(line.substr(line.find(':') + 1).c_str()); };
    if (line.rfind("physical id", 0) == 0) physical = value();
    if (line.rfind("core id", 0) == 0) {
      core = value();
      cores.insert({physical, core});
    }
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, n);
}

namespace {

// How long an idle worker polls for the next job before it sleeps.
constexpr std::chrono::microseconds kSpin{200};

// state_ = job number * kJobStep | kShared (a run_shared job) | kOpen (workers may join).
constexpr uint64_t kOpen = 1, kShared = 2, kJobStep = 4;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    state_.store((state_.load(std::memory_order_relaxed) / kJobStep + 1) * kJobStep,
                 std::memory_order_release);  // a new job number, not open: workers exit
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;  // job numbers start at 1
  for (;;) {
    // Spin first: the next job usually follows within microseconds.
    uint64_t now = state_.load(std::memory_order_acquire);
    if (now / kJobStep == seen) {
      const auto deadline = std::chrono::steady_clock::now() + kSpin;
      for (int i = 0; now / kJobStep == seen; ++i) {
        cpu_relax();
        now = state_.load(std::memory_order_acquire);
        if ((i & 255) == 255 && std::chrono::steady_clock::now() > deadline) break;
      }
    }
    if (now / kJobStep == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++sleepers_;
      wake_.wait(lock, [&] { return state_.load(std::memory_order_acquire) / kJobStep != seen; });
      --sleepers_;
      now = state_.load(std::memory_order_acquire);
      if (stop_) return;
    }
    seen = now / kJobStep;
    if ((now & kOpen) == 0) {  // a closed shared job, or the destructor's wake-up
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
      continue;
    }
    const std::function<void(int)>* job = job_.load(std::memory_order_acquire);
    const bool shared = (now & kShared) != 0;
    if (shared) {
      // Join only while the job is still the one we saw and open; the caller closes it and then
      // waits for active_ to drop to 0 (both sides seq_cst, so one of them sees the other).
      active_.fetch_add(1, std::memory_order_seq_cst);
      if (state_.load(std::memory_order_seq_cst) != now) {
        active_.fetch_sub(1, std::memory_order_release);
        continue;
      }
      job = job_.load(std::memory_order_acquire);
    }
    if (job == nullptr) {  // not reachable: job_ is set before a job opens
      if (shared) active_.fetch_sub(1, std::memory_order_release);
      continue;
    }
    try {
      (*job)(index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    (shared ? active_ : pending_).fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  dispatch(fn, false);
}

void ThreadPool::run_shared(const std::function<void(int)>& fn) {
  dispatch(fn, true);
}

void ThreadPool::dispatch(const std::function<void(int)>& fn, bool shared) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  std::lock_guard<std::mutex> one_job_at_a_time(dispatch_mutex_);
  job_.store(&fn, std::memory_order_relaxed);
  pending_.store(shared ? 0 : n_threads_ - 1, std::memory_order_relaxed);
  bool wake = false;
  uint64_t open = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open = (state_.load(std::memory_order_relaxed) / kJobStep + 1) * kJobStep | kOpen |
           (shared ? kShared : 0);
    state_.store(open, std::memory_order_seq_cst);
    wake = sleepers_ > 0;
  }
  if (wake) wake_.notify_all();
  std::exception_ptr error;
  try {
    fn(0);
  } catch (...) {
    error = std::current_exception();
  }
  // Wait for every worker that runs fn, even when fn threw: they still reference it. A worker
  // the OS has descheduled can take long: spin briefly, then yield the core to it.
  // A run() job stays open until every worker has run it; a shared one closes now.
  // Closing a shared job is a read-modify-write, not a plain store: with the worker's
  // fetch_add-then-load it forms a store-load (Dekker) pair, which seq_cst orders in C++ and
  // RCsc STLR/LDAR on Arm hardware, but qemu-user runs STLR + LDAR on an x86 host without a
  // fence between them, so a plain store could still sit in the store buffer when we read
  // active_ == 0 while a worker joins the job (measured: a hang in about 1 of 10 runs of
  // test_thread_pool under qemu-aarch64). An RMW is a full barrier there and costs nothing here.
  std::atomic<int>& running = shared ? active_ : pending_;
  if (shared) state_.fetch_and(~kOpen, std::memory_order_seq_cst);
  for (int i = 0; running.load(std::memory_order_seq_cst) != 0; ++i) {
    if (i < 4000) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  if (!shared) state_.store(open & ~kOpen, std::memory_order_relaxed);
  job_.store(nullptr, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error) error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  const int64_t workers = std::min<int64_t>(n_threads_, units);
  if (workers <= 1) {
    fn(0, n, 0);
    return;
  }
  run([&](int t) {
    if (t >= workers) return;
    const int64_t begin = std::min(n, (units * t / workers) * grain);
    const int64_t end = std::min(n, (units * (t + 1) / workers) * grain);
    if (begin < end) fn(begin, end, t);
  });
}

}  // namespace boltrt
