// How the emulator runs a kernel: every CUDA thread of a block is a fiber (a stack of its own,
// switched with Boost.Context's fcontext), and the threads of a block take turns on one OS thread.
// A thread runs until it reaches a synchronisation point — __syncthreads, a warp shuffle or
// vote, __syncwarp, mma.sync — or exits; the point completes when every thread CUDA says must
// arrive has arrived, and only then do the waiting threads go on. So no two threads ever run in
// lockstep, values written by another thread are seen only after the synchronisation CUDA
// requires for them, and the order in which threads run between synchronisation points is a
// parameter (forward, reverse, seeded shuffle) that the race check varies.
//
// What is checked here, each failure a finding naming the kernel (emulator.h):
//   - a __syncthreads that not every thread reaches, or that threads reach at different call
//     sites, or that waits while some threads have exited;
//   - warp collectives: the caller's lane in the mask, the same intrinsic (call site), mask and
//     width on every lane, a width that is a power of two, reads from lanes outside the mask or
//     exited, mma.sync with fewer than 32 converged lanes;
//   - shared memory: declared variables and the dynamic array live in a per-block arena filled
//     with 0xFF (NaN as f32 and f16) at block start, with guard bytes between them (poisoned for
//     AddressSanitizer, else checked for writes when the block ends); totals above the device's
//     per-block limit;
//   - the race check: each launch runs again under a second schedule (threads and blocks in
//     another order) from the same starting memory, and every byte it may write must come out
//     the same.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <boost/context/detail/fcontext.hpp>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "backend/cuda_emulator/emu_internal.h"
#include "quant/fp16.h"
#include "util/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define BOLTRT_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BOLTRT_EMU_ASAN 1
#endif
#endif
#if defined(BOLTRT_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// The warp-collective hot path (a lane's arrival at a shuffle / vote / mma, the switch to the
// next runnable lane, completing the group, the mma arithmetic) is not instrumented by the
// sanitizers: it is the emulator's own bookkeeping over one warp's 32 lanes and fixed-size
// locals, every index bounded by 32 or a loop constant, and under ASan+UBSan it was half of an
// E4B-shape CUDA test's time (compute_mma alone 40 %). The kernels (the code under test), the
// device memory they reach, fiber stacks, launches and everything else of the emulator stay
// instrumented.
#if defined(__clang__) || defined(__GNUC__)
#define BOLTRT_EMU_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined")))
#else
#define BOLTRT_EMU_UNINSTRUMENTED
#endif

namespace bctx = boost::context::detail;

