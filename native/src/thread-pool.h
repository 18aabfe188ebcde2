// Persistent worker pool with a low-latency hand-off.
//
//   caller ── job, gen++ ──► workers spin on `gen` for spin_us, then sleep on
//     │                      a futex; each runs job(tid) and bumps `done`.
//     └── runs job(0) itself, then spins until done == n-1.
//
// A decode step issues ~100 small ops, so a hand-off must cost microseconds,
// not a scheduler tick: workers keep spinning between ops of one step and
// only go to sleep after spin_us of silence.
#pragma once
#include <atomic>
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
  // Runs fn(ctx, tid, n) on every thread (tid 0 = the caller); returns when all are done.
  void run(JobFn fn, void* ctx);

 private:
  void worker_main(int tid);

  int n_threads_;
  int spin_us_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one job at a time (calls from several JS threads queue here)
  alignas(64) std::atomic<uint32_t> gen_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  alignas(64) std::atomic<int> done_{0};
  JobFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  std::atomic<bool> stop_{false};
};

// The process-wide pool (created on first use: KVTIER_NATIVE_THREADS or all cores).
ThreadPool& global_pool();
void set_global_threads(int n);  // recreate with n threads (n <= 0: default)
int default_thread_count();

// Static contiguous split of [0, n) over the pool: f(begin, end).
// Each index goes to exactly one thread and the split depends only on n and
// the thread count; kernels still make every output independent of it.
template <typename F>
void parallel_for(ThreadPool& pool, size_t n, F&& f, size_t min_per_thread = 1) {
  int t = pool.size();
  if (t <= 1 || n <= min_per_thread) {
    if (n) f((size_t)0, n);
    return;
  }
  size_t max_t = (n + min_per_thread - 1) / min_per_thread;
  int used = (int)((size_t)t < max_t ? (size_t)t : max_t);
  struct Ctx {
    F* f;
    size_t n;
    int used;
  } ctx{&f, n, used};
  pool.run(
      [](void* c, int tid, int) {
        Ctx* x = static_cast<Ctx*>(c);
        if (tid >= x->used) return;
        size_t b = x->n * (size_t)tid / (size_t)x->used;
        size_t e = x->n * (size_t)(tid + 1) / (size_t)x->used;
        if (b < e) (*x->f)(b, e);
      },
      &ctx);
}

// Dynamic split in chunks of `chunk` indices claimed from a shared counter:
// for uneven work (causal attention). f(begin, end).
template <typename F>
void parallel_for_dynamic(ThreadPool& pool, size_t n, size_t chunk, F&& f) {
  if (pool.size() <= 1 || n <= chunk) {
    if (n) f((size_t)0, n);
    return;
  }
  struct Ctx {
    F* f;
    size_t n, chunk;
    std::atomic<size_t> next;
  } ctx;
  ctx.f = &f;
  ctx.n = n;
  ctx.chunk = chunk;
  ctx.next.store(0);
  pool.run(
      [](void* c, int, int) {
        Ctx* x = static_cast<Ctx*>(c);
        for (;;) {
          size_t b = x->next.fetch_add(x->chunk);
          if (b >= x->n) return;
          size_t e = b + x->chunk < x->n ? b + x->chunk : x->n;
          (*x->f)(b, e);
        }
      },
      &ctx);
}

// Measures the round trip of an empty job: mean nanoseconds per hand-off.
double measure_handoff_ns(ThreadPool& pool, int iters);

}  // namespace kvt
