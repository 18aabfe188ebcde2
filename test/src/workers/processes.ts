/**
 * Real processes for the distributed tests: a redis-server that can be
 * stopped and started again on the same port, and `kvtier worker` processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../helpers/free-port.ts';
export { freePort };

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');

export class RedisProcess {
  private child: ChildProcess | null = null;
  private started = false;
  constructor(private currentPort: number) {}

  /** The port given, or a fresh one if that was taken before the first start bound it. */
  get port(): number {
    return this.currentPort;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.currentPort}`;
  }

  /**
   * The constructor's port was free when freePort() checked it; another process can bind it before
   * redis-server does. The first start then moves to a fresh port (read `url` after start); a restart
   * keeps its port, as a restarted server must.
   */
  async start(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const child = spawn('redis-server', ['--port', String(this.currentPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
      this.child = child;
      try {
        await waitForLine(child, /Ready to accept connections/, 10_000, 'redis-server');
        this.started = true;
        return;
      } catch (error) {
        if (this.started || attempt >= 4 || !/Address already in use/i.test((error as Error).message)) throw error;
        this.currentPort = await freePort();
      }
    }
  }

  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (child && child.exitCode === null) await killAndWait(child, 'SIGTERM');
  }
}

export interface WorkerProcess {
  child: ChildProcess;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export async function startWorker(env: Record<string, string>): Promise<WorkerProcess> {
  // bin/kvtier.js runs the CLI in its own process (tsx's CLI would put a wrapper
  // process in between, and a SIGKILL to the wrapper leaves the worker running).
  const child = spawn(process.execPath, [join(ROOT, 'bin/kvtier.js'), 'worker'], {
    cwd: ROOT,
    // The tiny test model prefills a block faster than a loaded machine reads one, so the default
    // fetch-or-recompute would (rightly) recompute hits; these tests claim loads. prefill-scheduler.test covers auto.
    env: { ...process.env, KVTIER_THREADS: '1', KVTIER_JOB_LOCK_MS: '2000', KVTIER_FETCH: 'load', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
  // An upper bound only (the ready line ends the wait): several processes may start at once on a loaded machine.
  await waitForLine(child, /kvtier worker .* ready/, 180_000, 'kvtier worker');
  return { child, output: () => output, stop: (signal = 'SIGTERM') => killAndWait(child, signal) };
}

function waitForLine(child: ChildProcess, pattern: RegExp, timeoutMs: number, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`${what} did not get ready within ${timeoutMs} ms:\n${seen}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      seen += chunk.toString();
      if (pattern.test(seen)) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.stderr?.off('data', onData);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code} before it was ready:\n${seen}`));
    });
  });
}

function killAndWait(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}
