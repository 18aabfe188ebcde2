/**
 * The Redis plane's shards (docs/cluster-metadata.md, "Redis Cluster sharding"): S = 2^k shards, a
 * block's shard is the top k bits of its key (keys are content hashes, so shards fill evenly), shard
 * s's keys carry the hash tag `{s}` (every script of a shard stays in one slot; the S tags spread
 * over a cluster's primaries). A call is split by shard and the shards run in parallel; a batch never
 * spans shards.
 *
 * S is fixed per deployment: `<p>{0}:shards` holds it (written by the first open); a node opened
 * with another S refuses to start (KVT_ERR_PLANE_SHARDS) instead of reading half the records in the
 * wrong shard.
 */
import { randomBytes } from 'node:crypto';

import { PlaneError } from '../errors.ts';
import type { PlaneState, PlaneUsage, RemovedBatch } from './metadata-plane.ts';
import { lruScore, memberOf } from './redis-plane-codec.ts';
import type { RedisPlaneCommands } from './redis-plane-commands.ts';
import { removeOldest } from './redis-plane-removal.ts';

/** Largest shard count (k ≤ 8: the shard is taken from the key's first byte). */
export const MAX_SHARDS = 256;

export function shardBitsOf(shards: number): number {
  const bits = Math.log2(shards);
  if (!Number.isInteger(bits) || bits < 0 || shards > MAX_SHARDS) throw new PlaneError('KVT_ERR_PLANE_OPEN', `shards must be a power of two 1..${MAX_SHARDS}, got ${shards}`);
  return bits;
}

/** Shard of a block key (32 hex chars): its top `bits` bits. */
export function shardOf(key: string, bits: number): number {
  if (bits === 0) return 0;
  return parseInt(key.slice(0, 2), 16) >> (8 - bits);
}

/**
 * Storage key prefixes (hex) whose union is exactly shard `shard`'s keys: with k ≤ 4 bits, 2^(4−k)
 * one-character prefixes; with k ≤ 8, 2^(8−k) two-character ones. A listing by prefix (fs: one
 * directory per two characters; S3: ListObjectsV2 `prefix`) reads that shard's keys and no others.
 */
export function shardKeyPrefixes(shard: number, bits: number): string[] {
  if (bits === 0) return [''];
  const chars = bits <= 4 ? 1 : 2;
  const span = 2 ** (4 * chars - bits);
  return Array.from({ length: span }, (_, i) => (shard * span + i).toString(16).padStart(chars, '0'));
}

/** Indexes of `keys` per shard (in their order), only shards that have any. */
export function groupByShard(keys: readonly string[], bits: number): Map<number, number[]> {
  const groups = new Map<number, number[]>();
  for (let i = 0; i < keys.length; i++) {
    const shard = shardOf(keys[i], bits);
    let group = groups.get(shard);
    if (group === undefined) groups.set(shard, (group = []));
    group.push(i);
  }
  return groups;
}

/** Checks (and on a new deployment records) the shard count; throws KVT_ERR_PLANE_SHARDS on a mismatch. */
export async function checkShardCount(first: RedisPlaneCommands, shards: number): Promise<void> {
  const key = first.keys.shards;
  await first.call(() => first.redis.set(key, String(shards), 'NX'));
  const stored = await first.call(() => first.redis.get(key));
  if (stored !== String(shards)) {
    throw new PlaneError(
      'KVT_ERR_PLANE_SHARDS',
      `this metadata plane was created with ${stored} shards and this node opens it with ${shards}: every node of a deployment must use the same shard count (KVTIER_PLANE_SHARDS); growing it needs a migration`,
    );
  }
}

export function addUsage(into: PlaneUsage, from: PlaneUsage): void {
  for (const [tag, n] of Object.entries(from.bytes)) into.bytes[tag] = (into.bytes[tag] ?? 0) + n;
  for (const [tag, n] of Object.entries(from.blocks)) into.blocks[tag] = (into.blocks[tag] ?? 0) + n;
}

/**
 * `removeByLastUse` over several shards, oldest first across them: a peek reads each shard's first
 * `limit` rows ≤ the bound (members and scores), the merge decides how many of the `limit` oldest
 * each shard holds, and each shard then takes that many in its own atomic call (rows renewed past the
 * bound in between stay, as on one shard). Returns the members concatenated for the removal message.
 */
export async function removeOldestAcross(
  shards: readonly RedisPlaneCommands[],
  options: { trafficClass: string; maxLastUseAt: number; limit: number; journal?: boolean },
): Promise<RemovedBatch & { members: Buffer }> {
  const max = String(lruScore(options.maxLastUseAt, 0));
  const peeks = await Promise.all(
    shards.map((commands) =>
      commands.call(() => commands.redis.zrangebyscoreBuffer(commands.keys.use + options.trafficClass, '-inf', max, 'WITHSCORES', 'LIMIT', 0, options.limit)),
    ),
  );
  const rows: { shard: number; score: number; member: string }[] = [];
  peeks.forEach((flat, shard) => {
    for (let i = 0; i + 1 < flat.length; i += 2) rows.push({ shard, member: flat[i].toString('hex'), score: Number(flat[i + 1].toString()) });
  });
  rows.sort((a, b) => a.score - b.score || (a.member < b.member ? -1 : a.member > b.member ? 1 : 0));
  const taken = rows.slice(0, options.limit);
  const counts = new Map<number, number>();
  for (const row of taken) counts.set(row.shard, (counts.get(row.shard) ?? 0) + 1);
  const batches = await Promise.all([...counts].map(([shard, limit]) => removeOldest(shards[shard], { ...options, limit })));
  const order = new Map(taken.map((row, i) => [row.member, i]));
  const keys = batches.flatMap((batch) => batch.keys).sort((a, b) => (order.get(a) ?? Infinity) - (order.get(b) ?? Infinity));
  const freed: PlaneUsage = { bytes: {}, blocks: {} };
  for (const batch of batches) addUsage(freed, batch.freed);
  return { keys, members: Buffer.concat(keys.map(memberOf)), freed, more: rows.length > options.limit || peeks.some((flat) => flat.length === 2 * options.limit) };
}

/** One shard's generation marker; a missing one (data lost, or a new shard) starts an untrusted generation. */
export async function shardState(commands: RedisPlaneCommands): Promise<PlaneState> {
  let stored = await commands.call(() => commands.redis.get(commands.keys.gen));
  if (stored === null) {
    await commands.call(() => commands.redis.set(commands.keys.gen, `${randomBytes(8).toString('hex')}:0`, 'NX'));
    stored = await commands.call(() => commands.redis.get(commands.keys.gen));
  }
  const [generation, trusted] = (stored ?? ':0').split(':');
  return { generation, trusted: trusted === '1' };
}
