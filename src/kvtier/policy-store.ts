import { mkdirSync } from 'node:fs';

import { open as openLmdb, type Database, type RootDatabase } from 'lmdb';

import { systemClock, type Clock } from './clock.ts';
import { KvTierError, PolicyError } from './errors.ts';
import { stderrLogger, type KvTierLogger } from './logger.ts';
import { createRedisClient, redactAddress, type RedisClient } from './redis-connection.ts';
import { defaultPolicyDoc, RetentionPolicy, validatePolicyDoc, type RetentionPolicyDoc } from './retention-policy.ts';

/** Edits a copy of the current document; return it (or mutate in place). `version`/`updatedAt` are set by the store. */
export type PolicyChange = (doc: RetentionPolicyDoc) => RetentionPolicyDoc | void;

/**
 * Where the retention policy lives: one document shared by every process.
 *
 * `current()` is synchronous and cheap (the hot path calls it per lookup); it
 * returns the last document read. Each store re-reads within `refreshMs`
 * (default 1 s) of a change made by any process: LMDB by polling the stored
 * version, Redis by pub/sub plus the same polling as a safety net.
 */
export interface PolicyStore {
  readonly kind: 'lmdb' | 'redis';
  current(): RetentionPolicy;
  /** Reads the stored document now. */
  refresh(): Promise<RetentionPolicy>;
  /** Atomic read-modify-write; concurrent edits from other processes are retried, never lost. */
  update(change: PolicyChange): Promise<RetentionPolicy>;
  /** Called after `current()` changes version. Returns an unsubscribe function. */
  onChange(listener: (policy: RetentionPolicy) => void): () => void;
  close(): Promise<void>;
}

interface CommonOptions {
  refreshMs?: number;
  clock?: Clock;
  logger?: KvTierLogger;
  /** Document written when none is stored yet; default: agent 3 d, chat 7 d, no quota. */
  initial?: RetentionPolicyDoc;
}

abstract class PolicyStoreBase implements PolicyStore {
  abstract readonly kind: 'lmdb' | 'redis';
  protected policy: RetentionPolicy;
  private readonly listeners = new Set<(policy: RetentionPolicy) => void>();
  private timer: NodeJS.Timeout | undefined;
  protected closed = false;
  protected readonly clock: Clock;
  protected readonly logger: KvTierLogger;

  protected constructor(initial: RetentionPolicy, options: CommonOptions) {
    this.policy = initial;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? stderrLogger;
  }

  protected startPolling(refreshMs: number): void {
    this.timer = setInterval(() => {
      this.refresh().catch((error: unknown) => {
        this.logger.warn({ code: (error as { code?: string }).code, err: (error as Error).message }, 'policy refresh failed; keeping the last policy read');
      });
    }, refreshMs);
    this.timer.unref();
  }

  current(): RetentionPolicy {
    return this.policy;
  }

