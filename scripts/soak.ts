/**
 * npm run soak -- [--minutes N] [--window-s S] [--concurrency C] [--seed X] [--model synthetic:tiny]
 *                 [--hot-cache-mb 64] [--response-memory-mb 8] [--min-warmup-s 120] [--block-ttl-s 60] [--gc-s 15]
 *
 * Starts a real `kvtier serve` on a free port, drives mixed valid and invalid
 * traffic at concurrency (scripts/soak/soak-traffic.ts) and prints one line
 * per window: requests, p50/p95 latency, status classes, 5xx, server RSS and
 * the hot cache's fill. The server's bounded memories are sized so they fill
 * within the warm-up (scripts/soak/soak-warmup.ts says which and how the end
 * of the warm-up is found); RSS growth is reported from there. Ends with a
 * JSON summary; exits 1 on any 5xx. Retention is shortened (blocks and stored
 * responses live --block-ttl-s, POST /admin/gc every --gc-s: embedded mode's
 * own GC timer runs at KVTIER_GC_INTERVAL_MS, 1 h by default) so the index and storage reach a steady
 * size within the run instead of growing for days' TTL.
 */
import { loadavg } from 'node:os';

import { startSoakServer, type SoakCacheState } from './soak/soak-server.ts';
import { runSoakTraffic } from './soak/soak-traffic.ts';
import { warmupEnd, type WarmupWindow } from './soak/soak-warmup.ts';

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1]! : fallback;
}

const minutes = Number(flag('minutes', '1'));
const windowMs = Number(flag('window-s', '10')) * 1000;
const concurrency = Number(flag('concurrency', '8'));
const seed = Number(flag('seed', String(Date.now() % 1_000_000)));
const model = flag('model', 'synthetic:tiny');
const hotCacheMiB = Number(flag('hot-cache-mb', '64'));
const responseMemoryMiB = Number(flag('response-memory-mb', '8'));
const blockTtlS = Number(flag('block-ttl-s', '60'));
const gcS = Number(flag('gc-s', '15'));
// At least two minutes (a fifth of a shorter run): the V8 heaps and the response memory settle.
const minWarmupMs = Number(flag('min-warmup-s', String(Math.min(120, (minutes * 60) / 5)))) * 1000;
const mb = (bytes: number) => Math.round(bytes / 1e6);
const pct = (end: number, from: number) => Math.round(((end - from) / from) * 1000) / 10;
const load = () => loadavg().map((l) => Math.round(l * 10) / 10);

