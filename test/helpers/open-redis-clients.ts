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
  client: { status: string; manuallyClosing?: boolean; options?: { connectionName?: string }; once(event: 'end', listener: () => void): unknown };
  file: string;
  madeAt: string;
}

/**
 * ioredis's own one-command connections: a Cluster's slot refresher (a node's duplicate() that
 * runs CLUSTER SLOTS), which ioredis ends when the reply comes or its slotsRefreshTimeout (1 s)
 * passes, also after the Cluster was disconnected. One still waiting at the file's end is not a
 * leak: its end is awaited (bounded), then judged (redis-cluster-noscript.test.ts failed on one).
 */
const TRANSIENT = /^ioredis-cluster\(refresher\)/;
const TRANSIENT_END_MS = 5000;

const isOpen = (entry: Noted): boolean => entry.client.status !== 'end' && !entry.client.manuallyClosing;

function ended(client: Noted['client'], boundMs: number): Promise<void> {
  if (client.status === 'end') return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, boundMs);
    client.once('end', () => {
      clearTimeout(timer);
      resolve();
    });
  });
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

afterAll(async () => {
  const file = currentFile();
  const mine = noted.filter((entry) => entry.file === file);
  for (let i = noted.length - 1; i >= 0; i--) if (noted[i].file === file) noted.splice(i, 1);
  await Promise.all(mine.filter((entry) => isOpen(entry) && TRANSIENT.test(entry.client.options?.connectionName ?? '')).map((entry) => ended(entry.client, TRANSIENT_END_MS)));
  const open = mine.filter(isOpen);
  if (open.length > 0) {
    throw new Error(`${open.length} Redis client(s) left open by this file (disconnect them in afterAll/finally):\n${open.map((entry) => `  ${entry.client.status}: ${entry.madeAt}`).join('\n')}`);
  }
});
