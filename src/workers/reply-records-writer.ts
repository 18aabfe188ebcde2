/**
 * `kvtier worker` writes a finished reply's reply-memory records itself, on
 * the connection that then publishes the job's `done`: Redis applies them
 * first, so the API need not write its own (docs/architecture.md, the reply
 * memory).
 */
import { describeError } from '../errors.ts';
import { isClusterAddress, type RedisClient as Redis } from '../kvtier/index.ts';
import type { RequestSpec } from '../scheduler/index.ts';

/**
 * The reply memory's shared records of a finished job (`kvtier worker` composes them from the
 * recipe: src/recipe/sampled-replies.ts, shared-reply-record.ts).
 */
export type ReplyRecords = (job: RequestSpec, completionIds: Iterable<number>) => ReadonlyArray<{ key: string; value: Buffer; ttlMs: number }>;

/**
 * Sends a reply's records ahead of its `done` on `publisher` (true: the API skips its own write).
 * Never on a Redis Cluster, where the record's node is not the channel's (no order between them),
 * nor with stop strings, which cut the reply on the API side.
 */
export function replyRecordsWriter(redisUrl: string, publisher: Redis, records: ReplyRecords | undefined, log: (level: 'warn', message: string) => void): (job: RequestSpec, completionIds: Uint32Array) => boolean {
  const replyRecords = isClusterAddress(redisUrl) ? undefined : records;
  return (job, completionIds) => {
    if (!replyRecords || job.prefillOnly || (job.sampling.stopStrings?.length ?? 0) > 0) return false;
    try {
      for (const record of replyRecords(job, completionIds)) {
        publisher.set(record.key, record.value, 'PX', record.ttlMs).catch((error: Error) => log('warn', `reply memory write failed (the next turn re-encodes this reply): ${error.message}`));
      }
      return true;
    } catch (error) {
      log('warn', `reply memory records of job ${job.id} not made (the API writes them): ${describeError(error).message}`);
      return false;
    }
  };
}