namespace boltrt::emu {

thread_local const Builtins* tl_builtins = nullptr;

void builtin_outside_kernel(const char* what) {
  std::fprintf(stderr, "boltrt-emu: %s read outside a kernel\n", what);
  std::abort();
}

namespace {

#if defined(BOLTRT_EMU_ASAN)
constexpr size_t kStackBytes = 256 * 1024;
#else
constexpr size_t kStackBytes = 64 * 1024;
#endif
constexpr size_t kGuardBytes = 4096;
constexpr size_t kRedzone = 64;
constexpr uint8_t kPoison = 0xFF;
constexpr uint8_t kCanary = 0xA5;
constexpr size_t kArenaBytes = 512 * 1024;

// One fiber stack (mmap'd, with a PROT_NONE guard page below it so an overflow faults).
struct Stack {
  uint8_t* base = nullptr;  // lowest usable byte
  size_t size = 0;
  Stack() {
    void* p = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("CUDA emulator: cannot map a fiber stack");
    mprotect(p, kGuardBytes, PROT_NONE);
    base = static_cast<uint8_t*>(p) + kGuardBytes;
    size = kStackBytes;
  }
  ~Stack() {
    if (base) munmap(base - kGuardBytes, size + kGuardBytes);
  }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
};

enum class State { kRunnable, kBarrier, kWarp, kExited };
enum class Collective { kShfl, kVote, kMma };

struct BlockRun;

// One CUDA thread.
struct CudaThread {
  Builtins builtins{};
  int tid = 0, lane = 0, warp = 0;
  State state = State::kRunnable;
  bctx::fcontext_t context = nullptr;  // where to resume it
  Stack* stack = nullptr;
  BlockRun* block = nullptr;
  void* fake_stack = nullptr;
  int position = 0;       // in the block's run order
  int warp_position = 0;  // among its warp's lanes, in that order
  // What it waits at.
  const void* site = nullptr;
  Collective collective = Collective::kShfl;
  int kind = 0;  // ShflKind / VoteKind
  unsigned mask = 0;
  int width = 32, operand = 0, predicate = 0;
  uint64_t value = 0, result = 0;
  float* mma_d = nullptr;
  uint32_t mma_a[4] = {}, mma_b[2] = {};
  bool mma_bf16 = false;
};

struct SharedVar {
  const void* site;
  size_t offset, size;
  const char* name;
};

// Which lanes of a warp wait at a collective, and which have exited (or do not exist).
struct WarpState {
  unsigned waiting = 0, exited = 0;
};

// One block's execution state, reused by a worker from block to block.
struct BlockRun {
  std::vector<WarpState> warps;
  // Warp w's lanes' thread ids in run order, at [32 w, 32 w + its lane count).
  std::vector<int> warp_order;
  bctx::fcontext_t scheduler = nullptr;  // the worker's own stack, where a block starts and ends
  const void* scheduler_bottom = nullptr;
  size_t scheduler_size = 0;
  const KernelLaunch* launch = nullptr;
  std::vector<CudaThread> threads;
  std::vector<int> order;
  int n_threads = 0, n_exited = 0, n_barrier = 0;
  bool faulted = false;
  uint8_t* arena = nullptr;
  size_t arena_used = 0, static_bytes = 0, limit = 0;
  size_t dynamic_offset = 0, dynamic_size = 0;
  std::vector<SharedVar> vars;
  // The same storage as threads, warps, order and warp_order, for the uninstrumented hot path:
  // it cannot inline the instrumented std::vector accessors (each element access was a call,
  // 4 % of an E4B-shape test under ASan). Set by run_block once the vectors are sized.
  CudaThread* thread_at = nullptr;
  WarpState* warp_at = nullptr;
  const int* order_at = nullptr;
  const int* warp_order_at = nullptr;
  const char* kernel() const { return launch->request.name; }
};

thread_local BlockRun* tl_block = nullptr;
thread_local CudaThread* tl_thread = nullptr;

void on_thread_exit(CudaThread& t);  // completes what the exited thread no longer blocks

// ---- fiber switching ------------------------------------------------------------------------
void asan_start(void** save, const void* bottom, size_t size) {
#if defined(BOLTRT_EMU_ASAN)
  __sanitizer_start_switch_fiber(save, bottom, size);
#else
  (void)save, (void)bottom, (void)size;
#endif
}
void asan_finish(void* save, const void** bottom, size_t* size) {
#if defined(BOLTRT_EMU_ASAN)
  __sanitizer_finish_switch_fiber(save, bottom, size);
#else
  (void)save, (void)bottom, (void)size;
#endif
}

// Switching: a CUDA thread that must wait hands the OS thread straight to the next runnable
// thread of the block in run order (one switch, not two through a scheduler), and to the
// worker's own stack only when none is runnable: the block is done, faulted or deadlocked.
// Every jump passes the address of the slot where the jumper's continuation belongs; whoever
// resumes stores it there.
BOLTRT_EMU_UNINSTRUMENTED void store_continuation(const bctx::transfer_t& back) {
  *static_cast<bctx::fcontext_t*>(back.data) = back.fctx;
}

// The next runnable thread after `from` in run order, looking first among its own warp's lanes
// (a warp collective's lanes take turns without a pass over the whole block).
BOLTRT_EMU_UNINSTRUMENTED CudaThread* next_runnable(BlockRun& b, const CudaThread& from) {
  const int n = b.n_threads;
  const int* lanes = b.warp_order_at + from.warp * 32;
  const int m = std::min(32, n - from.warp * 32);
  // positions wrap by a compare, not `%`: an integer division per lane switch was most of this
  for (int step = 1, p = from.warp_position + 1; step < m; ++step, ++p) {
    if (p == m) p = 0;
    CudaThread& t = b.thread_at[lanes[p]];
    if (t.state == State::kRunnable) return &t;
  }
  for (int step = 1, p = from.position + 1; step <= n; ++step, ++p) {
    if (p == n) p = 0;
    CudaThread& t = b.thread_at[b.order_at[p]];
    if (t.state == State::kRunnable) return &t;
  }
  return nullptr;
}

// Leaves the calling CUDA thread; returns when some thread (or the worker) resumes it.
// Uninstrumented like the rest of the lane-switching path: its locals whose addresses go to the
// fiber API gave it an ASan stack frame (redzones poisoned and cleared on every one of the ~31
// switches per warp shuffle).
BOLTRT_EMU_UNINSTRUMENTED void switch_away(CudaThread& t) {
  BlockRun& b = *t.block;
  CudaThread* next = b.faulted ? nullptr : next_runnable(b, t);
  if (next == &t) return;  // it is runnable itself (it completed what it waited for)
  void** save = t.state == State::kExited ? nullptr : &t.fake_stack;
  bctx::transfer_t back;
  if (next) {
    asan_start(save, next->stack->base, next->stack->size);
    tl_thread = next;
    tl_builtins = &next->builtins;
    back = bctx::jump_fcontext(next->context, &t.context);
  } else {
    asan_start(save, b.scheduler_bottom, b.scheduler_size);
    tl_thread = nullptr;
    tl_builtins = nullptr;
    back = bctx::jump_fcontext(b.scheduler, &t.context);
  }
  const void* bottom = nullptr;
  size_t size = 0;
  asan_finish(t.fake_stack, &bottom, &size);
  if (back.data == &b.scheduler) {
    b.scheduler_bottom = bottom;
    b.scheduler_size = size;
  }
  store_continuation(back);
  tl_thread = &t;
  tl_builtins = &t.builtins;
}

void fiber_entry(bctx::transfer_t from) {
  CudaThread* t = tl_thread;  // set by whoever jumped here
  BlockRun& b = *t->block;
  const void* bottom = nullptr;
  size_t size = 0;
  asan_finish(nullptr, &bottom, &size);
  if (from.data == &b.scheduler) {
    b.scheduler_bottom = bottom;
    b.scheduler_size = size;
  }
  store_continuation(from);
  b.launch->request.run();
  t->state = State::kExited;
  ++b.n_exited;
  on_thread_exit(*t);
  for (;;) switch_away(*t);  // never resumed again
}

// From the worker's stack: runs the block's threads until none is runnable.
void run_threads(BlockRun& b, CudaThread& first) {
  tl_thread = &first;
  tl_builtins = &first.builtins;
  void* fake = nullptr;
  asan_start(&fake, first.stack->base, first.stack->size);
  const bctx::transfer_t back = bctx::jump_fcontext(first.context, &b.scheduler);
  asan_finish(fake, nullptr, nullptr);
  store_continuation(back);
  tl_thread = nullptr;
  tl_builtins = nullptr;
}

// ---- findings on a fiber ------------------------------------------------------------------------
std::string thread_name(const CudaThread& t) {
  const Builtins& b = t.builtins;
  return fmt::format("block ({},{},{}) thread ({},{},{})", b.block_idx.x, b.block_idx.y,
                     b.block_idx.z, b.thread_idx.x, b.thread_idx.y, b.thread_idx.z);
}

// Records the fault and parks the calling CUDA thread for good (the scheduler abandons the block).
// The message is moved into a scope that ends before parking: the frames of a parked fiber are
// never unwound, so nothing it owns may stay on them (LeakSanitizer would report it).
[[noreturn]] void fiber_fault(std::string what) {
  CudaThread& t = *tl_thread;
  BlockRun& b = *t.block;
  {
    const std::string message = std::move(what);
    if (!b.faulted && !message.empty()) report_finding(b.kernel(), thread_name(t) + ": " + message);
  }
  b.faulted = true;
  for (;;) switch_away(t);
}

BOLTRT_EMU_UNINSTRUMENTED CudaThread& current_thread(const char* what) {
  if (!tl_thread) {
    std::fprintf(stderr, "boltrt-emu: %s called outside a kernel\n", what);
    std::abort();
  }
  return *tl_thread;
}

// ---- __syncthreads ----------------------------------------------------------------------------
void try_complete_barrier(BlockRun& b) {
  if (b.n_barrier == 0 || b.n_barrier + b.n_exited < b.n_threads || b.faulted) return;
  const CudaThread* first = nullptr;
  int count = 0, all = 1, any = 0;
  for (CudaThread& t : b.threads) {
    if (t.state != State::kBarrier) continue;
    if (!first) first = &t;
    if (t.site != first->site) {
      report_finding(b.kernel(), fmt::format("__syncthreads at different call sites: {} and {} "
                                             "(a barrier in divergent code)",
                                             thread_name(*first), thread_name(t)));
      b.faulted = true;
      return;
    }
    count += t.predicate != 0;
    all &= t.predicate != 0;
    any |= t.predicate != 0;
  }
  if (b.n_exited > 0) {
    report_finding(b.kernel(), fmt::format("__syncthreads reached by {} threads while {} of the "
                                           "block's {} have exited (a barrier in divergent code)",
                                           b.n_barrier, b.n_exited, b.n_threads));
    b.faulted = true;
    return;
  }
  for (CudaThread& t : b.threads) {
    if (t.state != State::kBarrier) continue;
    t.state = State::kRunnable;
    t.result = static_cast<uint64_t>(t.kind == 1   ? count
                                     : t.kind == 2 ? all
                                     : t.kind == 3 ? any
                                                   : 0);
  }
  b.n_barrier = 0;
}

// ---- warp collectives -------------------------------------------------------------------------
unsigned existing_lanes(const BlockRun& b, int warp) {
  const int first = warp * 32;
  const int n = std::min(32, b.n_threads - first);
  return n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
}

BOLTRT_EMU_UNINSTRUMENTED void shfl_source(const CudaThread& t, int* src, bool* valid) {
  const unsigned b_op = static_cast<unsigned>(t.operand) & 31u;
  const unsigned seg = static_cast<unsigned>(32 - t.width) & 31u;
  const unsigned lane = static_cast<unsigned>(t.lane);
  const unsigned lo = lane & seg, hi = lo | (31u & ~seg);
  unsigned j = lane;
  bool ok = true;
  switch (static_cast<ShflKind>(t.kind)) {
    case ShflKind::kIdx:
      j = lo | (b_op & ~seg);
      break;
    case ShflKind::kUp:
      ok = lane >= b_op && lane - b_op >= lo;
      j = lane - b_op;
      break;
    case ShflKind::kDown:
      j = lane + b_op;
      ok = j <= hi;
      break;
    case ShflKind::kXor:
      j = lane ^ b_op;
      ok = j <= hi;
      break;
  }
  *src = static_cast<int>(j);
  *valid = ok;
}

void compute_mma(BlockRun& b, int warp);

// Completes the collective of the lanes named by `mask` (the mask of a waiting lane) when every
// named lane that has not exited waits at it; false when it cannot complete yet.
BOLTRT_EMU_UNINSTRUMENTED bool try_complete_group(BlockRun& b, int warp, const CudaThread& leader) {
  CudaThread* lanes = b.thread_at + warp * 32;
  const unsigned mask = leader.mask;
  WarpState& ws = b.warp_at[warp];
  const unsigned waiting = ws.waiting, exited = ws.exited;
  if (((waiting | exited) & mask) != mask) return false;  // a named lane has not arrived yet
  const char* what = leader.collective == Collective::kMma    ? "mma.sync"
                     : leader.collective == Collective::kVote ? "warp vote / __syncwarp"
                                                              : "warp shuffle";
  // A lane named in the mask that waits at another intrinsic, or with another mask or width,
  // can never meet this one.
  for (int l = 0; l < 32; ++l) {
    if (!((waiting & mask) >> l & 1u)) continue;
    const CudaThread& t = lanes[l];
    if (t.site != leader.site || t.collective != leader.collective || t.kind != leader.kind) {
      report_finding(b.kernel(), fmt::format("lanes of warp {} wait at different warp intrinsics "
                                             "under one mask {:#010x}: {} and {}",
                                             warp, mask, thread_name(leader), thread_name(t)));
      b.faulted = true;
      return false;
    }
    if (t.mask != mask || t.width != leader.width) {
      report_finding(b.kernel(), fmt::format("{}: lanes of warp {} disagree on the mask "
                                             "({:#010x} vs {:#010x}) or the width ({} vs {})",
                                             what, warp, mask, t.mask, leader.width, t.width));
      b.faulted = true;
      return false;
    }
  }
  const unsigned participants = waiting & mask;
  switch (leader.collective) {
    case Collective::kShfl:
      for (int l = 0; l < 32; ++l) {
        if (!(participants >> l & 1u)) continue;
        CudaThread& t = lanes[l];
        int src = l;
        bool valid = true;
        shfl_source(t, &src, &valid);
        if (!valid) {
          t.result = t.value;
        } else if (!(mask >> src & 1u)) {
          report_finding(b.kernel(), fmt::format("{} reads lane {}, outside the mask {:#010x}",
                                                 thread_name(t), src, mask));
          b.faulted = true;
          return false;
        } else if (!(participants >> src & 1u)) {
          report_finding(b.kernel(),
                         fmt::format("{} reads lane {}, which has exited", thread_name(t), src));
          b.faulted = true;
          return false;
        } else {
          t.result = lanes[src].value;
        }
      }
      break;
    case Collective::kVote: {
      unsigned ballot = 0;
      for (int l = 0; l < 32; ++l) {
        if (participants >> l & 1u && lanes[l].predicate) ballot |= 1u << l;
      }
      for (int l = 0; l < 32; ++l) {
        if (!(participants >> l & 1u)) continue;
        CudaThread& t = lanes[l];
        switch (static_cast<VoteKind>(t.kind)) {
          case VoteKind::kBallot:
            t.result = ballot;
            break;
          case VoteKind::kAny:
            t.result = ballot != 0;
            break;
          case VoteKind::kAll:
            t.result = ballot == participants;
            break;
          case VoteKind::kSyncwarp:
            t.result = 0;
            break;
        }
      }
      break;
    }
    case Collective::kMma:
      if (participants != 0xffffffffu) {
        report_finding(b.kernel(), fmt::format("mma.sync in warp {} with lanes {:#010x} only "
                                               "(all 32 lanes must execute it converged)",
                                               warp, participants));
        b.faulted = true;
        return false;
      }
      compute_mma(b, warp);
      break;
  }
  for (int l = 0; l < 32; ++l) {
    if (participants >> l & 1u) lanes[l].state = State::kRunnable;
  }
  ws.waiting &= ~participants;
  return true;
}

// Completes every collective of the warp that can complete (groups with disjoint masks wait
// independently).
void try_complete_warp(BlockRun& b, int warp) {
  bool progress = true;
  while (progress && !b.faulted) {
    progress = false;
    CudaThread* lanes = &b.threads[static_cast<size_t>(warp) * 32];
    const unsigned waiting = b.warps[static_cast<size_t>(warp)].waiting;
    for (int l = 0; l < 32 && !b.faulted; ++l) {
      if (!(waiting >> l & 1u)) continue;
      if (try_complete_group(b, warp, lanes[l])) {
        progress = true;
        break;
      }
    }
  }
}

// The findings of arrive_warp, out of line: their strings would give the hot path a stack frame.
[[noreturn]] __attribute__((noinline)) void fault_warp_operands(const CudaThread& t) {
  if (!(t.mask >> t.lane & 1u)) {
    fiber_fault(
        fmt::format("warp intrinsic with mask {:#010x} that does not name the calling "
                    "lane {}",
                    t.mask, t.lane));
  }
  fiber_fault(fmt::format("warp shuffle width {} is not a power of two in [1, 32]", t.width));
}
[[noreturn]] __attribute__((noinline)) void park_faulted() {
  fiber_fault("");
}

// Parks the calling lane at a collective until it completes; returns its result.
BOLTRT_EMU_UNINSTRUMENTED uint64_t arrive_warp(CudaThread& t) {
  t.state = State::kWarp;
  if (!(t.mask >> t.lane & 1u) || t.width < 1 || t.width > 32 || (t.width & (t.width - 1)) != 0) {
    fault_warp_operands(t);
  }
  BlockRun& b = *t.block;
  b.warp_at[t.warp].waiting |= 1u << t.lane;
  try_complete_group(b, t.warp, t);  // only the caller's group can complete by its arrival
  while (t.state != State::kRunnable) {
    switch_away(t);
    if (b.faulted) park_faulted();
  }
  return t.result;
}

// mma.m16n8k16: A row = g (+8), k = 2c (+1) (+8); B k = 2c (+1) (+8), n = g; D row g (+8),
// col 2c (+1) (PTX ISA fragment tables). Products of two f16/bf16 are exact in f32 and the
// sums are taken in double, then rounded once: a reference, not the tensor core's bits.
// Every f16 value as f32 (entries 0..65535), then every bf16 value (65536..131071), from the
// project's conversions: compute_mma is uninstrumented and so cannot inline the instrumented
// conversions, and a call per operand was 8 % of the test.
const float* half_tables() {
  static const std::vector<float> table = [] {
    std::vector<float> t(2 * 65536);
    for (uint32_t h = 0; h < 65536; ++h) {
      t[h] = fp16_to_fp32(static_cast<uint16_t>(h));
      t[65536 + h] = bf16_to_fp32(static_cast<uint16_t>(h));
    }
    return t;
  }();
  return table.data();
}

BOLTRT_EMU_UNINSTRUMENTED void compute_mma(BlockRun& b, int warp) {
  CudaThread* lanes = b.thread_at + warp * 32;
  const bool bf16 = lanes[0].mma_bf16;
  const float* decode = half_tables() + (bf16 ? 65536 : 0);  // the 16-bit format's values
  double A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; ++l) {
    const CudaThread& t = lanes[l];
    if (t.mma_bf16 != bf16) {
      report_finding(b.kernel(), "mma.sync lanes disagree on the input type");
      b.faulted = true;
      return;
    }
    const int g = l >> 2, c = l & 3;
    auto lo = [](uint32_t r) { return static_cast<uint16_t>(r & 0xffffu); };
    auto hi = [](uint32_t r) { return static_cast<uint16_t>(r >> 16); };
    A[g][2 * c] = decode[lo(t.mma_a[0])];
    A[g][2 * c + 1] = decode[hi(t.mma_a[0])];
    A[g + 8][2 * c] = decode[lo(t.mma_a[1])];
    A[g + 8][2 * c + 1] = decode[hi(t.mma_a[1])];
    A[g][2 * c + 8] = decode[lo(t.mma_a[2])];
    A[g][2 * c + 9] = decode[hi(t.mma_a[2])];
    A[g + 8][2 * c + 8] = decode[lo(t.mma_a[3])];
    A[g + 8][2 * c + 9] = decode[hi(t.mma_a[3])];
    B[2 * c][g] = decode[lo(t.mma_b[0])];
    B[2 * c + 1][g] = decode[hi(t.mma_b[0])];
    B[2 * c + 8][g] = decode[lo(t.mma_b[1])];
    B[2 * c + 9][g] = decode[hi(t.mma_b[1])];
    C[g][2 * c] = t.mma_d[0];
    C[g][2 * c + 1] = t.mma_d[1];
    C[g + 8][2 * c] = t.mma_d[2];
    C[g + 8][2 * c + 1] = t.mma_d[3];
  }
  double D[16][8];
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 8; ++n) {
      double s = C[r][n];
      for (int k = 0; k < 16; ++k) s += A[r][k] * B[k][n];
      D[r][n] = s;
    }
  }
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, c = l & 3;
    float* d = lanes[l].mma_d;
    d[0] = static_cast<float>(D[g][2 * c]);
    d[1] = static_cast<float>(D[g][2 * c + 1]);
    d[2] = static_cast<float>(D[g + 8][2 * c]);
    d[3] = static_cast<float>(D[g + 8][2 * c + 1]);
  }
}

