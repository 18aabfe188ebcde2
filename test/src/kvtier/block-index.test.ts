import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { BlockIndex, DAY_MS, HotBlockCache, PROBE_ABSENT, PROBE_EXPIRED, RetentionPolicy, defaultPolicyDoc, type DecodedBlock } from '../../../src/kvtier/index.ts';
import { tempDir } from './fixtures.ts';

const policy = new RetentionPolicy(defaultPolicyDoc());
const key = (n: number) => {
  const bytes = new Uint8Array(16);
  new DataView(bytes.buffer).setUint32(12, n);
  return bytes;
};
const hex = (n: number) => Buffer.from(key(n)).toString('hex');
const T0 = Date.UTC(2026, 0, 1);

describe('BlockIndex', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let index: BlockIndex;
  beforeEach(async () => {
    dir = await tempDir();
    index = BlockIndex.open({ path: join(dir.path, 'index') });
  });
  afterEach(async () => {
    await index.close();
    await dir.remove();
  });

  /** Counters must equal sums over the entries, and each entry must have its rows. */
  function expectConsistent(now: number): void {
    const entries = [...index.allEntries()];
    expect(index.countIn({ kind: 'global' })).toBe(entries.length);
    expect(index.bytesIn({ kind: 'global' })).toBe(entries.reduce((sum, e) => sum + e.sizeBytes, 0));
    for (const cls of ['chat', 'agent']) {
      expect(index.bytesIn({ kind: 'class', name: cls })).toBe(entries.filter((e) => e.trafficClass === cls).reduce((sum, e) => sum + e.sizeBytes, 0));
    }
    const all = index.expiredBatch(Number.MAX_SAFE_INTEGER, 10_000).keys.map((k) => Buffer.from(k).toString('hex'));
    expect(all.sort()).toEqual(entries.map((e) => e.key).sort());
    const expiredNow = index.expiredBatch(now, 10_000).keys.map((k) => Buffer.from(k).toString('hex'));
    expect(expiredNow.sort()).toEqual(entries.filter((e) => e.expiresAt <= now).map((e) => e.key).sort());
  }

  it('records a unit tail\'s kind with its entry (with and without a client TTL cap), keeps it through touch and size notes, and counts tails under k:tail', async () => {
    await index.recordWrites(
      [
        { keyBytes: key(1), sizeBytes: 100, trafficClass: 'chat', tenant: 'a', depth: 2, kind: 'tail' },
        { keyBytes: key(2), sizeBytes: 50, trafficClass: 'chat', tenant: 'a', depth: 1, kind: 'tail', ttlCapMs: 60_000 },
        { keyBytes: key(3), sizeBytes: 70, trafficClass: 'chat', tenant: 'a', depth: 0 },
        { keyBytes: key(4), sizeBytes: 30, trafficClass: 'chat', tenant: 'a', depth: 0, ttlCapMs: 60_000 },
      ],
      T0,
      policy,
    );
    await index.touch([key(1), key(2)], T0 + 1000, policy);
    await index.noteSizes([{ keyBytes: key(2), sizeBytes: 55 }]);
    // a rewrite of the tail without a kind keeps it a tail
    await index.recordWrites([{ keyBytes: key(1), sizeBytes: 100, trafficClass: 'chat', tenant: 'a', depth: 2 }], T0 + 2000, policy);
    expect(index.get(hex(1))).toMatchObject({ kind: 'tail', hits: 1 });
    expect(index.get(hex(2))).toMatchObject({ kind: 'tail', ttlCapMs: 60_000, sizeBytes: 55 });
    expect(index.get(hex(3))?.kind).toBeUndefined();
    expect(index.get(hex(4))).toMatchObject({ ttlCapMs: 60_000 });
    expect(index.get(hex(4))?.kind).toBeUndefined();
    expect(index.usage()).toMatchObject({ blocks: { g: 4, 'k:tail': 2 }, bytes: { g: 255, 'k:tail': 155 } });
    await index.remove([key(2)]);
    expect(index.usage()).toMatchObject({ blocks: { 'k:tail': 1 }, bytes: { 'k:tail': 100 } });
    expectConsistent(T0 + 2000);
  });

  it('records writes with class TTLs, probes live/expired/absent', async () => {
    await index.recordWrites(
      [
        { keyBytes: key(1), sizeBytes: 100, trafficClass: 'chat', tenant: 'a', depth: 0 },
        { keyBytes: key(2), sizeBytes: 50, trafficClass: 'agent', tenant: 'a', depth: 0 },
      ],
      T0,
      policy,
    );
    expect(index.get(hex(1))).toMatchObject({ sizeBytes: 100, trafficClass: 'chat', tenant: 'a', createdAt: T0, lastUseAt: T0, expiresAt: T0 + 7 * DAY_MS, hits: 0 });
    expect(index.get(hex(2))?.expiresAt).toBe(T0 + 3 * DAY_MS);
    expect(index.probe(key(1), T0 + DAY_MS, policy)).toBe(T0);
    expect(index.probe(key(2), T0 + 3 * DAY_MS, policy)).toBe(PROBE_EXPIRED);
    expect(index.probe(key(3), T0, policy)).toBe(PROBE_ABSENT);
    expectConsistent(T0 + 3 * DAY_MS);
  });

  it('moves an entry in the expiry ordering when it is touched, counters unchanged', async () => {
    const writes = [1, 2, 3].map((n) => ({ keyBytes: key(n), sizeBytes: 10 * n, trafficClass: 'chat', tenant: 'a', depth: n }));
    for (const [i, write] of writes.entries()) await index.recordWrites([write], T0 + i * 1000, policy);
    const expiring = (at: number) => index.expiredBatch(at, 10).keys.map((k) => Buffer.from(k).toString('hex'));
    expect(expiring(T0 + 2000 + 7 * DAY_MS)).toEqual([hex(1), hex(2), hex(3)]);
    await index.touch([key(1)], T0 + 5000, policy);
    expect(expiring(T0 + 5000 + 7 * DAY_MS)).toEqual([hex(2), hex(3), hex(1)]);
    expect(index.usage()).toMatchObject({ blocks: { g: 3, 'c:chat': 3, 't:a': 3 }, bytes: { g: 60, 'c:chat': 60, 't:a': 60 } });
    expect(index.get(hex(1))).toMatchObject({ hits: 1, lastUseAt: T0 + 5000, expiresAt: T0 + 5000 + 7 * DAY_MS });
    // Expiry ordering follows: key 2 expires first now.
    expect(index.expiredBatch(T0 + 1000 + 7 * DAY_MS, 10).keys.map((k) => Buffer.from(k).toString('hex'))).toEqual([hex(2)]);
    expectConsistent(T0 + 7 * DAY_MS + 2000);
  });

  it('pages expired keys with a cursor', async () => {
    await index.recordWrites(
      [0, 1, 2, 3].map((depth) => ({ keyBytes: key(10 + depth), sizeBytes: 1, trafficClass: 'chat', tenant: 'a', depth, at: T0 + depth })),
      T0,
      policy,
    );
    const end = T0 + 7 * DAY_MS + 10;
    const first = index.expiredBatch(end, 2);
    const second = index.expiredBatch(end, 2, first.cursor);
    expect([...first.keys, ...second.keys].map((k) => Buffer.from(k).toString('hex'))).toEqual([hex(10), hex(11), hex(12), hex(13)]);
    expect(index.expiredBatch(end, 2, second.cursor).keys).toHaveLength(0);
  });

  it('drops the LRU rows an index written before #29 kept (byUse), once, at open', async () => {
    await index.recordWrites([{ keyBytes: key(1), sizeBytes: 5, trafficClass: 'chat', tenant: 'a', depth: 0 }], T0, policy);
    await index.close();
    const { open } = await import('lmdb');
    const env = open({ path: join(dir.path, 'index'), maxDbs: 8 });
    const byUse = env.openDB<Uint8Array, Uint8Array>({ name: 'byUse', keyEncoding: 'binary', encoding: 'binary' });
    await byUse.put(Buffer.from('g\0old-row'), new Uint8Array(0));
    expect(byUse.getKeysCount()).toBe(1);
    await env.close();
    index = BlockIndex.open({ path: join(dir.path, 'index') });
    const again = open({ path: join(dir.path, 'index'), maxDbs: 8 });
    expect(again.openDB({ name: 'byUse', keyEncoding: 'binary', encoding: 'binary' }).getKeysCount()).toBe(0);
    await again.close();
    expect(index.get(hex(1))).toMatchObject({ sizeBytes: 5 });
  });

  it('adopts only unknown keys, learns sizes later, removes with counters', async () => {
    await index.recordWrites([{ keyBytes: key(1), sizeBytes: 100, trafficClass: 'chat', tenant: 'a', depth: 0 }], T0, policy);
    expect(await index.adopt([{ keyBytes: key(1), trafficClass: 'agent', tenant: 'b', depth: 0 }, { keyBytes: key(2), trafficClass: 'agent', tenant: 'b', depth: 1 }], T0, policy)).toBe(1);
    expect(index.get(hex(1))?.trafficClass).toBe('chat');
    expect(index.get(hex(2))?.sizeBytes).toBe(0);
    await index.noteSizes([{ keyBytes: key(2), sizeBytes: 70 }]);
    expect(index.bytesIn({ kind: 'global' })).toBe(170);
    expect(index.bytesIn({ kind: 'tenant', name: 'b' })).toBe(70);
    const removed = await index.remove([key(1), key(9)]);
    expect(removed.map((e) => e.key)).toEqual([hex(1)]);
    expect(index.bytesIn({ kind: 'global' })).toBe(70);
    expectConsistent(T0);
  });

  it('recomputes expiries after a policy change', async () => {
    await index.recordWrites([{ keyBytes: key(1), sizeBytes: 1, trafficClass: 'chat', tenant: 'a', depth: 0 }], T0, policy);
    const shorter = new RetentionPolicy({ ...defaultPolicyDoc(), version: 2, classes: { agent: { ttlMs: 3 * DAY_MS }, chat: { ttlMs: DAY_MS } } });
    expect(index.probe(key(1), T0 + DAY_MS, shorter)).toBe(PROBE_EXPIRED); // the current policy decides at once
    expect(await index.reapplyPolicy(shorter)).toBe(1);
    expect(index.appliedPolicyVersion()).toBe(2);
    expect(index.get(hex(1))?.expiresAt).toBe(T0 + DAY_MS);
    expectConsistent(T0 + DAY_MS);
  });
});

describe('HotBlockCache', () => {
  const block = (key: string, bytes: number) => ({ key, bytes: new Uint8Array(bytes), residentBytes: bytes }) as DecodedBlock;
  it('evicts least recently used entries beyond its byte budget', () => {
    const cache = new HotBlockCache(300);
    cache.put(block('a', 100));
    cache.put(block('b', 100));
    cache.put(block('c', 100));
    expect(cache.get('a')?.key).toBe('a'); // a is now most recent
    cache.put(block('d', 100));
    expect(cache.get('b')).toBeUndefined();
    expect(['a', 'c', 'd'].map((k) => cache.get(k)?.key)).toEqual(['a', 'c', 'd']);
    expect(cache.usedBytes).toBe(300);
    cache.put(block('huge', 301));
    expect(cache.get('huge')).toBeUndefined();
    expect(cache.size).toBe(3);
  });
});
