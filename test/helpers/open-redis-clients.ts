/**
 * A vitest setup file: a test file that leaves an ioredis client open fails. With `isolate: false`
 * (vitest.config.ts) a fork runs many files in one process, and a client left open reconnects for
 * the rest of that fork once its redis-server is stopped: CPU taken from later files, and
 * "[ioredis] Unhandled error event" lines in their output (CI, stop 38). BullMQ leaves a client
 * handed to it open (it duplicates one for blocking reads), so a test that passes `new Redis(…)`
 * to a Queue or QueueEvents must disconnect it itself.
 *
 * Every client that connects while a file runs is noted with where it was made; the file's last
 * afterAll (this one: hooks run as a stack, and setup files register first) lists those neither
 * ended nor being closed.
 */
import { afterAll } from 'vitest';
import { Cluster, Redis } from 'ioredis';

interface Noted {
  client: { status: string; manuallyClosing?: boolean };
  file: string;
  madeAt: string;
}

const state = globalThis as unknown as { kvtierOpenRedisClients?: Noted[] };
const noted = (state.kvtierOpenRedisClients ??= []);
const currentFile = (): string => (globalThis as { __vitest_worker__?: { filepath?: string } }).__vitest_worker__?.filepath ?? '';

for (const ClientClass of [Redis, Cluster] as unknown as Array<{ prototype: Record<string, unknown> }>) {
  const prototype = ClientClass.prototype as { connect: (...args: unknown[]) => unknown; kvtierNoted?: boolean };
  if (prototype.kvtierNoted) continue;
  prototype.kvtierNoted = true;
  const connect = prototype.connect;
  prototype.connect = function (this: Noted['client'] & { kvtierNoted?: boolean }, ...args: unknown[]) {
    if (!Object.prototype.hasOwnProperty.call(this, 'kvtierNoted')) {
      Object.defineProperty(this, 'kvtierNoted', { value: true });
      const madeAt = (new Error().stack ?? '').split('\n').slice(2).filter((line) => !line.includes('node_modules') && !line.includes('node:internal')).slice(0, 3).join(' ← ').trim();
      noted.push({ client: this, file: currentFile(), madeAt });
    }
    return connect.apply(this, args);
  };
}

afterAll(() => {
  const file = currentFile();
  const open = noted.filter((entry) => entry.file === file && entry.client.status !== 'end' && !entry.client.manuallyClosing);
  for (let i = noted.length - 1; i >= 0; i--) if (noted[i].file === file) noted.splice(i, 1);
  if (open.length > 0) {
    throw new Error(`${open.length} Redis client(s) left open by this file (disconnect them in afterAll/finally):\n${open.map((entry) => `  ${entry.client.status}: ${entry.madeAt}`).join('\n')}`);
  }
});