// ---- shared memory ----------------------------------------------------------------------------
size_t align_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

void poison_bytes(uint8_t* p, size_t n) {
#if defined(BOLTRT_EMU_ASAN)
  __asan_poison_memory_region(p, n);
#else
  std::memset(p, kCanary, n);
#endif
}
void unpoison_bytes(uint8_t* p, size_t n) {
#if defined(BOLTRT_EMU_ASAN)
  __asan_unpoison_memory_region(p, n);
#else
  (void)p, (void)n;
#endif
}

void start_shared(BlockRun& b, size_t dynamic_bytes, size_t limit) {
  // Everything used by the previous block goes back to guard state; the dynamic array first.
  poison_bytes(b.arena, std::min(kArenaBytes, b.arena_used + kRedzone));
  b.vars.clear();
  b.static_bytes = 0;
  b.limit = limit;
  b.dynamic_offset = kRedzone;
  b.dynamic_size = dynamic_bytes;
  b.arena_used = b.dynamic_offset + dynamic_bytes;
  if (dynamic_bytes) {
    unpoison_bytes(b.arena + b.dynamic_offset, dynamic_bytes);
    std::memset(b.arena + b.dynamic_offset, kPoison, dynamic_bytes);
  }
}

// Guard bytes that are no longer the canary: a write past a shared variable (without ASan).
void check_shared_guards(BlockRun& b) {
#if !defined(BOLTRT_EMU_ASAN)
  std::vector<std::pair<size_t, size_t>> used;  // [begin, end) of live objects
  if (b.dynamic_size) used.emplace_back(b.dynamic_offset, b.dynamic_offset + b.dynamic_size);
  for (const SharedVar& v : b.vars) used.emplace_back(v.offset, v.offset + v.size);
  std::sort(used.begin(), used.end());
  size_t pos = 0;
  const size_t end = std::min(kArenaBytes, b.arena_used + kRedzone);
  for (size_t i = 0; i <= used.size(); ++i) {
    const size_t stop = i < used.size() ? used[i].first : end;
    for (size_t p = pos; p < stop; ++p) {
      if (b.arena[p] != kCanary) {
        std::string near = "the dynamic shared array";
        for (const SharedVar& v : b.vars) {
          if (v.offset <= p) near = v.name;
        }
        report_finding(b.kernel(), fmt::format("shared memory written out of bounds: byte {} "
                                               "after the start of '{}'",
                                               p, near));
        b.faulted = true;
        return;
      }
    }
    if (i < used.size()) pos = std::max(pos, used[i].second);
  }
#else
  (void)b;
#endif
}