  onChange(listener: (policy: RetentionPolicy) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  protected adopt(doc: RetentionPolicyDoc): RetentionPolicy {
    if (doc.version !== this.policy.version || doc.updatedAt !== this.policy.doc.updatedAt) {
      this.policy = new RetentionPolicy(doc);
      for (const listener of this.listeners) listener(this.policy);
    }
    return this.policy;
  }

  protected applyChange(current: RetentionPolicyDoc, change: PolicyChange): RetentionPolicyDoc {
    const draft = structuredClone(current);
    const next = change(draft) ?? draft;
    next.version = current.version + 1;
    next.updatedAt = this.clock.now();
    return validatePolicyDoc(next);
  }

  protected stopPolling(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  abstract refresh(): Promise<RetentionPolicy>;
  abstract update(change: PolicyChange): Promise<RetentionPolicy>;
  abstract close(): Promise<void>;
}

const POLICY_KEY = 'policy';

/** Embedded mode: the policy in an LMDB environment that every process on the host opens. */
export class LmdbPolicyStore extends PolicyStoreBase {
  readonly kind = 'lmdb';
  private constructor(
    private readonly env: RootDatabase,
    private readonly db: Database<string, string>,
    initial: RetentionPolicy,
    options: CommonOptions,
  ) {
    super(initial, options);
  }

  static async open(options: CommonOptions & { path: string }): Promise<LmdbPolicyStore> {
    let env: RootDatabase;
    try {
      mkdirSync(options.path, { recursive: true });
      env = openLmdb({ path: options.path, noSync: false });
    } catch (error) {
      throw new KvTierError('KVT_ERR_INDEX_OPEN', `cannot open the policy LMDB at ${options.path}: ${(error as Error).message}`, { cause: error });
    }
    const db = env.openDB<string, string>({ name: 'policy', encoding: 'string' });
    const initialDoc = validatePolicyDoc(structuredClone(options.initial ?? defaultPolicyDoc()));
    await db.transaction(() => {
      if (db.get(POLICY_KEY) === undefined) db.put(POLICY_KEY, JSON.stringify(initialDoc));
    });
    const store = new LmdbPolicyStore(env, db, new RetentionPolicy(parseDoc(db.get(POLICY_KEY)!)), options);
    store.startPolling(options.refreshMs ?? 1000);
    return store;
  }

  async refresh(): Promise<RetentionPolicy> {
    if (this.closed) return this.policy;
    const stored = this.db.get(POLICY_KEY);
    return stored === undefined ? this.policy : this.adopt(parseDoc(stored));
  }

  async update(change: PolicyChange): Promise<RetentionPolicy> {
    // The LMDB write transaction is exclusive across processes, so the
    // read-modify-write inside it cannot interleave with another editor.
    const next = await this.db.transaction(() => {
      const current = parseDoc(this.db.get(POLICY_KEY) ?? JSON.stringify(defaultPolicyDoc()));
      const updated = this.applyChange(current, change);
      this.db.put(POLICY_KEY, JSON.stringify(updated));
      return updated;
    });
    return this.adopt(next);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopPolling();
    await this.env.close();
  }
}

export interface RedisPolicyStoreOptions extends CommonOptions {
  /** `redis://host:port/db`; defaults to `REDIS_URL`. */
  url?: string;
  /** Key prefix; default `kvtier:`. The document is at `<prefix>policy`, changes are published on `<prefix>policy:changed`. */
  keyPrefix?: string;
  connectTimeoutMs?: number;
}

/** Distributed mode: the policy in Redis, changes announced by pub/sub. */
export class RedisPolicyStore extends PolicyStoreBase {
  readonly kind = 'redis';
  private updateChain: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly redis: RedisClient,
    private readonly subscriber: RedisClient,
    private readonly key: string,
    private readonly channel: string,
    initial: RetentionPolicy,
    options: CommonOptions,
  ) {
    super(initial, options);
  }

  static async open(options: RedisPolicyStoreOptions = {}): Promise<RedisPolicyStore> {
    const url = options.url ?? process.env.REDIS_URL;
    if (url === undefined || url === '') {
      throw new PolicyError('KVT_ERR_POLICY_UNREACHABLE', 'RedisPolicyStore needs a url (or REDIS_URL), e.g. redis://127.0.0.1:6379');
    }
    const prefix = options.keyPrefix ?? 'kvtier:';
    const key = `${prefix}policy`;
    const channel = `${prefix}policy:changed`;
    // ioredis is loaded by the first Redis-backed open (redis-connection.ts): the embedded default and
    // the CLI's local admin never need it (it costs ~0.1–0.2 s to import). One key and one channel: on a
    // Redis Cluster the document lives in one slot and PUBLISH reaches every node.
    const connect = (): RedisClient =>
      createRedisClient(url, { lazyConnect: true, connectTimeout: options.connectTimeoutMs ?? 5000, maxRetriesPerRequest: 3, enableAutoPipelining: false });
    const redis = connect();
    const subscriber = connect();
    // ioredis reconnects by itself; without a listener its errors would be
    // unhandled events. Before open succeeds the failure is thrown instead.
    let opened = false;
    const logger = options.logger ?? stderrLogger;
    for (const connection of [redis, subscriber]) {
      connection.on('error', (error: Error) => {
        if (opened) logger.warn({ code: 'KVT_ERR_POLICY_UNREACHABLE', err: error.message }, 'Redis connection for the retention policy failed; retrying');
      });
    }
    try {
      await redis.connect();
      await subscriber.connect();
      const initialDoc = validatePolicyDoc(structuredClone(options.initial ?? defaultPolicyDoc()));
      await redis.set(key, JSON.stringify(initialDoc), 'NX');
      const stored = await redis.get(key);
      const store = new RedisPolicyStore(redis, subscriber, key, channel, new RetentionPolicy(parseDoc(stored!)), options);
      subscriber.on('message', (from: string) => {
        if (from !== channel) return;
        store.refresh().catch((error: unknown) => {
          store.logger.warn({ err: (error as Error).message }, 'policy refresh after a change notice failed; polling will retry');
        });
      });
      await subscriber.subscribe(channel);
      store.startPolling(options.refreshMs ?? 1000);
      opened = true;
      return store;
    } catch (error) {
      redis.disconnect();
      subscriber.disconnect();
      if (error instanceof KvTierError) throw error;
      throw new PolicyError('KVT_ERR_POLICY_UNREACHABLE', `cannot reach Redis at ${redactAddress(url)} for the retention policy: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  async refresh(): Promise<RetentionPolicy> {
    if (this.closed) return this.policy;
    const stored = await this.redis.get(this.key);
    return stored === null ? this.policy : this.adopt(parseDoc(stored));
  }

  update(change: PolicyChange): Promise<RetentionPolicy> {
    // WATCH is per connection: serialise this process's edits on it; other
    // processes' edits make EXEC fail and we retry on the fresh document.
    const run = this.updateChain.then(() => this.updateOnce(change));
    this.updateChain = run.catch(() => undefined);
    return run;
  }

  private async updateOnce(change: PolicyChange): Promise<RetentionPolicy> {
    for (let attempt = 0; attempt < 20; attempt++) {
      await this.redis.watch(this.key);
      const stored = await this.redis.get(this.key);
      let next: RetentionPolicyDoc;
      try {
        next = this.applyChange(parseDoc(stored ?? JSON.stringify(defaultPolicyDoc())), change);
      } catch (error) {
        await this.redis.unwatch();
        throw error;
      }
      const result = await this.redis.multi().set(this.key, JSON.stringify(next)).publish(this.channel, String(next.version)).exec();
      if (result !== null) return this.adopt(next);
    }
    throw new PolicyError('KVT_ERR_POLICY_CONFLICT', 'the retention policy kept changing under this edit (20 attempts); retry it');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopPolling();
    await Promise.allSettled([this.redis.quit(), this.subscriber.quit()]);
  }
}

function parseDoc(text: string): RetentionPolicyDoc {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    throw new PolicyError('KVT_ERR_POLICY_INVALID', `stored retention policy is not JSON: ${(error as Error).message}; rewrite it with policy.update`);
  }
  return validatePolicyDoc(doc as RetentionPolicyDoc);
}