const server = await startSoakServer({
  model,
  extraEnv: { KVTIER_HOT_CACHE_BYTES: String(hotCacheMiB * 1024 * 1024), KVTIER_RESPONSE_MEMORY_BYTES: String(responseMemoryMiB * 1024 * 1024) },
});
await server.setBlockTtl(blockTtlS * 1000);
const rssStart = server.rssBytes();
const loadStart = load();
process.stdout.write(
  `soak: ${model}, ${minutes} min, window ${windowMs / 1000} s, concurrency ${concurrency}, seed ${seed}, server pid ${server.pid}, RSS start ${mb(rssStart)} MB, load ${loadStart.join(' ')}\n` +
    `bounded memories sized to fill in the warm-up (≥ ${minWarmupMs / 1000} s, until the hot cache is full): hot cache ${hotCacheMiB} MiB, stored responses ${responseMemoryMiB} MiB; blocks and responses live ${blockTtlS} s, GC every ${gcS} s\n`,
);
const rssByWindow: number[] = [];
const anonByWindow: number[] = [];
const fileByWindow: number[] = [];
const warmup: WarmupWindow[] = [];
const started = Date.now();
// The last window's line (it awaits the server's stats) is printed before the summary.
let lastWindow: Promise<void> = Promise.resolve();
let gcFailures = 0;
// One GC at a time: a run that takes longer than --gc-s delays the next instead of queueing more behind it.
let gcRunning = false;
const gcTimer = setInterval(() => {
  if (gcRunning) return;
  gcRunning = true;
  server
    .runGc()
    .catch((error: Error) => {
      gcFailures++;
      process.stdout.write(`  gc: ${error.message}\n`);
    })
    .finally(() => (gcRunning = false));
}, gcS * 1000);
try {
  const run = await runSoakTraffic({
    url: server.url,
    model,
    durationMs: minutes * 60_000,
    windowMs,
    concurrency,
    seed,
    onWindow: (w) => {
      lastWindow = (async () => {
        const atMs = Date.now() - started;
        const rss = server.rssBytes();
        rssByWindow.push(rss);
        const split = server.rssSplit();
        anonByWindow.push(split.anonBytes);
        fileByWindow.push(split.fileBytes);
        const caches: SoakCacheState | null = await server.cacheState().catch(() => null);
        warmup.push({ atMs, hotBytes: caches?.hotCache.bytes ?? 0, hotBudgetBytes: caches?.hotCache.budgetBytes ?? Infinity });
        const classes = Object.entries(w.byClass).map(([k, v]) => `${k}=${v}`).join(' ');
        const hot = caches ? `hot ${mb(caches.hotCache.bytes)}/${mb(caches.hotCache.budgetBytes)} MB  retained ${caches.retained}  pool free ${caches.pool.freeBlocks}/${caches.pool.totalBlocks}  gc ${caches.gc.runs} runs, ${caches.gc.expiredBlocks} expired` : 'caches ?';
        process.stdout.write(`window ${String(w.window).padStart(3)}: ${String(w.requests).padStart(4)} req  p50 ${String(w.p50Ms).padStart(5)} ms  p95 ${String(w.p95Ms).padStart(5)} ms  ${classes}  disconnects=${w.disconnects}  5xx=${w.fiveXx}  RSS ${mb(rss)} MB (anon ${mb(split.anonBytes)}, file ${mb(split.fileBytes)})  ${hot}\n`);
        for (const sample of w.fiveXxSamples) process.stdout.write(`  5xx: ${sample}\n`);
      })();
    },
  });
  await lastWindow;
  const rssEnd = server.rssBytes();
  const splitEnd = server.rssSplit();
  const warmEnd = warmupEnd(warmup.slice(0, rssByWindow.length), minWarmupMs);
  if (warmEnd === null) process.stdout.write(`the hot cache did not fill after ${minWarmupMs / 1000} s: the growth below includes its filling\n`);
  const warmAt = warmEnd ?? Math.max(0, warmup.findIndex((w) => w.atMs >= minWarmupMs));
  const warm = rssByWindow[warmAt] ?? rssStart;
  const afterWarm = rssByWindow.slice(warmAt);
  const summary = {
    seed,
    minutes,
    requests: run.totalRequests,
    fiveXx: run.totalFiveXx,
    hotCacheMiB,
    responseMemoryMiB,
    blockTtlS,
    gcS,
    gcFailures,
    warmupEndsAtS: Math.round((warmup[warmAt]?.atMs ?? 0) / 1000),
    hotCacheFull: warmEnd !== null,
    rssStartMB: mb(rssStart),
    rssAfterWarmupMB: mb(warm),
    rssMaxAfterWarmupMB: mb(Math.max(warm, ...afterWarm)),
    rssEndMB: mb(rssEnd),
    growthAfterWarmupPct: pct(rssEnd, warm),
    // Anonymous memory (heaps, buffers, KV pool) and file-backed pages (the LMDB maps grow with the index: every block stored).
    anonAfterWarmupMB: mb(anonByWindow[warmAt] ?? 0),
    anonEndMB: mb(splitEnd.anonBytes),
    anonGrowthAfterWarmupPct: pct(splitEnd.anonBytes, anonByWindow[warmAt] ?? splitEnd.anonBytes),
    fileAfterWarmupMB: mb(fileByWindow[warmAt] ?? 0),
    fileEndMB: mb(splitEnd.fileBytes),
    loadStart,
    loadEnd: load(),
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  if (run.totalFiveXx > 0) process.exitCode = 1;
} finally {
  clearInterval(gcTimer);
  await server.stop();
}
