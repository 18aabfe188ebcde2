/**
 * How the Ceph test cluster (ceph-s3.ts) waits for its daemons: each wait polls an observed state
 * (a port accepting, radosgw answering as S3) against one deadline and fails at once, with the
 * daemons' log tails, when a daemon exits.
 */
import type { ChildProcess } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';

async function waitUntil(what: string, ready: () => Promise<boolean>, deadline: number, daemons: ChildProcess[], dir: string): Promise<void> {
  for (;;) {
    const dead = daemons.find((daemon) => daemon.exitCode !== null || daemon.signalCode !== null);
    if (dead) throw new Error(`${dead.spawnargs[0]} exited (${dead.exitCode ?? dead.signalCode}) during start-up; logs in ${dir}`);
    if (await ready()) return;
    if (Date.now() > deadline) throw new Error(`${what} in time; logs in ${dir}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export function waitForPort(port: number, deadline: number, daemons: ChildProcess[], dir: string): Promise<void> {
  const accepts = () =>
    new Promise<boolean>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1' });
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => (socket.destroy(), resolve(false)));
    });
  return waitUntil(`nothing accepted on 127.0.0.1:${port}`, accepts, deadline, daemons, dir);
}

export function waitForHttp(endpoint: string, deadline: number, daemons: ChildProcess[], dir: string): Promise<void> {
  const answers = async () => {
    try {
      const response = await fetch(endpoint, { signal: AbortSignal.timeout(2000) });
      await response.arrayBuffer();
      // radosgw names every answer; another process that took the port first does not.
      if (!response.headers.has('x-amz-request-id')) throw new Error(`${endpoint} answered, but not as radosgw (no x-amz-request-id); another process holds the port`);
      return true;
    } catch (error) {
      if (error instanceof Error && error.message.includes('not as radosgw')) throw error;
      return false; // not listening yet (or still creating its pools)
    }
  };
  return waitUntil(`radosgw did not answer on ${endpoint}`, answers, deadline, daemons, dir);
}

export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, () =>
      new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
        const server = createServer();
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => resolve(server));
      }),
    ),
  );
  const ports = servers.map((server) => (server.address() as { port: number }).port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

export async function daemonLogTails(dir: string): Promise<string> {
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  const tails: string[] = [];
  for (const name of names.filter((n) => n.endsWith('.log'))) {
    const text = await fsp.readFile(join(dir, name), 'utf8').catch(() => '');
    tails.push(`--- ${name} (last lines)\n${text.split('\n').slice(-15).join('\n')}`);
  }
  return tails.join('\n');
}