// ---- block execution ----------------------------------------------------------------------------
std::vector<int> make_order(Schedule s, int n, uint64_t seed) {
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  if (s == Schedule::kReverse) std::reverse(order.begin(), order.end());
  if (s == Schedule::kShuffle) {
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

struct Worker {
  std::vector<std::unique_ptr<Stack>> stacks;
  BlockRun block;
  uint8_t* arena = nullptr;
  Worker() {
    arena = static_cast<uint8_t*>(std::aligned_alloc(256, kArenaBytes));
    std::memset(arena, kCanary, kArenaBytes);
    block.arena = arena;
  }
  ~Worker() {
#if defined(BOLTRT_EMU_ASAN)
    __asan_unpoison_memory_region(arena, kArenaBytes);
#endif
    std::free(arena);
  }
};

Worker& this_worker() {
  thread_local Worker worker;
  return worker;
}

std::string deadlock_report(const BlockRun& b) {
  int at_barrier = 0, at_warp = 0;
  const CudaThread* warp_example = nullptr;
  for (const CudaThread& t : b.threads) {
    if (t.state == State::kBarrier) ++at_barrier;
    if (t.state == State::kWarp) {
      ++at_warp;
      if (!warp_example) warp_example = &t;
    }
  }
  std::string s = fmt::format("deadlock: {} threads wait at __syncthreads, {} at warp intrinsics",
                              at_barrier, at_warp);
  if (warp_example) {
    s += fmt::format(" ({} waits with mask {:#010x} for lanes that wait elsewhere)",
                     thread_name(*warp_example), warp_example->mask);
  }
  return s;
}

// Runs one block; false when it faulted.
bool run_block(const KernelLaunch& launch, uint3 block_idx, Schedule schedule, uint64_t seed,
               size_t shared_limit) {
  Worker& w = this_worker();
  BlockRun& b = w.block;
  const LaunchRequest& r = launch.request;
  const int n = static_cast<int>(r.block.x * r.block.y * r.block.z);
  while (w.stacks.size() < static_cast<size_t>(n)) w.stacks.push_back(std::make_unique<Stack>());
  b.launch = &launch;
  b.n_threads = n;
  b.threads.assign(static_cast<size_t>(n), CudaThread{});
  b.warps.assign(static_cast<size_t>((n + 31) / 32), WarpState{});
  for (size_t wi = 0; wi < b.warps.size(); ++wi) {
    b.warps[wi].exited = ~existing_lanes(b, static_cast<int>(wi));
  }
  b.n_threads = n;
  b.n_exited = 0;
  b.n_barrier = 0;
  b.faulted = false;
  start_shared(b, r.dynamic_shared, shared_limit);
  for (int i = 0; i < n; ++i) {
    CudaThread& t = b.threads[static_cast<size_t>(i)];
    t.tid = i;
    t.lane = i & 31;
    t.warp = i >> 5;
    t.builtins.thread_idx = uint3{static_cast<unsigned>(i) % r.block.x,
                                  static_cast<unsigned>(i) / r.block.x % r.block.y,
                                  static_cast<unsigned>(i) / (r.block.x * r.block.y)};
    t.builtins.block_idx = block_idx;
    t.builtins.block_dim = r.block;
    t.builtins.grid_dim = r.grid;
    t.block = &b;
    t.stack = w.stacks[static_cast<size_t>(i)].get();
    t.context = bctx::make_fcontext(t.stack->base + t.stack->size, t.stack->size, fiber_entry);
  }
  b.order = make_order(schedule, n, seed);
  b.warp_order.assign(static_cast<size_t>(n), 0);
  int lanes_placed[32] = {};  // per warp (at most 1024 threads, checked at launch)
  for (int p = 0; p < n; ++p) {
    CudaThread& t = b.threads[static_cast<size_t>(b.order[static_cast<size_t>(p)])];
    t.position = p;
    int& placed = lanes_placed[t.warp];
    t.warp_position = placed;
    b.warp_order[static_cast<size_t>(t.warp * 32 + placed++)] = t.tid;
  }
  b.thread_at = b.threads.data();
  b.warp_at = b.warps.data();
  b.order_at = b.order.data();
  b.warp_order_at = b.warp_order.data();
  tl_block = &b;
  while (!b.faulted && b.n_exited < n) {
    CudaThread* first = nullptr;
    for (int i : b.order) {
      if (b.threads[static_cast<size_t>(i)].state == State::kRunnable) {
        first = &b.threads[static_cast<size_t>(i)];
        break;
      }
    }
    if (!first) {
      report_finding(r.name, fmt::format("block ({},{},{}): {}", block_idx.x, block_idx.y,
                                         block_idx.z, deadlock_report(b)));
      b.faulted = true;
      break;
    }
    run_threads(b, *first);
  }
  tl_block = nullptr;
  if (!b.faulted) check_shared_guards(b);
#if defined(BOLTRT_EMU_ASAN)
  // Abandoned fibers leave their frames' redzones poisoned; the next block's frames on the same
  // stacks would hit them.
  if (b.faulted) {
    for (int i = 0; i < n; ++i) {
      __asan_unpoison_memory_region(w.stacks[static_cast<size_t>(i)]->base, kStackBytes);
    }
  }
#endif
  return !b.faulted;
}

// ---- the workers that share a launch's blocks ---------------------------------------------------
class BlockPool {
 public:
  static BlockPool& get() {
    static BlockPool* pool = new BlockPool;  // never destroyed: the device thread may use it
    return *pool;                            // until the process ends
  }

  // Runs `blocks` (indices into the launch's grid, in this order of issue) on the calling thread
  // and the helpers; false when a block faulted.
  bool run(const KernelLaunch& launch, const std::vector<uint32_t>& blocks, Schedule schedule,
           uint64_t seed, size_t shared_limit) {
    std::unique_lock lock(mutex_);
    job_ = Job{&launch, &blocks, schedule, seed, shared_limit};
    next_.store(0);
    failed_.store(false);
    active_ = static_cast<int>(helpers_.size());
    ++generation_;
    cv_.notify_all();
    lock.unlock();
    work();
    lock.lock();
    done_cv_.wait(lock, [&] { return active_ == 0; });
    return !failed_.load();
  }

 private:
  struct Job {
    const KernelLaunch* launch = nullptr;
    const std::vector<uint32_t>* blocks = nullptr;
    Schedule schedule = Schedule::kForward;
    uint64_t seed = 0;
    size_t shared_limit = 0;
  };

  BlockPool() {
    const int n = std::max(0, settings().workers - 1);
    for (int i = 0; i < n; ++i) helpers_.emplace_back([this] { helper(); });
  }
  ~BlockPool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : helpers_) t.join();
  }

  void helper() {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      lock.unlock();
      work();
      lock.lock();
      if (--active_ == 0) done_cv_.notify_all();
    }
  }

  void work() {
    const Job job = job_;
    const dim3 grid = job.launch->request.grid;
    for (;;) {
      if (failed_.load()) return;
      const size_t i = next_.fetch_add(1);
      if (i >= job.blocks->size()) return;
      const uint32_t linear = (*job.blocks)[i];
      const uint3 idx{linear % grid.x, linear / grid.x % grid.y, linear / (grid.x * grid.y)};
      if (!run_block(*job.launch, idx, job.schedule, job.seed ^ (linear * 0x9E3779B97F4A7C15ull),
                     job.shared_limit)) {
        failed_.store(true);
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> helpers_;
  Job job_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> failed_{false};
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

std::mutex g_meta_mutex;
std::map<std::string, int>& launch_bounds_registry() {
  static std::map<std::string, int> m;
  return m;
}
std::map<std::string, KernelStats>& stats_registry() {
  static std::map<std::string, KernelStats> m;
  return m;
}

std::string base_name(const char* name) {
  std::string s(name);
  const size_t lt = s.find('<');
  if (lt != std::string::npos) s.resize(lt);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  const size_t colon = s.rfind("::");
  if (colon != std::string::npos) s = s.substr(colon + 2);
  return s;
}

// Snapshot of the allocations a launch may write (its non-const pointer arguments' blocks).
struct Snapshot {
  std::vector<Allocation> allocations;
  std::vector<std::vector<uint8_t>> bytes;
};

// Fills `s`, reusing its buffers: a fresh multi-megabyte copy per checked launch was mostly page
// faults (5 % of an E4B-shape test under ASan).
void take_snapshot(const LaunchRequest& r, Snapshot& s) {
  s.allocations.clear();
  size_t used = 0;
  for (const PointerArg& p : r.pointers) {
    if (!p.writable || !p.ptr) continue;
    Allocation a;
    if (!find_allocation(p.ptr, 1, &a)) continue;
    bool seen = false;
    for (const Allocation& b : s.allocations) seen |= b.base == a.base;
    if (seen) continue;
    s.allocations.push_back(a);
    const auto* src = reinterpret_cast<const uint8_t*>(a.base);
    if (s.bytes.size() <= used) s.bytes.emplace_back();
    s.bytes[used++].assign(src, src + a.size);
  }
}

void restore(const Snapshot& s) {
  for (size_t i = 0; i < s.allocations.size(); ++i) {
    std::memcpy(reinterpret_cast<void*>(s.allocations[i].base), s.bytes[i].data(),
                s.bytes[i].size());
  }
}

const char* schedule_name(Schedule s) {
  return s == Schedule::kForward ? "forward" : s == Schedule::kReverse ? "reverse" : "shuffled";
}

std::vector<uint32_t> block_order(Schedule s, uint32_t n, uint64_t seed) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = i;
  if (s == Schedule::kReverse) std::reverse(v.begin(), v.end());
  if (s == Schedule::kShuffle) {
    std::mt19937_64 rng(seed * 31 + 7);
    std::shuffle(v.begin(), v.end(), rng);
  }
  return v;
}

void on_thread_exit(CudaThread& t) {
  BlockRun& b = *t.block;
  b.warps[static_cast<size_t>(t.warp)].exited |= 1u << t.lane;
  try_complete_barrier(b);
  try_complete_warp(b, t.warp);
}

}  // namespace

// ---- intrinsics ---------------------------------------------------------------------------------
__attribute__((noinline)) int barrier(int predicate, int reduce) {
  CudaThread& t = current_thread("__syncthreads");
  t.site = __builtin_return_address(0);
  t.predicate = predicate;
  t.kind = reduce;
  t.state = State::kBarrier;
  ++t.block->n_barrier;
  try_complete_barrier(*t.block);
  while (t.state != State::kRunnable) {
    switch_away(t);
    if (t.block->faulted) fiber_fault("");
  }
  return static_cast<int>(t.result);
}

BOLTRT_EMU_UNINSTRUMENTED __attribute__((noinline)) uint64_t shfl(ShflKind kind, unsigned mask,
                                                                  uint64_t value, int operand,
                                                                  int width) {
  CudaThread& t = current_thread("a warp shuffle");
  t.site = __builtin_return_address(0);
  t.collective = Collective::kShfl;
  t.kind = static_cast<int>(kind);
  t.mask = mask;
  t.value = value;
  t.operand = operand;
  t.width = width;
  return arrive_warp(t);
}

BOLTRT_EMU_UNINSTRUMENTED __attribute__((noinline)) unsigned vote(VoteKind kind, unsigned mask,
                                                                  int predicate) {
  CudaThread& t = current_thread("a warp vote");
  t.site = __builtin_return_address(0);
  t.collective = Collective::kVote;
  t.kind = static_cast<int>(kind);
  t.mask = mask;
  t.width = 32;
  t.predicate = predicate;
  return static_cast<unsigned>(arrive_warp(t));
}

unsigned active_mask() {
  // Only the calling lane is sure to be on the current path (independent thread scheduling:
  // __activemask may return a subset), so that is the adversarial, still legal, answer.
  return 1u << current_thread("__activemask").lane;
}

__attribute__((noinline)) void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1, bool bf16) {
  CudaThread& t = current_thread("mma.sync");
  t.site = __builtin_return_address(0);
  t.collective = Collective::kMma;
  t.kind = 0;
  t.mask = 0xffffffffu;
  t.width = 32;
  t.mma_d = d;
  std::memcpy(t.mma_a, a, sizeof t.mma_a);
  t.mma_b[0] = b0;
  t.mma_b[1] = b1;
  t.mma_bf16 = bf16;
  arrive_warp(t);
}

