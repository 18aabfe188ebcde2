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
});
