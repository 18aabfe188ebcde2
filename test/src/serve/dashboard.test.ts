/**
 * The dashboard in real headless Chromium after real traffic through the
 * API: charts have data, the figures on the page equal GET
 * /admin/stats/overview, no console errors. Saves test-artifacts/dashboard.png.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { OverviewResponse } from '../../../src/admin/index.ts';
import { ROOT } from '../cli/cli-runner.ts';
import { admin, chat } from './admin-fixtures.ts';
import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';
import { collectPageProblems, launchDashboardBrowser } from './dashboard-browser.ts';

let server: TestServer;
let browser: Browser;
let evictedByGc = 0;

/**
 * Requests that the stats recorder's own periodic flushes have stored, summed over the last minute's steps
 * (GET /admin/stats/history reads without flushing; the overview flushes first).
 */
async function flushedRequests(): Promise<number> {
  const { body } = await admin<{ series: { requests: (number | null)[] } }>(server.url, '/admin/stats/history?minutes=1');
  return body.series.requests.reduce<number>((sum, n) => sum + (n ?? 0), 0);
}

/** Until a periodic flush has stored `count` requests (polled): traffic sent after it lands in a later stats step. */
async function flushed(count: number): Promise<void> {
  for (let poll = 0; poll < 2000 && (await flushedRequests()) < count; poll++) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(await flushedRequests()).toBe(count);
}

beforeAll(async () => {
  server = await startTestServer({}, { statsStepMs: 400 });
  // Traffic over a few stats steps, so the charts get several intervals: repeats hit, new questions miss.
  const questions = ['What is a KV cache?', 'How long are blocks kept?', 'What is a KV cache?', 'Why 64 tokens per block?'];
  for (let round = 0; round < 4; round++) {
    for (const key of [KEYS.alice, KEYS.bob, KEYS.sharedOne]) await chat(server.url, key, questions[round], { trafficClass: round % 2 === 0 ? 'chat' : 'agent' });
    await chat(server.url, KEYS.alice, questions[0]);
    // Each round in its own stats step: the next round starts once a flush has taken this one.
    await flushed(4 * (round + 1));
    if (round === 2) {
      // A tight agent quota and a GC through the tier: evictions show on the page.
      await admin(server.url, '/admin/policy/edit', { method: 'POST', body: { op: 'setClass', name: 'agent', quotaBytes: 40_000 } });
      const gc = await admin<{ removed: { evicted: { blocks: number } } }>(server.url, '/admin/gc', { method: 'POST', body: {} });
      evictedByGc = gc.body.removed.evicted.blocks;
    }
  }
  browser = await launchDashboardBrowser();
}, 540_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe('dashboard', () => {
  it('asks for the token when it has none', async () => {
    const page = await browser.newPage();
    await page.goto(`${server.url}/dashboard`);
    await page.waitForSelector('#login:not([hidden])');
    expect(await page.textContent('#status')).toMatch(/admin token needed/);
    await page.close();
  });

  it('shows live charts and the same figures as /admin/stats/overview, with no console errors', async () => {
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1 });
    const problems = collectPageProblems(page, { httpErrors: true });
    await page.goto(`${server.url}/dashboard#token=${ADMIN_TOKEN}`);
    await page.waitForFunction(() => Number(document.querySelector('#chart-hitrate')?.getAttribute('data-points') ?? 0) >= 2, undefined, { timeout: 120_000 });

    // The figures the page shows after the last traffic equal the endpoint's (no requests in between).
    const api = (await admin<OverviewResponse>(server.url, '/admin/stats/overview')).body;
    await page.waitForFunction((after) => Number(document.body.getAttribute('data-generated-at')) > after, api.generatedAt, { timeout: 120_000 });
    const shown = await page.evaluate(() => {
      const out: Record<string, string> = {};
      for (const el of Array.from(document.querySelectorAll('[data-figure]'))) out[el.getAttribute('data-figure')!] = el.getAttribute('data-value') ?? '';
      return out;
    });
    const o = api.overview;
    expect(o.requests).toBe(16);
    expect(o.tokens.hit).toBeGreaterThan(0);
    expect(o.tokens.miss).toBeGreaterThan(0);
    expect(evictedByGc).toBeGreaterThan(0);
    expect(o.gc.evicted.blocks).toBe(evictedByGc);
    const expected: Record<string, unknown> = {
      'hitRate.byTokens': o.hitRate.byTokens,
      'hitRate.byRequests': o.hitRate.byRequests,
      requests: o.requests,
      'cost.usd': o.cost.usd,
      'cost.withoutCacheUsd': o.cost.withoutCacheUsd,
      'cost.savedUsd': o.cost.savedUsd,
      'tokens.hit': o.tokens.hit,
      'tokens.miss': o.tokens.miss,
      'tokens.output': o.tokens.output,
      'storage.blocks': o.storage.blocks,
      'storage.bytes': o.storage.bytes,
      'gc.evicted.blocks': evictedByGc,
      'pricing.hitPerMillion': 0.0028,
      'pricing.missPerMillion': 0.14,
      'pricing.outputPerMillion': 0.28,
      'engine.gpuHourUsd': 7,
    };
    for (const [figure, value] of Object.entries(expected)) expect(`${figure}=${shown[figure]}`).toBe(`${figure}=${String(value)}`);
    expect(await page.textContent('[data-figure="hitRate.byTokens"]')).toBe(`${(o.hitRate.byTokens * 100).toFixed(1)}%`);
    expect(await page.textContent('#pricing-source')).toMatch(/DeepSeek's published API price list, deepseek-v4-flash/);

    // Every chart drew intervals; the tenants and classes tables list the traffic.
    for (const id of ['chart-hitrate', 'chart-tokens', 'chart-cost', 'chart-storage', 'chart-gc']) {
      expect(Number(await page.getAttribute(`#${id}`, 'data-points'))).toBeGreaterThanOrEqual(2);
      expect(await page.locator(`#${id} canvas`).count()).toBe(1);
    }
    const tenants = await page.locator('#tenants tbody tr[data-tenant]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-tenant')));
    expect(tenants.sort()).toEqual(['alice', 'bob', 'team-one']);
    expect(await page.locator('#classes tbody tr').count()).toBe(2);

    mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true });
    await page.screenshot({ path: join(ROOT, 'test-artifacts/dashboard.png'), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  }, 300_000);
});
