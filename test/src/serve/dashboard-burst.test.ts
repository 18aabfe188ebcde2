/**
 * A short burst of traffic fills a single stats interval: the charts must
 * still show it (a lone value is drawn as a point), and the page loads with
 * no failed or 4xx/5xx request (favicon included).
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { admin, chat } from './admin-fixtures.ts';
import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';
import { collectPageProblems, launchDashboardBrowser } from './dashboard-browser.ts';

let server: TestServer;
let browser: Browser;

beforeAll(async () => {
  // A long step: the burst and the first poll land in the same interval.
  server = await startTestServer({}, { statsStepMs: 15_000 });
  await chat(server.url, KEYS.alice, 'What is a KV cache?');
  await chat(server.url, KEYS.alice, 'What is a KV cache?');
  browser = await launchDashboardBrowser();
}, 540_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

/** Pixels of the plot canvas close to any of `colours`: what the chart actually drew in those series' colours (one readback). */
async function pixelsOfColours(page: import('playwright-core').Page, chartId: string, colours: [number, number, number][]): Promise<number> {
  return page.evaluate(
    ([id, wanted]) => {
      const canvas = document.querySelector(`#${id} canvas`) as HTMLCanvasElement;
      const data = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
      let n = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3]! <= 200) continue;
        for (const [r, g, b] of wanted) if (Math.abs(data[i]! - r) < 24 && Math.abs(data[i + 1]! - g) < 24 && Math.abs(data[i + 2]! - b) < 24) { n++; break; }
      }
      return n;
    },
    [chartId, colours] as const,
  );
}

describe('dashboard after a short burst', () => {
  it('draws the single interval it has, with no failed request', async () => {
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1 });
    const problems = collectPageProblems(page, { httpErrors: true });
    await page.goto(`${server.url}/dashboard#token=${ADMIN_TOKEN}`);
    // The first interval closes one step after the server started; the burst is in it.
    await page.waitForFunction(() => Number(document.querySelector('#chart-hitrate')?.getAttribute('data-points') ?? 0) >= 1, undefined, { timeout: 120_000 });
    // Only the burst's interval has requests, so each hit-rate series is one value among gaps,
    // and a new store's first interval is the burst itself (its left edge is the zero it started from).
    type History = { series: { hitRateTokens: (number | null)[]; hitTokens: number[]; missTokens: number[] } };
    let history: History['series'] = { hitRateTokens: [], hitTokens: [], missTokens: [] };
    for (let i = 0; i < 480 && !history.hitRateTokens.some((v) => v !== null); i++) {
      if (i > 0) await page.waitForTimeout(250);
      history = (await admin<History>(server.url, '/admin/stats/history?minutes=60')).body.series;
    }
    // A new store's first interval holds the burst itself: its left edge is the zero the store started from.
    const overview = (await admin<{ overview: { tokens: { hit: number; miss: number } } }>(server.url, '/admin/stats/overview')).body.overview;
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    expect(sum(history.hitTokens) + sum(history.missTokens)).toBe(overview.tokens.hit + overview.tokens.miss);
    // The page's next poll draws it. With one step of 15 s the burst is almost always one interval,
    // one value among gaps, which a line alone cannot show; drawn either way.
    const seenAt = Date.now();
    await page.waitForFunction((after) => Number(document.body.getAttribute('data-generated-at')) > after, seenAt, { timeout: 120_000 });
    // Both series (by tokens #3ddc97, by requests #c792ea) draw; the later one may cover the other.
    const drawn = await pixelsOfColours(page, 'chart-hitrate', [[0x3d, 0xdc, 0x97], [0xc7, 0x92, 0xea]]);
    expect(drawn).toBeGreaterThan(10);
    // Let one more poll run, then no request of the page failed or answered 4xx/5xx.
    await page.waitForTimeout(500);
    expect(problems).toEqual([]);
    await page.close();
  }, 300_000);
});
