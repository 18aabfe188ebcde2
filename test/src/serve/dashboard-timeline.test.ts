/**
 * The dashboard's timeline charts in real headless Chromium: for the 1 h,
 * 24 h and 7 d windows the x axis spans exactly that window (not just the
 * data there is), its labels are clock times or days that fit side by side,
 * and one request (a burst in one stats interval) is one visible point, not
 * a line rising from zero and falling back to it.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { chat } from './admin-fixtures.ts';
import { collectPageProblems, launchDashboardBrowser } from './dashboard-browser.ts';
import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';

let server: TestServer;
let browser: Browser;

beforeAll(async () => {
  server = await startTestServer();
  // One request: the recorder counts it in exactly one stats interval.
  await chat(server.url, KEYS.alice, 'What is a timeline?');
  browser = await launchDashboardBrowser();
}, 300_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

interface ChartState {
  xMin: number;
  xMax: number;
  labels: string[];
  /** Widest label and the plot's width, CSS px (the axis font). */
  labelWidth: number;
  plotWidth: number;
  miss: (number | null)[];
  pointIdxs: number[] | null;
}

async function chartState(page: Page, id: string): Promise<ChartState> {
  return page.evaluate((chartId) => {
    type Axis = { _values?: string[]; font?: [string] | string };
    type Chart = {
      scales: { x: { min: number; max: number } };
      axes: Axis[];
      data: (number | null)[][];
      bbox: { width: number };
      ctx: CanvasRenderingContext2D;
      series: { points: { filter: (u: unknown, i: number, show: boolean) => number[] | null } }[];
    };
    const u = (window as unknown as { kvtierCharts: Record<string, Chart> }).kvtierCharts[chartId];
    const labels = (u.axes[0]._values ?? []).map(String);
    const font = u.axes[0].font;
    u.ctx.save();
    u.ctx.font = Array.isArray(font) ? font[0] : (font ?? '12px system-ui');
    const labelWidth = Math.max(0, ...labels.map((l) => u.ctx.measureText(l).width)) / devicePixelRatio;
    u.ctx.restore();
    return {
      xMin: u.scales.x.min,
      xMax: u.scales.x.max,
      labels,
      labelWidth,
      plotWidth: u.bbox.width / devicePixelRatio,
      miss: u.data[2],
      pointIdxs: u.series[2].points.filter(u, 2, true),
    };
  }, id);
}

/** Pixels of the plot canvas close to `colour` (what the chart drew in that series' colour). */
async function pixelsOf(page: Page, chartId: string, [r, g, b]: [number, number, number]): Promise<number> {
  return page.evaluate(
    ([id, want]) => {
      const canvas = document.querySelector(`#${id} canvas`) as HTMLCanvasElement;
      const data = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
      let n = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3]! > 200 && Math.abs(data[i]! - want[0]) < 24 && Math.abs(data[i + 1]! - want[1]) < 24 && Math.abs(data[i + 2]! - want[2]) < 24) n++;
      }
      return n;
    },
    [chartId, [r, g, b]] as const,
  );
}

/** Selects a window and waits until the tokens chart has been redrawn for it. */
async function showWindow(page: Page, minutes: number): Promise<ChartState> {
  await page.selectOption('#window', String(minutes));
  await page.waitForFunction(
    (span) => {
      const range = document.querySelector('#chart-tokens')?.getAttribute('data-x-range')?.split(',').map(Number);
      return range !== undefined && Math.abs(range[1] - range[0] - span) < 1;
    },
    minutes * 60,
    { timeout: 60_000 },
  );
  return chartState(page, 'chart-tokens');
}

const CLOCK = /^\d\d:\d\d$/;
const DAY = /^(Sun|Mon|Tue|Wed|Thu|Fri|Sat) \d{1,2}$/;

function expectReadable(state: ChartState, label: RegExp, most: number): void {
  expect(state.labels.length).toBeGreaterThanOrEqual(3);
  expect(state.labels.length).toBeLessThanOrEqual(most);
  for (const text of state.labels) expect(text).toMatch(label);
  expect(new Set(state.labels).size).toBe(state.labels.length);
  // Side by side, each label with a gap: they never overlap.
  expect(state.labels.length * (state.labelWidth + 8)).toBeLessThan(state.plotWidth);
}

describe('dashboard timeline charts', () => {
  it('span the window asked for (1 h, 24 h, 7 d) with readable labels; one request is one point', async () => {
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1 });
    const problems = collectPageProblems(page, { httpErrors: true });
    await page.goto(`${server.url}/dashboard#token=${ADMIN_TOKEN}`);
    // The request's interval is charted once the recorder has flushed it.
    await page.waitForFunction(
      () => {
        const u = (window as unknown as { kvtierCharts?: Record<string, { data: (number | null)[][] }> }).kvtierCharts?.['chart-tokens'];
        return u !== undefined && (u.data[2] ?? []).some((v) => v !== null && v > 0);
      },
      undefined,
      { timeout: 120_000 },
    );

    const hour = await showWindow(page, 60);
    const now = Date.now() / 1000;
    expect(hour.xMax - hour.xMin).toBeCloseTo(3600, 0);
    expect(Math.abs(hour.xMax - now)).toBeLessThan(60);
    expectReadable(hour, CLOCK, 13);
    // The request is one value among gaps, drawn as a point; no line to zero on either side.
    const values = hour.miss.map((v, i) => [v, i] as const).filter(([v]) => v !== null);
    expect(values.length).toBe(1);
    expect(hour.pointIdxs).toEqual([values[0][1]]);
    const missPixels = await pixelsOf(page, 'chart-tokens', [0xff, 0x8a, 0x5b]);
    expect(missPixels).toBeGreaterThan(10); // the point is drawn
    expect(missPixels).toBeLessThan(200); // and no line: a 2 px line down to zero and back alone is > 250 px

    const day = await showWindow(page, 1440);
    expect(day.xMax - day.xMin).toBeCloseTo(86_400, 0);
    expectReadable(day, new RegExp(`${CLOCK.source}|${DAY.source}`), 13);

    const week = await showWindow(page, 10_080);
    expect(week.xMax - week.xMin).toBeCloseTo(7 * 86_400, 0);
    expectReadable(week, DAY, 8);
    expect(problems).toEqual([]);
    await page.close();
  }, 300_000);
});
