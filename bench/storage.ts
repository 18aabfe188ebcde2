/**
 * Storage adapter throughput, against baselines measured in the same run.
 *
 *   npx tsx -e "import('./bench/storage.ts').then(async m=>console.log(await m.run()))"
 *   npm run bench -- storage          (merged with the kvtier part)
 *
 * fs: FsBlobStore put/get of 1 MiB blobs (about one 64-token KV block of the
 * demo model) vs plain `fs.writeFile`/`fs.readFile` of the same bytes on the
 * same disk, same concurrency. Each round writes fresh files for both (the
 * previous round's are deleted untimed); within a round the two take turns
 * by chunks of 16 blobs, so background load hits both alike; each figure is
 * the median over rounds; the `*_vs_raw` ratios are the median of the
 * per-round ratios (each round's pair saw the same load). Reads are of files just
 * written, so both sides read from the page cache alike.
 *
 * s3: S3BlobStore against a Ceph radosgw started on loopback by the test
 * helper (memstore OSD), 16 requests in flight. While it is up: the kvtier
 * hit path on it against plain gets of the same objects (s3_load_*, see
 * bench/storage-load.ts), and one object per block against runs of 8 blocks
 * per object read whole or by ranged GETs (bench/storage-s3-objects.ts).
 *
 * GB/s = 1e9 bytes per second. Set KVTIER_BENCH_DIR to measure another mount
 * (a 3FS/CephFS/NFS directory); default is the OS temp dir.
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { FsBlobStore, S3BlobStore } from '../storage-adapters/index.ts';
import { startCephS3 } from '../test/helpers/ceph-s3.ts';
import { benchLoadPair } from './storage-load.ts';
import { benchS3ObjectSizes } from './storage-s3-objects.ts';
import { median } from './sample-stats.ts';

const BLOB_BYTES = 1 << 20;
const FS_BLOBS = Number(process.env.KVTIER_BENCH_FS_BLOBS ?? 256);
const FS_ROUNDS = Number(process.env.KVTIER_BENCH_FS_ROUNDS ?? 7);
const FS_CONCURRENCY = 4; // libuv's default thread pool size: more only queues
const FS_CHUNK = 16;
const S3_BLOBS = Number(process.env.KVTIER_BENCH_S3_BLOBS ?? 192);
const S3_ROUNDS = Number(process.env.KVTIER_BENCH_S3_ROUNDS ?? 3);
const S3_CONCURRENCY = 16;
const S3_LOAD_BLOCKS = Number(process.env.KVTIER_BENCH_S3_LOAD_BLOCKS ?? 64);
const S3_LOAD_ROUNDS = Number(process.env.KVTIER_BENCH_S3_LOAD_ROUNDS ?? 5);

const progress = (line: string) => process.stderr.write(`[bench storage] ${line}\n`);

export async function run(): Promise<Record<string, number | string>> {
  const blobs = Array.from({ length: Math.max(FS_BLOBS, S3_BLOBS) }, () => randomBytes(BLOB_BYTES));
  const keys = blobs.map((_, i) => `${i.toString(16).padStart(4, '0')}${randomBytes(14).toString('hex')}`);
  const fs = await benchFs(blobs.slice(0, FS_BLOBS), keys.slice(0, FS_BLOBS));
  const s3 = await benchS3(blobs.slice(0, S3_BLOBS), keys.slice(0, S3_BLOBS));
  return {
    ...fs,
    ...s3,
    storage_blob_bytes: BLOB_BYTES,
    storage_fs_blobs: FS_BLOBS,
    storage_fs_rounds: FS_ROUNDS,
    storage_s3_blobs: S3_BLOBS,
    storage_s3_rounds: S3_ROUNDS,
    storage_s3_in_flight: S3_CONCURRENCY,
    storage_statistic: 'median over rounds',
  };
}

async function benchFs(blobs: Buffer[], keys: string[]) {
  const root = await fsp.mkdtemp(join(process.env.KVTIER_BENCH_DIR ?? tmpdir(), 'kvtier-bench-storage-'));
  const rawDir = join(root, 'raw');
  const storeDir = join(root, 'store');
  const bytes = blobs.length * BLOB_BYTES;
  const samples = { put: [] as number[], get: [] as number[], rawWrite: [] as number[], rawRead: [] as number[] };
  progress(`fs: ${blobs.length} × 1 MiB, ${FS_ROUNDS} rounds, ${FS_CONCURRENCY} in flight, under ${root}`);
  try {
    const store = new FsBlobStore({ dir: storeDir });
    // the raw side gets the same two-level layout, made beforehand, so it pays no mkdir either
    const rawPaths = keys.map((key) => join(rawDir, key.slice(0, 2), key.slice(2, 4), key));
    for (const path of new Set(rawPaths.map((p) => join(p, '..')))) await fsp.mkdir(path, { recursive: true });
    await store.put(keys[0], blobs[0]); // warm-up: imports, first shard dirs
    for (let round = 0; round < FS_ROUNDS; round++) {
      await Promise.all([store.delete(keys), Promise.all(rawPaths.map((p) => fsp.rm(p, { force: true })))]);
      // Raw and store take turns chunk by chunk (who goes first alternates),
      // so a burst of background load lands on both sides alike.
      const time = { put: 0, get: 0, rawWrite: 0, rawRead: 0 };
      let readBytes = 0;
      const chunks = chunkIndexes(blobs.length, FS_CHUNK);
      for (const [c, chunk] of chunks.entries()) {
        const rawWrite = async () => {
          time.rawWrite += await timed(() => forAll(chunk, (i) => fsp.writeFile(rawPaths[i], blobs[i])));
        };
        const put = async () => {
          time.put += await timed(() => forAll(chunk, (i) => store.put(keys[i], blobs[i])));
        };
        for (const step of (c + round) % 2 ? [put, rawWrite] : [rawWrite, put]) await step();
      }
      for (const [c, chunk] of chunks.entries()) {
        const rawRead = async () => {
          time.rawRead += await timed(() =>
            forAll(chunk, async (i) => {
              const read = await fsp.readFile(rawPaths[i]);
              readBytes += read.byteLength; // after the await: `x += await y` would read x before it
            }),
          );
        };
        const get = async () => {
          time.get += await timed(() =>
            forAll(chunk, async (i) => {
              const read = await store.get(keys[i]);
              readBytes += read!.byteLength;
            }),
          );
        };
        for (const step of (c + round) % 2 ? [get, rawRead] : [rawRead, get]) await step();
      }
      if (readBytes !== 2 * bytes) throw new Error(`fs bench read ${readBytes} bytes, expected ${2 * bytes}`);
      if (round === 0) await verify(store, keys, blobs);
      samples.put.push(time.put);
      samples.get.push(time.get);
      samples.rawWrite.push(time.rawWrite);
      samples.rawRead.push(time.rawRead);
      progress(
        `fs round ${round + 1}: put ${gbps(bytes, time.put)} raw write ${gbps(bytes, time.rawWrite)} ` +
          `get ${gbps(bytes, time.get)} raw read ${gbps(bytes, time.rawRead)} GB/s`,
      );
    }
    await store.close();
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
  return {
    fs_put_gbps: gbps(bytes, median(samples.put)),
    fs_get_gbps: gbps(bytes, median(samples.get)),
    raw_write_gbps: gbps(bytes, median(samples.rawWrite)),
    raw_read_gbps: gbps(bytes, median(samples.rawRead)),
    // paired within each round (same background load), then the median
    fs_put_vs_raw: round3(median(samples.put.map((t, r) => samples.rawWrite[r] / t))),
    fs_get_vs_raw: round3(median(samples.get.map((t, r) => samples.rawRead[r] / t))),
  };
}

async function benchS3(blobs: Buffer[], keys: string[]) {
  progress('s3: starting a Ceph cluster (mon, memstore OSD, radosgw) on loopback');
  const cluster = await startCephS3({ log: progress });
  const bytes = blobs.length * BLOB_BYTES;
  const puts: number[] = [];
  const gets: number[] = [];
  let extra: Record<string, number> = {};
  try {
    const store = await S3BlobStore.open({
      endpoint: cluster.endpoint,
      bucket: 'kvtier-bench',
      prefix: 'blocks',
      credentials: cluster,
      createBucket: true,
      concurrency: S3_CONCURRENCY,
    });
    await store.put(keys[0], blobs[0]); // warm-up: sockets, the bucket's first object
    progress(`s3: ${blobs.length} × 1 MiB, ${S3_ROUNDS} rounds, ${S3_CONCURRENCY} in flight`);
    for (let round = 0; round < S3_ROUNDS; round++) {
      puts.push(await timed(() => forAll(keys, (key, i) => store.put(key, blobs[i]), S3_CONCURRENCY)));
      let readBytes = 0;
      gets.push(await timed(() => forAll(keys, async (key) => {
        const read = await store.get(key);
        readBytes += read!.byteLength;
      }, S3_CONCURRENCY)));
      if (readBytes !== bytes) throw new Error(`s3 bench read ${readBytes} bytes, expected ${bytes}`);
      if (round === 0) await verify(store, keys.slice(0, 16), blobs);
      progress(`s3 round ${round + 1}: put ${gbps(bytes, puts.at(-1)!)} get ${gbps(bytes, gets.at(-1)!)} GB/s`);
    }
    await store.delete(keys);
    const pair = await benchLoadPair(store, { blocks: S3_LOAD_BLOCKS, rounds: S3_LOAD_ROUNDS, inFlight: S3_CONCURRENCY, log: progress });
    extra = {
      s3_load_payload_gbps: pair.loadPayloadGbps,
      s3_load_get_gbps: pair.getGbps,
      s3_load_over_get: pair.loadOverGet,
      s3_load_cpu_us_per_block: pair.loadCpuUsPerBlock,
      s3_load_get_cpu_us_per_block: pair.getCpuUsPerBlock,
      s3_load_pair_blocks: S3_LOAD_BLOCKS,
      s3_load_pair_rounds: S3_LOAD_ROUNDS,
      ...(await benchS3ObjectSizes(store, blobs, S3_LOAD_ROUNDS, progress)),
    };
    await store.close();
  } finally {
    await cluster.stop();
  }
  return { s3_put_gbps: gbps(bytes, median(puts)), s3_get_gbps: gbps(bytes, median(gets)), ...extra };
}

async function verify(store: FsBlobStore | S3BlobStore, keys: string[], blobs: Buffer[]): Promise<void> {
  for (let i = 0; i < keys.length; i++) {
    const got = await store.get(keys[i]);
    if (got === null || !Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(blobs[i])) {
      throw new Error(`${store.kind} bench: ${keys[i]} did not read back what was written`);
    }
  }
}

function chunkIndexes(count: number, size: number): number[][] {
  const chunks: number[][] = [];
  for (let i = 0; i < count; i += size) chunks.push(Array.from({ length: Math.min(size, count - i) }, (_, j) => i + j));
  return chunks;
}

async function forAll<T>(items: T[], fn: (item: T, index: number) => Promise<unknown>, limit = FS_CONCURRENCY): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        await fn(items[index], index);
      }
    }),
  );
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

function gbps(bytes: number, seconds: number): number {
  return round3(bytes / seconds / 1e9);
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}
