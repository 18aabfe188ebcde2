import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

import { describe, expect, it } from 'vitest';

import { WriteBehindQueue } from '../../../src/kvtier/write-behind-queue.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

describe('WriteBehindQueue', () => {
  it('holds no finished job: what a job captured (block payloads) is collectable once it ran', async () => {
    // Before the fix a finished job stayed in the FIFO array until 1024 more had run, so a
    // soak server kept up to 1024 requests' worth of KV payloads alive (RSS climbing).
    const queue = new WriteBehindQueue(1 << 30, 2, (error) => {
      throw error;
    });
    const refs: WeakRef<Uint8Array>[] = [];
    for (let i = 0; i < 20; i++) {
      const payload = new Uint8Array(1 << 16);
      refs.push(new WeakRef(payload));
      queue.offer({ key: `k${i}`, bytes: payload.byteLength, run: async () => void payload.byteLength });
    }
    await queue.drain();
    expect(queue.queuedJobs).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 0));
    gc();
    expect(refs.filter((ref) => ref.deref() !== undefined).length).toBe(0);
  });

  it('below(n) resolves once at most n jobs are left, while the rest still run', async () => {
    const queue = new WriteBehindQueue(1 << 30, 2, (error) => {
      throw error;
    });
    const gates: (() => void)[] = [];
    for (let i = 0; i < 6; i++) queue.offer({ key: `k${i}`, bytes: 1, run: () => new Promise<void>((resolve) => gates.push(resolve)) });
    await expect(queue.below(6)).resolves.toBeUndefined();
    let below = false;
    const waiting = queue.below(3).then(() => (below = true));
    // Two jobs finish: four are left, above the bound.
    gates[0]();
    gates[1]();
    await new Promise((resolve) => setImmediate(resolve));
    expect(below).toBe(false);
    expect(queue.queuedJobs).toBe(4);
    gates[2]();
    await waiting;
    expect(queue.queuedJobs).toBe(3);
    for (let i = 3; i < 6; i++) {
      while (gates.length <= i) await new Promise((resolve) => setImmediate(resolve));
      gates[i]();
    }
    await queue.drain();
    expect(queue.queuedJobs).toBe(0);
  });

  it('still runs every job FIFO with the concurrency bound after the array is compacted', async () => {
    const queue = new WriteBehindQueue(1 << 30, 3, (error) => {
      throw error;
    });
    const order: number[] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    for (let i = 0; i < 3000; i++) {
      queue.offer({
        key: `k${i}`,
        bytes: 1,
        run: async () => {
          inFlight++;
          maxInFlight = Math.max(maxInFlight, inFlight);
          order.push(i);
          await Promise.resolve();
          inFlight--;
        },
      });
    }
    await queue.drain();
    expect(order).toEqual(Array.from({ length: 3000 }, (_, i) => i));
    expect(maxInFlight).toBe(3);
    expect(queue.queuedBytes).toBe(0);
  });

  it('a job that reports its put landed frees its slot for the next, and stays held (key, bytes, drain) until it settles', async () => {
    const queue = new WriteBehindQueue(1 << 30, 1, (error) => {
      throw error;
    });
    let recorded!: () => void;
    const records = new Promise<void>((resolve) => (recorded = resolve));
    const started: string[] = [];
    queue.offer({
      key: 'a',
      bytes: 10,
      run: async (putLanded) => {
        started.push('a');
        await Promise.resolve();
        putLanded();
        putLanded(); // twice is once
        await records;
      },
    });
    queue.offer({ key: 'b', bytes: 20, run: async () => void started.push('b') });
    queue.offer({ key: 'c', bytes: 30, run: async () => void started.push('c') });
    for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
    // b and c ran one at a time in the freed slot while a is still recording.
    expect(started).toEqual(['a', 'b', 'c']);
    expect(queue.has('a')).toBe(true);
    expect(queue.offer({ key: 'a', bytes: 10, run: async () => {} })).toBe('duplicate');
    expect(queue.queuedBytes).toBe(10);
    expect(queue.queuedJobs).toBe(1);
    let drained = false;
    const drain = queue.drain().then(() => (drained = true));
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(drained).toBe(false);
    recorded();
    await drain;
    expect(queue.has('a')).toBe(false);
    expect(queue.queuedBytes).toBe(0);
  });

  it('without a landed put a job holds its slot to the end (the bound is on whole jobs then)', async () => {
    const queue = new WriteBehindQueue(1 << 30, 2, (error) => {
      throw error;
    });
    let inFlight = 0;
    let maxInFlight = 0;
    for (let i = 0; i < 50; i++) {
      queue.offer({
        key: `k${i}`,
        bytes: 1,
        run: async () => {
          maxInFlight = Math.max(maxInFlight, ++inFlight);
          await new Promise<void>((resolve) => setImmediate(resolve));
          inFlight--;
        },
      });
    }
    await queue.drain();
    expect(maxInFlight).toBe(2);
  });
});
