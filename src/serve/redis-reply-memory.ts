/**
 * The reply memory shared through Redis (REDIS_URL or KVTIER_REDIS_CLUSTER), so a turn served by
 * one API process splices the ids another API process's reply was sampled as (a tool loop whose
 * turns alternate API processes keeps its cache: test/src/cluster/chains-cluster.test.ts). Its
 * records (key, value, TTL): src/recipe/shared-reply-record.ts; `kvtier worker` writes them too.
 *
 * Every call is bounded (REDIS_WAIT_MS) and swallows its error: a Redis fault or failover leaves
 * the reply to be re-encoded from its text (fewer cached tokens), never an error or other ids than sampled.
 */
import { createRedisClient, type RedisClient } from '../kvtier/index.ts';
import { REPLY_TTL_MS, replyIdsBytes, replyIdsOf, replyKey, type SharedReplies } from '../recipe/index.ts';

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
    return found === undefined ? none : found.map(replyIdsOf);
  }

  /**
   * Awaits Redis's answer (bounded), though it is ~0.4 ms of a cluster request's overhead: resolving once
   * the SETs were only written let another process's read, sent right after, miss them now and then
   * (test/src/serve/redis-reply-memory.test.ts; bench/RESULTS.md, "e2e overhead, fifth session").
   */
  async save(tenantScope: string, replies: ReadonlyArray<{ text: string; ids: ArrayLike<number> }>): Promise<void> {
    await this.bounded(Promise.all(replies.map((reply) => this.client.set(replyKey(tenantScope, reply.text), replyIdsBytes(reply.ids), 'PX', this.ttlMs))), 'save');
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
