/**
 * The request overhead of two checkouts, side by side: both stacks run at
 * once (each `kvtier serve`, and with KVT_AB_MODE=bullmq its redis-server and
 * one `kvtier worker`), and short chat requests alternate A, B, B, A, … so
 * both see the same load. Overhead = client wall time − x-kvtier-worker-ms,
 * as the e2e bench's overhead sample (bench/e2e-overhead.ts), from a client
 * in this process (not the server's, unlike the e2e bench).
 *
 * On this shared 2-core box one e2e run's overhead p50 moves ±0.5 ms between
 * runs of the same code; paired this way an A/A run differs by ~0.1 ms
 * (bench/RESULTS.md, "e2e overhead, seventh look"). Run it both ways round.
 *
 *   KVT_AB_MODE=inproc|bullmq KVT_AB_REQUESTS=300 npx tsx bench/overhead-ab.ts DIR_A DIR_B
 *
 * DIR_A/DIR_B: checkouts with node_modules and the native build (a git worktree
 * with node_modules linked and native/build copied does).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedis } from '../test/helpers/redis-server.ts';

const [dirA, dirB] = process.argv.slice(2).filter((a) => a !== '--');
if (!dirA || !dirB) {
  console.error('usage: KVT_AB_MODE=inproc|bullmq npx tsx bench/overhead-ab.ts DIR_A DIR_B');
  process.exit(2);
}
const N = Number(process.env.KVT_AB_REQUESTS ?? 300);
const bull = process.env.KVT_AB_MODE === 'bullmq';
const children: ChildProcess[] = [];
const cleanups: Array<() => Promise<void>> = [];

function waitFor(child: ChildProcess, re: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = '';
    child.stderr!.on('data', (c: Buffer) => { seen += c; const m = seen.match(re); if (m) resolve(m[1] ?? m[0]); });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${seen}`)));
  });
}

async function stack(dir: string): Promise<string> {
  const data = mkdtempSync(join(tmpdir(), 'abab-'));
  cleanups.push(async () => rmSync(data, { recursive: true, force: true }));
  const env: Record<string, string> = { ...process.env as Record<string, string>, KVTIER_MODEL: 'synthetic:small', KVTIER_DATA_DIR: data, KVTIER_LOG_LEVEL: 'warn' };
  if (bull) {
    const redis = await startRedis();
    cleanups.push(() => redis.stop());
    env.REDIS_URL = redis.url;
    env.KVTIER_STORAGE = `fs:${join(data, 'blocks')}`;
    const worker = spawn(process.execPath, ['bin/kvtier.js', 'worker'], { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(worker);
    await waitFor(worker, /kvtier worker .* ready/);
  }
  const api = spawn(process.execPath, ['bin/kvtier.js', 'serve', '--host', '127.0.0.1', '--port', '0'], { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(api);
  return waitFor(api, /on (http:\/\/[^ ]+) /);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
function post(url: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.request(`${url}/v1/chat/completions`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        JSON.parse(text);
        const wall = performance.now() - started;
        const workerMs = Number(res.headers['x-kvtier-worker-ms']);
        if (res.statusCode !== 200 || !Number.isFinite(workerMs)) return reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`));
        resolve(wall - workerMs);
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}
const p = (xs: number[], q: number) => { const s = [...xs].sort((a, b) => a - b); return +s[Math.min(s.length - 1, Math.floor((q / 100) * s.length))].toFixed(3); };
try {
  const urlA = await stack(dirA);
  const urlB = await stack(dirB);
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < N + 10; i++) {
    const body = JSON.stringify({ model: 'synthetic:small', messages: [{ role: 'user', content: `ping ${i % 4}` }], max_tokens: 1, temperature: 0 });
    const first = i % 2 === 0;
    const x = await post(first ? urlA : urlB, body);
    const y = await post(first ? urlB : urlA, body);
    if (i < 10) continue;
    (first ? a : b).push(x);
    (first ? b : a).push(y);
  }
  let wins = 0;
  for (let i = 0; i < a.length; i++) if (b[i] < a[i]) wins++;
  console.log(JSON.stringify({ mode: process.env.KVT_AB_MODE ?? 'inproc', n: a.length, a_p50: p(a, 50), b_p50: p(b, 50), a_p25: p(a, 25), b_p25: p(b, 25), a_p75: p(a, 75), b_p75: p(b, 75), b_faster_share: +(wins / a.length).toFixed(3) }));
} finally {
  agent.destroy();
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : null)));
  for (const c of cleanups) await c();
}
