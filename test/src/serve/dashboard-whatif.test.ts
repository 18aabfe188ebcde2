/**
 * The dashboard's retention what-if panel in real headless Chromium, after
 * real traffic: every figure on the panel (a cell per class, TTL and field)
 * equals `kvtier stats --what-if --json` against the same server.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';

import { runAdminCommand } from '../../../src/cli/commands/index.ts';
import type { OverviewResponse } from '../../../src/admin/index.ts';
import type { WhatIf } from '../../../src/stats/index.ts';
import { admin, chat } from './admin-fixtures.ts';
import { collectPageProblems, launchDashboardBrowser } from './dashboard-browser.ts';
import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';

let server: TestServer;
let browser: Browser;

beforeAll(async () => {
  server = await startTestServer();
  const question = 'What does a retention what-if say about a one-hour TTL versus seven days?';
  for (let round = 0; round < 3; round++) {
    await chat(server.url, KEYS.alice, question, { trafficClass: 'chat' });
    await chat(server.url, KEYS.bob, question, { trafficClass: 'agent' });
  }
  browser = await launchDashboardBrowser();
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

it('the what-if panel shows, per class and TTL, the figures kvtier stats --what-if --json prints', async () => {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runAdminCommand(['stats', '--what-if', '--json', '--url', server.url, '--token', ADMIN_TOKEN], { out: (t) => void out.push(t), err: (t) => void err.push(t), env: {}, interactive: false });
  expect(code, err.join('')).toBe(0);
  const cli = JSON.parse(out.join('')) as WhatIf;
  // Every class of the policy has its six rows (5m … 7d, current). The repeats are served from the engine's retained
  // sequences (or blocks still being written) and still record their reuse gaps: seconds apart, so every TTL
  // row shows the two repeats' hit tokens, and the figures on the page are those, not zeros.
  expect(cli.classes.map((c) => c.trafficClass).sort()).toEqual(['agent', 'chat']);
  for (const c of cli.classes) {
    expect(c.rows.map((r) => r.ttl)).toEqual(['5m', '1h', '24h', '3d', '7d', 'current']);
    for (const r of c.rows) {
      expect(r.hitTokens, `${c.trafficClass} ${r.ttl}`).toBeGreaterThan(0);
      expect(r.savedUsd, `${c.trafficClass} ${r.ttl}`).toBeGreaterThan(0);
    }
  }

  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  const problems = collectPageProblems(page, { httpErrors: true });
  const after = (await admin<OverviewResponse>(server.url, '/admin/stats/overview')).body.generatedAt;
  await page.goto(`${server.url}/dashboard#token=${ADMIN_TOKEN}`);
  await page.waitForFunction((t) => Number(document.body.getAttribute('data-generated-at')) > t, after, { timeout: 120_000 });
  const shown = await page.evaluate(() => {
    const cells: Record<string, string> = {};
    for (const el of Array.from(document.querySelectorAll('[data-whatif]'))) cells[el.getAttribute('data-whatif')!] = el.getAttribute('data-value') ?? '';
    return cells;
  });
  const expected: Record<string, string> = {};
  for (const c of cli.classes) {
    for (const r of c.rows) {
      for (const field of ['hitTokens', 'savedUsd', 'storageByteDays', 'storageUsd', 'netUsd'] as const) expected[`${c.trafficClass}|${r.ttl}|${field}`] = String(r[field]);
    }
  }
  expect(shown).toEqual(expected);
  // Lower bounds are marked: a TTL past the class's TTL in force shows "≥".
  const agentCurrent = cli.classes.find((c) => c.trafficClass === 'agent')!.currentTtlMs!;
  if (agentCurrent < 7 * 86_400_000) expect(await page.textContent('[data-whatif="agent|7d|hitTokens"]')).toMatch(/^≥ /);
  expect(problems).toEqual([]);
  await page.close();
}, 300_000);
