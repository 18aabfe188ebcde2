/**
 * The reply memory shared through Redis (REDIS_URL or KVTIER_REDIS_CLUSTER), so a turn served by
 * one API process splices the ids another API process's reply was sampled as (a tool loop whose
 * turns alternate API processes keeps its cache: test/src/cluster/chains-cluster.test.ts).
 *
 *   key    kvtier:reply:<sha256(tenant scope \0 reply text), hex>   no hash tag: spread over the
 *          slots by design, single-key commands only (SET PX, GETEX PX)
 *   value  the sampled ids, uint32 little-endian
 *   TTL    REPLY_TTL_MS (1 h), renewed by every read: a reply lives while its conversation keeps
 *          sending it back, and an hour after the last time it did
 *
 * The hash keeps keys short whatever the reply's length and the tenant's salt out of the key; a
 * tenant's scope is part of it, so another tenant's identical text is another key. Every call is
 * bounded (REDIS_WAIT_MS) and swallows its error: a Redis fault or failover leaves the reply to be
 * re-encoded from its text (fewer cached tokens), never an error or other ids than sampled.
 */
import { createHash } from 'node:crypto';

import { createRedisClient, type RedisClient } from '../kvtier/index.ts';
import type { SharedReplies } from '../recipe/index.ts';

/** How long a reply stays after it was last written or read. */
export const REPLY_TTL_MS = 60 * 60 * 1000;
/** The longest a prompt waits on the shared memory before it goes on without it. */
const REDIS_WAIT_MS = 1000;

export class RedisReplyMemory implements SharedReplies {
  private readonly client: RedisClient;
  /** Calls that failed or timed out (a degraded prompt each, not an error). */
  faults = 0;

  constructor(
    url: string,
    private readonly log: (level: 'warn', message: string) => void,
    private readonly ttlMs = REPLY_TTL_MS,
  ) {
    this.client = createRedisClient(url, { maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: false });
    this.client.on('error', (error: Error) => log('warn', `redis (reply memory): ${error.message}`));
  }

  async load(tenantScope: string, texts: readonly string[]): Promise<Array<Uint32Array | undefined>> {
    const none = texts.map(() => undefined);
    const found = await this.bounded(Promise.all(texts.map((text) => this.client.getexBuffer(replyKey(tenantScope, text), 'PX', this.ttlMs))), 'load');
    return found === undefined ? none : found.map(idsOf);
  }

  /**
   * Awaits Redis's answer (bounded), though it is ~0.4 ms of a cluster request's overhead: resolving once
   * the SETs were only written let another process's read, sent right after, miss them now and then
   * (test/src/serve/redis-reply-memory.test.ts; bench/RESULTS.md, "e2e overhead, fifth session").
   */
  async save(tenantScope: string, replies: ReadonlyArray<{ text: string; ids: ArrayLike<number> }>): Promise<void> {
    await this.bounded(Promise.all(replies.map((reply) => this.client.set(replyKey(tenantScope, reply.text), bytesOf(reply.ids), 'PX', this.ttlMs))), 'save');
  }

  async close(): Promise<void> {
    this.client.disconnect();
  }

  private async bounded<T>(call: Promise<T>, what: string): Promise<T | undefined> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), REDIS_WAIT_MS).unref();
    });
    try {
      const result = await Promise.race([call, late]);
      if (result === undefined) throw new Error(`no answer within ${REDIS_WAIT_MS} ms`);
      return result;
    } catch (error) {
      call.catch(() => undefined); // a late rejection after the timer is not unhandled
      this.faults++;
      this.log('warn', `reply memory ${what} skipped (replies are re-encoded): ${(error as Error).message}`);
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}

export function replyKey(tenantScope: string, text: string): string {
  return `kvtier:reply:${createHash('sha256').update(tenantScope).update('\u0000').update(text).digest('hex')}`;
}

function bytesOf(ids: ArrayLike<number>): Buffer {
  const bytes = Buffer.allocUnsafe(ids.length * 4);
  for (let i = 0; i < ids.length; i++) bytes.writeUInt32LE(ids[i], i * 4);
  return bytes;
}

/** A value that is not whole uint32s (not written by save) is treated as absent. */
function idsOf(bytes: Buffer | null): Uint32Array | undefined {
  if (bytes === null || bytes.length === 0 || bytes.length % 4 !== 0) return undefined;
  const ids = new Uint32Array(bytes.length / 4);
  for (let i = 0; i < ids.length; i++) ids[i] = bytes.readUInt32LE(i * 4);
  return ids;
}
