import { randomBytes } from 'node:crypto';

import type { Redis } from 'ioredis';

import { PlaneError } from '../errors.ts';
import { stderrLogger, type KvTierLogger } from '../logger.ts';
import { createRedisClient, isClusterAddress, redactAddress, type RedisClient } from '../redis-connection.ts';
import type { BlockRecord, MetadataPlane, PlaneState, PlaneUsage, RemovedBatch, RemoveOptions, ScanOptions, ScanPage } from './metadata-plane.ts';
import { removeLegacyPlaneKeys } from './redis-legacy-keys.ts';
import { decodeValue, encodeValue, lruScore, memberOf, planeKeyNames, type PlaneKeys } from './redis-plane-codec.ts';
import { defineScripts, RedisPlaneCommands } from './redis-plane-commands.ts';
import { clearPendingDeletes, pendingDeletes, removeOldest, removeRecords } from './redis-plane-removal.ts';
import { scanByLastUse } from './redis-plane-walk.ts';
import { RenewalBuffer, type PendingRenewal } from './renewal-buffer.ts';

export interface RedisMetadataPlaneOptions {
  /** `redis://host:port/db` or `redis-cluster://host:port,…` (redis-connection.ts); defaults to `REDIS_URL`. */
  url?: string;
  /** Key prefix; default `kvtier:plane:` (no `{` or `}`: the plane adds its own hash tag). */
  keyPrefix?: string;
  connectTimeoutMs?: number;
  logger?: KvTierLogger;
  /** Renewals buffered before a flush; default 8192. */
  renewBatchKeys?: number;
  /** Longest a renewal waits in the buffer (wall ms); default 1000. */
  renewFlushMs?: number;
  /**
   * Records are spread over 2^bucketBits hashes (1..16, default 16: sized for
   * 10^6–10^7 blocks, 15–150 per hash; past 128 per hash raise Redis'
   * hash-max-listpack-entries or a hash turns into a ~2× larger hashtable).
   * Every node of a cluster must use the same value.
   */
  bucketBits?: number;
}

/** Keys per script call of a get or upsert (upsert: a quarter, four arguments per record). */
const MEMBERS_PER_COMMAND = 1024;

/**
 * Cluster driver: the plane in Redis.
 *
 * ```
 * <p>{0}:gen          "<generation>:<0|1>"   (1 = rebuilt from storage, trusted)
 * <p>{0}:u:<class>    zset  key16 → lastUse × 2048 + (2047 − depth)   (last-use index of one traffic class)
 * <p>{0}:classes      set   classes with at least one record (renewals touch their indexes)
 * <p>{0}:cap          zset  same scores, only records with a ttlMs cap
 * <p>{0}:r:<b>:<h>    hash  key bytes after the first ⌊b/8⌋ → "size,created s,ttl,depth\0class\0tenant\0writer id" (base 36, created since 2025); h = first b bits of the key
 * <p>{0}:usage        hash  "b|<tag>", "n|<tag>" → bytes, blocks
 * <p>{0}:w            hash  "n<writer>" → id, "i<id>" → writer, "#" → last id (records keep the writer's id; clients see names)
 * <p>{0}:orph         hash  key16 → first seen on storage without a record
 * <p>{0}:delb         set   key16‖key16… one member per journaled removal call: keys removed whose blobs are not yet confirmed deleted
 * <p>{0}:del          set   key16 of that journal, single (batches cleared in another grouping are moved here, once)
 * <p>{0}:legacy-swept  string  set once the keys of the naming before the hash tag were removed (redis-legacy-keys.ts)
 * <p>removed          channel: instance id ‖ key16… removed by any node
 * ```
 *
 * `{0}` is the Redis Cluster hash tag of the plane's one shard: every key a
 * script touches hashes to the same slot (test/src/kvtier/metadata/
 * redis-plane-slots.test.ts). How more shards would split the key space:
 * docs/cluster-metadata.md.
 *
 * Invariant of the last-use index: a record's row is in exactly the index of
 * its class, so the expire walk of a class reads rows of that class only and
 * stops at now − the class's TTL: it reads expired rows, not the whole
 * population up to the smallest TTL of any class. Eviction merges the class
 * indexes (class-scan-merge.ts).
 *
 * A renewal is a member of a batched `ZADD XX GT` on every class index (it
 * neither creates a record nor moves one back in time), so renewals from many
 * nodes commute and a flush of N keys is ⌈N/1024⌉ script calls in one pipeline. The record
 * itself is written only by `upsert` and `remove` (Lua, atomic with the
 * usage counters). Losing Redis loses `<p>gen`: the next `state()` starts a
 * new, untrusted generation and GC rebuilds before it judges anything.
 */
