/**
 * The MetadataPlane contract (src/kvtier/metadata/metadata-plane.ts), run by
 * lmdb-plane.test.ts and redis-plane.test.ts against a real driver.
 */
import { createHash } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import type { BlockRecord, MetadataPlane } from '../../../../src/kvtier/metadata/index.ts';

export interface PlaneFixture {
  /** A fresh, empty plane; a second call opens another handle on the same data (another node). */
  open(): Promise<MetadataPlane>;
  dispose(): Promise<void>;
}

/** A fixture whose open() is `openPlane` (each call another handle) and whose dispose closes every handle opened, then runs `cleanup`. */
export function planeFixture(openPlane: () => Promise<MetadataPlane>, cleanup?: () => Promise<void>): PlaneFixture {
  const opened: MetadataPlane[] = [];
  return {
    open: async () => {
      const plane = await openPlane();
      opened.push(plane);
      return plane;
    },
    dispose: async () => {
      for (const plane of opened) await plane.close();
      await cleanup?.();
    },
  };
}

const T0 = Date.UTC(2026, 0, 1);

export function keyOf(n: number): string {
  return createHash('sha256').update(`block-${n}`).digest('hex').slice(0, 32);
}

export function recordOf(n: number, extra: Partial<BlockRecord> = {}): BlockRecord {
  return { key: keyOf(n), trafficClass: 'chat', tenant: 'acme', sizeBytes: 1000 + n, writer: 'node-a', createdAt: T0, lastUseAt: T0, ttlMs: 0, depth: 0, ...extra };
}

