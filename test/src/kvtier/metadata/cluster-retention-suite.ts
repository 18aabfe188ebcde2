/**
 * Issue #15 items 1-2 end to end: one retention truth for two nodes over a
 * shared store, GC from node A, an injected clock. Run over fs and S3 stores
 * by cluster-retention-*.test.ts.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';

import type { BlobStore } from '../../../../storage-adapters/index.ts';
import { DAY_MS, HOUR_MS, type BlockRecord, type MetadataPlane } from '../../../../src/kvtier/index.ts';
import { openClusterRig, type ClusterRig } from './cluster-fixtures.ts';

export interface ClusterSuiteFixture {
  redisUrl: string;
  /** A fresh store (same location on each call within one test). */
  store: () => Promise<BlobStore>;
  /** A handle on the test's shared plane (each call: another node's handle). */
  plane: () => Promise<MetadataPlane>;
  policyPrefix: string;
  /** The plane can lose its data (Redis FLUSHALL). */
  flushable: boolean;
  dispose(): Promise<void>;
}

const EPS = 60_000;

export function runClusterRetentionSuite(name: string, makeFixture: () => Promise<ClusterSuiteFixture>): void {
  describe(`cluster retention over ${name}`, () => {
    const withRig = async (body: (rig: ClusterRig, fixture: ClusterSuiteFixture) => Promise<void>) => {
      const fixture = await makeFixture();
      const rig = await openClusterRig(fixture);
      try {
        await body(rig, fixture);
      } finally {
        await rig.close();
        await fixture.dispose();
      }
    };

    it('a block A wrote and B hits daily survives 8 days of GC from A; 3 d + ε (agent), 7 d + ε (chat) after the last use anywhere it is gone on every node; tenant overrides hold', () =>
      withRig(async (rig) => {
        const { a, b, clock } = rig;
        await rig.policy.update((doc) => {
          doc.tenants.vip = { ttlMs: { agent: 10 * DAY_MS } };
        });
        const chat = { tenant: 'acme', trafficClass: 'chat' };
        const agent = { tenant: 'acme', trafficClass: 'agent' };
        const vip = { tenant: 'vip', trafficClass: 'agent' };
        const x = await rig.write(a, 1, 2, chat);
        const y = await rig.write(a, 2, 2, agent);
        const z = await rig.write(a, 3, 1, vip);
        expect((await a.gc()).plane.trusted).toBe(true);
        for (let day = 1; day <= 8; day++) {
          clock.advance(DAY_MS);
          expect(await rig.hits(b, x, chat)).toBe(2);
          expect(await rig.hits(b, y, agent)).toBe(2);
          const report = await a.gc();
          expect(report.removed.expired.blocks).toBe(0);
          expect(report.errors).toEqual([]);
        }
        // A wrote them 8 days ago and never used them since: its own view is stale, the plane's is not.
        expect(await rig.hits(a, x, chat)).toBe(2);
        expect(await rig.hits(a, y, agent)).toBe(2);
        const keysOf = async (tokens: Uint32Array, scope: { tenant: string; trafficClass: string }) => (await a.lookup(rig.ns(a, scope.tenant), tokens, scope)).keys;
        const xKeys = await keysOf(x, chat);
        const yKeys = await keysOf(y, agent);
        await a.flush();

        clock.advance(2 * DAY_MS + EPS); // day 10 + ε: vip agent block (10 d TTL, never hit) goes; agent y is 2 d + ε idle
        let report = await a.gc();
        expect(report.removed.expired.blocks).toBe(1);
        expect(report.byClass.agent.expired.blocks).toBe(1);
        expect(await rig.hits(b, z, vip)).toBe(0);
        expect(await rig.hits(a, z, vip)).toBe(0);

        clock.advance(DAY_MS); // y: 3 d + ε after its last use (on A, a day after B's last hit)
        report = await a.gc();
        expect(report.removed.expired.blocks).toBe(2);
        expect(await rig.store.has(yKeys)).toEqual([false, false]);
        expect(await rig.store.has(xKeys)).toEqual([true, true]);
        expect(await rig.hits(b, y, agent)).toBe(0);
        expect(await rig.hits(a, y, agent)).toBe(0);
        expect(await rig.hits(b, x, chat)).toBe(0 + 2); // chat, 3 d + ε idle: alive (and now used again, by B)

        clock.advance(7 * DAY_MS - 1); // just under 7 d after that hit
        expect((await a.gc()).removed.expired.blocks).toBe(0);
        clock.advance(1 + EPS);
        report = await a.gc();
        expect(report.removed.expired.blocks).toBe(2);
        expect(await rig.store.has(xKeys)).toEqual([false, false]);
        expect(await rig.hits(a, x, chat)).toBe(0);
        expect(await rig.hits(b, x, chat)).toBe(0);
        expect(await rig.planeKeys()).toEqual([]);
        expect(await rig.storageKeys()).toEqual([]);
      }));

    it('a client cap (StoreRequest.ttlMs) shortens a block\'s life on every node and in GC; renewals slide it', () =>
      withRig(async (rig) => {
        const { a, b, clock } = rig;
        const chat = { tenant: 'acme', trafficClass: 'chat' };
        const capped = await rig.write(a, 41, 2, { ...chat, ttlMs: HOUR_MS });
        const plain = await rig.write(a, 42, 1, chat);
        await a.gc();
        clock.advance(HOUR_MS - EPS);
        expect(await rig.hits(b, capped, chat)).toBe(2); // B renews it
        clock.advance(HOUR_MS - EPS);
        expect((await a.gc()).removed.expired.blocks).toBe(0);
        expect(await rig.hits(a, capped, chat)).toBe(2); // A's own entry is stale: the plane says live
        clock.advance(HOUR_MS + EPS);
        expect(await rig.hits(b, capped, chat)).toBe(0);
        const report = await a.gc();
        expect(report.removed.expired.blocks).toBe(2);
        expect(await rig.hits(a, capped, chat)).toBe(0);
        expect(await rig.hits(b, plain, chat)).toBe(1);
      }));

    it('quotas are enforced across the cluster: the least recently used block anywhere goes first', () =>
      withRig(async (rig) => {
        const { a, b, clock } = rig;
        const chat = { tenant: 'acme', trafficClass: 'chat' };
        const p1 = await rig.write(a, 11, 1, chat);
        clock.advance(1000);
        const p2 = await rig.write(b, 12, 1, chat);
        clock.advance(1000);
        const p3 = await rig.write(a, 13, 1, chat);
        clock.advance(1000);
        expect(await rig.hits(b, p1, chat)).toBe(1); // p1: written first on A, used last on B
        await a.gc(); // trust the plane
        const usage = await rig.planeA.usage();
        const blockBytes = usage.bytes['t:acme'] / 3;
        await rig.policy.update((doc) => {
          doc.tenants.acme = { quotaBytes: Math.floor(blockBytes * 2.5) };
        });
        const report = await a.gc();
        expect(report.removed.evicted.blocks).toBe(1);
        expect(await rig.hits(a, p2, chat)).toBe(0); // B's block, least recently used anywhere
        expect(await rig.hits(a, p1, chat)).toBe(1);
        expect(await rig.hits(b, p3, chat)).toBe(1);
      }));

    it('an orphan blob (no record) is swept after the grace period, never before; recorded blocks stay', () =>
      withRig(async (rig) => {
        const { a, clock } = rig;
        const chat = { tenant: 'acme', trafficClass: 'chat' };
        const kept = await rig.write(a, 21, 2, chat);
        await a.gc();
        const orphan = 'ab'.repeat(16);
        await rig.store.put(orphan, new Uint8Array(300).fill(7)); // a writer that died between put and record
        const grace = HOUR_MS;
        let report = await a.gc({ orphanGraceMs: grace });
        expect(report.orphansPending).toBe(1);
        expect(report.orphansSwept).toBe(0);
        clock.advance(grace - 1);
        report = await a.gc({ orphanGraceMs: grace });
        expect(report.orphansSwept).toBe(0);
        expect(await rig.store.has([orphan])).toEqual([true]);
        clock.advance(1);
        report = await a.gc({ orphanGraceMs: grace });
        expect(report.orphansSwept).toBe(1);
        expect(await rig.store.has([orphan])).toEqual([false]);
        expect(await rig.hits(rig.b, kept, chat)).toBe(2);
        expect(await rig.storageKeys()).toEqual(await rig.planeKeys());
      }));

    it('a GC killed midway (abort, or a crash between storage and plane) and run again leaves metadata and storage agreeing', () =>
      withRig(async (rig) => {
        const { a, b, clock } = rig;
        const agent = { tenant: 'acme', trafficClass: 'agent' };
        const chat = { tenant: 'acme', trafficClass: 'chat' };
        for (let seed = 0; seed < 6; seed++) await rig.write(seed % 2 === 0 ? a : b, 100 + seed, 4, agent);
        const live = await rig.write(b, 200, 3, chat);
        await a.gc();
        clock.advance(3 * DAY_MS + EPS);
        const controller = new AbortController();
        let batches = 0;
        const first = await a.gc({
          batchSize: 4,
          signal: controller.signal,
          onProgress: (progress) => {
            if (progress.phase === 'expire' && ++batches === 2) controller.abort();
          },
        });
        expect(first.aborted).toBe(true);
        expect(first.removed.expired.blocks).toBeGreaterThan(0);
        expect(first.removed.expired.blocks).toBeLessThan(24);
        // A crash after the storage delete, before the plane remove: the plane still holds records whose blob is gone.
        const victim = (await rig.planeA.scanByLastUse({ limit: 100 })).records.find((record) => record.trafficClass === 'agent') as BlockRecord;
        await rig.store.delete([victim.key]);
        expect((await rig.planeA.get([victim.key]))[0]).not.toBeNull();
        const second = await a.gc({ batchSize: 4 });
        expect(second.aborted).toBe(false);
        expect(first.removed.expired.blocks + second.removed.expired.blocks).toBe(24);
        const storage = await rig.storageKeys();
        expect(storage).toEqual(await rig.planeKeys());
        expect(storage).toHaveLength(3);
        expect(await rig.hits(a, live, chat)).toBe(3);
      }));

    it('the plane loses its data (FLUSHALL): GC deletes nothing live, rebuilds the records, hits continue', () =>
      withRig(async (rig, fixture) => {
        if (!fixture.flushable) return;
        const { a, b, clock } = rig;
        const chat = { tenant: 'acme', trafficClass: 'chat' };
        const agent = { tenant: 'acme', trafficClass: 'agent' };
        const x = await rig.write(a, 31, 3, chat);
        const y = await rig.write(b, 32, 2, agent);
        await a.gc();
        clock.advance(2 * DAY_MS);
        expect(await rig.hits(b, y, agent)).toBe(2);
        const admin = new Redis(fixture.redisUrl);
        await admin.flushall();
        admin.disconnect();
        expect(await rig.planeKeys()).toEqual([]);
        clock.advance(DAY_MS + EPS); // y's last use (on B) is 1 d + ε ago; A wrote it 3 d + ε ago
        const report = await a.gc();
        expect(report.plane.trusted).toBe(true);
        expect(report.rebuiltRecords).toBe(5);
        expect(report.removed.expired.blocks + report.removed.evicted.blocks + report.orphansSwept).toBe(0);
        expect(await rig.storageKeys()).toEqual(await rig.planeKeys());
        expect(await rig.hits(a, x, chat)).toBe(3);
        expect(await rig.hits(b, y, agent)).toBe(2);
        expect(await rig.hits(a, y, agent)).toBe(2);
        // Rebuilt records judged as used at the rebuild; the hits since renewed them.
        clock.advance(3 * DAY_MS - EPS);
        expect((await a.gc()).removed.expired.blocks).toBe(0);
        expect(await rig.hits(b, y, agent)).toBe(2);
      }));
  });
}
