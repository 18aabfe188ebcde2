/**
 * Would storing a run of a prefix's blocks as one larger S3 object (read back
 * whole, or block by block with ranged GETs, as 3FS serves large chunks) beat
 * one object per block? Measured on the same bytes in the same run, rounds
 * interleaved, through the S3BlobStore's own client and sockets:
 *
 *   per_block   64 × 1 MiB objects, one GET each, 16 in flight (today's layout)
 *   run_whole   8 × 8 MiB objects (8 blocks each), one GET each, 8 in flight
 *   run_ranged  the same 8 MiB objects, 64 ranged GETs of 1 MiB, 16 in flight
 *
 * Used by bench/storage.ts while its Ceph cluster is up.
 */
import type { Readable } from 'node:stream';

import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';

import type { S3BlobStore } from '../storage-adapters/index.ts';
import { median } from './sample-stats.ts';

const MIB = 1 << 20;
const BLOCKS = 64;
const RUN = 8;

export async function benchS3ObjectSizes(store: S3BlobStore, blobs: Uint8Array[], rounds: number, log: (line: string) => void): Promise<Record<string, number>> {
  const prefix = `${store.keyPrefix}objsize-${Date.now().toString(36)}.`;
  const small = Array.from({ length: BLOCKS }, (_, i) => `${prefix}b${i}`);
  const runs = Array.from({ length: BLOCKS / RUN }, (_, i) => `${prefix}r${i}`);
  const put = (Key: string, Body: Uint8Array) => store.client.send(new PutObjectCommand({ Bucket: store.bucket, Key, Body, ContentLength: Body.byteLength }));
  await forAll(small, (key, i) => put(key, blobs[i % blobs.length]), 16);
  await forAll(runs, (key, r) => {
    const joined = new Uint8Array(RUN * MIB);
    for (let b = 0; b < RUN; b++) joined.set(blobs[(r * RUN + b) % blobs.length].subarray(0, MIB), b * MIB);
    return put(key, joined);
  }, 8);
  const get = async (Key: string, Range?: string): Promise<number> => {
    const response = await store.client.send(new GetObjectCommand({ Bucket: store.bucket, Key, Range }));
    let bytes = 0;
    for await (const chunk of response.Body as Readable) bytes += (chunk as Buffer).byteLength;
    return bytes;
  };
  const modes: Record<string, () => Promise<number>> = {
    per_block: async () => sum(await forAll(small, (key) => get(key), 16)),
    run_whole: async () => sum(await forAll(runs, (key) => get(key), 8)),
    run_ranged: async () =>
      sum(await forAll(Array.from({ length: BLOCKS }, (_, i) => i), (i) => get(runs[Math.floor(i / RUN)], `bytes=${(i % RUN) * MIB}-${(i % RUN) * MIB + MIB - 1}`), 16)),
  };
  const seconds: Record<string, number[]> = { per_block: [], run_whole: [], run_ranged: [] };
  for (const mode of Object.keys(modes)) await modes[mode](); // warm-up
  for (let round = 0; round < rounds; round++) {
    const order = Object.keys(modes);
    if (round % 2 === 1) order.reverse();
    for (const mode of order) {
      const start = performance.now();
      const bytes = await modes[mode]();
      if (bytes !== BLOCKS * MIB) throw new Error(`s3 object-size bench ${mode} read ${bytes} bytes, expected ${BLOCKS * MIB}`);
      seconds[mode].push((performance.now() - start) / 1000);
    }
    log(`s3 object sizes round ${round + 1}: ${Object.entries(seconds).map(([m, s]) => `${m} ${((BLOCKS * MIB) / s.at(-1)! / 1e9).toFixed(3)}`).join(', ')} GB/s`);
  }
  await store.delete([...small, ...runs].map((key) => key.slice(store.keyPrefix.length)));
  const gbps = (mode: string) => round3((BLOCKS * MIB) / median(seconds[mode]) / 1e9);
  const paired = (mode: string) => round3(median(seconds[mode].map((s, r) => seconds.per_block[r] / s)));
  return {
    s3_get_1mib_objects_gbps: gbps('per_block'),
    s3_get_8mib_objects_gbps: gbps('run_whole'),
    s3_ranged_1mib_of_8mib_gbps: gbps('run_ranged'),
    s3_8mib_objects_over_1mib: paired('run_whole'),
    s3_ranged_over_1mib_objects: paired('run_ranged'),
  };
}

async function forAll<T, R>(items: T[], fn: (item: T, index: number) => Promise<R>, limit: number): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        results[index] = await fn(items[index], index);
      }
    }),
  );
  return results;
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}