void* block_shared(const void* site, size_t bytes, size_t align, const char* name) {
  CudaThread& t = current_thread("a __shared__ declaration");
  BlockRun& b = *t.block;
  for (const SharedVar& v : b.vars) {
    if (v.site == site) return b.arena + v.offset;
  }
  const size_t offset = align_up(b.arena_used + kRedzone, std::max<size_t>(align, 16));
  b.static_bytes += bytes;
  if (b.static_bytes + b.dynamic_size > b.limit || offset + bytes + kRedzone > kArenaBytes) {
    fiber_fault(fmt::format(
        "{} bytes of shared memory ({} static incl. '{}' + {} dynamic) "
        "exceed the {} bytes a block may use",
        b.static_bytes + b.dynamic_size, b.static_bytes, name, b.dynamic_size, b.limit));
  }
  b.vars.push_back(SharedVar{site, offset, bytes, name});
  b.arena_used = offset + bytes;
  unpoison_bytes(b.arena + offset, bytes);
  std::memset(b.arena + offset, kPoison, bytes);
  return b.arena + offset;
}

void* dynamic_shared() {
  CudaThread& t = current_thread("extern __shared__");
  return t.block->arena + t.block->dynamic_offset;
}

// ---- atomics ------------------------------------------------------------------------------------
namespace {
template <typename T>
void check_atomic_address(T* p) {
  if (reinterpret_cast<uintptr_t>(p) % alignof(T) != 0) {
    if (tl_thread) fiber_fault(fmt::format("misaligned atomic at {}", static_cast<void*>(p)));
  }
  if (tl_thread) {
    BlockRun& b = *tl_thread->block;
    const auto* u = reinterpret_cast<const uint8_t*>(p);
    if (u >= b.arena && u < b.arena + kArenaBytes) return;
    Allocation a;
    if (!find_allocation(p, sizeof(T), &a) || a.kind != MemKind::kDevice) {
      fiber_fault(fmt::format("atomic on {}, neither shared nor device memory",
                              static_cast<const void*>(p)));
    }
  }
}
}  // namespace

