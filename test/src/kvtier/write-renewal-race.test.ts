/**
 * A block hit while its write is in flight is renewed on the flight only;
 * the write carries that renewal over to the index after its records. Until
 * the carried-over touch is committed, the flight must keep answering: a
 * lookup in between read the index's older last use and missed a live block
 * under a short TTL (the replay's 1-minute case, once requests ran between
 * the write path's commits).
 */
import { join } from 'node:path';

import { afterEach, expect, it, vi } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { BlockIndex, KvTier, LmdbMetadataPlane, ManualClock } from '../../../src/kvtier/index.ts';
import { LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from './fixtures.ts';

const TTL_MS = 60_000;

/** A promise released by hand, and whether anyone waits on it. */
function gate(): { wait: () => Promise<void>; open: () => void; waiting: () => boolean } {
  let release!: () => void;
  const opened = new Promise<void>((resolve) => (release = resolve));
  let waiters = 0;
  return {
    wait: () => {
      waiters++;
      return opened;
    },
    open: () => release(),
    waiting: () => waiters > 0,
  };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !check(); i++) await new Promise<void>((resolve) => setImmediate(resolve));
  expect(check()).toBe(true);
}

afterEach(() => {
  vi.restoreAllMocks();
});

it('a block hit while it is written stays a hit until the renewal reaches the index', async () => {
  const dir = await tempDir();
  const clock = new ManualClock();
  const t0 = clock.now();
  const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
  // Renewals stay buffered in the plane (no timed flush): only the index can know of the renewal.
  const plane = await LmdbMetadataPlane.open({ path: join(dir.path, 'plane'), renewFlushMs: 3_600_000 });
  const records = gate();
  const touches = gate();
  const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, clock, logger: captureLogger(), touchIntervalMs: 0, hotCacheBytes: 0, metadataPlane: plane });
  try {
    await tier.policy.update((doc) => {
      doc.classes.chat.ttlMs = TTL_MS;
    });
    await tier.gc();
    const scope = { tenant: 'acme', trafficClass: 'chat' };
    const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
    const tokens = tokensOf(64, 70);

    const recordWrites = BlockIndex.prototype.recordWrites;
    const touch = BlockIndex.prototype.touch;
    vi.spyOn(BlockIndex.prototype, 'recordWrites').mockImplementation(async function (this: BlockIndex, ...args) {
      await records.wait();
      return recordWrites.apply(this, args);
    });
    vi.spyOn(BlockIndex.prototype, 'touch').mockImplementation(async function (this: BlockIndex, ...args) {
      await touches.wait();
      return touch.apply(this, args);
    });

    expect(tier.store({ namespace: ns, tokens, layout: LAYOUT, ...scope, payloads: [payloadFor(70, 0)] }).queued).toBe(1);
    await until(records.waiting);
    // Hit while the write's records are pending: the flight takes the use.
    clock.set(t0 + 50_000);
    expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(1);
    records.open();
    await until(touches.waiting);
    // The index holds the write's last use (t0, expired by now); the renewal to t0 + 50 s is not committed yet.
    clock.set(t0 + 70_000);
    expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(1);
    touches.open();
    await tier.flush();
    // Renewed at t0 + 70 s by the lookup just above (through the flight, carried over in turn).
    clock.set(t0 + 125_000);
    expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(1);
    clock.set(t0 + 125_000 + TTL_MS);
    expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(0);
    expect(tier.stats().errors).toEqual({});
  } finally {
    // A failed assertion must not leave the tier's close waiting on a gate.
    records.open();
    touches.open();
    await tier.close();
    await plane.close();
    await store.close();
    await dir.remove();
  }
});
