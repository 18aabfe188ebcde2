/**
 * `kvtier` admin commands on a bare data directory (no server), and a policy
 * edit made by one process reaching a second worker process through Redis,
 * applied by that worker's next GC.
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier, type GcReport } from '../../../src/kvtier/index.ts';
import type { BlockDetail, BlockListing, OverviewResponse } from '../../../src/admin/index.ts';
import { startRedis, type RedisServer } from '../../helpers/redis-server.ts';
import { LAYOUT, payloadFor, tempDir, tokensOf } from '../kvtier/fixtures.ts';
import { expectOneLineError, kvtier, ROOT } from './cli-runner.ts';
import { childArgs } from '../../helpers/ts-child.ts';

let dir: { path: string; remove: () => Promise<void> };
let dataDir: string;

/** Writes blocks the way a server would: tenant/class in the index, files in <dataDir>/blocks. */
async function seed(path: string, blocks: Array<{ tenant: string; trafficClass: string; seed: number; count: number }>): Promise<void> {
  const store = await FsBlobStore.open({ dir: join(path, 'blocks') });
  const tier = await KvTier.open({ dataDir: path, store, hotCacheBytes: 0 });
  for (const b of blocks) {
    const ns = tier.namespace({ modelFingerprint: 'fp-test', tenantSalt: b.tenant });
    const payloads = Array.from({ length: b.count }, (_, i) => payloadFor(b.seed, i));
    tier.store({ namespace: ns, tokens: tokensOf(64 * b.count, b.seed), payloads, layout: LAYOUT, tenant: b.tenant, trafficClass: b.trafficClass });
  }
  await tier.flush();
  await tier.close();
  await store.close();
}

beforeAll(async () => {
  dir = await tempDir('kvtier-cli-local-');
  dataDir = join(dir.path, 'data');
  mkdirSync(dataDir);
  await seed(dataDir, [
    { tenant: 'acme', trafficClass: 'chat', seed: 1, count: 3 },
    { tenant: 'acme', trafficClass: 'agent', seed: 2, count: 2 },
    { tenant: 'zeta', trafficClass: 'chat', seed: 3, count: 4 },
  ]);
}, 120_000);

afterAll(async () => {
  await dir?.remove();
});

