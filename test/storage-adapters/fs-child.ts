/**
 * A separate OS process for the fs tests (run with `node --import tsx`):
 *
 *   fs-child.ts hammer <dir> <writerId> <minOps> <maxMs>
 *     puts, gets, has and deletes self-checking values on a few shared keys;
 *     prints {writes, reads, nulls, torn, foreign, deletes, firstTorn} as JSON.
 *   fs-child.ts put-once <dir>
 *     one put; prints {code} of the error, or {code: null} on success.
 *
 * Value layout (all u32 LE): magic, payload length, writer id, sequence,
 * payload, then xxh64 (seed 0) of everything before it as u64 LE. A torn or
 * mixed value fails the length or the hash.
 */
import xxhash from 'xxhash-wasm';

import { FsBlobStore } from '../../storage-adapters/index.ts';

const MAGIC = 0x4b565442;
const SHARED_KEYS = Array.from({ length: 8 }, (_, i) => `shared-${i}`);

const { h64Raw } = await xxhash();

export function encodeValue(writerId: number, seq: number, payloadLength: number): Uint8Array {
  const bytes = new Uint8Array(16 + payloadLength + 8);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, payloadLength, true);
  view.setUint32(8, writerId, true);
  view.setUint32(12, seq, true);
  let state = (writerId * 0x9e3779b1 + seq) >>> 0;
  for (let i = 0; i < payloadLength; i++) {
    state = (state * 1664525 + 1013904223) >>> 0;
    bytes[16 + i] = state >>> 24;
  }
  view.setBigUint64(16 + payloadLength, h64Raw(bytes.subarray(0, 16 + payloadLength)), true);
  return bytes;
}

/** The writer id when `bytes` is whole, else a reason. */
export function checkValue(bytes: Uint8Array): { writerId: number } | { torn: string } {
  if (bytes.byteLength < 24) return { torn: `only ${bytes.byteLength} bytes` };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== MAGIC) return { torn: 'bad magic' };
  const payloadLength = view.getUint32(4, true);
  if (bytes.byteLength !== 16 + payloadLength + 8) return { torn: `length ${bytes.byteLength}, header says ${16 + payloadLength + 8}` };
  if (view.getBigUint64(16 + payloadLength, true) !== h64Raw(bytes.subarray(0, 16 + payloadLength))) return { torn: 'hash mismatch' };
  return { writerId: view.getUint32(8, true) };
}

async function hammer(dir: string, writerId: number, minOps: number, maxMs: number): Promise<void> {
  const store = new FsBlobStore({ dir });
  const stats = { writes: 0, reads: 0, nulls: 0, torn: 0, foreign: 0, deletes: 0, firstTorn: null as string | null };
  const started = Date.now();
  let seq = 0;
  let ops = 0;
  // Runs until it has both done its share and read the other process's work,
  // so the test proves sharing regardless of how the two were scheduled.
  while ((ops < minOps || stats.foreign === 0) && Date.now() - started < maxMs) {
    ops++;
    const key = SHARED_KEYS[Math.floor(Math.random() * SHARED_KEYS.length)];
    const dice = Math.random();
    if (dice < 0.45) {
      await store.put(key, encodeValue(writerId, seq++, Math.floor(Math.random() * 300_000)));
      stats.writes++;
    } else if (dice < 0.5) {
      await store.delete([key]);
      stats.deletes++;
    } else {
      const got = await store.get(key);
      stats.reads++;
      if (got === null) {
        stats.nulls++;
        continue;
      }
      const check = checkValue(got);
      if ('torn' in check) {
        stats.torn++;
        stats.firstTorn ??= `${key}: ${check.torn}`;
      } else if (check.writerId !== writerId) {
        stats.foreign++;
      }
    }
  }
  await store.close();
  process.stdout.write(JSON.stringify(stats));
}

async function putOnce(dir: string): Promise<void> {
  const store = new FsBlobStore({ dir });
  try {
    await store.put('denied-probe', Uint8Array.of(1, 2, 3));
    process.stdout.write(JSON.stringify({ code: null }));
  } catch (error) {
    process.stdout.write(JSON.stringify({ code: (error as { code?: string }).code ?? String(error) }));
  } finally {
    await store.close();
  }
}

const [mode, ...args] = process.argv.slice(2);
if (mode === 'hammer') await hammer(args[0], Number(args[1]), Number(args[2]), Number(args[3]));
else if (mode === 'put-once') await putOnce(args[0]);
else if (mode !== undefined) {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