int atomic_add_i32(int* p, int v) {
  check_atomic_address(p);
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
unsigned atomic_add_u32(unsigned* p, unsigned v) {
  check_atomic_address(p);
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
unsigned long long atomic_add_u64(unsigned long long* p, unsigned long long v) {
  check_atomic_address(p);
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
float atomic_add_f32(float* p, float v) {
  check_atomic_address(p);
  uint32_t old_bits = __atomic_load_n(reinterpret_cast<uint32_t*>(p), __ATOMIC_RELAXED);
  for (;;) {
    float old;
    std::memcpy(&old, &old_bits, 4);
    const float sum = old + v;
    uint32_t new_bits;
    std::memcpy(&new_bits, &sum, 4);
    if (__atomic_compare_exchange_n(reinterpret_cast<uint32_t*>(p), &old_bits, new_bits, false,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      return old;
    }
  }
}
int atomic_max_i32(int* p, int v) {
  check_atomic_address(p);
  int old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v &&
         !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
int atomic_min_i32(int* p, int v) {
  check_atomic_address(p);
  int old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old > v &&
         !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
int atomic_exch_i32(int* p, int v) {
  check_atomic_address(p);
  return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);
}
int atomic_cas_i32(int* p, int compare, int v) {
  check_atomic_address(p);
  __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}

// ---- launches -----------------------------------------------------------------------------------
bool declare_launch_bounds(const char* name, int max_threads) {
  std::lock_guard lock(g_meta_mutex);
  launch_bounds_registry()[base_name(name)] = max_threads;
  return true;
}

int declared_launch_bounds(const char* name) {
  std::lock_guard lock(g_meta_mutex);
  const auto it = launch_bounds_registry().find(base_name(name));
  return it == launch_bounds_registry().end() ? 0 : it->second;
}

void record_stats(const std::string& name, uint64_t bytes, uint64_t sectors) {
  std::lock_guard lock(g_meta_mutex);
  KernelStats& s = stats_registry()[name];
  s.name = name;
  ++s.launches;
  s.bytes_requested += bytes;
  s.sectors += sectors;
}

std::vector<KernelStats> kernel_stats() {
  std::lock_guard lock(g_meta_mutex);
  std::vector<KernelStats> v;
  for (const auto& [name, s] : stats_registry()) v.push_back(s);
  return v;
}

void clear_kernel_stats() {
  std::lock_guard lock(g_meta_mutex);
  stats_registry().clear();
}

size_t shared_limit_for(const void* fn);  // runtime.cpp

// Kernels whose results legitimately depend on the order of their threads: moe_group writes
// each expert's pairs in the order its atomics hand out slots (any order is a valid grouping,
// kernels/moe_group.cu). Their race check compares nothing; test_cuda_moe checks the grouping.
bool order_dependent_by_design(const char* name) {
  return base_name(name) == "moe_group_kernel";
}

// The race check runs on the first 2 launches of every kernel in every launch shape, then on
// every 32nd (every launch with BOLTRT_EMU_RACECHECK=all): a whole-model test launches the same
// few kernels thousands of times on the same shapes, and each check copies the memory the
// launch may write twice.
bool race_check_due(const LaunchRequest& r, const Settings& cfg) {
  if (cfg.racecheck_all) return true;
  static std::mutex m;
  static std::map<std::string, uint64_t> launches;
  const std::string key = fmt::format("{} {}x{}x{} {}x{}x{} {}", r.name, r.grid.x, r.grid.y,
                                      r.grid.z, r.block.x, r.block.y, r.block.z, r.dynamic_shared);
  std::lock_guard lock(m);
  const uint64_t n = launches[key]++;
  return n < 2 || n % 32 == 0;
}

void execute_kernel(const KernelLaunch& launch) {
  const LaunchRequest& r = launch.request;
  const uint32_t n_blocks = r.grid.x * r.grid.y * r.grid.z;
  const size_t limit = shared_limit_for(r.fn);
  const Settings& cfg = settings();
  const Schedule first = cfg.schedule;
  const uint64_t seed = launch.serial * 0x2545F4914F6CDD1Dull + 1;
  const bool check = cfg.racecheck && !order_dependent_by_design(r.name) && race_check_due(r, cfg);
  // One pair of snapshots per emulator thread that executes launches, kept for their buffers.
  thread_local Snapshot before, after;
  if (check) take_snapshot(r, before);
  BlockPool& pool = BlockPool::get();
  if (!pool.run(launch, block_order(first, n_blocks, seed), first, seed, limit) || !check) return;

  // The race check: the same launch from the same memory under another schedule.
  const Schedule second = launch.serial % 2 ? Schedule::kShuffle : Schedule::kReverse;
  take_snapshot(r, after);
  restore(before);
  if (!pool.run(launch, block_order(second, n_blocks, seed + 1), second, seed + 1, limit)) return;
  for (size_t i = 0; i < after.allocations.size(); ++i) {
    const auto* now = reinterpret_cast<const uint8_t*>(after.allocations[i].base);
    const std::vector<uint8_t>& then = after.bytes[i];
    if (std::memcmp(now, then.data(), then.size()) == 0) continue;
    size_t at = 0;
    while (now[at] == then[at]) ++at;
    report_finding(r.name,
                   fmt::format("results depend on the order of its threads (a race): "
                               "byte {} of the {}-byte allocation written through its "
                               "arguments differs between the {} and {} schedules",
                               at, then.size(), schedule_name(first), schedule_name(second)));
    return;
  }
}

}  // namespace boltrt::emu