export class RedisMetadataPlane implements MetadataPlane {
  readonly kind = 'redis';
  private readonly listeners = new Set<(keys: string[]) => void>();
  private readonly renewals: RenewalBuffer;
  private readonly instanceId = randomBytes(8);
  private readonly keys: PlaneKeys;
  private readonly commands: RedisPlaneCommands;

  private constructor(
    private readonly redis: RedisClient,
    private readonly subscriber: RedisClient,
    prefix: string,
    private readonly logger: KvTierLogger,
    options: RedisMetadataPlaneOptions,
  ) {
    this.keys = planeKeyNames(prefix, options.bucketBits ?? 16);
    this.commands = new RedisPlaneCommands(redis, this.keys);
    this.renewals = new RenewalBuffer(
      (batch) => this.writeRenewals(batch),
      (error) => this.logger.warn({ code: 'KVT_ERR_PLANE_UNREACHABLE', err: (error as Error).message }, 'plane renewal flush failed; the next hit renews again'),
      options.renewBatchKeys ?? 8192,
      options.renewFlushMs ?? 1000,
    );
  }

  static async open(options: RedisMetadataPlaneOptions = {}): Promise<RedisMetadataPlane> {
    const url = options.url ?? process.env.REDIS_URL;
    if (url === undefined || url === '') {
      throw new PlaneError('KVT_ERR_PLANE_OPEN', 'RedisMetadataPlane needs a url (or REDIS_URL), e.g. redis://127.0.0.1:6379');
    }
    const logger = options.logger ?? stderrLogger;
    const bits = options.bucketBits ?? 16;
    if (!Number.isInteger(bits) || bits < 1 || bits > 16) throw new PlaneError('KVT_ERR_PLANE_OPEN', `bucketBits must be an integer 1..16, got ${bits}`);
    if (/[{}]/.test(options.keyPrefix ?? '')) throw new PlaneError('KVT_ERR_PLANE_OPEN', `keyPrefix must not contain { or } (the plane adds its own Redis Cluster hash tag), got ${JSON.stringify(options.keyPrefix)}`);
    const connect = (): RedisClient => createRedisClient(url, { lazyConnect: true, connectTimeout: options.connectTimeoutMs ?? 5000, maxRetriesPerRequest: 3, enableAutoPipelining: false });
    const redis = connect();
    const subscriber = connect();
    let opened = false;
    for (const connection of [redis, subscriber]) {
      connection.on('error', (error: Error) => {
        if (opened) logger.warn({ code: 'KVT_ERR_PLANE_UNREACHABLE', err: error.message }, 'Redis connection of the metadata plane failed; retrying');
      });
    }
    defineScripts(redis);
    try {
      await redis.connect();
      await subscriber.connect();
      const plane = new RedisMetadataPlane(redis, subscriber, options.keyPrefix ?? 'kvtier:plane:', logger, options);
      subscriber.on('messageBuffer', (channel: Buffer, message: Buffer) => plane.onRemovedMessage(channel, message));
      // Housekeeping: a failure leaves the old keys for the next open, it does not stop this one.
      // A cluster deployment never had the naming before the hash tag (and SCAN there reads one node only).
      if (!isClusterAddress(url)) await removeLegacyPlaneKeys(redis as Redis, options.keyPrefix ?? 'kvtier:plane:', plane.keys.legacySwept, logger).catch((error: unknown) =>
        logger.warn({ code: 'KVT_ERR_PLANE_UNREACHABLE', err: (error as Error).message }, 'removing the metadata plane keys of the naming before the hash tag failed; the next open retries'),
      );
      await subscriber.subscribe(plane.keys.removed);
      await plane.state();
      opened = true;
      return plane;
    } catch (error) {
      redis.disconnect();
      subscriber.disconnect();
      throw new PlaneError('KVT_ERR_PLANE_UNREACHABLE', `cannot reach Redis at ${redactAddress(url)} for the metadata plane: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  async state(): Promise<PlaneState> {
    let stored = await this.commands.call(() => this.redis.get(this.keys.gen));
    if (stored === null) {
      // The marker is gone: a new Redis, or one restarted empty. Start an untrusted generation.
      await this.commands.call(() => this.redis.set(this.keys.gen, `${randomBytes(8).toString('hex')}:0`, 'NX'));
      stored = await this.commands.call(() => this.redis.get(this.keys.gen));
    }
    const [generation, trusted] = (stored ?? ':0').split(':');
    return { generation, trusted: trusted === '1' };
  }

  async markTrusted(generation: string): Promise<boolean> {
    return (await this.commands.call(() => this.commands.script('kvtPlaneMarkTrusted', this.keys.gen, generation))) === 1;
  }

  async get(keys: readonly string[]): Promise<(BlockRecord | null)[]> {
    const out: (BlockRecord | null)[] = [];
    for (let i = 0; i < keys.length; i += MEMBERS_PER_COMMAND) {
      const chunk = keys.slice(i, i + MEMBERS_PER_COMMAND);
      const reply = (await this.commands.call(() => this.commands.scriptBuffer('kvtPlaneGet', this.keys.bucket, this.keys.use, ...chunk.map(memberOf)))) as (Buffer | null)[];
      for (let j = 0; j < chunk.length; j++) {
        const value = reply[2 * j];
        const score = reply[2 * j + 1];
        out.push(value === null || value === undefined || score === null || score === undefined ? null : decodeValue(chunk[j], value, Number(score.toString())));
      }
    }
    return out;
  }

  async upsert(records: readonly BlockRecord[], options: { ifAbsent?: boolean } = {}): Promise<void> {
    for (let i = 0; i < records.length; i += MEMBERS_PER_COMMAND / 4) {
      const args: (string | Buffer)[] = [this.keys.bucket, this.keys.use, options.ifAbsent ? '1' : '0'];
      for (const record of records.slice(i, i + MEMBERS_PER_COMMAND / 4)) {
        args.push(memberOf(record.key), encodeValue(record), String(lruScore(record.lastUseAt, record.depth)), record.ttlMs > 0 ? '1' : '0');
      }
      await this.commands.call(() => this.commands.script('kvtPlaneUpsert', this.keys.cap, this.keys.usage, this.keys.classes, ...args));
    }
  }

  renew(keys: readonly string[], at: number, depths?: readonly number[]): void {
    if (this.commands.closed) throw new PlaneError('KVT_ERR_PLANE_CLOSED', 'this metadata plane is closed; open a new one');
    this.renewals.add(keys, at, depths);
  }

  flush(): Promise<void> {
    return this.renewals.flush();
  }

  async remove(keys: readonly string[], options: RemoveOptions = {}): Promise<BlockRecord[]> {
    const removed = await removeRecords(this.commands, keys, options);
    if (removed.length > 0) {
      const removedKeys = removed.map((record) => record.key);
      await this.tellRemoved(removedKeys, Buffer.concat(removedKeys.map(memberOf)));
    }
    return removed;
  }

  async removeByLastUse(options: { trafficClass: string; maxLastUseAt: number; limit: number; journal?: boolean }): Promise<RemovedBatch> {
    const { members, ...taken } = await removeOldest(this.commands, options);
    await this.tellRemoved(taken.keys, members);
    return taken;
  }

  pendingDeletes(): Promise<string[]> {
    return pendingDeletes(this.commands);
  }

  clearPendingDeletes(keys: readonly string[]): Promise<void> {
    return clearPendingDeletes(this.commands, keys);
  }

  /** Local listeners now; other nodes through the removal channel. `members`: the same keys as raw bytes, concatenated (the message body). */
  private async tellRemoved(keys: string[], members: Buffer): Promise<void> {
    if (keys.length === 0) return;
    for (const listener of this.listeners) listener(keys);
    await this.commands.call(() => this.redis.publish(this.keys.removed, Buffer.concat([this.instanceId, members])));
  }

  scanByLastUse(options: ScanOptions = {}): Promise<ScanPage> {
    return scanByLastUse(this.commands, options);
  }

  async usage(): Promise<PlaneUsage> {
    const all = await this.commands.call(() => this.redis.hgetall(this.keys.usage));
    const bytes: Record<string, number> = {};
    const blocks: Record<string, number> = {};
    for (const [name, value] of Object.entries(all)) {
      const n = Number(value);
      if (n === 0) continue;
      if (name.startsWith('b|')) bytes[name.slice(2)] = n;
      else if (name.startsWith('n|')) blocks[name.slice(2)] = n;
    }
    return { bytes, blocks };
  }

  async noteOrphans(keys: readonly string[], at: number): Promise<number[]> {
    if (keys.length === 0) return [];
    const reply = (await this.commands.call(() => this.commands.script('kvtPlaneNoteOrphans', this.keys.orphans, String(Math.floor(at)), ...keys.map(memberOf)))) as string[];
    return reply.map(Number);
  }

  async clearOrphans(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    for (let i = 0; i < keys.length; i += MEMBERS_PER_COMMAND) {
      await this.commands.call(() => this.redis.hdel(this.keys.orphans, ...keys.slice(i, i + MEMBERS_PER_COMMAND).map(memberOf)));
    }
  }

  async orphanSightings(): Promise<Map<string, number>> {
    const flat = (await this.commands.call(() => this.redis.callBuffer('HGETALL', this.keys.orphans))) as Buffer[];
    const out = new Map<string, number>();
    for (let i = 0; i + 1 < flat.length; i += 2) out.set(flat[i].toString('hex'), Number(flat[i + 1].toString()));
    return out;
  }

  onRemoved(listener: (keys: string[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.commands.closed) return;
    await this.renewals.flush().catch(() => undefined);
    this.renewals.stop();
    this.commands.closed = true;
    this.listeners.clear();
    await Promise.allSettled([this.redis.quit(), this.subscriber.quit()]);
  }

  // ── internals ──────────────────────────────────────────────────────────

  private async writeRenewals(batch: Map<string, PendingRenewal>): Promise<void> {
    if (this.commands.closed) return;
    const pipeline = this.commands.pipeline();
    let args: (string | Buffer)[] = [this.keys.cap, this.keys.classes, this.keys.use];
    for (const [key, { at, depth }] of batch) {
      args.push(String(lruScore(at, depth)), memberOf(key));
      if (args.length >= 3 + 2 * MEMBERS_PER_COMMAND) {
        pipeline.kvtPlaneRenew(...args);
        args = [this.keys.cap, this.keys.classes, this.keys.use];
      }
    }
    if (args.length > 3) pipeline.kvtPlaneRenew(...args);
    const results = await this.commands.call(() => pipeline.exec());
    const failed = results?.find(([error]) => error !== null);
    if (failed !== undefined) throw new PlaneError('KVT_ERR_PLANE_UNREACHABLE', `plane renewal failed: ${(failed[0] as Error).message}`);
  }

  private onRemovedMessage(channel: Buffer, message: Buffer): void {
    if (channel.toString() !== this.keys.removed || message.length < 8) return;
    if (message.subarray(0, 8).equals(this.instanceId)) return; // our own removal: listeners already told
    const keys: string[] = [];
    for (let offset = 8; offset + 16 <= message.length; offset += 16) keys.push(message.subarray(offset, offset + 16).toString('hex'));
    for (const listener of this.listeners) {
      try {
        listener(keys);
      } catch (error) {
        this.logger.warn({ err: (error as Error).message }, 'a plane removal listener threw');
      }
    }
  }
}
