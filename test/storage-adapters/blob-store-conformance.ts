/**
 * The behaviour every BlobStore adapter must show, as one vitest suite that
 * each adapter's test file runs against its own backend:
 *
 *   runBlobStoreConformance('fs', async () => ({ open, dispose }))
 *
 * Each test gets a fresh namespace (a directory, a bucket prefix). `open` may
 * be called more than once per namespace: every store opened on it must see
 * the same data, the way two kvtier nodes share one storage.
 */
import { createHash, randomBytes } from 'node:crypto';

import { afterEach, describe, expect, it } from 'vitest';

import { MAX_KEY_LENGTH, type BlobStore } from '../../storage-adapters/index.ts';

export interface ConformanceNamespace {
  /** Opens a store on this namespace; every call sees the same data. */
  open(): Promise<BlobStore>;
  /** Removes what the namespace holds; called after each test. */
  dispose(): Promise<void>;
}

export interface ConformanceOptions {
  /** Keys used by the many-keys test (above 1000 exercises S3 paging and DeleteObjects batches). Default 1100. */
  manyKeys?: number;
}

export function runBlobStoreConformance(
  label: string,
  newNamespace: () => Promise<ConformanceNamespace>,
  options: ConformanceOptions = {},
): void {
  const manyKeys = options.manyKeys ?? 1100;

  describe(`BlobStore conformance: ${label}`, () => {
    const opened: BlobStore[] = [];
    let namespace: ConformanceNamespace | undefined;

    async function freshStore(): Promise<BlobStore> {
      namespace ??= await newNamespace();
      const store = await namespace.open();
      opened.push(store);
      return store;
    }

    afterEach(async () => {
      for (const store of opened.splice(0)) await store.close();
      await namespace?.dispose();
      namespace = undefined;
    });

    it('round-trips bytes exactly, and a second store on the same namespace sees them', async () => {
      const store = await freshStore();
      const every = new Uint8Array(256).map((_, i) => i);
      const values = { k0: every, k1: randomBytes(1), k2: randomBytes(4095), k3: randomBytes(65_537), k4: randomBytes(1 << 20) };
      for (const [key, bytes] of Object.entries(values)) await store.put(key, bytes);
      const other = await freshStore();
      for (const [key, bytes] of Object.entries(values)) {
        expectSameBytes(await store.get(key), bytes);
        expectSameBytes(await other.get(key), bytes);
      }
    });

    it('get with allocate: the same bytes, read into the caller\'s buffer (larger ArrayBuffer, dirty) when the adapter uses it', async () => {
      const store = await freshStore();
      const values = { a0: randomBytes(1), a1: randomBytes(65_537), a2: randomBytes(1 << 20) };
      for (const [key, bytes] of Object.entries(values)) await store.put(key, bytes);
      for (const [key, bytes] of Object.entries(values)) {
        const given: Uint8Array[] = [];
        const got = await store.get(key, {
          allocate: (size) => {
            // A recycled buffer: bigger than asked and full of another block's bytes.
            const view = new Uint8Array(new ArrayBuffer(size + 4096), 0, size).fill(0xee);
            given.push(view);
            return view;
          },
        });
        expectSameBytes(got, bytes);
        if (given.length > 0) expect(got!.buffer).toBe(given.at(-1)!.buffer);
      }
      expect(await store.get('a-missing', { allocate: (size) => new Uint8Array(size) })).toBeNull();
    });

    it('get with maxBytes: a blob past it is refused (KVT_ERR_STORAGE_TOO_LARGE) before allocate is asked for its size; one of exactly maxBytes is read', async () => {
      const store = await freshStore();
      const bytes = randomBytes(70_000);
      await store.put('capped', bytes);
      const asked: number[] = [];
      const allocate = (size: number) => {
        asked.push(size);
        return new Uint8Array(size);
      };
      await expect(store.get('capped', { allocate, maxBytes: bytes.byteLength - 1 })).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_TOO_LARGE' });
      expect(asked).toEqual([]);
      expectSameBytes(await store.get('capped', { allocate, maxBytes: bytes.byteLength }), bytes);
      expectSameBytes(await store.get('capped', { maxBytes: bytes.byteLength }), bytes);
      expect(await store.get('capped-missing', { allocate, maxBytes: 1 })).toBeNull();
    });

    it('get with an allocate that throws rejects that get only (the store and the process go on)', async () => {
      const store = await freshStore();
      const bytes = randomBytes(5000);
      await store.put('no-room', bytes);
      const refusing = () => {
        throw new RangeError('Array buffer allocation failed');
      };
      await expect(store.get('no-room', { allocate: refusing })).rejects.toMatchObject({ code: expect.stringMatching(/^KVT_ERR_STORAGE_/) });
      expectSameBytes(await store.get('no-room'), bytes);
    });

    it('returns a plain Uint8Array that does not alias what was put', async () => {
      const store = await freshStore();
      const bytes = randomBytes(10_000);
      const copy = Buffer.from(bytes);
      await store.put('alias', bytes);
      bytes.fill(0);
      const got = await store.get('alias');
      expect(got).toBeInstanceOf(Uint8Array);
      expectSameBytes(got, copy);
    });

    it('overwrites: the last put wins', async () => {
      const store = await freshStore();
      const first = randomBytes(3000);
      const second = randomBytes(1000);
      await store.put('over', first);
      await store.put('over', second);
      expectSameBytes(await store.get('over'), second);
      expect(await store.has(['over'])).toEqual([true]);
    });

    it('answers null / false for keys that were never written, not an error', async () => {
      const store = await freshStore();
      expect(await store.get('never-written')).toBeNull();
      expect(await store.get('0123456789abcdef0123456789abcdef')).toBeNull();
      expect(await store.has(['never-written', 'x'])).toEqual([false, false]);
    });

    it('has() answers in input order, for empty, duplicate and large batches', async () => {
      const store = await freshStore();
      const keys = Array.from({ length: 300 }, (_, i) => `h${i.toString(16).padStart(4, '0')}`);
      const present = new Set(keys.filter((_, i) => i % 3 === 0));
      await Promise.all([...present].map((key) => store.put(key, Uint8Array.of(1))));
      const asked = shuffle([...keys, ...keys.slice(0, 20)]);
      expect(await store.has(asked)).toEqual(asked.map((key) => present.has(key)));
      expect(await store.has([])).toEqual([]);
    });

    it('deletes what exists and ignores keys that do not', async () => {
      const store = await freshStore();
      await store.put('d1', Uint8Array.of(1));
      await store.put('d2', Uint8Array.of(2));
      await store.delete(['d1', 'missing-1', 'd2', 'missing-2', 'd1']);
      expect(await store.has(['d1', 'd2'])).toEqual([false, false]);
      expect(await store.get('d1')).toBeNull();
      await store.delete([]);
      await store.delete(['missing-3']);
      // a deleted key can be written again
      await store.put('d1', Uint8Array.of(9));
      expectSameBytes(await store.get('d1'), Uint8Array.of(9));
    });

    it('lists by key prefix, including short keys and keys with dots', async () => {
      const store = await freshStore();
      const keys = ['aa-1', 'aa-2', 'ab-1', 'b', 'a', 'a.b', 'a_c', 'abcdef-1', 'abcdef-2', 'abcd', '3f9c', '3f9d0'];
      await Promise.all(keys.map((key) => store.put(key, Uint8Array.of(key.length))));
      const cases: Record<string, string[]> = {
        '': keys,
        a: keys.filter((k) => k.startsWith('a')),
        aa: ['aa-1', 'aa-2'],
        'a.': ['a.b'],
        a_: ['a_c'],
        abc: ['abcdef-1', 'abcdef-2', 'abcd'],
        abcd: ['abcdef-1', 'abcdef-2', 'abcd'],
        abcde: ['abcdef-1', 'abcdef-2'],
        '3f9': ['3f9c', '3f9d0'],
        b: ['b'],
        zz: [],
      };
      for (const [prefix, expected] of Object.entries(cases)) {
        expect(await collect(store.list(prefix)), `list(${JSON.stringify(prefix)})`).toEqual([...expected].sort());
      }
      expect(await collect(store.list())).toEqual([...keys].sort());
    });

    it(`handles ${manyKeys} keys: list pages through all, delete batches through all`, async () => {
      const store = await freshStore();
      const keys = Array.from({ length: manyKeys }, (_, i) => `m${i.toString(36).padStart(4, '0')}`);
      await parallel(keys, 32, (key) => store.put(key, new TextEncoder().encode(key)));
      await store.put('other', Uint8Array.of(0));
      expect(await collect(store.list('m'))).toEqual([...keys].sort());
      expect((await store.has(keys)).every(Boolean)).toBe(true);
      await store.delete(keys);
      expect(await collect(store.list('m'))).toEqual([]);
      expect(await collect(store.list())).toEqual(['other']);
    });

    it('stores empty and 8 MiB values', async () => {
      const store = await freshStore();
      const large = randomBytes(8 << 20);
      await store.put('empty', new Uint8Array(0));
      await store.put('large', large);
      const empty = await store.get('empty');
      expect(empty).not.toBeNull();
      expect(empty!.byteLength).toBe(0);
      expect(await store.has(['empty', 'large'])).toEqual([true, true]);
      expectSameBytes(await store.get('large'), large);
    });

    it('leaves exactly one whole value after concurrent puts of one key, and readers never see a partial one', async () => {
      const writer = await freshStore();
      const reader = await freshStore();
      const candidates = Array.from({ length: 6 }, (_, i) => randomBytes((1 << 20) + i * 4099));
      const fingerprints = new Set(candidates.map(fingerprint));
      const reads: (Uint8Array | null)[] = [];
      let writing = true;
      const readLoop = (async () => {
        while (writing) reads.push(await reader.get('contended'));
      })();
      await Promise.all(candidates.map((bytes) => writer.put('contended', bytes)));
      writing = false;
      await readLoop;
      for (const got of reads) if (got !== null) expect(fingerprints.has(fingerprint(got))).toBe(true);
      const final = await reader.get('contended');
      expect(final).not.toBeNull();
      expect(fingerprints.has(fingerprint(final!))).toBe(true);
      expect(await collect(reader.list('contended'))).toEqual(['contended']);
    });

    it('rejects keys outside the alphabet with KVT_ERR_STORAGE_BAD_KEY', async () => {
      const store = await freshStore();
      for (const key of ['', '.', '..', '../x', 'a/b', 'Upper', 'sp ace', 'x'.repeat(MAX_KEY_LENGTH + 1)]) {
        await expect(store.put(key, Uint8Array.of(1)), key).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_BAD_KEY' });
        await expect(store.get(key), key).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_BAD_KEY' });
      }
      const longest = 'k'.repeat(MAX_KEY_LENGTH);
      await store.put(longest, Uint8Array.of(7));
      expectSameBytes(await store.get(longest), Uint8Array.of(7));
      expect(await collect(store.list('kkk'))).toEqual([longest]);
      await expect(store.has(['ok', 'B'])).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_BAD_KEY' });
      await expect(collect(store.list('A'))).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_BAD_KEY' });
    });

    it('close() waits for a put in flight, then refuses new work with KVT_ERR_STORAGE_CLOSED', async () => {
      const store = await freshStore();
      const bytes = randomBytes(2 << 20);
      const pending = store.put('closing', bytes);
      await store.close();
      await pending;
      await store.close(); // idempotent
      for (const attempt of [
        () => store.put('x', Uint8Array.of(1)),
        () => store.get('closing'),
        () => store.has(['closing']),
        () => store.delete(['closing']),
        () => collect(store.list()),
      ]) {
        await expect(attempt()).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_CLOSED' });
      }
      const other = await freshStore();
      expectSameBytes(await other.get('closing'), bytes);
    });
  });
}

export function expectSameBytes(actual: Uint8Array | null, expected: Uint8Array): void {
  expect(actual).not.toBeNull();
  expect(actual!.byteLength).toBe(expected.byteLength);
  // Buffer.equals compares natively; toEqual on MiB arrays is slow and prints huge diffs.
  expect(Buffer.from(actual!.buffer, actual!.byteOffset, actual!.byteLength).equals(Buffer.from(expected))).toBe(true);
}

export async function collect(iterable: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const key of iterable) out.push(key);
  return out.sort();
}

function fingerprint(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}

async function parallel<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}
