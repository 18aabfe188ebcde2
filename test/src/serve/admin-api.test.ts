/**
 * The admin HTTP API added by src/serve/admin: guarded by the admin token,
 * typed 400/404s, NDJSON progress for purge/GC, policy edits applied by the
 * serving tier, and figures that survive a server restart on the same data dir.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { HistoryResponse, OverviewResponse, PolicyEditResult } from '../../../src/admin/index.ts';
import { admin, chat } from './admin-fixtures.ts';
import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({}, { statsStepMs: 300 });
  await chat(server.url, KEYS.alice, 'Tell me about block keys');
  await chat(server.url, KEYS.alice, 'Tell me about block keys');
}, 120_000);

afterAll(async () => {
  await server?.close();
});

async function ndjson(path: string, body: unknown): Promise<Array<Record<string, unknown>>> {
  const response = await fetch(`${server.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(response.headers.get('content-type')).toMatch(/application\/x-ndjson/);
  return (await response.text())
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('admin API', () => {
  it('every added route needs the admin token', async () => {
    for (const path of ['/admin/stats/overview', '/admin/stats/history', '/admin/blocks', `/admin/blocks/${'0'.repeat(32)}`]) {
      const response = await admin<{ error: { code: string } }>(server.url, path, { token: 'wrong' });
      expect(`${path} ${response.status} ${response.body.error.code}`).toBe(`${path} 401 KVT_ERR_AUTH_ADMIN_TOKEN`);
    }
    const edit = await admin<{ error: { code: string } }>(server.url, '/admin/policy/edit', { method: 'POST', body: { op: 'reset' }, token: 'wrong' });
    expect(edit.status).toBe(401);
  });

  it('bad requests are typed 400/404s naming the field', async () => {
    const cases: Array<[string, { method?: string; body?: unknown }, number, string, string | null]> = [
      ['/admin/blocks?limit=0', {}, 400, 'KVT_ERR_ADMIN_BAD_REQUEST', 'limit'],
      ['/admin/blocks?class=nope', {}, 400, 'KVT_ERR_ADMIN_BAD_REQUEST', 'class'],
      ['/admin/blocks/xyz', {}, 400, 'KVT_ERR_ADMIN_BAD_REQUEST', 'key'],
      [`/admin/blocks/${'a'.repeat(32)}`, {}, 404, 'KVT_ERR_ADMIN_NOT_FOUND', 'key'],
      ['/admin/policy/edit', { method: 'POST', body: { op: 'setClass', name: 'chat', ttlMs: 5 } }, 400, 'KVT_ERR_ADMIN_BAD_REQUEST', 'ttlMs'],
      ['/admin/policy/edit', { method: 'POST', body: { op: 'explode' } }, 400, 'KVT_ERR_ADMIN_BAD_REQUEST', 'op'],
      ['/admin/policy/edit', { method: 'POST', body: { op: 'setClass', name: 'nope', ttlMs: 60_000 } }, 400, 'KVT_ERR_POLICY_UNKNOWN_CLASS', null],
      ['/admin/blocks/purge', { method: 'POST', body: {} }, 400, 'KVT_ERR_ADMIN_BAD_REQUEST', 'filter'],
      ['/admin/gc/run', { method: 'POST', body: { dryRun: 'yes' } }, 400, 'KVT_ERR_ADMIN_BAD_REQUEST', 'dryRun'],
    ];
    for (const [path, init, status, code, param] of cases) {
      const response = await admin<{ error: { code: string; param: string | null; message: string } }>(server.url, path, init);
      expect(`${path} ${response.status} ${response.body.error.code} ${response.body.error.param}`).toBe(`${path} ${status} ${code} ${param}`);
    }
  });

  it('a policy edit returns once the serving tier reads it', async () => {
    const edit = await admin<PolicyEditResult>(server.url, '/admin/policy/edit', { method: 'POST', body: { op: 'setTenant', tenant: 'alice', trafficClass: 'chat', ttlMs: 3_600_000, quotaBytes: 1 << 30 } });
    expect(edit.status).toBe(200);
    expect(edit.body.applied).toBe(true);
    const tierView = await admin<{ version: number; tenants: Record<string, unknown> }>(server.url, '/admin/policy');
    expect(tierView.body.version).toBe(edit.body.policy.version);
    expect(tierView.body.tenants.alice).toEqual({ ttlMs: { chat: 3_600_000 }, quotaBytes: 1 << 30 });
  });

  it('purge and GC stream progress, then one result line', async () => {
    const gc = await ndjson('/admin/gc/run', { dryRun: true });
    expect(gc.at(-1)).toMatchObject({ type: 'done', result: { dryRun: true } });
    expect(gc.slice(0, -1).every((line) => line.type === 'progress')).toBe(true);
    const purge = await ndjson('/admin/blocks/purge', { tenant: 'alice' });
    const done = purge.at(-1) as { type: string; result: { matched: number; removedBlocks: number } };
    expect(done.type).toBe('done');
    expect(done.result.matched).toBeGreaterThan(0);
    expect(done.result.removedBlocks).toBe(done.result.matched);
    expect(purge.some((line) => line.type === 'progress' && line.totalBlocks === done.result.matched)).toBe(true);
    const overview = (await admin<OverviewResponse>(server.url, '/admin/stats/overview')).body.overview;
    expect(overview.gc.purged.blocks).toBe(done.result.matched);
  });

  it('history series and totals survive a restart on the same data dir', async () => {
    const before = (await admin<OverviewResponse>(server.url, '/admin/stats/overview')).body.overview;
    expect(before.requests).toBe(2);
    const dataDir = server.dataDir;
    await server.close();
    server = await startTestServer({ dataDir }, { statsStepMs: 300 });
    await chat(server.url, KEYS.bob, 'Tell me about block keys');
    // The stats recorder counts a request when its generation's end event reaches it, which can be
    // after the client has the reply: on a loaded machine the first read can come before it.
    let after = (await admin<OverviewResponse>(server.url, '/admin/stats/overview')).body.overview;
    for (let i = 0; i < 100 && after.requests < 3; i++) {
      await new Promise((r) => setTimeout(r, 50));
      after = (await admin<OverviewResponse>(server.url, '/admin/stats/overview')).body.overview;
    }
    expect(after.requests).toBe(3);
    expect(after.tokens.hit).toBeGreaterThanOrEqual(before.tokens.hit);
    expect(after.tenants.map((t) => t.tenant).sort()).toEqual(['alice', 'bob']);
    const history = (await admin<HistoryResponse>(server.url, '/admin/stats/history?minutes=10')).body;
    expect(history.series.requests.reduce<number>((a, b) => a + (b ?? 0), 0)).toBeGreaterThanOrEqual(1);
    expect(history.series.t.length).toBeGreaterThanOrEqual(1);
  }, 120_000);
});
