/**
 * One record of the reply memory shared through Redis: written by the API
 * process (src/serve/redis-reply-memory.ts) or by the `kvtier worker` that
 * sampled the reply (ahead of its `done`), read by any API process.
 *
 *   key    kvtier:reply:<sha256(tenant scope \0 reply text), hex>   no hash tag: spread over the
 *          slots by design, single-key commands only (SET PX, GETEX PX)
 *   value  the sampled ids, uint32 little-endian
 *   TTL    REPLY_TTL_MS (1 h), renewed by every read: a reply lives while its conversation keeps
 *          sending it back, and an hour after the last time it did
 *
 * The hash keeps keys short whatever the reply's length and the tenant's salt out of the key; a
 * tenant's scope is part of it, so another tenant's identical text is another key.
 */
import { createHash } from 'node:crypto';

import { sampledRepliesOfIds } from './sampled-replies.ts';

/** How long a reply stays after it was last written or read. */
export const REPLY_TTL_MS = 60 * 60 * 1000;

export function replyKey(tenantScope: string, text: string): string {
  return `kvtier:reply:${createHash('sha256').update(tenantScope).update('\u0000').update(text).digest('hex')}`;
}

export function replyIdsBytes(ids: ArrayLike<number>): Buffer {
  const bytes = Buffer.allocUnsafe(ids.length * 4);
  for (let i = 0; i < ids.length; i++) bytes.writeUInt32LE(ids[i], i * 4);
  return bytes;
}

/** A value that is not whole uint32s (not written by replyIdsBytes) is treated as absent. */
export function replyIdsOf(bytes: Buffer | null): Uint32Array | undefined {
  if (bytes === null || bytes.length === 0 || bytes.length % 4 !== 0) return undefined;
  const ids = new Uint32Array(bytes.length / 4);
  for (let i = 0; i < ids.length; i++) ids[i] = bytes.readUInt32LE(i * 4);
  return ids;
}

/** A finished job's records, as `kvtier worker` writes them ahead of its `done` (src/workers/bullmq-worker.ts). */
export function sharedReplyRecords(
  codec: Parameters<typeof sampledRepliesOfIds>[0],
  job: Parameters<typeof sampledRepliesOfIds>[1] & { tenantSalt: string },
  completionIds: Iterable<number>,
): Array<{ key: string; value: Buffer; ttlMs: number }> {
  return sampledRepliesOfIds(codec, job, completionIds).map((reply) => ({ key: replyKey(job.tenantSalt, reply.text), value: replyIdsBytes(reply.ids), ttlMs: REPLY_TTL_MS }));
}
