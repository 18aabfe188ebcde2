/**
 * The API process's handles on queues other than the shared one (a split
 * half's role queue, a worker's own queue), opened on first use. Workers come
 * and go (their ids are per process): a handle unused for a while, with no
 * job of this process on its queue, is closed when the next one opens.
 */
import { Queue } from 'bullmq';
import type { RedisClient as Redis } from '../kvtier/index.ts';

import { LIVE_TTL_MS } from './bullmq-protocol.ts';

export class QueueHandles {
  private readonly queues = new Map<string, { queue: Queue; usedAt: number }>();

  constructor(
    private readonly connection: Redis,
    /** BullMQ key prefix (hash-tagged on a Redis Cluster: bullmq-protocol.ts bullmqPrefix). */
    private readonly prefix: string | undefined,
    /** Whether a job of this process is on that queue now (its handle stays open). */
    private readonly inUse: (name: string) => boolean,
    private readonly log: (level: 'info' | 'warn' | 'error', message: string) => void,
  ) {}

  get(name: string): Queue {
    const now = Date.now();
    let entry = this.queues.get(name);
    if (!entry) {
      const queue = new Queue(name, { connection: this.connection, prefix: this.prefix });
      queue.on('error', (error: Error) => this.log('warn', `queue ${name}: ${error.message}`));
      entry = { queue, usedAt: now };
      this.queues.set(name, entry);
      for (const [other, { queue: q, usedAt }] of this.queues) {
        if (now - usedAt > 10 * LIVE_TTL_MS && !this.inUse(other)) {
          this.queues.delete(other);
          void q.close().catch(() => undefined);
        }
      }
    }
    entry.usedAt = now;
    return entry.queue;
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.queues.values()].map((entry) => entry.queue.close()));
  }
}
