/**
 * Thirty seconds of `npm run soak`: a real `kvtier serve` (embedded,
 * synthetic:tiny) under mixed valid and invalid traffic at concurrency,
 * streamed and not, with clients hanging up mid-stream. No answer may be a
 * 5xx (nor a broken connection), and the server's RSS after warm-up stays
 * bounded. The RSS bound is loose (a gross-leak guard: see bench/RESULTS.md
 * "soak" for the measured growth); the leaks it found have their own exact
 * tests (test/src/kvtier/write-behind-queue.test.ts, the response store's
 * byte bound in test/src/serve/response-store.test.ts). At the end, idle and
 * purged, every KV page is back in the engine's pool.
 */
import { afterAll, describe, expect, it } from 'vitest';

import { SOAK_ADMIN_TOKEN, startSoakServer, type SoakServer } from '../../scripts/soak/soak-server.ts';
import { runSoakTraffic } from '../../scripts/soak/soak-traffic.ts';

let server: SoakServer | undefined;
afterAll(async () => server?.stop());

describe('soak (30 s; npm run soak runs the long one)', () => {
  it('mixed traffic: no 5xx, server alive, RSS after warm-up bounded', async () => {
    // Bounded memories sized to fill within the first windows (as npm run soak does, smaller).
    server = await startSoakServer({ extraEnv: { KVTIER_HOT_CACHE_BYTES: String(16 << 20), KVTIER_RESPONSE_MEMORY_BYTES: String(2 << 20) } });
    const rss: number[] = [];
    const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 1_000_000);
    process.stdout.write(`[soak] seed ${seed}\n`);
    const run = await runSoakTraffic({
      url: server.url,
      model: 'synthetic:tiny',
      durationMs: 30_000,
      windowMs: 5_000,
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
    // No KV page is lost: once idle and with the retained sequences purged, every page of the pool is free again.
    const idle = await server.cacheState();
    expect(idle.hotCache.bytes).toBeLessThanOrEqual(idle.hotCache.budgetBytes);
    const purge = await fetch(`${server.url}/admin/blocks/purge`, { method: 'POST', headers: { authorization: `Bearer ${SOAK_ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ all: true }) });
    expect(purge.status).toBe(200);
    await purge.text();
    const purged = await server.cacheState();
    expect(purged.retained).toBe(0);
    expect(purged.pool.freeBlocks).toBe(purged.pool.totalBlocks);
  }, 180_000);
});
