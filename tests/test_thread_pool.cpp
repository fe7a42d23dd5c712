#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"

namespace boltrt {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 33, 1000}) {
      for (int64_t grain : {1, 4, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int t) {
          EXPECT_GE(t, 0);
          EXPECT_LT(t, threads);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
        for (auto& h : hits) EXPECT_EQ(h.load(), 1);
      }
    }
  }
}

TEST(ThreadPool, RunUsesEveryThreadAndIsReusable) {
  ThreadPool pool(4);
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> mask{0};
    pool.run([&](int t) { mask |= 1 << t; });
    ASSERT_EQ(mask.load(), 0xF);
  }
}

// Callers on several threads at once (batch workers drafting, API sessions) take turns: every
// job runs whole and nobody waits forever (before the turn-taking, two concurrent dispatches
// overwrote each other's job state and one caller spun forever).
TEST(ThreadPool, CallersOnSeveralThreadsTakeTurns) {
  ThreadPool pool(2);
  constexpr int kCallers = 4, kRounds = 300;
  constexpr int64_t kN = 97;
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < kRounds; ++round) {
        std::vector<int> hits(static_cast<size_t>(kN), 0);
        if ((round + c) % 2 == 0) {
          pool.parallel_for(kN, 1, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          });
        } else {
          std::atomic<int64_t> next{0};
          pool.run_shared([&](int) {
            for (int64_t i; (i = next.fetch_add(1)) < kN;) hits[static_cast<size_t>(i)]++;
          });
        }
        int64_t sum = 0;
        for (int h : hits) sum += h;
        total += sum;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), int64_t{kCallers} * kRounds * kN);
}

TEST(ThreadPool, PhysicalCoresAtLeastOne) {
  EXPECT_GE(physical_core_count(), 1);
}

TEST(ThreadPool, ExceptionsReachTheCallerAfterAllThreadsFinish) {
  ThreadPool pool(3);
  for (int thrower : {0, 1, 2}) {
    std::atomic<int> finished{0};
    EXPECT_THROW(pool.run([&](int t) {
      if (t == thrower) throw std::runtime_error("job failed");
      finished++;
    }),
                 std::runtime_error);
    EXPECT_EQ(finished.load(), 2);
  }
  // The pool is still usable.
  std::atomic<int> ran{0};
  pool.run([&](int) { ran++; });
  EXPECT_EQ(ran.load(), 3);
}

// run_shared: work taken from a shared counter is done exactly once whichever threads join, the
// thread indices are in range, and it interleaves with run() and parallel_for on the same pool
// (a worker that missed a shared job must not run the next job twice).
TEST(ThreadPool, RunSharedDoesEachPieceOnceAndMixesWithRun) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 2000; ++round) {
      const int64_t n = round % 7 == 0 ? 1 : 64;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int64_t> next{0};
      pool.run_shared([&](int t) {
        EXPECT_GE(t, 0);
        EXPECT_LT(t, threads);
        for (int64_t i; (i = next.fetch_add(1)) < n;) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
      if (round % 3 == 0) {
        std::atomic<int> mask{0}, calls{0};
        pool.run([&](int t) {
          mask |= 1 << t;
          calls++;
        });
        ASSERT_EQ(mask.load(), (1 << threads) - 1);
        ASSERT_EQ(calls.load(), threads);
      }
    }
  }
}

TEST(ThreadPool, RunSharedPassesExceptionsOn) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run_shared([](int t) {
    if (t == 0) throw std::runtime_error("job failed");
  }),
               std::runtime_error);
  std::atomic<int> ran{0};
  pool.run([&](int) { ran++; });
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace boltrt
