import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { openBlobStore, parseBlobStoreUrl, SegmentBlobStore } from '../../storage-adapters/index.ts';
import { KIND_PUT, recordBytes, writeRecord, crcOf } from '../../storage-adapters/segment-format.ts';
import { collect, expectSameBytes, runBlobStoreConformance } from './blob-store-conformance.ts';

const scratchDirs: string[] = [];

async function scratchDir(): Promise<string> {
  const dir = await fsp.mkdtemp(join(tmpdir(), 'kvtier-segment-test-'));
  scratchDirs.push(dir);
  return dir;
}

afterAll(async () => {
  for (const dir of scratchDirs) await fsp.rm(dir, { recursive: true, force: true });
});

runBlobStoreConformance('segment', async () => {
  const dir = await scratchDir();
  return {
    open: async () => SegmentBlobStore.open({ dir: join(dir, 'store') }),
    dispose: () => fsp.rm(dir, { recursive: true, force: true }),
  };
});

runBlobStoreConformance('segment with fsync and small segments, opened by URL', async () => {
  const dir = await scratchDir();
  return {
    open: async () => openBlobStore(`segment:${join(dir, 'store')}?fsync=true&segmentBytes=65536`),
    dispose: () => fsp.rm(dir, { recursive: true, force: true }),
  };
});

async function segmentFiles(dir: string): Promise<string[]> {
  return (await fsp.readdir(dir)).filter((name) => name.endsWith('.kvseg')).sort();
}

