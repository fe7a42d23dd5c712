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
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin first: the next job usually follows within microseconds.
    uint64_t now = generation_.load(std::memory_order_acquire);
    if (now == seen) {
      const auto deadline = std::chrono::steady_clock::now() + kSpin;
      for (int i = 0; now == seen; ++i) {
        cpu_relax();
        now = generation_.load(std::memory_order_acquire);
        if ((i & 255) == 255 && std::chrono::steady_clock::now() > deadline) break;
      }
    }
    if (now == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++sleepers_;
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      --sleepers_;
      now = generation_.load(std::memory_order_acquire);
      if (stop_) return;
    }
    seen = now;
    const std::function<void(int)>* job = job_.load(std::memory_order_acquire);
    if (job == nullptr) {  // the destructor's wake-up
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
      continue;
    }
    try {
      (*job)(index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  job_.store(&fn, std::memory_order_relaxed);
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) wake_.notify_all();
  std::exception_ptr error;
  try {
    fn(0);
  } catch (...) {
    error = std::current_exception();
  }
  // Wait for every worker even when fn threw: they still reference fn.
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < 100000) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
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
