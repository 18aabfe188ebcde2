import { join } from 'node:path';

import { open as openLmdb } from 'lmdb';
import { describe, expect, it } from 'vitest';

import { LmdbMetadataPlane } from '../../../../src/kvtier/metadata/index.ts';
import { tempDir } from '../fixtures.ts';
import { planeFixture, recordOf, runPlaneConformance } from './plane-conformance.ts';

runPlaneConformance('lmdb', async () => {
  const dir = await tempDir('kvtier-plane-');
  // One environment per process: a second "node" in this process shares the first handle's env through a second open.
  return planeFixture(() => LmdbMetadataPlane.open({ path: join(dir.path, 'plane') }), () => dir.remove());
});

describe('LmdbMetadataPlane written before the per-class last-use index', () => {
  it('is re-indexed by class at open: walks see every record once, the old index is emptied', async () => {
    const dir = await tempDir('kvtier-plane-layout-');
    const path = join(dir.path, 'plane');
    try {
      const records = Array.from({ length: 12 }, (_, n) => recordOf(n, { trafficClass: n % 3 === 0 ? 'agent' : 'chat', lastUseAt: Date.UTC(2026, 0, 1) + n * 1000 }));
      const first = await LmdbMetadataPlane.open({ path });
      await first.upsert(records);
      await first.close();
      // Make it look like the earlier layout: no layout marker, no class index, rows in the old all-class index.
      const env = openLmdb({ path, maxDbs: 8 });
      const binary = { keyEncoding: 'binary', encoding: 'binary' } as const;
      const byClassUse = env.openDB<Uint8Array, Uint8Array>({ name: 'byClassUse', ...binary });
      const byUse = env.openDB<Uint8Array, Uint8Array>({ name: 'byUse', ...binary });
      const meta = env.openDB<string | number, string>({ name: 'meta' });
      await env.transaction(() => {
        for (const row of [...byClassUse.getKeys({ snapshot: false })]) byClassUse.remove(row);
        for (let n = 0; n < 12; n++) byUse.put(Buffer.from(`old-row-${n}`), new Uint8Array(0));
        meta.remove('layout');
      });
      await env.close();

      const plane = await LmdbMetadataPlane.open({ path });
      try {
        const all = await plane.scanByLastUse({ limit: 100 });
        expect(all.records.map((record) => record.key)).toEqual(records.map((record) => record.key));
        const agent = await plane.scanByLastUse({ trafficClass: 'agent', limit: 100 });
        expect(agent.records.map((record) => record.key)).toEqual(records.filter((record) => record.trafficClass === 'agent').map((record) => record.key));
      } finally {
        await plane.close();
      }
      const check = openLmdb({ path, maxDbs: 8 });
      expect([...check.openDB<Uint8Array, Uint8Array>({ name: 'byUse', ...binary }).getKeys()]).toEqual([]);
      await check.close();
    } finally {
      await dir.remove();
    }
  });
});

describe('LmdbMetadataPlane upsert on the writer thread', () => {
  it('commits the inserts and their counters in one transaction (the lmdb-js batching the upsert relies on)', async () => {
    const dir = await tempDir('kvtier-plane-txn-');
    const path = join(dir.path, 'plane');
    try {
      const plane = await LmdbMetadataPlane.open({ path });
      const stats = openLmdb({ path, maxDbs: 8 });
      try {
        for (const [from, count] of [[0, 1], [1, 3000]]) {
          const before = stats.getStats() as { lastTxnId: number };
          await plane.upsert(Array.from({ length: count }, (_, n) => recordOf(from + n)));
          const after = stats.getStats() as { lastTxnId: number };
          // One write transaction: were the counters a transaction of their own, a crash between the two would leave them behind the records.
          expect(after.lastTxnId - before.lastTxnId).toBe(1);
        }
        expect((await plane.usage()).blocks.g).toBe(3001);
      } finally {
        await stats.close();
        await plane.close();
      }
    } finally {
      await dir.remove();
    }
  });
});
