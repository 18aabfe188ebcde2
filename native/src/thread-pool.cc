#include "thread-pool.h"

#include <chrono>
#include <climits>
#include <cstdlib>
#include <memory>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define KVT_PAUSE() _mm_pause()
#else
#define KVT_PAUSE() std::this_thread::yield()
#endif

namespace kvt {
namespace {

void futex_wait(std::atomic<uint32_t>* addr, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  while (addr->load() == expected) std::this_thread::sleep_for(std::chrono::microseconds(50));
#endif
}

void futex_wake_all(std::atomic<uint32_t>* addr) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#else
  (void)addr;
#endif
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return (end && *end == 0 && x > 0 && x < 4096) ? (int)x : fallback;
}

std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;

}  // namespace

ThreadPool::ThreadPool(int n_threads, int spin_us)
    : n_threads_(n_threads < 1 ? 1 : n_threads), spin_us_(spin_us < 0 ? 0 : spin_us) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  gen_.fetch_add(1);
  futex_wake_all(&gen_);
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_main(int tid) {
  // gen_ starts at 0; a job posted before this thread got scheduled must still run
  uint32_t seen = 0;
  for (;;) {
    auto start = std::chrono::steady_clock::now();
    int polls = 0;
    while (gen_.load(std::memory_order_acquire) == seen) {
      KVT_PAUSE();
      if (++polls == 256) {
        polls = 0;
        auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start)
                      .count();
        if (us >= spin_us_ || parked_gen_.load(std::memory_order_relaxed) == seen) {
          sleepers_.fetch_add(1);
          while (gen_.load() == seen) futex_wait(&gen_, seen);
          sleepers_.fetch_sub(1);
          break;
        }
      }
    }
    seen = gen_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    // join the current job only while it is open
    uint32_t st = job_state_.load(std::memory_order_acquire);
    bool joined = false;
    while (!(st & kClosed)) {
      if (job_state_.compare_exchange_weak(st, st + 1, std::memory_order_acq_rel)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    job_fn_(job_ctx_, tid, n_threads_);
    job_state_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(JobFn fn, void* ctx) {
  if (n_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  std::lock_guard<std::mutex> lock(run_mutex_);
  // no worker is inside a job here (state is kClosed | 0), so fn/ctx can change
  job_fn_ = fn;
  job_ctx_ = ctx;
  job_state_.store(0, std::memory_order_release);
  gen_.fetch_add(1);  // seq_cst: ordered before the sleepers_ load below
  if (sleepers_.load() > 0) futex_wake_all(&gen_);
  fn(ctx, 0, n_threads_);
  uint32_t st = job_state_.fetch_or(kClosed, std::memory_order_acq_rel);
  int polls = 0;
  while ((st & ~kClosed) != 0) {
    KVT_PAUSE();
    // a joined worker that got descheduled (2 shared cores) gets the core back sooner
    if (++polls > 4096) std::this_thread::yield();
    st = job_state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::park() { parked_gen_.store(gen_.load(std::memory_order_acquire), std::memory_order_relaxed); }

int default_thread_count() {
  int hw = (int)std::thread::hardware_concurrency();
  return env_int("KVTIER_NATIVE_THREADS", hw > 0 ? hw : 1);
}

ThreadPool& global_pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) g_pool.reset(new ThreadPool(default_thread_count(), env_int("KVTIER_NATIVE_SPIN_US", 300)));
  return *g_pool;
}

void set_global_threads(int n) {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_pool.reset();
  g_pool.reset(new ThreadPool(n > 0 ? n : default_thread_count(), env_int("KVTIER_NATIVE_SPIN_US", 300)));
}

// Round trip caller → worker → caller: the caller posts a job and spins
// until a worker has run it (bounded at 10 ms, so a worker that never comes
// shows up as a large number instead of a hang). Mean nanoseconds.
double measure_handoff_ns(ThreadPool& pool, int iters) {
  if (pool.size() < 2) return 0.0;
  struct Ctx {
    std::atomic<int> seen{0};
  } ctx;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    ctx.seen.store(0, std::memory_order_relaxed);
    pool.run(
        [](void* c, int tid, int) {
          Ctx* x = static_cast<Ctx*>(c);
          if (tid != 0) {
            x->seen.store(1, std::memory_order_release);
            return;
          }
          auto start = std::chrono::steady_clock::now();
          while (!x->seen.load(std::memory_order_acquire)) {
            KVT_PAUSE();
            if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(10)) break;
          }
        },
        &ctx);
  }
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  return (double)ns / (iters > 0 ? iters : 1);
}

}  // namespace kvt
