/**
 * BullMQ's completed events of the queues a test listens to, each job's
 * return value handed to `onCompleted` (a worker's return value names it:
 * `workerId`, role, token counts).
 */
import { QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';

export class CompletedJobEvents<T extends { workerId?: string }> {
  private readonly sources: QueueEvents[] = [];
  private readonly clients: Redis[] = [];

  constructor(private readonly onCompleted: (jobId: string, value: T) => void) {}

  async listen(redisUrl: string, queueName: string): Promise<void> {
    const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
    connection.on('error', (error: Error) => console.warn(`queue events ${queueName}: ${error.message}`));
    // From the stream's start: with the default ('$', "from now") events that land before the first
    // XREAD (waitUntilReady does not wait for it) are lost, and a wait on them runs out (the split flake).
    const events = new QueueEvents(queueName, { connection, lastEventId: '0-0' });
    events.on('completed', ({ jobId, returnvalue }) => {
      const value = (typeof returnvalue === 'string' ? JSON.parse(returnvalue) : returnvalue) as T | null;
      if (value?.workerId) this.onCompleted(jobId, value);
    });
    await events.waitUntilReady();
    this.sources.push(events);
    this.clients.push(connection);
  }

  async close(): Promise<void> {
    await Promise.all(this.sources.map((e) => e.close()));
    for (const client of this.clients) client.disconnect();
  }
}
