/**
 * The plane's removals as news: listeners in this process are told at once,
 * other nodes through one pub/sub channel (`<p>removed`: instance id ‖ key16…),
 * so each node drops removed blocks from its caches and index. A node skips
 * its own messages (its listeners were already told).
 */
import { randomBytes } from 'node:crypto';

import type { KvTierLogger } from '../logger.ts';
import type { RedisPlaneCommands } from './redis-plane-commands.ts';

export class RemovedChannel {
  private readonly listeners = new Set<(keys: string[]) => void>();
  private readonly instanceId = randomBytes(8);

  /** `first`: shard 0's commands, whose keys name the channel and whose call wrapper publishes. */
  constructor(
    private readonly publisher: { publish(channel: string, message: Buffer): Promise<number> },
    private readonly first: RedisPlaneCommands,
    private readonly logger: KvTierLogger,
  ) {}

  /** Local listeners now; other nodes through the channel. `members`: the same keys as raw bytes, concatenated (the message body). */
  async tell(keys: string[], members: Buffer): Promise<void> {
    if (keys.length === 0) return;
    for (const listener of this.listeners) listener(keys);
    const first = this.first;
    await first.call(() => this.publisher.publish(first.keys.removed, Buffer.concat([this.instanceId, members])));
  }

  /** A message of the subscriber connection: another node's removals reach the listeners. */
  onMessage(channel: Buffer, message: Buffer): void {
    if (channel.toString() !== this.first.keys.removed || message.length < 8) return;
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

  listen(listener: (keys: string[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  clear(): void {
    this.listeners.clear();
  }
}
