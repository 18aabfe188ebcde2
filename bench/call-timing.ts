// How long a kernel call takes: in CPU time (one thread, a busy shared machine) or as a median of wall-clock samples.

/**
 * CPU seconds per call (user+system of this process) over calls lasting at
 * least minSec: with one thread this is the kernel's own cost even when the
 * shared machine is busy (wall time then includes waiting for a core).
 */
export function cpuTime(fn: () => void, minSec = 0.3): number {
  fn();
  let calls = 0;
  const c0 = process.cpuUsage();
  const start = performance.now();
  while (calls < 3 || (performance.now() - start) / 1000 < minSec) {
    fn();
    calls++;
  }
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1e6 / calls;
}

/** Median seconds per call over `reps` calls after a warm-up, at least `minSec` in total. */
export function time(fn: () => void, minSec = 0.3): number {
  fn();
  const samples: number[] = [];
  const start = performance.now();
  while (samples.length < 5 || (performance.now() - start) / 1000 < minSec) {
    const t0 = performance.now();
    fn();
    samples.push((performance.now() - t0) / 1000);
    if (samples.length > 2000) break;
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}
