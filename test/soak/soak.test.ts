/**
 * One minute of `npm run soak`: a real `kvtier serve` (embedded,
 * synthetic:tiny) under mixed valid and invalid traffic at concurrency,
 * streamed and not, with clients hanging up mid-stream. No answer may be a
 * 5xx (nor a broken connection), and the server's RSS after warm-up stays
 * bounded. The RSS bound is loose (a gross-leak guard: see bench/RESULTS.md
 * "soak" for the measured growth); the retained-payload leak it was written
 * for has its own exact test (test/src/kvtier/write-behind-queue.test.ts).
 */
import { afterAll, describe, expect, it } from 'vitest';

import { startSoakServer, type SoakServer } from '../../scripts/soak/soak-server.ts';
import { runSoakTraffic } from '../../scripts/soak/soak-traffic.ts';

let server: SoakServer | undefined;
afterAll(async () => server?.stop());

describe('soak (one minute)', () => {
  it('mixed traffic: no 5xx, server alive, RSS after warm-up bounded', async () => {
    server = await startSoakServer();
    const rss: number[] = [];
    const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 1_000_000);
    process.stdout.write(`[soak] seed ${seed}\n`);
    const run = await runSoakTraffic({
      url: server.url,
      model: 'synthetic:tiny',
      durationMs: 60_000,
      windowMs: 10_000,
      concurrency: 6,
      seed,
      onWindow: (w) => {
        rss.push(server!.rssBytes());
        process.stdout.write(`[soak] window ${w.window}: ${w.requests} req p50 ${w.p50Ms} ms p95 ${w.p95Ms} ms 5xx ${w.fiveXx} RSS ${Math.round(rss.at(-1)! / 1e6)} MB\n`);
      },
    });
    expect(run.windows.flatMap((w) => w.fiveXxSamples)).toEqual([]);
    expect(run.totalFiveXx).toBe(0);
    expect(run.totalRequests).toBeGreaterThan(50);
    // Both kinds of traffic ran: successes and refusals.
    const classes = run.windows.reduce<Record<string, number>>((acc, w) => {
      for (const [k, v] of Object.entries(w.byClass)) acc[k] = (acc[k] ?? 0) + v;
      return acc;
    }, {});
    expect(classes['2xx']).toBeGreaterThan(0);
    expect(classes['4xx']).toBeGreaterThan(0);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    const afterWarmup = rss[1] ?? rss[0]!;
    expect(rss.at(-1)!).toBeLessThan(afterWarmup * 2.5);
  }, 180_000);
});
