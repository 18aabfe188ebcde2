/**
 * The floor of the replay's write path (#29: ≥ 2,000 requests/s of the
 * conversation trace, ~19 new blocks per request = 25.7 µs per block for
 * everything), for a design not built yet: blocks appended to a segment file,
 * one write per request, and ONE index row per block (segment, offset,
 * length, last use) in one LMDB transaction per request. Beside it, in the
 * same run, the store the tier has: one file per block (temp file, write,
 * rename into its two-level shard), with the same one-row index. The blocks
 * are real BlockCodec encodings of the replay's block (512 tokens, a 1 KiB
 * payload), so encode is counted too. Nothing else of the tier is here (no
 * lookup, no plane record, no prefix hashing): what is left of the 25.7 µs
 * after these figures is their budget.
 *
 *   replay_floor_packed_us_per_block      wall µs per block: encode + segment append + index row
 *   replay_floor_files_us_per_block       the same with one file per block
 *   replay_floor_packed_over_files        files / packed (how much faster packing is)
 *   replay_floor_packed_{encode,write,index}_us   the packed path's parts
 *   replay_floor_packed_requests_per_s    requests/s if these were all a request did
 *
 * KVTIER_BENCH_REPLAY_FLOOR_REQUESTS (default 2000) requests of 19 blocks per side.
 */
import { closeSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { open, type RootDatabase } from 'lmdb';

import { BlockCodec, type KvLayout } from '../src/kvtier/index.ts';

const REQUESTS = Number(process.env.KVTIER_BENCH_REPLAY_FLOOR_REQUESTS ?? 2000);
const BLOCKS_PER_REQUEST = 19;
const layout: KvLayout = { layers: 1, kvHeads: 1, headDim: 1, dtype: 'f16', tokensPerBlock: 512, kind: 'mla' };
const say = (line: string) => console.error(`bench replay-floor: ${line}`);

interface Parts { encode: number; write: number; index: number; wall: number }
const noParts = (): Parts => ({ encode: 0, write: 0, index: 0, wall: 0 });

function indexRow(segment: number, offset: number, length: number, lastUse: number): Buffer {
  const row = Buffer.allocUnsafe(24);
  row.writeUInt32LE(segment, 0);
  row.writeDoubleLE(offset, 4);
  row.writeUInt32LE(length, 12);
  row.writeDoubleLE(lastUse, 16);
  return row;
}

async function side(codec: BlockCodec, dir: string, packed: boolean): Promise<Parts> {
  const db: RootDatabase = open({ path: join(dir, 'index'), noSync: true, compression: false, encoding: 'binary' });
  const blocksDir = join(dir, 'blocks');
  const segment = packed ? openSync(join(dir, 'segment-0'), 'a') : -1;
  const tokens = new Uint32Array(512).map((_, i) => (i * 7919) % 129_280);
  const payload = new Uint8Array(1024);
  const keys = Array.from({ length: REQUESTS * BLOCKS_PER_REQUEST }, () => randomBytes(16));
  const parts = noParts();
  let offset = 0;
  const start = performance.now();
  for (let r = 0; r < REQUESTS; r++) {
    let t = performance.now();
    const blobs: Uint8Array[] = [];
    for (let b = 0; b < BLOCKS_PER_REQUEST; b++) {
      const k = r * BLOCKS_PER_REQUEST + b;
      blobs.push(codec.encode({ key: keys[k], parentKey: keys[Math.max(0, k - 1)], modelFingerprint: 'kvtier-replay', tokens, layout, payload }));
    }
    parts.encode += performance.now() - t;
    t = performance.now();
    if (packed) {
      writeSync(segment, Buffer.concat(blobs));
    } else {
      blobs.forEach((blob, b) => {
        const hex = keys[r * BLOCKS_PER_REQUEST + b].toString('hex');
        const shard = join(blocksDir, hex.slice(0, 2), hex.slice(2, 4));
        mkdirSync(shard, { recursive: true });
        const tmp = join(shard, `.${hex}.tmp`);
        writeFileSync(tmp, blob, { flag: 'wx' });
        renameSync(tmp, join(shard, hex));
      });
    }
    parts.write += performance.now() - t;
    t = performance.now();
    db.transactionSync(() => {
      for (let b = 0; b < BLOCKS_PER_REQUEST; b++) {
        void db.put(keys[r * BLOCKS_PER_REQUEST + b], indexRow(0, offset, blobs[b].length, r));
        offset += blobs[b].length;
      }
    });
    parts.index += performance.now() - t;
  }
  parts.wall = performance.now() - start;
  if (packed) closeSync(segment);
  await db.close();
  return parts;
}

export async function run(): Promise<Record<string, number>> {
  const codec = await BlockCodec.create();
  const n = REQUESTS * BLOCKS_PER_REQUEST;
  const us = (ms: number) => Number(((ms * 1000) / n).toFixed(2));
  const results: Record<'packed' | 'files', Parts> = { packed: noParts(), files: noParts() };
  // Two halves each, alternated, so load on the machine falls on both sides alike.
  for (const name of ['packed', 'files', 'files', 'packed'] as const) {
    const dir = mkdtempSync(join(tmpdir(), `kvtier-bench-replay-floor-${name}-`));
    try {
      const parts = await side(codec, dir, name === 'packed');
      for (const k of Object.keys(parts) as Array<keyof Parts>) results[name][k] += parts[k] / 2;
      say(`${name}: ${us(parts.wall)} µs per block (encode ${us(parts.encode)}, write ${us(parts.write)}, index ${us(parts.index)})`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const { packed, files } = results;
  return {
    replay_floor_blocks_per_side: n,
    replay_floor_packed_us_per_block: us(packed.wall),
    replay_floor_files_us_per_block: us(files.wall),
    replay_floor_packed_over_files: Number((files.wall / packed.wall).toFixed(2)),
    replay_floor_packed_encode_us: us(packed.encode),
    replay_floor_packed_write_us: us(packed.write),
    replay_floor_packed_index_us: us(packed.index),
    replay_floor_files_write_us: us(files.write),
    replay_floor_packed_requests_per_s: Math.round(REQUESTS / (packed.wall / 1000)),
  };
}
