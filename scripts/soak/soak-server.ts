/**
 * The server a soak drives: a real `kvtier serve` (embedded default: engine
 * thread, fs storage, LMDB index) in its own process on a free loopback port,
 * so its RSS is the server's alone and not the load generator's.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export const SOAK_KEY = 'sk-soak';
/** The soak reads the tier's bounded caches per window from GET /admin/stats. */
export const SOAK_ADMIN_TOKEN = 'adm-soak';

/** What GET /admin/stats says about the server's bounded caches (embedded mode). */
export interface SoakCacheState {
  hotCache: { blocks: number; bytes: number; budgetBytes: number };
  /** Finished sequences kept in the engine's KV pool, and its free pages. */
  retained: number;
  pool: { freeBlocks: number; totalBlocks: number };
  /** Retention GC runs so far and the blocks they expired. */
  gc: { runs: number; expiredBlocks: number };
}

export interface SoakServer {
  url: string;
  pid: number;
  /** Resident set size of the server process in bytes (from /proc). */
  rssBytes(): number;
  /** RSS split: anonymous memory (heaps, buffers, the KV pool) and file-backed pages (LMDB maps of index/plane, code). */
  rssSplit(): { anonBytes: number; fileBytes: number };
  /** The last lines the server wrote (stdout and stderr: its startup line, crashes, --trace-gc). */
  stderr(): string;
  cacheState(): Promise<SoakCacheState>;
  /** Sets the chat and agent classes' retention TTL (PUT /admin/policy); GC then expires older blocks. */
  setBlockTtl(ttlMs: number): Promise<void>;
  /** One retention GC run (POST /admin/gc), as an operator's schedule would. */
  runGc(): Promise<void>;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** Anonymous and file-backed resident bytes of a process (from /proc/<pid>/status). */
export function rssSplitOf(pid: number): { anonBytes: number; fileBytes: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)\\s+kB`).exec(status)?.[1] ?? NaN) * 1024;
  return { anonBytes: kb('RssAnon'), fileBytes: kb('RssFile') + kb('RssShmem') };
}

export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+)\s+kB/.exec(status);
  if (!match) throw new Error(`no VmRSS for process ${pid}`);
  return Number(match[1]) * 1024;
}

export async function startSoakServer(options: { model?: string; extraEnv?: Record<string, string>; nodeArgs?: string[] } = {}): Promise<SoakServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-soak-'));
  const keysFile = join(dataDir, 'keys.txt');
  writeFileSync(keysFile, `${SOAK_KEY} soak\n`);
  const port = await freePort();
  const args = [...(options.nodeArgs ?? []), join(REPO, 'bin/kvtier.js'), 'serve', '--host', '127.0.0.1', '--port', String(port), '--model', options.model ?? 'synthetic:tiny', '--data-dir', dataDir, '--api-keys', keysFile, '--threads', '1'];
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: REPO,
    env: { ...process.env, KVTIER_STORAGE: `fs:${join(dataDir, 'blocks')}`, KVTIER_LOG_LEVEL: 'silent', KVTIER_ADMIN_TOKEN: SOAK_ADMIN_TOKEN, ...options.extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  const keep = (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-200_000);
  };
  child.stderr!.on('data', keep);
  child.stdout!.on('data', keep);
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`kvtier serve exited with ${child.exitCode} before listening:\n${stderr}`);
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`kvtier serve did not listen within 120 s:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return {
    url,
    pid: child.pid!,
    rssBytes: () => rssOf(child.pid!),
    rssSplit: () => rssSplitOf(child.pid!),
    stderr: () => stderr,
    async setBlockTtl(ttlMs: number) {
      const response = await fetch(`${url}/admin/policy`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${SOAK_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ classes: { agent: { ttlMs }, chat: { ttlMs } } }),
      });
      if (!response.ok) throw new Error(`PUT /admin/policy answered ${response.status}: ${await response.text()}`);
    },
    async runGc() {
      const response = await fetch(`${url}/admin/gc`, { method: 'POST', headers: { authorization: `Bearer ${SOAK_ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: '{}' });
      if (!response.ok) throw new Error(`POST /admin/gc answered ${response.status}: ${await response.text()}`);
      await response.text();
    },
    async cacheState() {
      const response = await fetch(`${url}/admin/stats`, { headers: { authorization: `Bearer ${SOAK_ADMIN_TOKEN}` } });
      if (!response.ok) throw new Error(`GET /admin/stats answered ${response.status}: ${await response.text()}`);
      type Gc = { runs: number; expired: { blocks: number } };
      const tier = ((await response.json()) as { tier: { cache: { hotCache: SoakCacheState['hotCache']; gc: Gc }; scheduler: { retained: number; pool: SoakCacheState['pool'] } } }).tier;
      return { hotCache: tier.cache.hotCache, retained: tier.scheduler.retained, pool: tier.scheduler.pool, gc: { runs: tier.cache.gc.runs, expiredBlocks: tier.cache.gc.expired.blocks } };
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(killer);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
