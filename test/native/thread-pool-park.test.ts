// parkThreads: an engine gone idle stops the pool's workers spinning out KVTIER_NATIVE_SPIN_US, so
// the core goes to the work that follows. Observed as CPU time in a child that alternates a pool job
// with 10 ms of idle: unparked, the worker spins ~4 ms of each idle stretch; parked, it sleeps.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

const CHILD = fileURLToPath(new URL('./thread-pool-park.child.mts', import.meta.url));
const TSX = createRequire(import.meta.url).resolve('tsx/cli');

function loopCpu(mode: 'park' | 'spin'): { threads: number; cpuMs: number } {
  const env = { ...process.env, KVTIER_NATIVE_THREADS: '2', KVTIER_NATIVE_SPIN_US: '4000' };
  return JSON.parse(execFileSync(process.execPath, [TSX, CHILD, mode], { env, encoding: 'utf8' }));
}

describe('thread pool park', () => {
  it('a parked pool sleeps through the idle stretches an unparked one spins through', () => {
    const spinning = loopCpu('spin');
    const parked = loopCpu('park');
    expect(spinning.threads).toBe(2);
    // 40 idle stretches of which an unparked worker spins ~3-4 ms each (less on a busy box, never
    // nothing); parked, it sleeps at once. The kernels' own work is the same on both sides.
    expect(spinning.cpuMs - parked.cpuMs).toBeGreaterThan(40);
  });
});
