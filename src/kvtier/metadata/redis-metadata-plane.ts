import type { Redis } from 'ioredis';

import { PlaneError } from '../errors.ts';
import { stderrLogger, type KvTierLogger } from '../logger.ts';
import { createRedisClient, isClusterAddress, redactAddress, type RedisClient } from '../redis-connection.ts';
import type { BlockRecord, MetadataPlane, PlaneState, PlaneUsage, RemovedBatch, RemoveOptions, ScanOptions, ScanPage } from './metadata-plane.ts';
import { removeLegacyPlaneKeys } from './redis-legacy-keys.ts';
import { memberOf, planeKeyNames } from './redis-plane-codec.ts';
import { defineScripts, RedisPlaneCommands } from './redis-plane-commands.ts';
import { clearPendingDeletes, pendingDeletes, removeOldest, removeRecords } from './redis-plane-removal.ts';
import { clearOrphans, getRecords, noteOrphans, orphanSightings, shardUsage, upsertRecords, writeRenewals } from './redis-plane-records.ts';
import { RemovedChannel } from './redis-plane-removed-channel.ts';
import { RedisPlaneShardView } from './redis-plane-shard-view.ts';
import { addUsage, checkShardCount, groupByShard, removeOldestAcross, shardBitsOf, shardKeyPrefixes, shardState } from './redis-plane-shards.ts';
import { scanByLastUse } from './redis-plane-walk.ts';
import { RenewalBuffer, type PendingRenewal } from './renewal-buffer.ts';
import { checkedPlaneUrl, type RedisMetadataPlaneOptions } from './redis-plane-options.ts';

