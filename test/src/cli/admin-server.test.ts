/**
 * `kvtier` admin commands as a spawned process against a running server
 * (embedded default, synthetic:tiny, temp data dir) after real traffic.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { BlockListing, OverviewResponse } from '../../../src/admin/index.ts';
import type { RetentionPolicyDoc } from '../../../src/kvtier/index.ts';
import { admin, chat, waitFor } from '../serve/admin-fixtures.ts';
import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from '../serve/server-fixture.ts';
import { expectOneLineError, kvtier } from './cli-runner.ts';

let server: TestServer;
let conn: string[];

beforeAll(async () => {
  server = await startTestServer();
  conn = ['--url', server.url, '--token', ADMIN_TOKEN];
  for (const key of [KEYS.alice, KEYS.bob]) {
    await chat(server.url, key, 'What is a KV cache?');
    await chat(server.url, key, 'What is a KV cache?');
  }
  await waitFor(async () => (await admin<BlockListing>(server.url, '/admin/blocks?tenant=bob')).body.matched > 0, 'bob blocks indexed');
}, 240_000);

afterAll(async () => {
  await server?.close();
});

describe('kvtier against a running server', () => {
  it('policy show / set / per-tenant override / reset, visible through the API', async () => {
    const shown = await kvtier(['policy', 'show', '--json', ...conn]);
    expect(shown.code).toBe(0);
    expect(Object.keys((JSON.parse(shown.stdout) as RetentionPolicyDoc).classes)).toEqual(['agent', 'chat']);

    const set = await kvtier(['policy', 'set', '--class', 'chat', '--ttl', '72h', '--quota', '500GiB', ...conn]);
    expect(set.stderr).toBe('');
    expect(set.stdout).toMatch(/class chat: ttl 3d, quota 500 GiB \(policy v\d+, applied\)/);
    const doc = (await admin<RetentionPolicyDoc>(server.url, '/admin/policy')).body;
    expect(doc.classes.chat).toEqual({ ttlMs: 72 * 3_600_000, quotaBytes: 500 * 2 ** 30 });

    const tenant = await kvtier(['policy', 'set', '--tenant', 'alice', '--class', 'agent', '--ttl', '90m', ...conn, '--json']);
    expect(tenant.code).toBe(0);
    expect(JSON.parse(tenant.stdout).policy.tenants.alice).toEqual({ ttlMs: { agent: 90 * 60_000 } });
    const human = await kvtier(['policy', 'show', ...conn]);
    expect(human.stdout).toMatch(/alice\s+agent=1h 30m/);

    const reset = await kvtier(['policy', 'reset', ...conn]);
    expect(reset.stdout).toMatch(/policy reset to the defaults/);
    const after = (await admin<RetentionPolicyDoc>(server.url, '/admin/policy')).body;
    expect(after.classes).toEqual({ agent: { ttlMs: 3 * 86_400_000 }, chat: { ttlMs: 7 * 86_400_000 } });
    expect(after.tenants).toEqual({});
  }, 240_000);

  it('stats --json is the overview the dashboard reads, with the traffic in it', async () => {
    const result = await kvtier(['stats', '--json', ...conn]);
    expect(result.code).toBe(0);
    const fromCli = JSON.parse(result.stdout) as OverviewResponse;
    const fromApi = (await admin<OverviewResponse>(server.url, '/admin/stats/overview')).body;
    expect(fromCli.overview.requests).toBeGreaterThanOrEqual(4);
    expect(fromCli.overview.tokens.hit).toBeGreaterThan(0);
    // No traffic in between: every request-derived figure is identical.
    for (const o of [fromCli.overview, fromApi.overview]) expect(o.tokens.hit + o.tokens.miss).toBe(o.tokens.prompt);
    expect(fromApi.overview.tokens).toEqual(fromCli.overview.tokens);
    expect(fromApi.overview.hitRate).toEqual(fromCli.overview.hitRate);
    expect(fromApi.overview.cost).toEqual(fromCli.overview.cost);
    expect(fromCli.overview.tenants.map((t) => t.tenant).sort()).toEqual(['alice', 'bob']);
    const human = await kvtier(['stats', ...conn]);
    expect(human.stdout).toMatch(/hit rate\s+\d+\.\d% of prompt tokens/);
  }, 240_000);

  it('ls, inspect, gc --dry-run, purge --tenant with progress, gc', async () => {
    const listed = await kvtier(['ls', '--tenant', 'bob', '--json', ...conn]);
    const listing = JSON.parse(listed.stdout) as BlockListing;
    expect(listing.blocks.length).toBeGreaterThan(0);
    expect(listing.blocks.every((b) => b.tenant === 'bob')).toBe(true);
    const table = await kvtier(['ls', '--class', 'chat', '--limit', '2', ...conn]);
    expect(table.stdout.split('\n')[0]).toMatch(/^key\s+kind\s+class\s+tenant\s+size/);

    const key = listing.blocks[0].key;
    const inspected = await kvtier(['inspect', key, ...conn]);
    expect(inspected.code).toBe(0);
    expect(inspected.stdout).toMatch(new RegExp(`block ${key}`));
    expect(inspected.stdout).toMatch(/tenant\s+bob/);
    expect(inspected.stdout).toMatch(/verified/);

    const dry = await kvtier(['gc', '--dry-run', ...conn]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/^gc would remove: expired 0 blocks/);

    const purged = await kvtier(['purge', '--tenant', 'bob', '--yes', ...conn]);
    expect(purged.code).toBe(0);
    expect(purged.stderr).toMatch(/^purge: \d+\/\d+ blocks/m);
    expect(purged.stdout).toMatch(new RegExp(`purged ${listing.matched} of ${listing.matched} matching blocks`));
    const afterPurge = await kvtier(['ls', '--tenant', 'bob', ...conn]);
    expect(afterPurge.stdout).toMatch(/^no blocks match/);
    const aliceLeft = JSON.parse((await kvtier(['ls', '--tenant', 'alice', '--json', ...conn])).stdout) as BlockListing;
    expect(aliceLeft.matched).toBeGreaterThan(0);

    const real = await kvtier(['gc', ...conn]);
    expect(real.code).toBe(0);
    expect(real.stdout).toMatch(/^gc removed: /);
    expect(real.stderr).toMatch(/^gc: /m);
  }, 240_000);

  it('every mistake is one line on stderr and a non-zero exit', async () => {
    const cases: Array<[string[], RegExp, number]> = [
      [['policy', 'set', '--class', 'nope', '--ttl', '1d', ...conn], /unknown class "nope"; known: agent, chat/, 1],
      [['policy', 'set', '--class', 'chat', '--ttl', '3x', ...conn], /--ttl 3x is not a duration/, 2],
      [['policy', 'set', '--class', 'chat', '--quota', '-5GiB', ...conn], /--quota -5GiB: a size cannot be negative/, 2],
      [['purge', '--tenant', 'alice', ...conn], /add --yes/, 2],
      [['purge', '--yes', ...conn], /say what to delete/, 2],
      [['ls', '--frob', ...conn], /unknown flag --frob/, 2],
      [['inspect', 'zz', ...conn], /not a block key/, 1],
      [['inspect', '0'.repeat(32), ...conn], /no block 0{32}/, 1],
      [['frobnicate'], /unknown command "frobnicate"/, 2],
      [['stats', '--url', server.url, '--token', 'wrong'], /refused the admin token/, 3],
      [['stats', '--url', server.url], /no admin token/, 3],
      [['stats', '--url', 'http://127.0.0.1:9', '--token', 'x'], /cannot reach the kvtier server at http:\/\/127\.0\.0\.1:9/, 3],
    ];
    const results = await Promise.all(cases.map(([args]) => kvtier(args)));
    results.forEach((result, i) => expectOneLineError(result, cases[i][1], cases[i][2]));
  }, 240_000);

  it('--help on every command', async () => {
    const commands = [['policy', 'show'], ['policy', 'set'], ['policy', 'reset'], ['stats'], ['ls'], ['inspect'], ['purge'], ['gc']];
    const results = await Promise.all(commands.map((c) => kvtier([...c, '--help'])));
    results.forEach((result, i) => {
      expect(result.code).toBe(0);
      expect(result.stdout).toContain(`kvtier ${commands[i].join(' ')} — `);
      expect(result.stdout).toContain('--url URL');
    });
  }, 240_000);
});