export function runPlaneConformance(name: string, makeFixture: () => Promise<PlaneFixture>): void {
  describe(`MetadataPlane contract: ${name}`, () => {
    const withPlane = async (body: (plane: MetadataPlane, fixture: PlaneFixture) => Promise<void>) => {
      const fixture = await makeFixture();
      const plane = await fixture.open();
      try {
        await body(plane, fixture);
      } finally {
        await plane.close();
        await fixture.dispose();
      }
    };

    it('upsert then get returns the record; a rewrite keeps createdAt, never moves lastUse back, and keeps usage exact', () =>
      withPlane(async (plane) => {
        await plane.upsert([recordOf(1, { tenant: 'tënant/ü', writer: 'node-ä', ttlMs: 3_600_000, depth: 5 }), recordOf(2, { trafficClass: 'agent' })]);
        const [one, two, none] = await plane.get([keyOf(1), keyOf(2), keyOf(3)]);
        expect(one).toEqual(recordOf(1, { tenant: 'tënant/ü', writer: 'node-ä', ttlMs: 3_600_000, depth: 5 }));
        expect(two?.trafficClass).toBe('agent');
        expect(none).toBeNull();
        await plane.upsert([recordOf(2, { trafficClass: 'agent', createdAt: T0 + 50, lastUseAt: T0 + 100, sizeBytes: 5000, writer: 'node-b' })]);
        await plane.upsert([recordOf(2, { trafficClass: 'agent', createdAt: T0 + 60, lastUseAt: T0 + 10, sizeBytes: 5000, writer: 'node-b' })]);
        const [rewritten] = await plane.get([keyOf(2)]);
        expect(rewritten).toMatchObject({ createdAt: T0, lastUseAt: T0 + 100, sizeBytes: 5000, writer: 'node-b' });
        const usage = await plane.usage();
        expect(usage.blocks).toEqual({ g: 2, 'c:chat': 1, 'c:agent': 1, 't:tënant/ü': 1, 't:acme': 1 });
        expect(usage.bytes.g).toBe(1001 + 5000);
        expect(usage.bytes['c:agent']).toBe(5000);
        // ifAbsent writes only what is missing (rebuild).
        await plane.upsert([recordOf(2, { trafficClass: 'chat', sizeBytes: 1 }), recordOf(3)], { ifAbsent: true });
        const [kept, added] = await plane.get([keyOf(2), keyOf(3)]);
        expect(kept?.trafficClass).toBe('agent');
        expect(added?.sizeBytes).toBe(1003);
      }));

    it('one upsert of new keys, present keys and a key twice: each record counted once, each walked once at its last use', () =>
      withPlane(async (plane) => {
        await plane.upsert([recordOf(1, { lastUseAt: T0 + 5 }), recordOf(2, { trafficClass: 'agent', lastUseAt: T0 + 6 })]);
        await plane.upsert([
          recordOf(1, { lastUseAt: T0 + 20, createdAt: T0 + 20, sizeBytes: 7000 }),
          recordOf(3, { lastUseAt: T0 + 21 }),
          recordOf(2, { trafficClass: 'agent', lastUseAt: T0 + 2, createdAt: T0 + 2 }),
          recordOf(3, { lastUseAt: T0 + 30, sizeBytes: 9000 }),
          recordOf(4, { trafficClass: 'agent', lastUseAt: T0 + 1 }),
        ]);
        const records = await plane.get([keyOf(1), keyOf(2), keyOf(3), keyOf(4)]);
        expect(records.map((record) => [record?.lastUseAt, record?.createdAt, record?.sizeBytes])).toEqual([
          [T0 + 20, T0, 7000],
          [T0 + 6, T0, 1002],
          [T0 + 30, T0, 9000],
          [T0 + 1, T0, 1004],
        ]);
        const usage = await plane.usage();
        expect(usage.blocks).toEqual({ g: 4, 'c:chat': 2, 'c:agent': 2, 't:acme': 4 });
        expect(usage.bytes).toEqual({ g: 7000 + 1002 + 9000 + 1004, 'c:chat': 16_000, 'c:agent': 2006, 't:acme': 7000 + 1002 + 9000 + 1004 });
        const walked = await plane.scanByLastUse({ limit: 100 });
        expect(walked.records.map((record) => [record.key, record.lastUseAt])).toEqual([
          [keyOf(4), T0 + 1],
          [keyOf(2), T0 + 6],
          [keyOf(1), T0 + 20],
          [keyOf(3), T0 + 30],
        ]);
      }));

    it('records a unit tail\'s kind: get, scan and remove return it, usage counts tails under k:tail, rewrites and removals keep the count exact', () =>
      withPlane(async (plane, fixture) => {
        await plane.upsert([recordOf(1, { kind: 'tail', depth: 3, ttlMs: 60_000 }), recordOf(2), recordOf(3, { kind: 'tail', trafficClass: 'agent' })]);
        const [one, two] = await plane.get([keyOf(1), keyOf(2)]);
        expect(one).toEqual(recordOf(1, { kind: 'tail', depth: 3, ttlMs: 60_000 }));
        expect(two).toEqual(recordOf(2));
        expect(two?.kind).toBeUndefined();
        let usage = await plane.usage();
        expect(usage.blocks).toMatchObject({ g: 3, 'k:tail': 2 });
        expect(usage.bytes['k:tail']).toBe(1001 + 1003);
        // Renewed and seen from another handle: still a tail.
        plane.renew([keyOf(1)], T0 + 50);
        await plane.flush();
        const other = await fixture.open();
        try {
          expect((await other.get([keyOf(1)]))[0]).toMatchObject({ kind: 'tail', lastUseAt: T0 + 50 });
        } finally {
          await other.close();
        }
        const scanned = (await plane.scanByLastUse({ limit: 10 })).records;
        expect(scanned.filter((record) => record.kind === 'tail').map((record) => record.key).sort()).toEqual([keyOf(1), keyOf(3)].sort());
        expect((await plane.scanByLastUse({ capped: true })).records.map((record) => record.kind)).toEqual(['tail']);
        // A rewrite with a new size moves the tail bytes; the kind stays with the record.
        await plane.upsert([recordOf(1, { kind: 'tail', depth: 3, sizeBytes: 7000 })]);
        usage = await plane.usage();
        expect(usage.bytes['k:tail']).toBe(7000 + 1003);
        const removed = await plane.remove([keyOf(1), keyOf(2)]);
        expect(removed.find((record) => record.key === keyOf(1))?.kind).toBe('tail');
        expect(removed.find((record) => record.key === keyOf(2))?.kind).toBeUndefined();
        expect((await plane.usage()).blocks).toMatchObject({ g: 1, 'k:tail': 1 });
        const taken = await plane.removeByLastUse({ trafficClass: 'agent', maxLastUseAt: T0, limit: 10 });
        expect(taken.keys).toEqual([keyOf(3)]);
        expect(taken.freed.blocks['k:tail']).toBe(1);
        expect(taken.freed.bytes['k:tail']).toBe(1003);
        expect(await plane.usage()).toEqual({ bytes: {}, blocks: {} });
      }));

    it('renewals are coalesced, only move forward, never create records, and every handle sees them after flush', () =>
      withPlane(async (plane, fixture) => {
        await plane.upsert([recordOf(1), recordOf(2)]);
        for (let i = 0; i < 100; i++) plane.renew([keyOf(1)], T0 + 1000 + i);
        plane.renew([keyOf(2)], T0 - 5000);
        plane.renew([keyOf(9)], T0 + 1000);
        await plane.flush();
        const other = await fixture.open();
        try {
          const [one, two, ghost] = await other.get([keyOf(1), keyOf(2), keyOf(9)]);
          expect(one?.lastUseAt).toBe(T0 + 1099);
          expect(two?.lastUseAt).toBe(T0);
          expect(ghost).toBeNull();
          other.renew([keyOf(2)], T0 + 7);
          await other.flush();
        } finally {
          await other.close();
        }
        expect((await plane.get([keyOf(2)]))[0]?.lastUseAt).toBe(T0 + 7);
        expect((await plane.usage()).blocks.g).toBe(2);
      }));

    it('scans oldest last use first (deeper first among equals), bounded by maxLastUseAt, restartable by cursor while pages are deleted', () =>
      withPlane(async (plane) => {
        const records: BlockRecord[] = [];
        for (let n = 0; n < 40; n++) records.push(recordOf(n, { lastUseAt: T0 + Math.floor(n / 4) * 1000, depth: n % 4, ttlMs: n % 10 === 0 ? 60_000 : 0 }));
        await plane.upsert(records);
        const expected = [...records].sort((a, b) => a.lastUseAt - b.lastUseAt || b.depth - a.depth).map((record) => record.key);
        const seen: string[] = [];
        let cursor: string | undefined;
        let pages = 0;
        do {
          const page = await plane.scanByLastUse({ limit: 3, cursor });
          seen.push(...page.records.map((record) => record.key));
          // Delete every other page as GC would: the cursor must still continue after it.
          if (pages++ % 2 === 0) await plane.remove(page.records.map((record) => record.key));
          cursor = page.cursor;
        } while (cursor !== undefined);
        expect(seen).toEqual(expected);
        const bounded = await plane.scanByLastUse({ maxLastUseAt: T0 + 2000, limit: 100 });
        expect(bounded.records.every((record) => record.lastUseAt <= T0 + 2000)).toBe(true);
        expect(bounded.cursor).toBeUndefined();
        const capped = await plane.scanByLastUse({ capped: true, limit: 100 });
        const cappedLeft = (await plane.get(records.filter((record) => record.ttlMs > 0).map((record) => record.key))).filter((record) => record !== null);
        expect(capped.records.map((record) => record.key).sort()).toEqual(cappedLeft.map((record) => record!.key).sort());
      }));

    it('equal last use and depth across many records: a cursor still visits each exactly once', () =>
      withPlane(async (plane) => {
        await plane.upsert(Array.from({ length: 25 }, (_, n) => recordOf(n)));
        const seen = new Set<string>();
        let cursor: string | undefined;
        let page = 0;
        do {
          const result = await plane.scanByLastUse({ limit: 4, cursor });
          for (const record of result.records) {
            expect(seen.has(record.key)).toBe(false);
            seen.add(record.key);
          }
          if (page++ === 1) await plane.remove(result.records.map((record) => record.key));
          cursor = result.cursor;
        } while (cursor !== undefined);
        expect(seen.size).toBe(25);
      }));

    it('remove returns what existed, tells removal listeners, and zeroes usage', () =>
      withPlane(async (plane) => {
        await plane.upsert([recordOf(1), recordOf(2, { trafficClass: 'agent' })]);
        const told: string[][] = [];
        const unsubscribe = plane.onRemoved((keys) => told.push(keys));
        const removed = await plane.remove([keyOf(1), keyOf(2), keyOf(3)]);
        expect(removed.map((record) => record.key).sort()).toEqual([keyOf(1), keyOf(2)].sort());
        expect(removed.find((record) => record.key === keyOf(2))?.trafficClass).toBe('agent');
        expect(told.flat().sort()).toEqual([keyOf(1), keyOf(2)].sort());
        unsubscribe();
        expect(await plane.get([keyOf(1), keyOf(2)])).toEqual([null, null]);
        const usage = await plane.usage();
        expect(usage.blocks).toEqual({});
        expect(usage.bytes).toEqual({});
        expect((await plane.scanByLastUse()).records).toEqual([]);
      }));

    it('each class has its own last-use walk; the unfiltered walk merges the classes in last-use order across pages', () =>
      withPlane(async (plane) => {
        const classes = ['agent', 'chat', 'batch'];
        const records = Array.from({ length: 30 }, (_, n) => recordOf(n, { trafficClass: classes[n % 3], lastUseAt: T0 + ((n * 7) % 30) * 1000, depth: n % 2 }));
        await plane.upsert(records);
        const order = (list: BlockRecord[]) => [...list].sort((a, b) => a.lastUseAt - b.lastUseAt || b.depth - a.depth).map((record) => record.key);
        const walk = async (options: { trafficClass?: string; maxLastUseAt?: number }) => {
          const seen: string[] = [];
          let cursor: string | undefined;
          do {
            const page = await plane.scanByLastUse({ ...options, limit: 4, cursor });
            seen.push(...page.records.map((record) => record.key));
            cursor = page.cursor;
          } while (cursor !== undefined);
          return seen;
        };
        expect(await walk({})).toEqual(order(records));
        const chat = records.filter((record) => record.trafficClass === 'chat');
        expect(await walk({ trafficClass: 'chat' })).toEqual(order(chat));
        expect(await walk({ trafficClass: 'chat', maxLastUseAt: T0 + 12_000 })).toEqual(order(chat.filter((record) => record.lastUseAt <= T0 + 12_000)));
        expect(await walk({ trafficClass: 'nobody' })).toEqual([]);
        // A rewrite into another class moves its row (and keeps the later last use); a renewal moves it within its class.
        await plane.upsert([recordOf(1, { trafficClass: 'chat', lastUseAt: T0 })]);
        expect((await walk({ trafficClass: 'agent' })).includes(keyOf(1))).toBe(false);
        const moved = await walk({ trafficClass: 'chat' });
        expect(moved.includes(keyOf(1))).toBe(true);
        expect((await plane.get([keyOf(1)]))[0]?.lastUseAt).toBe(records[1].lastUseAt);
        plane.renew([keyOf(1)], T0 + 99_000);
        await plane.flush();
        expect((await walk({ trafficClass: 'chat' })).at(-1)).toBe(keyOf(1));
        expect((await walk({ trafficClass: 'chat', maxLastUseAt: T0 + 50_000 })).includes(keyOf(1))).toBe(false);
      }));

    it('remove with judgedLastUseAt keeps a record renewed or rewritten after it was judged, on any handle', () =>
      withPlane(async (plane, fixture) => {
        await plane.upsert([recordOf(1), recordOf(2), recordOf(3), recordOf(4, { ttlMs: 60_000 })]);
        const judged = await plane.get([keyOf(1), keyOf(2), keyOf(3), keyOf(4)]);
        const other = await fixture.open();
        try {
          other.renew([keyOf(1), keyOf(4)], T0 + 1);
          await other.flush();
          await other.upsert([recordOf(2, { lastUseAt: T0 + 5 })]);
        } finally {
          await other.close();
        }
        const removed = await plane.remove(
          [keyOf(1), keyOf(2), keyOf(3), keyOf(4)],
          { judgedLastUseAt: judged.map((record) => record!.lastUseAt) },
        );
        expect(removed.map((record) => record.key)).toEqual([keyOf(3)]);
        const [one, two, three, four] = await plane.get([keyOf(1), keyOf(2), keyOf(3), keyOf(4)]);
        expect(one?.lastUseAt).toBe(T0 + 1);
        expect(two?.lastUseAt).toBe(T0 + 5);
        expect(three).toBeNull();
        expect(four?.lastUseAt).toBe(T0 + 1);
        expect((await plane.usage()).blocks.g).toBe(3);
        // Judged at its current last use (or later): it goes.
        expect((await plane.remove([keyOf(1), keyOf(4)], { judgedLastUseAt: [T0 + 1, T0 + 2] })).map((record) => record.key).sort()).toEqual([keyOf(1), keyOf(4)].sort());
        expect((await plane.scanByLastUse({ capped: true })).records).toEqual([]);
        await expect(plane.remove([keyOf(2)], { judgedLastUseAt: [] })).rejects.toMatchObject({ code: 'KVT_ERR_PLANE_BAD_RECORD' });
      }));

    it('removeByLastUse takes the oldest records of one class up to the bound, in batches, with their capped rows, usage, summed tallies and listeners', () =>
      withPlane(async (plane) => {
        const records = Array.from({ length: 10 }, (_, n) => recordOf(n, { trafficClass: n < 7 ? 'agent' : 'chat', tenant: n === 2 ? 'beta' : 'acme', lastUseAt: T0 + n * 1000, ttlMs: n === 1 ? 60_000 : 0 }));
        await plane.upsert(records);
        const told: string[] = [];
        plane.onRemoved((keys) => told.push(...keys));
        const first = await plane.removeByLastUse({ trafficClass: 'agent', maxLastUseAt: T0 + 4000, limit: 3 });
        expect(first.keys).toEqual([keyOf(0), keyOf(1), keyOf(2)]);
        // What the batch held, summed per scope tag inside the plane (GC tallies these).
        expect(first.freed).toEqual({
          bytes: { g: 3003, 'c:agent': 3003, 't:acme': 2001, 't:beta': 1002 },
          blocks: { g: 3, 'c:agent': 3, 't:acme': 2, 't:beta': 1 },
        });
        expect(first.more).toBe(true);
        const second = await plane.removeByLastUse({ trafficClass: 'agent', maxLastUseAt: T0 + 4000, limit: 3 });
        expect(second.keys).toEqual([keyOf(3), keyOf(4)]);
        expect(second.more).toBe(false);
        expect(told.sort()).toEqual([0, 1, 2, 3, 4].map(keyOf).sort());
        expect((await plane.scanByLastUse({ capped: true })).records).toEqual([]);
        const usage = await plane.usage();
        expect(usage.blocks).toMatchObject({ g: 5, 'c:agent': 2, 'c:chat': 3 });
        expect(await plane.removeByLastUse({ trafficClass: 'nobody', maxLastUseAt: T0 + 99_000, limit: 3 })).toEqual({ keys: [], freed: { bytes: {}, blocks: {} }, more: false });
        expect((await plane.scanByLastUse({ limit: 100 })).records.map((record) => record.key)).toEqual([5, 6, 7, 8, 9].map(keyOf));
      }));

    it('removals with journal note their keys as pending deletes (atomically) until cleared; plain removals do not', () =>
      withPlane(async (plane, fixture) => {
        await plane.upsert([recordOf(1), recordOf(2), recordOf(3), recordOf(4, { trafficClass: 'agent' })]);
        await plane.remove([keyOf(1)]);
        await plane.remove([keyOf(2), keyOf(9)], { journal: true });
        await plane.removeByLastUse({ trafficClass: 'agent', maxLastUseAt: T0, limit: 10, journal: true });
        const other = await fixture.open();
        try {
          expect((await other.pendingDeletes()).sort()).toEqual([keyOf(2), keyOf(4)].sort());
          await other.clearPendingDeletes([keyOf(2)]);
        } finally {
          await other.close();
        }
        expect(await plane.pendingDeletes()).toEqual([keyOf(4)]);
        await plane.clearPendingDeletes([keyOf(4)]);
        expect(await plane.pendingDeletes()).toEqual([]);
      }));

    it('pending deletes noted by one removal clear whole, or key by key in any grouping', () =>
      withPlane(async (plane) => {
        await plane.upsert([1, 2, 3, 4, 5].map((n) => recordOf(n, { trafficClass: 'agent', lastUseAt: T0 + n })));
        await plane.upsert([recordOf(6), recordOf(7)]);
        const taken = await plane.removeByLastUse({ trafficClass: 'agent', maxLastUseAt: T0 + 10, limit: 10, journal: true });
        expect(taken.keys).toEqual([1, 2, 3, 4, 5].map(keyOf));
        await plane.remove([keyOf(6), keyOf(7)], { journal: true });
        await plane.clearPendingDeletes([keyOf(6), keyOf(7)]);
        expect((await plane.pendingDeletes()).sort()).toEqual([1, 2, 3, 4, 5].map(keyOf).sort());
        await plane.clearPendingDeletes([keyOf(4), keyOf(2)]);
        expect((await plane.pendingDeletes()).sort()).toEqual([1, 3, 5].map(keyOf).sort());
        await plane.clearPendingDeletes([keyOf(1), keyOf(3), keyOf(5)]);
        expect(await plane.pendingDeletes()).toEqual([]);
      }));

    it('a new plane is untrusted until markTrusted for its generation', () =>
      withPlane(async (plane) => {
        const first = await plane.state();
        expect(first.trusted).toBe(false);
        expect(await plane.markTrusted('not-' + first.generation)).toBe(false);
        expect((await plane.state()).trusted).toBe(false);
        expect(await plane.markTrusted(first.generation)).toBe(true);
        expect(await plane.state()).toEqual({ generation: first.generation, trusted: true });
      }));

    it('orphan sightings keep the earliest time until cleared', () =>
      withPlane(async (plane) => {
        expect(await plane.noteOrphans([keyOf(1), keyOf(2)], T0 + 100)).toEqual([T0 + 100, T0 + 100]);
        expect(await plane.noteOrphans([keyOf(1), keyOf(3)], T0 + 500)).toEqual([T0 + 100, T0 + 500]);
        await plane.clearOrphans([keyOf(2)]);
        expect([...(await plane.orphanSightings()).entries()].sort()).toEqual(
          [
            [keyOf(1), T0 + 100],
            [keyOf(3), T0 + 500],
          ].sort(),
        );
      }));
  });
}