/**
 * Cluster driver: the plane in Redis.
 *
 * ```
 * <p>{0}:gen          "<generation>:<0|1>"   (1 = rebuilt from storage, trusted)
 * <p>{0}:u:<class>    zset  key16 → lastUse × 2048 + (2047 − depth)   (last-use index of one traffic class)
 * <p>{0}:classes      set   classes with at least one record (renewals touch their indexes)
 * <p>{0}:cap          zset  same scores, only records with a ttlMs cap
 * <p>{0}:r:<b>:<h>    hash  key bytes after the first ⌊b/8⌋ → "size,created s,ttl,depth[,1]\0class\0tenant\0writer id" (base 36, created since 2025; ",1": a unit tail); h = first b bits of the key
 * <p>{0}:usage        hash  "b|<tag>", "n|<tag>" → bytes, blocks (tags g, c:<class>, t:<tenant>, k:tail)
 * <p>{0}:w            hash  "n<writer>" → id, "i<id>" → writer, "#" → last id (records keep the writer's id; clients see names)
 * <p>{0}:orph         hash  key16 → first seen on storage without a record
 * <p>{0}:delb         set   key16‖key16… one member per journaled removal call: keys removed whose blobs are not yet confirmed deleted
 * <p>{0}:del          set   key16 of that journal, single (batches cleared in another grouping are moved here, once)
 * <p>{0}:legacy-swept  string  set once the keys of the naming before the hash tag were removed (redis-legacy-keys.ts)
 * <p>removed          channel: instance id ‖ key16… removed by any node
 * ```
 *
 * `{0}` is the Redis Cluster hash tag of shard 0; with `shards` S > 1 shard s
 * has the same keys under `{s}` (a block in the shard of its key's top bits,
 * redis-plane-shards.ts). Every key a script touches hashes to its shard's
 * slot (test/src/kvtier/metadata/redis-plane-slots.test.ts, and CROSSSLOT
 * counted on a real cluster in redis-cluster-plane.test.ts). Trust is per
 * shard (`<p>{s}:gen`); the plane's generation is theirs joined by '.', and
 * a rebuild need only cover the shards that lost theirs (`untrustedShards`).
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
  private readonly renewals: RenewalBuffer;
  private readonly removedChannel: RemovedChannel;
  /** One entry per shard: its keys and calls. */
  private readonly shards: RedisPlaneCommands[];
  private readonly shardBits: number;
  private closed = false;

  private constructor(
    private readonly redis: RedisClient,
    private readonly subscriber: RedisClient,
    prefix: string,
    private readonly logger: KvTierLogger,
    options: RedisMetadataPlaneOptions,
  ) {
    const count = options.shards ?? 1;
    this.shardBits = shardBitsOf(count);
    this.shards = Array.from({ length: count }, (_, shard) => new RedisPlaneCommands(redis, planeKeyNames(prefix, options.bucketBits ?? 16, shard)));
    this.removedChannel = new RemovedChannel(redis, this.shards[0], logger);
    this.renewals = new RenewalBuffer(
      (batch) => this.flushRenewals(batch),
      (error) => this.logger.warn({ code: 'KVT_ERR_PLANE_UNREACHABLE', err: (error as Error).message }, 'plane renewal flush failed; the next hit renews again'),
      options.renewBatchKeys ?? 8192,
      options.renewFlushMs ?? 1000,
    );
  }

  static async open(options: RedisMetadataPlaneOptions = {}): Promise<RedisMetadataPlane> {
    const url = checkedPlaneUrl(options);
    const logger = options.logger ?? stderrLogger;
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
      await checkShardCount(plane.shards[0], plane.shards.length);
      subscriber.on('messageBuffer', (channel: Buffer, message: Buffer) => plane.removedChannel.onMessage(channel, message));
      // Housekeeping: a failure leaves the old keys for the next open, it does not stop this one.
      // A cluster deployment never had the naming before the hash tag (and SCAN there reads one node only).
      if (!isClusterAddress(url)) await removeLegacyPlaneKeys(redis as Redis, options.keyPrefix ?? 'kvtier:plane:', plane.shards[0].keys.legacySwept, logger).catch((error: unknown) =>
        logger.warn({ code: 'KVT_ERR_PLANE_UNREACHABLE', err: (error as Error).message }, 'removing the metadata plane keys of the naming before the hash tag failed; the next open retries'),
      );
      await subscriber.subscribe(plane.shards[0].keys.removed);
      await plane.state();
      opened = true;
      return plane;
    } catch (error) {
      redis.disconnect();
      subscriber.disconnect();
      if (error instanceof PlaneError && error.code === 'KVT_ERR_PLANE_SHARDS') throw error;
      throw new PlaneError('KVT_ERR_PLANE_UNREACHABLE', `cannot reach Redis at ${redactAddress(url)} for the metadata plane: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  /** Shard count S of this plane. */
  get shardCount(): number {
    return this.shards.length;
  }

  async state(): Promise<PlaneState> {
    const states = await Promise.all(this.shards.map((commands) => shardState(commands)));
    return { generation: states.map((state) => state.generation).join('.'), trusted: states.every((state) => state.trusted) };
  }

  /** Shards whose data was lost (generation marker gone, or never rebuilt). */
  async untrustedShards(): Promise<number[]> {
    const states = await Promise.all(this.shards.map((commands) => shardState(commands)));
    return states.flatMap((state, shard) => (state.trusted ? [] : [shard]));
  }

  /** Only the keys of the shards that lost their data, as listing prefixes (see MetadataPlane.rebuildScope). */
  async rebuildScope(): Promise<string[] | undefined> {
    const lost = await this.untrustedShards();
    if (lost.length === this.shards.length) return undefined;
    return lost.flatMap((shard) => shardKeyPrefixes(shard, this.shardBits));
  }

  /** Shard `s` alone (MetadataPlane.shard): GC of one shard under its own lease. */
  shard(s: number): MetadataPlane {
    if (!Number.isInteger(s) || s < 0 || s >= this.shards.length) throw new PlaneError('KVT_ERR_PLANE_SHARDS', `this plane has ${this.shards.length} shards (0..${this.shards.length - 1}); shard ${s} does not exist`);
    return new RedisPlaneShardView(this, s, this.shards[s], this.shardBits);
  }

  async markTrusted(generation: string): Promise<boolean> {
    const generations = generation.split('.');
    if (generations.length !== this.shards.length) return false;
    const marked = await Promise.all(this.shards.map((commands, shard) => commands.call(() => commands.script('kvtPlaneMarkTrusted', commands.keys.gen, generations[shard]))));
    return marked.every((reply) => reply === 1);
  }

  async get(keys: readonly string[]): Promise<(BlockRecord | null)[]> {
    const out: (BlockRecord | null)[] = new Array(keys.length).fill(null);
    await this.perShard(keys, async (commands, indexes) => {
      const records = await getRecords(commands, indexes.map((i) => keys[i]));
      indexes.forEach((i, j) => (out[i] = records[j]));
    });
    return out;
  }

  async upsert(records: readonly BlockRecord[], options: { ifAbsent?: boolean } = {}): Promise<void> {
    await this.perShard(records.map((record) => record.key), (commands, indexes) => upsertRecords(commands, indexes.map((i) => records[i]), options.ifAbsent === true));
  }

  renew(keys: readonly string[], at: number, depths?: readonly number[]): void {
    if (this.closed) throw new PlaneError('KVT_ERR_PLANE_CLOSED', 'this metadata plane is closed; open a new one');
    this.renewals.add(keys, at, depths);
  }

  flush(): Promise<void> {
    return this.renewals.flush();
  }

  async remove(keys: readonly string[], options: RemoveOptions = {}): Promise<BlockRecord[]> {
    const removed: BlockRecord[] = [];
    const judged = options.judgedLastUseAt;
    if (judged !== undefined && judged.length !== keys.length) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `remove: ${judged.length} judged last uses for ${keys.length} keys`);
    await this.perShard(keys, async (commands, indexes) => {
      removed.push(...(await removeRecords(commands, indexes.map((i) => keys[i]), { ...options, judgedLastUseAt: judged && indexes.map((i) => judged[i]) })));
    });
    if (removed.length > 0) {
      const removedKeys = removed.map((record) => record.key);
      await this.tellRemoved(removedKeys, Buffer.concat(removedKeys.map(memberOf)));
    }
    return removed;
  }

  async removeByLastUse(options: { trafficClass: string; maxLastUseAt: number; limit: number; journal?: boolean }): Promise<RemovedBatch> {
    const { members, ...taken } = this.shards.length === 1 ? await removeOldest(this.shards[0], options) : await removeOldestAcross(this.shards, options);
    await this.tellRemoved(taken.keys, members);
    return taken;
  }

  async pendingDeletes(): Promise<string[]> {
    return [...new Set((await Promise.all(this.shards.map((commands) => pendingDeletes(commands)))).flat())];
  }

  async clearPendingDeletes(keys: readonly string[]): Promise<void> {
    await this.perShard(keys, (commands, indexes) => clearPendingDeletes(commands, indexes.map((i) => keys[i])));
  }

  /** Local listeners now; other nodes through the removal channel. `members`: the same keys as raw bytes, concatenated (the message body). */
  tellRemoved(keys: string[], members: Buffer): Promise<void> {
    return this.removedChannel.tell(keys, members);
  }

  scanByLastUse(options: ScanOptions = {}): Promise<ScanPage> {
    return scanByLastUse(this.shards, options);
  }

  /** Summed over the shards (each keeps its own counters). */
  async usage(): Promise<PlaneUsage> {
    const total: PlaneUsage = { bytes: {}, blocks: {} };
    for (const shard of await this.shardUsages()) addUsage(total, shard);
    for (const side of [total.bytes, total.blocks]) for (const [tag, n] of Object.entries(side)) if (n === 0) delete side[tag];
    return total;
  }

  shardUsages(): Promise<PlaneUsage[]> {
    return Promise.all(this.shards.map(shardUsage));
  }

  async noteOrphans(keys: readonly string[], at: number): Promise<number[]> {
    const out: number[] = new Array(keys.length).fill(0);
    await this.perShard(keys, async (commands, indexes) => {
      const seen = await noteOrphans(commands, indexes.map((i) => keys[i]), at);
      indexes.forEach((i, j) => (out[i] = seen[j]));
    });
    return out;
  }

  async clearOrphans(keys: readonly string[]): Promise<void> {
    await this.perShard(keys, (commands, indexes) => clearOrphans(commands, indexes.map((i) => keys[i])));
  }

  async orphanSightings(): Promise<Map<string, number>> {
    return new Map((await Promise.all(this.shards.map(orphanSightings))).flatMap((shard) => [...shard]));
  }

  onRemoved(listener: (keys: string[]) => void): () => void {
    return this.removedChannel.listen(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.renewals.flush().catch(() => undefined);
    this.renewals.stop();
    this.closed = true;
    for (const commands of this.shards) commands.closed = true;
    this.removedChannel.clear();
    await Promise.allSettled([this.redis.quit(), this.subscriber.quit()]);
  }

  // ── internals ──────────────────────────────────────────────────────────

  /** Runs `body` once per shard that `keys` touch (with the indexes of its keys), the shards in parallel. */
  private async perShard(keys: readonly string[], body: (commands: RedisPlaneCommands, indexes: number[]) => Promise<void>): Promise<void> {
    if (keys.length === 0) return;
    if (this.shards.length === 1) return body(this.shards[0], keys.map((_, i) => i));
    await Promise.all([...groupByShard(keys, this.shardBits)].map(([shard, indexes]) => body(this.shards[shard], indexes)));
  }

  private async flushRenewals(batch: Map<string, PendingRenewal>): Promise<void> {
    if (this.closed) return;
    if (this.shards.length === 1) return writeRenewals(this.shards[0], batch);
    const entries = [...batch];
    await Promise.all([...groupByShard(entries.map(([key]) => key), this.shardBits)].map(([shard, indexes]) => writeRenewals(this.shards[shard], indexes.map((i) => entries[i]))));
  }
}
