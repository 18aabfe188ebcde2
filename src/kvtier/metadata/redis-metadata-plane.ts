import { randomBytes } from 'node:crypto';

import type { Redis } from 'ioredis';

import { PlaneError } from '../errors.ts';
import { stderrLogger, type KvTierLogger } from '../logger.ts';
import { mergeClassPages, type ClassScanPage } from './class-scan-merge.ts';
import type { BlockRecord, MetadataPlane, PlaneState, PlaneUsage, RemovedBatch, RemoveOptions, ScanOptions, ScanPage } from './metadata-plane.ts';
import { CLEAR_PENDING_LUA, GET_LUA, MARK_TRUSTED_LUA, NOTE_ORPHANS_LUA, REMOVE_LUA, REMOVE_OLDEST_LUA, RENEW_LUA, SCAN_LUA, UPSERT_LUA } from './redis-plane-scripts.ts';
import { removeLegacyPlaneKeys } from './redis-legacy-keys.ts';
import { RenewalBuffer, type PendingRenewal } from './renewal-buffer.ts';

export interface RedisMetadataPlaneOptions {
  /** `redis://host:port/db`; defaults to `REDIS_URL`. */
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

/** Depth bits folded into the score: lastUse × 2048 + (2047 − depth) stays an exact double until 2109. */
const DEPTH_SLOTS = 2048;
const MEMBERS_PER_COMMAND = 1024;

/** Score of a record in the LRU zsets: last use, deeper blocks first among equals. */
export function lruScore(lastUseAt: number, depth: number): number {
  return Math.floor(lastUseAt) * DEPTH_SLOTS + (DEPTH_SLOTS - 1 - Math.min(Math.max(depth, 0), DEPTH_SLOTS - 1));
}

function lastUseOf(score: number): number {
  return Math.floor(score / DEPTH_SLOTS);
}

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
 * <p>{0}:del          set   key16… removed by GC whose blobs are not yet confirmed deleted (journal; one member per removal call: its keys concatenated)
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
  private closed = false;
  private readonly keys: ReturnType<typeof planeKeyNames>;

