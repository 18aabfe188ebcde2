/**
 * Stored responses (`store: true`, `previous_response_id`, GET/DELETE
 * /v1/responses/{id}). A record holds the response object and the transcript
 * a chained turn continues from (history without instructions + this input +
 * this output), so the next turn renders the same linear prompt prefix.
 *
 * Ownership: the key is tenant + id; another tenant's id is simply absent (404).
 * Expiry: the record lives as long as its traffic class's retention TTL
 * (the same TTL the tier gives the blocks of that conversation).
 *
 *   embedded (no REDIS_URL): in-process map with expiry; lost on restart and
 *                            not shared between processes
 *   REDIS_URL set:           Redis keys `kvtier:resp:<tenant>:<id>` with PX = TTL,
 *                            shared by every API process of the cluster
 *
 * Background runs: a cancel or DELETE that reaches an API process other than
 * the one running the response leaves a mark here (`…:cancel`, or the record
 * gone) that the running process polls (`control`).
 */

import { KvtError } from '../errors.ts';
import { createRedisClient, type RedisClient } from '../kvtier/index.ts';
import type { ChatMessage, ResponsesListItem, ToolSpec } from '../recipe/index.ts';

export interface StoredResponse {
  response: Record<string, unknown>;
  /** The chained conversation so far (no instructions): what previous_response_id continues. */
  transcript: ChatMessage[];
  tools?: ToolSpec[];
  /** The reply texts of the transcript with the ids they were sampled as, for the reply memory of whichever API process continues it. */
  sampled?: Array<{ text: string; ids: number[] }>;
  /** What GET /v1/responses/{id}/input_items lists: the chain's items, then this request's input (recipe/responses-items.ts). */
  inputItems?: ResponsesListItem[];
}

export interface ResponseStore {
  put(tenant: string, id: string, record: StoredResponse, ttlMs: number): Promise<void>;
  get(tenant: string, id: string): Promise<StoredResponse | undefined>;
  /** true when a record was deleted. */
  delete(tenant: string, id: string): Promise<boolean>;
  /** Asks whichever API process runs background response `id` to cancel it (POST …/cancel reached another process). */
  requestCancel(tenant: string, id: string, ttlMs: number): Promise<void>;
  /** What the process running background response `id` must do: go on, cancel (asked by another process), or stop because the record was deleted. */
  control(tenant: string, id: string): Promise<'run' | 'cancel' | 'deleted'>;
  close(): Promise<void>;
}

/** A bound on the records one process keeps (oldest dropped first), besides their bytes. */
const MAX_MEMORY_RECORDS = 100_000;

/** KVTIER_RESPONSE_MEMORY_BYTES' default, and the bound on one record when that variable is 0. */
export const DEFAULT_RESPONSE_MEMORY_BYTES = 32 * 1024 * 1024;

/**
 * The largest one record may be, in either store. A chained record holds the
 * whole conversation (transcript, input items), and `truncation: "auto"`
 * lets a chain outgrow the context, so without this a chain of
 * previous_response_id turns grows one record, and the memory and Redis
 * value holding it, without bound.
 */
export function recordLimitOf(responseMemoryBytes: number): number {
  return responseMemoryBytes > 0 ? responseMemoryBytes : DEFAULT_RESPONSE_MEMORY_BYTES;
}

/** JSON bytes (UTF-8) of a value as a store holds it. */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value));
}

export function recordTooLarge(bytes: number, limit: number, param: string): KvtError {
  return new KvtError('KVT_ERR_RESPONSE_TOO_LARGE', `the stored response would be ${bytes} bytes of JSON, more than the ${limit} one stored response may hold (KVTIER_RESPONSE_MEMORY_BYTES)`, { param });
}

/**
 * Embedded mode's store: records by insertion (a put refreshes), bounded by
 * count and by their size as JSON (KVTIER_RESPONSE_MEMORY_BYTES) — by count
 * alone, a soak's ~3 KB records grew the heap for the whole run (100 000 of
 * them would hold several hundred MB). Records past their TTL are dropped
 * from the oldest end as new ones arrive, not only when read. One record
 * past the whole bound is refused (KVT_ERR_RESPONSE_TOO_LARGE), so the bound
 * holds for every put.
 */
export class MemoryResponseStore implements ResponseStore {
  private readonly records = new Map<string, { record: StoredResponse; expiresAt: number; bytes: number }>();
  private readonly cancels = new Set<string>();
  private bytes = 0;

  private readonly recordLimit: number;

  constructor(
    private readonly now: () => number = Date.now,
    private readonly maxBytes = DEFAULT_RESPONSE_MEMORY_BYTES,
  ) {
    this.recordLimit = recordLimitOf(maxBytes);
  }

