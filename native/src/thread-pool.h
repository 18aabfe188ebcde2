// Persistent worker pool with a low-latency, late-tolerant hand-off.
//
//   caller ── job, gen++ ──► workers spin on `gen` for spin_us, then sleep on
//     │                      a futex; a worker that sees the job *joins* it
//     │                      (only while it is open) and claims chunks of work.
//     └── runs the job itself, closes it, waits only for workers that joined.
//
// A decode step issues ~100 small ops, so a hand-off must cost microseconds,
// not a scheduler tick. On 2 shared cores a worker is often descheduled; with
// dynamic chunks and join-while-open the caller then simply does all the work
// instead of waiting for the worker to be scheduled again. Which thread
// computes a chunk never changes the result: kernels compute each output
// element whole, in one fixed order.
#pragma once
#include <atomic>
#include <utility>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace kvt {

class ThreadPool {
 public:
  using JobFn = void (*)(void* ctx, int tid, int n_threads);

  explicit ThreadPool(int n_threads, int spin_us);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn(ctx, tid, n) on the caller (tid 0) and on every worker that wakes
  // before the caller is done; returns when all of those are done. fn must
  // therefore split work dynamically (see parallel_for).
  void run(JobFn fn, void* ctx);
  // Workers waiting for the next job sleep now instead of spinning out spin_us: the caller has no
  // more work coming soon (an engine gone idle), and on shared cores a spinning worker takes the
  // core that the caller's own process, or another, needs next. The next run() wakes them.
  void park();

 private:
  void worker_main(int tid);

  int n_threads_;
  int spin_us_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one job at a time (calls from several JS threads queue here)
  alignas(64) std::atomic<uint32_t> gen_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  // The generation park() was called at: a worker that has seen it stops spinning.
  std::atomic<uint32_t> parked_gen_{UINT32_MAX};
  // kClosed bit | number of workers inside the current job
  static constexpr uint32_t kClosed = 0x80000000u;
  alignas(64) std::atomic<uint32_t> job_state_{kClosed};
  JobFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  std::atomic<bool> stop_{false};
};

// The process-wide pool (created on first use: KVTIER_NATIVE_THREADS or all cores).
ThreadPool& global_pool();
void set_global_threads(int n);  // recreate with n threads (n <= 0: default)
int default_thread_count();

// Fixed chunk size (uneven work such as causal attention).
template <typename F>
void parallel_for_dynamic(ThreadPool& pool, size_t n, size_t chunk, F&& f) {
  if (n == 0) return;
  if (pool.size() <= 1 || n <= chunk) {
    f((size_t)0, n);
    return;
  }
  struct Ctx {
    F* f;
    size_t n, chunk;
    alignas(64) std::atomic<size_t> next;
  } ctx;
  ctx.f = &f;
  ctx.n = n;
  ctx.chunk = chunk;
  ctx.next.store(0, std::memory_order_relaxed);
  pool.run(
      [](void* c, int, int) {
        Ctx* x = static_cast<Ctx*>(c);
        for (;;) {
          size_t b = x->next.fetch_add(x->chunk, std::memory_order_relaxed);
          if (b >= x->n) return;
          size_t e = b + x->chunk < x->n ? b + x->chunk : x->n;
          (*x->f)(b, e);
        }
      },
      &ctx);
}

// Splits [0, n) into chunks of at least min_chunk indices claimed from a
// shared counter: f(begin, end) runs once per chunk, on whichever thread
// claims it. Kernels make every output independent of that choice.
template <typename F>
void parallel_for(ThreadPool& pool, size_t n, F&& f, size_t min_chunk = 1) {
  int t = pool.size();
  // ~4 chunks per thread: balance without much counter traffic
  size_t chunk = t <= 1 ? n : (n + (size_t)t * 4 - 1) / ((size_t)t * 4);
  if (chunk < min_chunk) chunk = min_chunk;
  parallel_for_dynamic(pool, n, chunk, std::forward<F>(f));
}

// Mean nanoseconds for the caller to hand a job to a worker and see it run (0 with 1 thread).
double measure_handoff_ns(ThreadPool& pool, int iters);

}  // namespace kvt
