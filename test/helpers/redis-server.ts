/**
 * A real redis-server on 127.0.0.1 for tests: a free port, no persistence.
 *
 *   const redis = await startRedis();   // redis.url = redis://127.0.0.1:<port>
 *   …
 *   await redis.stop();
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Socket } from 'node:net';
import { freePort } from './free-port.ts';

export interface RedisServer {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/**
 * freePort's port can be taken by another process before redis-server binds it; such a start is
 * tried again on a fresh port (a few times), any other failure is thrown at once.
 */
export async function startRedis(options: { startTimeoutMs?: number } = {}): Promise<RedisServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRedisOnce(await freePort(), options);
    } catch (error) {
      if (attempt >= 4 || !(error instanceof Error && /Address already in use/i.test(error.message))) throw error;
    }
  }
}

async function startRedisOnce(port: number, options: { startTimeoutMs?: number }): Promise<RedisServer> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const spawnError = new Promise<never>((_, reject) => {
    child.once('error', (error) =>
      reject(new Error(`cannot start redis-server (${error.message}); install it: apt-get install redis-server`)),
    );
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code} before answering PING:\n${output}`)));
  });
  const deadline = Date.now() + (options.startTimeoutMs ?? 10_000);
  try {
    await Promise.race([waitForOwnServer(port, child.pid!, deadline), spawnError]);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  spawnError.catch(() => undefined);
  return { url: `redis://127.0.0.1:${port}`, port, stop: () => stopChild(child) };
}

/**
 * Waits until the server on `port` is the one this call started (INFO's process_id): another test's
 * redis-server that bound the port first answers PING too, and would be handed out as this one.
 */
async function waitForOwnServer(port: number, pid: number, deadline: number): Promise<void> {
  for (;;) {
    const answering = await serverPid(port);
    if (answering === pid) return;
    if (answering !== null) throw new Error(`Address already in use: port ${port} is served by another redis-server (pid ${answering})`);
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer PING in time`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * One inline command over a raw socket (no client library: these probes run before a server is
 * known to be up): `read` is given the answer so far and returns the result once it can tell, or
 * undefined to wait for more; null when nothing answers within 500 ms.
 */
function ask<T>(port: number, command: string, read: (answer: string) => T | undefined): Promise<T | null> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let answer = '';
    const done = (result: T | null) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(500, () => done(null));
    socket.once('error', () => done(null));
    socket.on('data', (chunk) => {
      answer += chunk.toString();
      const result = read(answer);
      if (result !== undefined) done(result);
    });
    socket.connect(port, '127.0.0.1', () => socket.write(`${command}\r\n`));
  });
}

/** The process id of the redis-server answering on `port` (INFO server), or null if none answers. */
export function serverPid(port: number): Promise<number | null> {
  return ask(port, 'INFO server', (answer) => {
    const found = /process_id:(\d+)/.exec(answer);
    if (found) return Number(found[1]);
    return answer.startsWith('-') ? null : undefined;
  });
}

/** One PING: true when the server answers +PONG within 500 ms. */
export async function ping(port: number): Promise<boolean> {
  return (await ask(port, 'PING', (answer) => (answer.includes('\r\n') ? answer.startsWith('+PONG') : undefined))) === true;
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
