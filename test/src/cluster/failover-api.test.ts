/**
 * kill -9 of a Redis Cluster primary under API traffic (failover-harness.ts): 4 clients' agent loops
 * through 2 API processes and 2 workers, GC every second, renewals flowing. The primary killed holds
 * the job queue's slot. Every request completes (retries allowed) with the answer it had before the
 * kill, no live block is lost, the replica is promoted, GC resumes under the per-shard leases, and the
 * killed node rejoins as a replica. The figures are printed (`npm run bench -- failover` too).
 */
import { describe, expect, it } from 'vitest';

import { runFailoverScenario } from './failover-harness.ts';

describe('a Redis Cluster primary killed under API traffic', () => {
  it('every request completes with the right answer, nothing live is lost, GC resumes, the node rejoins', async () => {
    const figures = await runFailoverScenario((line) => console.log(`[failover] ${line}`));
    console.log(`[failover] ${JSON.stringify(figures)}`);
    expect(figures.requests).toBeGreaterThan(0);
    expect(figures.requests_failed).toBe(0);
    expect(figures.wrong_hits).toBe(0);
    expect(figures.live_blocks_lost).toBe(0);
    expect(figures.gc_resumed).toBe(true);
    expect(figures.killed_rejoined_as_replica).toBe(true);
    expect(figures.crossslot_errors).toBe(0);
  }, 600_000);
});