  /** JSON bytes of the records held. */
  get heldBytes(): number {
    return this.bytes;
  }

  get size(): number {
    return this.records.size;
  }

  async put(tenant: string, id: string, record: StoredResponse, ttlMs: number): Promise<void> {
    const key = keyOf(tenant, id);
    const bytes = jsonBytes(record);
    if (bytes > this.recordLimit) throw recordTooLarge(bytes, this.recordLimit, 'store');
    this.drop(key);
    this.records.set(key, { record: structuredClone(record), expiresAt: this.now() + ttlMs, bytes });
    this.bytes += bytes;
    // The newest record stays (its chained turn needs it); with maxBytes 0 it is the only one.
    for (const [oldKey, old] of this.records) {
      if (oldKey === key) break;
      if (this.records.size <= MAX_MEMORY_RECORDS && this.bytes <= this.maxBytes && old.expiresAt > this.now()) break;
      this.drop(oldKey);
    }
  }

  private drop(key: string): void {
    const entry = this.records.get(key);
    if (entry === undefined) return;
    this.records.delete(key);
    this.bytes -= entry.bytes;
  }

  async get(tenant: string, id: string): Promise<StoredResponse | undefined> {
    const key = keyOf(tenant, id);
    const entry = this.records.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.drop(key);
      return undefined;
    }
    return structuredClone(entry.record);
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    const key = keyOf(tenant, id);
    const entry = this.records.get(key);
    this.drop(key);
    return entry !== undefined && entry.expiresAt > this.now();
  }

  async requestCancel(tenant: string, id: string): Promise<void> {
    this.cancels.add(keyOf(tenant, id));
    // A mark outlives its run only until MAX_MEMORY_RECORDS newer ones (a run polls it every 200 ms).
    if (this.cancels.size > MAX_MEMORY_RECORDS) this.cancels.delete(this.cancels.values().next().value!);
  }

  async control(tenant: string, id: string): Promise<'run' | 'cancel' | 'deleted'> {
    const key = keyOf(tenant, id);
    const entry = this.records.get(key);
    if (entry === undefined || entry.expiresAt <= this.now()) return 'deleted';
    return this.cancels.has(key) ? 'cancel' : 'run';
  }

  async close(): Promise<void> {
    this.records.clear();
    this.cancels.clear();
    this.bytes = 0;
  }
}

export class RedisResponseStore implements ResponseStore {
  private readonly client: RedisClient;

  /** `recordLimit`: the largest one record's JSON (recordLimitOf(KVTIER_RESPONSE_MEMORY_BYTES)). */
  constructor(
    url: string,
    log: (level: 'warn', message: string) => void,
    private readonly recordLimit = DEFAULT_RESPONSE_MEMORY_BYTES,
  ) {
    // Single-key commands only: on a Redis Cluster the records spread over the slots by design.
    this.client = createRedisClient(url, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false });
    this.client.on('error', (error: Error) => log('warn', `redis (response store): ${error.message}`));
  }

  async put(tenant: string, id: string, record: StoredResponse, ttlMs: number): Promise<void> {
    const json = JSON.stringify(record);
    const bytes = Buffer.byteLength(json);
    if (bytes > this.recordLimit) throw recordTooLarge(bytes, this.recordLimit, 'store');
    await this.client.set(redisKey(tenant, id), json, 'PX', Math.max(1, Math.floor(ttlMs)));
  }

  async get(tenant: string, id: string): Promise<StoredResponse | undefined> {
    const text = await this.client.get(redisKey(tenant, id));
    return text === null ? undefined : (JSON.parse(text) as StoredResponse);
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    return (await this.client.del(redisKey(tenant, id))) > 0;
  }

  async requestCancel(tenant: string, id: string, ttlMs: number): Promise<void> {
    await this.client.set(`${redisKey(tenant, id)}:cancel`, '1', 'PX', Math.max(1, Math.floor(ttlMs)));
  }

  async control(tenant: string, id: string): Promise<'run' | 'cancel' | 'deleted'> {
    const key = redisKey(tenant, id);
    const [record, cancel] = await Promise.all([this.client.exists(key), this.client.exists(`${key}:cancel`)]);
    if (record === 0) return 'deleted';
    return cancel === 1 ? 'cancel' : 'run';
  }

  async close(): Promise<void> {
    this.client.disconnect();
  }
}

function keyOf(tenant: string, id: string): string {
  return `${tenant}\u0000${id}`;
}

function redisKey(tenant: string, id: string): string {
  return `kvtier:resp:${encodeURIComponent(tenant)}:${id}`;
}
