/**
 * `kvtier replay` through the real tier (fs + LMDB, simulated prefill, time
 * compressed with an injected clock), checked against the definition
 * computed in trace-fixtures.ts:
 *
 *   - the whole conversation trace: the replay's ideal (an infinite cache)
 *     equals the definition with no TTL, request by request;
 *   - with no TTL limit the tier's hits equal the ideal exactly (infinite
 *     quota), on the conversation trace's first 1,500 requests;
 *   - TTLs 1 min, 5 min, 1 h and none on a subsample spanning the hour:
 *     each equals the definition at that TTL, request by request, and the
 *     sweep is monotone;
 *   - the CLI prints the same figures with --json.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { runReplayCommand } from '../../../src/cli/commands/replay-command.ts';
import { IdealCache, readTrace, runReplay, TierTarget, type ReplayReport } from '../../../src/replay/index.ts';
import { CONVERSATION, definitionHits, fullBlocks, rawTrace, writeGenericSubsample } from './trace-fixtures.ts';

const sum = (xs: ArrayLike<number>) => Array.from(xs).reduce((a, b) => a + b, 0);

async function replayThroughTier(
  path: string,
  ttlMs: number | undefined,
  limit?: number,
  nodeIndex?: 'lmdb' | 'plane',
): Promise<{ hits: number[]; hitTokens: number; idealHitTokens: number; byClass: Record<string, { hitTokens: number }> }> {
  const trace = readTrace(path, { limit });
  const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-replay-test-'));
  // The plane-index runs keep blocks in a segment store (the bench's headline setup); the others one file per block.
  const storage = nodeIndex === 'plane' ? `segment:${join(dataDir, 'segments')}` : undefined;
  const target = await TierTarget.open({ dataDir, storage, blockTokens: 512, ttlMs, classes: [...new Set(trace.requests.map((r) => r.trafficClass))], nodeIndex });
  try {
    const outcome = await runReplay(trace, target, { sampleEveryMs: 0 });
    return { hits: Array.from(outcome.hitBlocks), hitTokens: outcome.total.hitTokens, idealHitTokens: outcome.total.idealHitTokens, byClass: outcome.byClass };
  } finally {
    await target.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

describe('replay against the definition', () => {
  it('the whole conversation trace: the ideal (infinite cache) equals the definition request by request', () => {
    const raw = rawTrace(CONVERSATION);
    const expected = definitionHits(raw.map((r) => ({ at: r.timestamp, blocks: fullBlocks(r) })));
    const trace = readTrace(CONVERSATION);
    expect(trace.requests).toHaveLength(12_031);
    const ideal = new IdealCache();
    const got = trace.requests.map((r) => ideal.serve(r));
    expect(got).toEqual(expected);
    expect(sum(expected)).toBeGreaterThan(0);
    // CPU alone (~10 s quiet); the bound only catches a hang: beside the full suite on 2 cores it took 66 s.
  }, 300_000);

  // Both node index kinds (node-index.ts): the tier's own LMDB index, and the embedded plane's records read directly.
  for (const nodeIndex of ['lmdb', 'plane'] as const) {
  it(`no TTL limit, through fs + LMDB (node index: ${nodeIndex}): hit tokens equal the ideal exactly (first 1,500 conversation requests)`, async () => {
    const limit = 1500;
    const raw = rawTrace(CONVERSATION).slice(0, limit);
    const expected = definitionHits(raw.map((r) => ({ at: r.timestamp, blocks: fullBlocks(r) })));
    const run = await replayThroughTier(CONVERSATION, 3650 * 86_400_000, limit, nodeIndex);
    expect(run.hits).toEqual(expected);
    expect(run.hitTokens).toBe(sum(expected) * 512);
    expect(run.hitTokens).toBe(run.idealHitTokens);
  }, 600_000);

  it(`TTLs 1 min, 5 min, 1 h, none over the hour (node index: ${nodeIndex}; every 20th request, generic form, two classes): each equals the definition; the sweep is monotone`, async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'kvtier-replay-generic-')), 'sub.jsonl');
    const requests = writeGenericSubsample(CONVERSATION, 20, path);
    const totals: number[] = [];
    for (const ttlMs of [60_000, 300_000, 3_600_000, 3650 * 86_400_000]) {
      const expected = definitionHits(requests, ttlMs);
      const run = await replayThroughTier(path, ttlMs, undefined, nodeIndex);
      expect(run.hits, `TTL ${ttlMs} ms`).toEqual(expected);
      // Per class too: each request's hit counts in its own class.
      const chat = expected.reduce((acc, hit, i) => acc + (requests[i].trafficClass === 'chat' ? hit : 0), 0);
      expect(run.byClass.chat.hitTokens).toBe(chat * 512);
      expect(run.byClass.agent.hitTokens).toBe((sum(expected) - chat) * 512);
      totals.push(run.hitTokens);
    }
    for (let i = 1; i < totals.length; i++) expect(totals[i]).toBeGreaterThanOrEqual(totals[i - 1]);
    // The TTLs matter on this trace: 1 min keeps less than 1 h.
    expect(totals[0]).toBeLessThan(totals[2]);
  }, 900_000);
  }
});

describe('kvtier replay (the command)', () => {
  it('--json: per class and total next to the ideal, dollars, GPU-seconds, per hour; a bad flag is one line and exit 2', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const io = { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t), env: {}, interactive: false };
    const code = await runReplayCommand([CONVERSATION, '--limit', '300', '--ttl', '5m', '--json', '--prefill-tokens-per-s', '5000'], io);
    expect(code, err.join('')).toBe(0);
    const report = JSON.parse(out.join('')) as ReplayReport;
    const raw = rawTrace(CONVERSATION).slice(0, 300);
    const expected = sum(definitionHits(raw.map((r) => ({ at: r.timestamp, blocks: fullBlocks(r) })), 300_000)) * 512;
    expect(report.total.hitTokens).toBe(expected);
    expect(report.byClass.chat.hitTokens).toBe(expected);
    expect(report.total.inputTokens).toBe(sum(raw.map((r) => r.input_length)));
    expect(report.total.idealHitTokens).toBeGreaterThanOrEqual(report.total.hitTokens);
    expect(report.ttlMsByClass).toEqual({ chat: 300_000 });
    const input = report.total.inputTokens;
    const output = sum(raw.map((r) => r.output_length));
    expect(report.total.usdNoCache).toBeCloseTo((input * 0.14 + output * 0.28) / 1e6, 9);
    expect(report.total.usd).toBeCloseTo((expected * 0.0028 + (input - expected) * 0.14 + output * 0.28) / 1e6, 9);
    expect(report.total.gpuSecondsSaved).toBeCloseTo(expected / 5000, 9);
    expect(report.byHour).toHaveLength(1);
    expect(report.byHour[0].hitTokens).toBe(expected);
    expect(report.stored.peakBytes).toBeGreaterThan(0);

    // The default node index here is the embedded plane's records; the tier's own LMDB index gives the same report.
    out.length = 0;
    expect(await runReplayCommand([CONVERSATION, '--limit', '300', '--ttl', '5m', '--json', '--prefill-tokens-per-s', '5000', '--node-index', 'lmdb'], io), err.join('')).toBe(0);
    const onLmdb = JSON.parse(out.join('')) as ReplayReport;
    expect(onLmdb.total).toEqual(report.total);
    expect(onLmdb.stored).toEqual(report.stored);

    for (const badArgs of [['--ttl', 'soon'], ['--node-index', 'memory']]) {
      const bad: string[] = [];
      const badCode = await runReplayCommand([CONVERSATION, ...badArgs], { ...io, err: (t: string) => void bad.push(t) });
      expect(badCode, badArgs.join(' ')).toBe(2);
      expect(bad.join('').trim().split('\n')).toHaveLength(1);
    }
  }, 300_000);
});
