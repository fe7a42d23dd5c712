// A persistent thread pool: threads are created once and reused for every parallel op, so a
// decode step (hundreds of matmuls) costs no thread creation. The calling thread takes part as
// worker 0. parallel_for splits [0, n) into one contiguous range per worker.
//
// Workers spin on an atomic job counter for a short while after each job before sleeping on a
// condition variable: decode issues a parallel op every few microseconds, and a futex wake-up
// per op would cost about as much as a small matmul. Idle pools fall asleep after kSpin.
//
// run_shared is for jobs whose threads share the work through their own counter (matmul's row
// chunks): a worker that has not joined by the time the caller's own call returns skips the job,
// so the caller never waits for a thread that the OS has not scheduled yet, only for the ones
// still finishing a piece of work.
//
// A pool runs one job at a time. Callers on several threads (batch workers' drafts, API
// sessions) take turns on dispatch_mutex_: a second caller waits for the first job to finish
// instead of overwriting its state (which would leave a caller spinning forever). A job must
// not dispatch on its own pool.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace boltrt {

// Physical cores (not hyper-threads) of this machine; at least 1.
int physical_core_count();

class ThreadPool {
 public:
  // n_threads >= 1; n_threads - 1 workers are started (the caller is the n-th).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index) on every thread (0 .. size()-1) and waits for all of them. If any call
  // throws, the first exception is rethrown here after all threads have finished.
  void run(const std::function<void(int thread)>& fn);

  // Runs fn(thread_index) on the calling thread (index 0) and on each worker that joins before
  // the caller's call returns; waits for those. fn must take its work from a shared counter, as
  // any thread may be absent. Exceptions as in run().
  void run_shared(const std::function<void(int thread)>& fn);

  // Splits [0, n) into size() contiguous chunks, aligned to `grain`, and runs
  // fn(begin, end, thread) for each non-empty chunk. Waits for all.
  void parallel_for(int64_t n, int64_t grain,
                    const std::function<void(int64_t begin, int64_t end, int thread)>& fn);

 private:
  void worker_loop(int index);
  void dispatch(const std::function<void(int)>& fn, bool shared);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::mutex dispatch_mutex_;  // held by the thread whose job runs (one job at a time)
  std::condition_variable wake_;
  std::atomic<const std::function<void(int)>*> job_{nullptr};
  // Job number, shared flag and open flag (thread_pool.cpp): a new number per job; a run_shared
  // job closes when the caller's own call returns, and workers that arrive later skip it.
  std::atomic<uint64_t> state_{0};
  std::atomic<int> pending_{0};  // run(): workers still to finish the current job
  std::atomic<int> active_{0};   // run_shared(): workers inside the current job
  int sleepers_ = 0;             // workers blocked on wake_ (guarded by mutex_)
  bool stop_ = false;            // guarded by mutex_
  std::exception_ptr error_;     // first exception a worker threw (guarded by mutex_)
};

}  // namespace boltrt
