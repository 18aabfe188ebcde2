import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { defaultPolicyDoc, hexToKeyBytes, KvTier, PlaneIndex, PROBE_ABSENT, PROBE_EXPIRED, RetentionPolicy } from '../../../src/kvtier/index.ts';
import { LmdbMetadataPlane, RedisMetadataPlane } from '../../../src/kvtier/metadata/index.ts';
import { SegmentBlobStore } from '../../../storage-adapters/index.ts';
import { startRedis } from '../../helpers/redis-server.ts';
import { tempDir } from './fixtures.ts';
import { keyOf, recordOf } from './metadata/plane-conformance.ts';

const T0 = Date.UTC(2026, 0, 1);
const MINUTE = 60_000;

function chatPolicy(ttlMs: number): RetentionPolicy {
  const doc = defaultPolicyDoc();
  doc.classes.chat = { ttlMs };
  return new RetentionPolicy(doc);
}

async function withPlaneIndex(body: (plane: LmdbMetadataPlane, index: PlaneIndex, policy: RetentionPolicy) => Promise<void>): Promise<void> {
  const dir = await tempDir('kvtier-plane-index-');
  // No timer flush: a renewal stays buffered until the test flushes.
  const plane = await LmdbMetadataPlane.open({ path: join(dir.path, 'plane'), renewFlushMs: 0 });
  const policy = chatPolicy(MINUTE);
  try {
    await body(plane, new PlaneIndex(plane, () => policy), policy);
  } finally {
    await plane.close();
    await dir.remove();
  }
}

describe('PlaneIndex: the node index as the embedded plane’s records', () => {
  it('probes the record, and counts a renewal the plane still buffers or is writing', () =>
    withPlaneIndex(async (plane, index, policy) => {
      const keyBytes = hexToKeyBytes(keyOf(1));
      expect(index.probe(keyBytes, T0, policy)).toBe(PROBE_ABSENT);
      await plane.upsert([recordOf(1, { lastUseAt: T0 })]);
      const expiry = new Float64Array(1);
      expect(index.probe(keyBytes, T0 + 10_000, policy, expiry)).toBe(T0);
      expect(expiry[0]).toBe(T0 + MINUTE);
      expect(index.probe(keyBytes, T0 + MINUTE, policy)).toBe(PROBE_EXPIRED);

      // A hit at T0 + 50 s: buffered in the plane, not yet in its record.
      plane.renew([keyOf(1)], T0 + 50_000, [0]);
      expect((await plane.get([keyOf(1)]))[0]?.lastUseAt).toBe(T0);
      expect(index.probe(keyBytes, T0 + MINUTE, policy, undefined, keyOf(1))).toBe(T0 + 50_000);
      expect(index.probe(keyBytes, T0 + MINUTE, policy)).toBe(T0 + 50_000);

      // Being written: out of the buffer, not yet committed. Still counted.
      const writing = plane.flush();
      expect(index.probe(keyBytes, T0 + MINUTE, policy)).toBe(T0 + 50_000);
      await writing;
      expect((await plane.get([keyOf(1)]))[0]?.lastUseAt).toBe(T0 + 50_000);
      expect(index.probe(keyBytes, T0 + MINUTE, policy)).toBe(T0 + 50_000);
      expect(index.probe(keyBytes, T0 + 50_000 + MINUTE, policy)).toBe(PROBE_EXPIRED);
      expect(index.get(keyOf(1))).toMatchObject({ key: keyOf(1), lastUseAt: T0 + 50_000, expiresAt: T0 + 50_000 + MINUTE, hits: 0, sizeBytes: 1001 });
    }));

  it('a client TTL cap shortens the expiry, as BlockIndex’s does', () =>
    withPlaneIndex(async (plane, index, policy) => {
      await plane.upsert([recordOf(2, { lastUseAt: T0, ttlMs: 10_000 })]);
      const keyBytes = hexToKeyBytes(keyOf(2));
      expect(index.probe(keyBytes, T0 + 9_000, policy)).toBe(T0);
      expect(index.probe(keyBytes, T0 + 10_000, policy)).toBe(PROBE_EXPIRED);
      expect(index.get(keyOf(2))?.ttlCapMs).toBe(10_000);
    }));

  it('usage, sizes, adoption and removal go through the plane’s records and counters', () =>
    withPlaneIndex(async (plane, index) => {
      await plane.upsert([recordOf(1), recordOf(2, { tenant: 'other' })]);
      expect(index.usage()).toEqual(await plane.usage());
      expect(index.bytesIn({ kind: 'global' })).toBe(1001 + 1002);
      expect(index.countIn({ kind: 'tenant', name: 'other' })).toBe(1);

      // Found on storage, unknown to the plane: a record of size 0 until a load learns it.
      const adopted = await index.adopt(
        [
          { keyBytes: hexToKeyBytes(keyOf(1)), trafficClass: 'chat', tenant: 'acme', depth: 0 },
          { keyBytes: hexToKeyBytes(keyOf(3)), trafficClass: 'chat', tenant: 'acme', depth: 2 },
        ],
        T0,
      );
      expect(adopted).toBe(1);
      expect((await plane.get([keyOf(3)]))[0]).toMatchObject({ sizeBytes: 0, writer: '', depth: 2, lastUseAt: T0 });
      await index.noteSizes([{ keyBytes: hexToKeyBytes(keyOf(3)), sizeBytes: 700 }]);
      expect(index.get(keyOf(3))?.sizeBytes).toBe(700);
      expect(index.bytesIn({ kind: 'global' })).toBe(1001 + 1002 + 700);

      const removedKeys: string[] = [];
      plane.onRemoved((keys) => removedKeys.push(...keys));
      const removed = await index.remove([hexToKeyBytes(keyOf(1)), hexToKeyBytes(keyOf(9))]);
      expect(removed.map((entry) => entry.key)).toEqual([keyOf(1)]);
      expect(removedKeys).toEqual([keyOf(1)]);
      expect(index.countIn({ kind: 'global' })).toBe(2);
      expect([...index.allEntries()].map((entry) => entry.key).sort()).toEqual([keyOf(2), keyOf(3)].sort());
    }));
});

describe('KvTier nodeIndex option', () => {
  it('is refused with a Redis plane, and for an unknown kind, naming the field', async () => {
    const dir = await tempDir('kvtier-plane-index-config-');
    const redis = await startRedis();
    const store = await SegmentBlobStore.open({ dir: join(dir.path, 'segments') });
    const plane = await RedisMetadataPlane.open({ url: redis.url });
    try {
      await expect(KvTier.open({ dataDir: join(dir.path, 'node'), store, metadataPlane: plane, nodeIndex: 'plane' })).rejects.toMatchObject({
        code: 'KVT_ERR_KVTIER_BAD_CONFIG',
        field: 'nodeIndex',
      });
      // @ts-expect-error: a kind that does not exist
      await expect(KvTier.open({ dataDir: join(dir.path, 'node'), store, nodeIndex: 'memory' })).rejects.toMatchObject({ code: 'KVT_ERR_KVTIER_BAD_CONFIG', field: 'nodeIndex' });
    } finally {
      await plane.close();
      await store.close();
      await redis.stop();
      await dir.remove();
    }
  });
});