  private constructor(
    private readonly redis: Redis,
    private readonly subscriber: Redis,
    prefix: string,
    private readonly logger: KvTierLogger,
    options: RedisMetadataPlaneOptions,
  ) {
    this.keys = planeKeyNames(prefix, options.bucketBits ?? 16);
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
    // ioredis is loaded by the first Redis-backed open (the embedded default never needs it).
    const { Redis: RedisClient } = await import('ioredis');
    const connect = (): Redis => new RedisClient(url, { lazyConnect: true, connectTimeout: options.connectTimeoutMs ?? 5000, maxRetriesPerRequest: 3, enableAutoPipelining: false });
    const redis = connect();
    const subscriber = connect();
    let opened = false;
    for (const connection of [redis, subscriber]) {
      connection.on('error', (error: Error) => {
        if (opened) logger.warn({ code: 'KVT_ERR_PLANE_UNREACHABLE', err: error.message }, 'Redis connection of the metadata plane failed; retrying');
      });
    }
    for (const [name, lua, numberOfKeys] of [
      ['kvtPlaneUpsert', UPSERT_LUA, 3],
      ['kvtPlaneRemove', REMOVE_LUA, 3],
      ['kvtPlaneRemoveOldest', REMOVE_OLDEST_LUA, 3],
      ['kvtPlaneGet', GET_LUA, 0],
      ['kvtPlaneRenew', RENEW_LUA, 2],
      ['kvtPlaneScan', SCAN_LUA, 1],
      ['kvtPlaneNoteOrphans', NOTE_ORPHANS_LUA, 1],
      ['kvtPlaneMarkTrusted', MARK_TRUSTED_LUA, 1],
      ['kvtPlaneClearPending', CLEAR_PENDING_LUA, 1],
    ] as const) {
      redis.defineCommand(name, { lua, numberOfKeys });
    }
    try {
      await redis.connect();
      await subscriber.connect();
      const plane = new RedisMetadataPlane(redis, subscriber, options.keyPrefix ?? 'kvtier:plane:', logger, options);
      subscriber.on('messageBuffer', (channel: Buffer, message: Buffer) => plane.onRemovedMessage(channel, message));
      // Housekeeping: a failure leaves the old keys for the next open, it does not stop this one.
      await removeLegacyPlaneKeys(redis, options.keyPrefix ?? 'kvtier:plane:', plane.keys.legacySwept, logger).catch((error: unknown) =>
        logger.warn({ code: 'KVT_ERR_PLANE_UNREACHABLE', err: (error as Error).message }, 'removing the metadata plane keys of the naming before the hash tag failed; the next open retries'),
      );
      await subscriber.subscribe(plane.keys.removed);
      await plane.state();
      opened = true;
      return plane;
    } catch (error) {
      redis.disconnect();
      subscriber.disconnect();
      throw new PlaneError('KVT_ERR_PLANE_UNREACHABLE', `cannot reach Redis at ${url.replace(/\/\/([^@/]*)@/, '//***@')} for the metadata plane: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  async state(): Promise<PlaneState> {
    let stored = await this.call(() => this.redis.get(this.keys.gen));
    if (stored === null) {
      // The marker is gone: a new Redis, or one restarted empty. Start an untrusted generation.
      await this.call(() => this.redis.set(this.keys.gen, `${randomBytes(8).toString('hex')}:0`, 'NX'));
      stored = await this.call(() => this.redis.get(this.keys.gen));
    }
    const [generation, trusted] = (stored ?? ':0').split(':');
    return { generation, trusted: trusted === '1' };
  }

  async markTrusted(generation: string): Promise<boolean> {
    return (await this.call(() => this.script('kvtPlaneMarkTrusted', this.keys.gen, generation))) === 1;
  }

  async get(keys: readonly string[]): Promise<(BlockRecord | null)[]> {
    const out: (BlockRecord | null)[] = [];
    for (let i = 0; i < keys.length; i += MEMBERS_PER_COMMAND) {
      const chunk = keys.slice(i, i + MEMBERS_PER_COMMAND);
      const reply = (await this.call(() => this.scriptBuffer('kvtPlaneGet', this.keys.bucket, this.keys.use, ...chunk.map(memberOf)))) as (Buffer | null)[];
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
      await this.call(() => this.script('kvtPlaneUpsert', this.keys.cap, this.keys.usage, this.keys.classes, ...args));
    }
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
    // Every chunk's script goes in one pipeline: one round trip per remove, however many chunks.
    const pipeline = this.redis.pipeline() as unknown as Record<string, (...args: (string | Buffer)[]) => unknown> & { exec(): Promise<[Error | null, unknown][] | null> };
    let chunks = 0;
    for (let i = 0; i < keys.length; i += MEMBERS_PER_COMMAND) {
      const args: (string | Buffer)[] = [this.keys.cap, this.keys.usage, this.keys.classes, this.keys.bucket, this.keys.use, options.journal ? this.keys.pending : ''];
      for (let j = i; j < Math.min(keys.length, i + MEMBERS_PER_COMMAND); j++) {
        // A last use ≤ judged is a score < lruScore(judged + 1, deepest): whatever its depth.
        args.push(memberOf(keys[j]), judged === undefined ? '' : String(lruScore(judged[j] + 1, DEPTH_SLOTS - 1)));
      }
      pipeline.kvtPlaneRemoveBuffer(...args);
      chunks++;
    }
    if (chunks === 0) return removed;
    const results = await this.call(() => pipeline.exec());
    for (const [error, reply] of results ?? []) {
      if (error !== null) throw new PlaneError('KVT_ERR_PLANE_UNREACHABLE', `metadata plane (Redis) remove failed: ${error.message}`, { cause: error });
      const rows = reply as Buffer[];
      for (let j = 0; j < rows.length; j += 3) removed.push(decodeValue(rows[j].toString('hex'), rows[j + 1], Number(rows[j + 2].toString())));
    }
    await this.tellRemoved(removed);
    return removed;
  }

  async removeByLastUse(options: { trafficClass: string; maxLastUseAt: number; limit: number; journal?: boolean }): Promise<RemovedBatch> {
    const reply = (await this.call(() =>
      this.scriptBuffer(
        'kvtPlaneRemoveOldest',
        this.keys.cap,
        this.keys.usage,
        this.keys.classes,
        this.keys.bucket,
        this.keys.use,
        options.trafficClass,
        String(lruScore(options.maxLastUseAt, 0)),
        String(options.limit),
        options.journal ? this.keys.pending : '',
      ),
    )) as [number, Buffer, ...(Buffer | number)[]];
    // [rows taken, members concatenated, then tag, bytes, blocks per usage delta (negative: freed)]
    const members = reply[1];
    const keys = splitMembers(members);
    const freed: PlaneUsage = { bytes: {}, blocks: {} };
    for (let j = 2; j + 2 < reply.length; j += 3) {
      const tag = (reply[j] as Buffer).toString();
      if (reply[j + 1] !== 0) freed.bytes[tag] = -Number(reply[j + 1]);
      if (reply[j + 2] !== 0) freed.blocks[tag] = -Number(reply[j + 2]);
    }
    await this.tellRemovedKeys(keys, members);
    return { keys, freed, more: Number(reply[0]) === options.limit };
  }

  /** The journal's members are batches (one per removal call, keys concatenated): split, deduplicated. */
  async pendingDeletes(): Promise<string[]> {
    const members = (await this.call(() => this.redis.smembersBuffer(this.keys.pending))) as Buffer[];
    return [...new Set(members.flatMap(splitMembers))];
  }

  async clearPendingDeletes(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    const blob = Buffer.from(keys.join(''), 'hex');
    if (blob.length !== keys.length * 16) for (const key of keys) memberOf(key); // names the malformed key
    await this.call(() => this.script('kvtPlaneClearPending', this.keys.pending, blob));
  }

  /** Local listeners now; other nodes through the removal channel. */
  private async tellRemoved(removed: BlockRecord[]): Promise<void> {
    if (removed.length > 0) {
      const removedKeys = removed.map((record) => record.key);
      await this.tellRemovedKeys(removedKeys, Buffer.concat(removedKeys.map(memberOf)));
    }
  }

  /** `members`: the same keys as raw bytes, concatenated (the channel's message body). */
  private async tellRemovedKeys(keys: string[], members: Buffer): Promise<void> {
    if (keys.length === 0) return;
    for (const listener of this.listeners) listener(keys);
    await this.call(() => this.redis.publish(this.keys.removed, Buffer.concat([this.instanceId, members])));
  }

  async scanByLastUse(options: ScanOptions = {}): Promise<ScanPage> {
    const limit = options.limit ?? 512;
    if (options.capped) return pageOf(await this.scanIndex(this.keys.cap, options, limit));
    if (options.trafficClass !== undefined) return pageOf(await this.scanIndex(this.keys.use + options.trafficClass, options, limit));
    const classes = (await this.call(() => this.redis.smembers(this.keys.classes))).sort();
    const pages = await Promise.all(classes.map((name) => this.scanIndex(this.keys.use + name, options, limit)));
    return mergeClassPages(pages, limit, comparePositions);
  }

  /** One page of one last-use index after the cursor (positions are `score:member hex`). */
  private async scanIndex(zset: string, options: ScanOptions, limit: number): Promise<ClassScanPage> {
    const maxScore = options.maxLastUseAt === undefined ? '+inf' : String(lruScore(options.maxLastUseAt, 0));
    let cursorScore = '';
    let cursorMember: Buffer = Buffer.alloc(0);
    if (options.cursor !== undefined) {
      const [score, member] = options.cursor.split(':');
      cursorScore = score;
      cursorMember = Buffer.from(member, 'hex');
    }
    const reply = (await this.call(() => this.scriptBuffer('kvtPlaneScan', zset, cursorScore, cursorMember, maxScore, String(limit), this.keys.bucket))) as (Buffer | number | null)[];
    const rows: ClassScanPage['rows'] = [];
    for (let i = 1; i < reply.length; i += 3) {
      const key = (reply[i] as Buffer).toString('hex');
      const score = (reply[i + 1] as Buffer).toString();
      const value = reply[i + 2];
      rows.push({ position: `${score}:${key}`, record: value instanceof Buffer ? decodeValue(key, value, Number(score)) : null });
    }
    return { rows, more: Number(reply[0]) === 1 };
  }

  async usage(): Promise<PlaneUsage> {
    const all = await this.call(() => this.redis.hgetall(this.keys.usage));
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
    const reply = (await this.call(() => this.script('kvtPlaneNoteOrphans', this.keys.orphans, String(Math.floor(at)), ...keys.map(memberOf)))) as string[];
    return reply.map(Number);
  }

  async clearOrphans(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    for (let i = 0; i < keys.length; i += MEMBERS_PER_COMMAND) {
      await this.call(() => this.redis.hdel(this.keys.orphans, ...keys.slice(i, i + MEMBERS_PER_COMMAND).map(memberOf)));
    }
  }

  async orphanSightings(): Promise<Map<string, number>> {
    const flat = (await this.call(() => this.redis.callBuffer('HGETALL', this.keys.orphans))) as Buffer[];
    const out = new Map<string, number>();
    for (let i = 0; i + 1 < flat.length; i += 2) out.set(flat[i].toString('hex'), Number(flat[i + 1].toString()));
    return out;
  }

  onRemoved(listener: (keys: string[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.renewals.flush().catch(() => undefined);
    this.renewals.stop();
    this.closed = true;
    this.listeners.clear();
    await Promise.allSettled([this.redis.quit(), this.subscriber.quit()]);
  }

  // ── internals ──────────────────────────────────────────────────────────

  private async writeRenewals(batch: Map<string, PendingRenewal>): Promise<void> {
    if (this.closed) return;
    const pipeline = this.redis.pipeline() as unknown as Record<string, (...args: (string | Buffer)[]) => unknown> & { exec(): Promise<[Error | null, unknown][] | null> };
    let args: (string | Buffer)[] = [this.keys.cap, this.keys.classes, this.keys.use];
    for (const [key, { at, depth }] of batch) {
      args.push(String(lruScore(at, depth)), memberOf(key));
      if (args.length >= 3 + 2 * MEMBERS_PER_COMMAND) {
        pipeline.kvtPlaneRenew(...args);
        args = [this.keys.cap, this.keys.classes, this.keys.use];
      }
    }
    if (args.length > 3) pipeline.kvtPlaneRenew(...args);
    const results = await this.call(() => pipeline.exec());
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

  private script(name: string, ...args: (string | Buffer)[]): Promise<unknown> {
    return (this.redis as unknown as Record<string, (...a: (string | Buffer)[]) => Promise<unknown>>)[name](...args);
  }

  private scriptBuffer(name: string, ...args: (string | Buffer)[]): Promise<unknown> {
    return (this.redis as unknown as Record<string, (...a: (string | Buffer)[]) => Promise<unknown>>)[`${name}Buffer`](...args);
  }

  private async call<T>(run: () => Promise<T>): Promise<T> {
    if (this.closed) throw new PlaneError('KVT_ERR_PLANE_CLOSED', 'this metadata plane is closed; open a new one');
    try {
      return await run();
    } catch (error) {
      if (error instanceof PlaneError) throw error;
      throw new PlaneError('KVT_ERR_PLANE_UNREACHABLE', `metadata plane (Redis) failed: ${(error as Error).message}`, { cause: error });
    }
  }
}

/** createdAt is kept in seconds since 2025-01-01 (base 36: one or two characters fewer per record than since 1970); earlier times are stored as 2025-01-01. */
const CREATED_EPOCH_S = Date.UTC(2025, 0, 1) / 1000;

/** Every Redis key (and the channel) of a plane: all keys carry the hash tag `{0}` of its one shard. */
export function planeKeyNames(prefix: string, bucketBits: number): { gen: string; use: string; classes: string; cap: string; bucket: string; usage: string; orphans: string; pending: string; legacySwept: string; removed: string } {
  const tagged = `${prefix}{0}:`;
  return {
    gen: `${tagged}gen`,
    use: `${tagged}u:`,
    classes: `${tagged}classes`,
    cap: `${tagged}cap`,
    bucket: `${tagged}r:${bucketBits}:`,
    usage: `${tagged}usage`,
    orphans: `${tagged}orph`,
    pending: `${tagged}del`,
    legacySwept: `${tagged}legacy-swept`,
    removed: `${prefix}removed`,
  };
}

function pageOf(page: ClassScanPage): ScanPage {
  const records: BlockRecord[] = [];
  for (const row of page.rows) if (row.record !== null) records.push(row.record);
  // The cursor is the last row read (its record may be gone).
  const last = page.rows[page.rows.length - 1];
  return { records, cursor: page.more && last !== undefined ? last.position : undefined };
}

/** Walk order of positions `score:member hex`: score, then member bytes (as Redis orders equal scores). */
function comparePositions(a: string, b: string): number {
  const ca = a.indexOf(':');
  const cb = b.indexOf(':');
  const d = Number(a.slice(0, ca)) - Number(b.slice(0, cb));
  if (d !== 0) return d;
  const ma = a.slice(ca + 1);
  const mb = b.slice(cb + 1);
  return ma < mb ? -1 : ma > mb ? 1 : 0;
}

/** Block keys (hex) of members concatenated 16 bytes each. */
function splitMembers(members: Buffer): string[] {
  const hex = members.toString('hex');
  const keys: string[] = [];
  for (let i = 0; i < hex.length; i += 32) keys.push(hex.slice(i, i + 32));
  return keys;
}

function memberOf(key: string): Buffer {
  if (key.length !== 32) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `a block key is 32 hex characters, got ${JSON.stringify(key)}`);
  return Buffer.from(key, 'hex');
}

function encodeValue(record: BlockRecord): Buffer {
  const n = (value: number) => Math.max(0, Math.floor(value)).toString(36);
  for (const field of [record.trafficClass, record.tenant, record.writer]) {
    if (field.includes('\0')) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `class, tenant and writer must not contain NUL (block ${record.key})`);
  }
  return Buffer.from(`${n(record.sizeBytes)},${n(record.createdAt / 1000 - CREATED_EPOCH_S)},${n(record.ttlMs)},${n(record.depth)}\0${record.trafficClass}\0${record.tenant}\0${record.writer}`);
}

function decodeValue(key: string, value: Buffer, score: number): BlockRecord {
  const text = value.toString('utf8');
  const nul = text.indexOf('\0');
  const numbers = text.slice(0, nul).split(',');
  const names = text.slice(nul + 1).split('\0');
  if (numbers.length !== 4 || names.length !== 3) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `plane record of ${key} is malformed; remove it (GC rebuilds it from storage)`);
  const [size, created, ttl, depth] = numbers.map((value) => parseInt(value, 36));
  return { key, sizeBytes: size, createdAt: (created + CREATED_EPOCH_S) * 1000, ttlMs: ttl, depth, trafficClass: names[0], tenant: names[1], writer: names[2], lastUseAt: lastUseOf(score) };
}
