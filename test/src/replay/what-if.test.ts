/**
 * The what-if on the traffic a replay fed in equals separate replays at each
 * shorter TTL: one replay at 7 d writes the tier's reuse-gap histogram into
 * the data dir's stats store; `kvtier stats --what-if --json --data-dir`
 * then says, per class, what 5 min and 1 h would have hit, and
 * separate replays at those TTLs hit exactly that.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect, it } from 'vitest';

import { runAdminCommand } from '../../../src/cli/commands/index.ts';
import { runReplayCommand } from '../../../src/cli/commands/replay-command.ts';
import type { ReplayReport } from '../../../src/replay/index.ts';
import type { WhatIf } from '../../../src/stats/index.ts';
import { CONVERSATION, writeGenericSubsample } from './trace-fixtures.ts';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t), env: {}, interactive: false } };
}

async function replay(path: string, ttl: string, dataDir?: string): Promise<ReplayReport> {
  const c = io();
  const code = await runReplayCommand([path, '--ttl', ttl, '--json', ...(dataDir ? ['--data-dir', dataDir] : [])], c.io);
  expect(code, c.err.join('')).toBe(0);
  return JSON.parse(c.out.join('')) as ReplayReport;
}

it('kvtier stats --what-if after a 7 d replay: per class, 5 min and 1 h equal separate replays at those TTLs (exact); current equals the replay', async () => {
  const path = join(mkdtempSync(join(tmpdir(), 'kvtier-whatif-')), 'sub.jsonl');
  writeGenericSubsample(CONVERSATION, 40, path);
  const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-whatif-data-'));
  const fed = await replay(path, '7d', dataDir);

  const c = io();
  expect(await runAdminCommand(['stats', '--what-if', '--json', '--data-dir', dataDir], c.io), c.err.join('')).toBe(0);
  const whatIf = JSON.parse(c.out.join('')) as WhatIf;
  const rowsOf = (trafficClass: string) => whatIf.classes.find((x) => x.trafficClass === trafficClass)!.rows;
  for (const trafficClass of ['agent', 'chat']) {
    const current = rowsOf(trafficClass).find((r) => r.ttl === 'current')!;
    expect(current.ttlMs).toBe(7 * 86_400_000);
    expect(current.hitTokens, trafficClass).toBe(fed.byClass[trafficClass].hitTokens);
  }
  const shorter: Array<[string, string]> = [['5m', '5m'], ['1h', '1h']];
  const hits: number[] = [];
  for (const [label, ttl] of shorter) {
    const separate = await replay(path, ttl);
    for (const trafficClass of ['agent', 'chat']) {
      const row = rowsOf(trafficClass).find((r) => r.ttl === label)!;
      expect(row.exact, `${trafficClass} ${label}`).toBe(true);
      expect(row.hitTokens, `${trafficClass} ${label}`).toBe(separate.byClass[trafficClass].hitTokens);
      expect(row.savedUsd).toBeCloseTo((row.hitTokens * (0.14 - 0.0028)) / 1e6, 9);
      expect(row.storageByteDays).toBeGreaterThan(0);
      expect(row.netUsd).toBeCloseTo(row.savedUsd - row.storageUsd, 9);
    }
    hits.push(separate.total.hitTokens);
  }
  // On this hour, 5 min keeps less than 1 h.
  expect(hits[0]).toBeLessThan(hits[1]);

  // The table form says which figures are lower bounds (none here: every row is within the 7 d in force).
  const text = io();
  expect(await runAdminCommand(['stats', '--what-if', '--data-dir', dataDir], text.io)).toBe(0);
  expect(text.out.join('')).toMatch(/class chat \(TTL in force 7d\)/);
}, 900_000);
