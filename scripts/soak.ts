/**
 * npm run soak -- [--minutes N] [--window-s S] [--concurrency C] [--seed X] [--model synthetic:tiny]
 *
 * Starts a real `kvtier serve` on a free port, drives mixed valid and invalid
 * traffic at concurrency (scripts/soak/soak-traffic.ts) and prints one line
 * per window: requests, p50/p95 latency, status classes, 5xx, server RSS.
 * Ends with a JSON summary; exits 1 on any 5xx.
 */
import { startSoakServer } from './soak/soak-server.ts';
import { runSoakTraffic } from './soak/soak-traffic.ts';

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1]! : fallback;
}

const minutes = Number(flag('minutes', '1'));
const windowMs = Number(flag('window-s', '10')) * 1000;
const concurrency = Number(flag('concurrency', '8'));
const seed = Number(flag('seed', String(Date.now() % 1_000_000)));
const model = flag('model', 'synthetic:tiny');
const mb = (bytes: number) => Math.round(bytes / 1e6);

const server = await startSoakServer({ model });
const rssStart = server.rssBytes();
process.stdout.write(`soak: ${model}, ${minutes} min, window ${windowMs / 1000} s, concurrency ${concurrency}, seed ${seed}, server pid ${server.pid}, RSS start ${mb(rssStart)} MB\n`);
const rssByWindow: number[] = [];
try {
  const run = await runSoakTraffic({
    url: server.url,
    model,
    durationMs: minutes * 60_000,
    windowMs,
    concurrency,
    seed,
    onWindow: (w) => {
      const rss = server.rssBytes();
      rssByWindow.push(rss);
      const classes = Object.entries(w.byClass).map(([k, v]) => `${k}=${v}`).join(' ');
      process.stdout.write(`window ${String(w.window).padStart(3)}: ${String(w.requests).padStart(4)} req  p50 ${String(w.p50Ms).padStart(5)} ms  p95 ${String(w.p95Ms).padStart(5)} ms  ${classes}  disconnects=${w.disconnects}  5xx=${w.fiveXx}  RSS ${mb(rss)} MB\n`);
      for (const sample of w.fiveXxSamples) process.stdout.write(`  5xx: ${sample}\n`);
    },
  });
  const rssEnd = server.rssBytes();
  // Warm-up: the first fifth of the run (at least one window) fills caches, pools and the JIT.
  const warm = rssByWindow[Math.max(0, Math.floor(rssByWindow.length / 5) - 1)] ?? rssStart;
  const summary = {
    seed,
    minutes,
    requests: run.totalRequests,
    fiveXx: run.totalFiveXx,
    rssStartMB: mb(rssStart),
    rssAfterWarmupMB: mb(warm),
    rssEndMB: mb(rssEnd),
    growthAfterWarmupPct: Math.round(((rssEnd - warm) / warm) * 1000) / 10,
  };
  process.stdout.write(JSON.stringify(summary) + '\n');
  if (run.totalFiveXx > 0) process.exitCode = 1;
} finally {
  await server.stop();
}