describe('SegmentBlobStore', () => {
  it('parses segment: URLs and refuses unknown options', () => {
    expect(parseBlobStoreUrl('segment:/mnt/kv?fsync=true&segmentBytes=1048576')).toEqual({ kind: 'segment', options: { dir: '/mnt/kv', fsync: true, segmentBytes: 1048576 } });
    expect(() => parseBlobStoreUrl('segment:/mnt/kv?concurrency=3')).toThrow(/unknown segment option/);
    expect(() => parseBlobStoreUrl('segment:')).toThrow(/names no directory/);
  });

  it('writes the puts of one turn as one append: one segment file, every value back', async () => {
    const dir = join(await scratchDir(), 's');
    const store = await SegmentBlobStore.open({ dir });
    const values = Array.from({ length: 19 }, () => randomBytes(3500));
    await Promise.all(values.map((bytes, i) => store.put(`k${i}`, bytes)));
    expect(await segmentFiles(dir)).toHaveLength(1);
    for (const [i, bytes] of values.entries()) expectSameBytes(await store.get(`k${i}`), bytes);
    await store.close();
  });

  it('batches one after another, large then small then large, each read back whole (the batch buffer is reused)', async () => {
    const dir = join(await scratchDir(), 's');
    const store = await SegmentBlobStore.open({ dir });
    const written = new Map<string, Uint8Array>();
    for (const [batch, count] of [40, 3, 25, 1].entries()) {
      const values = Array.from({ length: count }, (_, i) => [`b${batch}-${i}`, randomBytes(1000 + ((i * 977) % 3000))] as const);
      await Promise.all(values.map(([key, bytes]) => store.put(key, bytes)));
      for (const [key, bytes] of values) written.set(key, bytes);
    }
    for (const [key, bytes] of written) expectSameBytes(await store.get(key), bytes);
    await store.close();
    const reopened = await SegmentBlobStore.open({ dir });
    for (const [key, bytes] of written) expectSameBytes(await reopened.get(key), bytes);
    await reopened.close();
  });

  it('a value damaged on storage is a KVT_ERR_STORAGE_IO error, never other bytes', async () => {
    const dir = join(await scratchDir(), 's');
    const store = await SegmentBlobStore.open({ dir });
    const bytes = randomBytes(4096);
    await store.put('victim', bytes);
    const [name] = await segmentFiles(dir);
    const handle = await fsp.open(join(dir, name), 'r+');
    // The value starts after the 28-byte header, the key and padding to 8: byte 100 is inside it.
    await handle.write(Uint8Array.of(bytes[100 - 40] ^ 0xff), 0, 1, 100);
    await handle.close();
    await expect(store.get('victim')).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_IO' });
    const other = await SegmentBlobStore.open({ dir });
    await expect(other.get('victim')).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_IO' });
    await other.close();
    await store.close();
  });

  it('a torn tail (a crash mid-append) ends a reader\'s scan there: earlier values read, the torn one is absent', async () => {
    const dir = join(await scratchDir(), 's');
    const store = await SegmentBlobStore.open({ dir });
    const first = randomBytes(2000);
    await store.put('whole', first);
    await store.put('torn', randomBytes(2000));
    await store.close();
    const [name] = await segmentFiles(dir);
    const path = join(dir, name);
    const { size } = await fsp.stat(path);
    await fsp.truncate(path, size - 32 - 100); // the sealed record and the last 100 bytes of 'torn'
    const reader = await SegmentBlobStore.open({ dir });
    expectSameBytes(await reader.get('whole'), first);
    expect(await reader.get('torn')).toBeNull();
    expect(await collect(reader.list())).toEqual(['whole']);
    await reader.close();
  });

  it('another store on the mount sees puts and deletes made after it opened (deletes within refreshMs)', async () => {
    const dir = join(await scratchDir(), 's');
    const a = await SegmentBlobStore.open({ dir });
    const b = await SegmentBlobStore.open({ dir, refreshMs: 50 });
    const bytes = randomBytes(1000);
    await a.put('shared', bytes);
    expect(await b.has(['shared'])).toEqual([true]);
    expectSameBytes(await b.get('shared'), bytes);
    await a.delete(['shared']);
    // b holds the location; its next get past refreshMs rescans and finds the tombstone.
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(await b.get('shared')).toBeNull();
    expect(await collect(b.list())).toEqual([]);
    await b.put('shared', Uint8Array.of(5));
    expectSameBytes(await a.get('shared'), Uint8Array.of(5));
    await a.close();
    await b.close();
  });

  it('compaction reclaims the space of deleted values and keeps the live ones readable, here and on another node', async () => {
    const dir = join(await scratchDir(), 's');
    const store = await SegmentBlobStore.open({ dir, segmentBytes: 64 * 1024 });
    const other = await SegmentBlobStore.open({ dir, refreshMs: 0 });
    const values = new Map(Array.from({ length: 120 }, (_, i) => [`b${i.toString().padStart(3, '0')}`, randomBytes(3000)] as const));
    for (const [key, bytes] of values) await store.put(key, bytes);
    const doomed = [...values.keys()].filter((_, i) => i % 4 !== 0);
    expectSameBytes(await other.get('b004'), values.get('b004')!); // other learns the locations before compaction
    await store.delete(doomed);
    const sizeOf = async () => {
      let total = 0;
      for (const name of await segmentFiles(dir)) total += (await fsp.stat(join(dir, name))).size;
      return total;
    };
    const before = await sizeOf();
    const report = await store.compact();
    expect(report.segmentsRemoved).toBeGreaterThan(0);
    expect(report.recordsMoved).toBeGreaterThan(0);
    const after = await sizeOf();
    expect(after).toBeLessThan(before / 2);
    for (const [i, [key, bytes]] of [...values].entries()) {
      if (i % 4 === 0) {
        expectSameBytes(await store.get(key), bytes);
        expectSameBytes(await other.get(key), bytes); // its old location is gone: it rescans and finds the copy
      } else {
        expect(await store.get(key)).toBeNull();
        expect(await other.get(key)).toBeNull();
      }
    }
    await store.close();
    await other.close();
    // A fresh node sees the same after compaction: deletes did not come back with their tombstones gone.
    const fresh = await SegmentBlobStore.open({ dir });
    expect(await collect(fresh.list())).toEqual([...values.keys()].filter((_, i) => i % 4 === 0).sort());
    await fresh.close();
  });

  it('a compacted tombstone still hides an older put in a segment that remains', async () => {
    const dir = join(await scratchDir(), 's');
    const old = await SegmentBlobStore.open({ dir });
    await old.put('ghost', Uint8Array.of(1));
    await old.put('keep', randomBytes(50_000)); // keeps old's segment mostly live: it is not compacted
    await old.close();
    const store = await SegmentBlobStore.open({ dir, segmentBytes: 4096 });
    await store.delete(['ghost']);
    for (let i = 0; i < 4; i++) await store.put(`filler${i}`, randomBytes(3000)); // rolls the tombstone's segment
    await store.delete(['filler0', 'filler1', 'filler2', 'filler3']);
    const report = await store.compact();
    expect(report.segmentsRemoved).toBeGreaterThan(0);
    expect(report.tombstonesKept).toBeGreaterThan(0);
    await store.close();
    const fresh = await SegmentBlobStore.open({ dir });
    expect(await fresh.get('ghost')).toBeNull();
    expect(await collect(fresh.list())).toEqual(['keep']);
    await fresh.close();
  });

  it('a delete wins over a put written by a node whose clock runs ahead (versions from the future)', async () => {
    const dir = join(await scratchDir(), 's');
    await fsp.mkdir(dir, { recursive: true });
    const value = randomBytes(100);
    const future = (Date.now() + 86_400_000) * 4096;
    const record = Buffer.alloc(recordBytes('skewed'.length, value.byteLength));
    writeRecord(record, 0, KIND_PUT, 'skewed', future, value, crcOf(value));
    await fsp.writeFile(join(dir, `${future.toString(16).padStart(14, '0')}-ahead.1.ffff.kvseg`), record);
    const store = await SegmentBlobStore.open({ dir });
    expectSameBytes(await store.get('skewed'), value);
    await store.delete(['skewed']);
    expect(await store.get('skewed')).toBeNull();
    await store.put('skewed', Uint8Array.of(3));
    expectSameBytes(await store.get('skewed'), Uint8Array.of(3));
    await store.close();
    const fresh = await SegmentBlobStore.open({ dir });
    expectSameBytes(await fresh.get('skewed'), Uint8Array.of(3));
    await fresh.close();
  });
});