describe('kvtier on a data directory', () => {
  it('policy, ls, inspect, stats, gc and purge without a server', async () => {
    const local = ['--data-dir', dataDir];
    const shown = await kvtier(['policy', 'show', ...local]);
    expect(shown.stdout).toMatch(/^agent\s+3d/m);
    const added = await kvtier(['policy', 'set', '--class', 'batch', '--ttl', '12h', '--add', ...local]);
    expect(added.stdout).toMatch(/class batch: ttl 12h/);
    const tenant = await kvtier(['policy', 'set', '--tenant', 'zeta', '--quota', '10MB', ...local]);
    expect(tenant.stdout).toMatch(/tenant zeta: class TTLs, quota 9\.54 MiB/);

    const all = JSON.parse((await kvtier(['ls', '--json', ...local])).stdout) as BlockListing;
    expect(all.matched).toBe(9);
    const acmeChat = JSON.parse((await kvtier(['ls', '--tenant', 'acme', '--class', 'chat', '--json', ...local])).stdout) as BlockListing;
    expect(acmeChat.blocks.map((b) => b.depth).sort()).toEqual([0, 1, 2]);

    const detail = JSON.parse((await kvtier(['inspect', acmeChat.blocks[0].key, '--json', ...local])).stdout) as BlockDetail;
    expect(detail.storage.verified).toBe(true);
    expect(detail.storage.header?.tokenCount).toBe(64);
    expect(detail.ttlMs).toBe(7 * 86_400_000);

    const stats = JSON.parse((await kvtier(['stats', '--json', ...local])).stdout) as OverviewResponse;
    expect(stats.overview.storage.blocks).toBe(9);
    expect(stats.overview.storage.byClass).toEqual({ chat: { blocks: 7, bytes: expect.any(Number) }, agent: { blocks: 2, bytes: expect.any(Number) } });

    // zeta's 4 blocks are ~65 KiB: a 30 KB tenant quota evicts its least recently used ones.
    await kvtier(['policy', 'set', '--tenant', 'zeta', '--quota', '30KB', ...local]);
    const dry = await kvtier(['gc', '--dry-run', '--json', ...local]);
    const dryReport = JSON.parse(dry.stdout) as GcReport;
    expect(dryReport.dryRun).toBe(true);
    expect(dryReport.removed.evicted.blocks).toBeGreaterThan(0);
    const real = await kvtier(['gc', ...local]);
    expect(real.stdout).toMatch(new RegExp(`^gc removed: expired 0 blocks \\(0 B\\), evicted ${dryReport.removed.evicted.blocks} blocks`));
    expect(real.stderr).toMatch(/^gc: (evict|sweep)/m);

    const purged = await kvtier(['purge', '--class', 'agent', '--yes', ...local]);
    expect(purged.stdout).toMatch(/^purged 2 of 2 matching blocks/);
    expect(purged.stderr).toMatch(/^purge: 2\/2 blocks/m);
    const after = JSON.parse((await kvtier(['stats', '--json', ...local])).stdout) as OverviewResponse;
    expect(after.overview.gc.evicted.blocks).toBe(dryReport.removed.evicted.blocks);
    expect(after.overview.gc.purged.blocks).toBe(2);
    expect(after.overview.storage.blocks).toBe(9 - 2 - dryReport.removed.evicted.blocks);

    const everything = await kvtier(['purge', '--all', '--yes', ...local]);
    expect(everything.stdout).toMatch(/^purged \d+ of \d+ matching blocks/);
    expect((await kvtier(['ls', ...local])).stdout).toMatch(/^no blocks match \(0 indexed/);

    const reset = await kvtier(['policy', 'reset', '--json', ...local]);
    expect(Object.keys(JSON.parse(reset.stdout).policy.classes)).toEqual(['agent', 'chat']);
  }, 300_000);

  it('bad input against a data directory: one line, non-zero exit', async () => {
    const local = ['--data-dir', dataDir];
    const cases: Array<[string[], RegExp, number]> = [
      [['ls', '--data-dir', join(dir.path, 'missing')], /no data directory at .*missing/, 2],
      [['policy', 'set', '--class', 'nope', '--ttl', '1d', ...local], /unknown class "nope"/, 1],
      [['policy', 'set', '--class', 'chat', '--ttl', '-3d', ...local], /cannot be negative/, 2],
      [['policy', 'set', '--class', 'chat', '--quota', '12 parsecs', ...local], /is not a size/, 2],
      [['ls', '--class', 'nope', ...local], /unknown class "nope"/, 1],
      [['ls', '--limit', 'lots', ...local], /--limit lots must be an integer/, 2],
      [['inspect', 'f'.repeat(32), ...local], /no block f{32}/, 1],
      [['purge', '--all', '--tenant', 'x', '--yes', ...local], /--all deletes everything/, 2],
      [['gc', '--dry-run', '--token', 't', ...local], /--token goes with --url/, 2],
      [['policy', 'frob', ...local], /unknown subcommand "frob"/, 2],
    ];
    const results = await Promise.all(cases.map(([args]) => kvtier(args)));
    results.forEach((result, i) => expectOneLineError(result, cases[i][1], cases[i][2]));
  }, 240_000);
});

describe('policy change across processes (Redis)', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('set by one process, observed by a second worker process within seconds and applied by its next GC', async () => {
    const storeDir = join(dir.path, 'shared-blocks');
    const workerDir = join(dir.path, 'worker');
    const cliDir = join(dir.path, 'cli');
    mkdirSync(cliDir, { recursive: true });
    const worker = spawn(process.execPath, [...childArgs(join(ROOT, 'test/src/cli/policy-gc-worker.ts')), storeDir, workerDir, redis.url, '2000'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = createInterface({ input: worker.stdout! })[Symbol.asyncIterator]();
    const next = async (): Promise<string> => {
      const { value, done } = await lines.next();
      if (done) throw new Error('the worker process exited early');
      return value as string;
    };
    try {
      const ready = (await next()).split(' ');
      expect(ready[0]).toBe('ready');
      const set = await kvtier(['policy', 'set', '--class', 'chat', '--ttl', '2s', '--data-dir', cliDir, '--redis-url', redis.url]);
      expect(set.stderr).toBe('');
      const version = Number(/policy v(\d+)/.exec(set.stdout)?.[1]);
      expect(version).toBeGreaterThan(Number(ready[2]));
      const observed = (await next()).split(' ');
      expect(observed).toEqual(['observed', String(version), '2000']);
      const gcLine = await next();
      const report = JSON.parse(gcLine.slice('gc '.length)) as GcReport;
      expect(report.policyVersion).toBe(version);
      expect(report.removed.expired.blocks).toBe(4);
      expect(report.remaining.blocks).toBe(0);
      // The CLI reads the same shared policy back.
      const shown = await kvtier(['policy', 'show', '--json', '--data-dir', cliDir, '--redis-url', redis.url]);
      expect(JSON.parse(shown.stdout).classes.chat.ttlMs).toBe(2000);
    } finally {
      worker.kill();
    }
  }, 240_000);
});
