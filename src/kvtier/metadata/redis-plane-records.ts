/**
 * The Redis plane's per-shard calls: get, upsert, a renewal flush, usage and orphan sightings, for keys
 * that all belong to one shard (`commands` holds that shard's keys). The plane splits a call by shard and runs these in
 * parallel (redis-metadata-plane.ts).
 */
import { PlaneError } from '../errors.ts';
import type { BlockRecord, PlaneUsage } from './metadata-plane.ts';
import { decodeValue, encodeValue, lruScore, memberOf } from './redis-plane-codec.ts';
import type { RedisPlaneCommands } from './redis-plane-commands.ts';
import type { PendingRenewal } from './renewal-buffer.ts';

/** Keys per script call of a get or renewal (upsert: a quarter, four arguments per record). */
export const MEMBERS_PER_COMMAND = 1024;

export async function getRecords(commands: RedisPlaneCommands, keys: readonly string[]): Promise<(BlockRecord | null)[]> {
  const out: (BlockRecord | null)[] = [];
  for (let i = 0; i < keys.length; i += MEMBERS_PER_COMMAND) {
    const chunk = keys.slice(i, i + MEMBERS_PER_COMMAND);
    const reply = (await commands.call(() => commands.scriptBuffer('kvtPlaneGet', commands.keys.bucket, commands.keys.use, ...chunk.map(memberOf)))) as (Buffer | null)[];
    for (let j = 0; j < chunk.length; j++) {
      const value = reply[2 * j];
      const score = reply[2 * j + 1];
      out.push(value === null || value === undefined || score === null || score === undefined ? null : decodeValue(chunk[j], value, Number(score.toString())));
    }
  }
  return out;
}

export async function upsertRecords(commands: RedisPlaneCommands, records: readonly BlockRecord[], ifAbsent: boolean): Promise<void> {
  const k = commands.keys;
  for (let i = 0; i < records.length; i += MEMBERS_PER_COMMAND / 4) {
    const args: (string | Buffer)[] = [k.bucket, k.use, ifAbsent ? '1' : '0'];
    for (const record of records.slice(i, i + MEMBERS_PER_COMMAND / 4)) {
      args.push(memberOf(record.key), encodeValue(record), String(lruScore(record.lastUseAt, record.depth)), record.ttlMs > 0 ? '1' : '0');
    }
    await commands.call(() => commands.script('kvtPlaneUpsert', k.cap, k.usage, k.classes, ...args));
  }
}

/** One pipeline of RENEW_LUA calls, 1024 keys each. */
export async function writeRenewals(commands: RedisPlaneCommands, batch: Iterable<[string, PendingRenewal]>): Promise<void> {
  const k = commands.keys;
  const pipeline = commands.pipeline();
  let args: (string | Buffer)[] = [k.cap, k.classes, k.use];
  let calls = 0;
  for (const [key, { at, depth }] of batch) {
    args.push(String(lruScore(at, depth)), memberOf(key));
    if (args.length >= 3 + 2 * MEMBERS_PER_COMMAND) {
      pipeline.kvtPlaneRenew(...args);
      calls++;
      args = [k.cap, k.classes, k.use];
    }
  }
  if (args.length > 3) (pipeline.kvtPlaneRenew(...args), calls++);
  if (calls === 0) return;
  const results = await commands.call(() => pipeline.exec());
  const failed = results?.find(([error]) => error !== null);
  if (failed !== undefined) throw new PlaneError('KVT_ERR_PLANE_UNREACHABLE', `plane renewal failed: ${(failed[0] as Error).message}`);
}

/** One shard's usage counters. */
export async function shardUsage(commands: RedisPlaneCommands): Promise<PlaneUsage> {
  const all = await commands.call(() => commands.redis.hgetall(commands.keys.usage));
  const usage: PlaneUsage = { bytes: {}, blocks: {} };
  for (const [name, value] of Object.entries(all)) {
    if (name.startsWith('b|')) usage.bytes[name.slice(2)] = Number(value);
    else if (name.startsWith('n|')) usage.blocks[name.slice(2)] = Number(value);
  }
  return usage;
}

export async function noteOrphans(commands: RedisPlaneCommands, keys: readonly string[], at: number): Promise<number[]> {
  const reply = (await commands.call(() => commands.script('kvtPlaneNoteOrphans', commands.keys.orphans, String(Math.floor(at)), ...keys.map(memberOf)))) as string[];
  return reply.map(Number);
}

export async function clearOrphans(commands: RedisPlaneCommands, keys: readonly string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += MEMBERS_PER_COMMAND) {
    await commands.call(() => commands.redis.hdel(commands.keys.orphans, ...keys.slice(i, i + MEMBERS_PER_COMMAND).map(memberOf)));
  }
}

export async function orphanSightings(commands: RedisPlaneCommands): Promise<Map<string, number>> {
  const flat = (await commands.call(() => commands.redis.callBuffer('HGETALL', commands.keys.orphans))) as Buffer[];
  const out = new Map<string, number>();
  for (let i = 0; i + 1 < flat.length; i += 2) out.set(flat[i].toString('hex'), Number(flat[i + 1].toString()));
  return out;
}
