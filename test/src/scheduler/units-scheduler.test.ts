/**
 * Prefix units on the worker's scheduler (src/scheduler/units.ts) with the
 * lfm2 engine (convolution state outside the pages) and a real KvTier over
 * fs: the cached tokens a request reports are exactly the matched unit's
 * length, every reply equals the engine's own greedy reply from a cold
 * pass, and units are written at the end of the prompt, the end of the
 * reply, every N tokens and at a detected common prefix.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadEngine, type LoadedEngine } from '../../../inference-core/index.ts';
import { ensureLfm2Model } from '../../../inference-core/synthetic/lfm2-synthetic.ts';
import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier } from '../../../src/kvtier/index.ts';
import { KvTierCache } from '../../../src/scheduler/cache-adapter.ts';
import { engineUnitPort, UnitPolicy, type UnitPolicyOptions } from '../../../src/scheduler/units.ts';
import { TEST_DATA_DIR, randomTokens } from '../../inference-core/engine-fixtures.ts';
import { greedyAlone, prefilledOf, schedulerJob, startScheduler, tokensOf } from './scheduler-fixtures.ts';

let engine: LoadedEngine;
beforeAll(async () => {
  engine = await loadEngine(ensureLfm2Model({ dataDir: TEST_DATA_DIR }), { kvDtype: 'f16', threads: 1, poolBytes: 32 * 2 ** 20, maxBatch: 4 });
}, 120_000);
afterAll(() => engine?.destroy());

async function withRig<T>(options: UnitPolicyOptions & { retainSequences?: number }, run: (r: { tier: KvTier; cache: KvTierCache; submit: (id: string, tokens: number[], maxTokens?: number, tenantSalt?: string) => Promise<{ cached: number; reply: number[] }> }) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-units-sched-'));
  const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
  const tier = await KvTier.open({ dataDir: join(dir, 'index'), store, blockTokens: 64, hotCacheBytes: 0, metadataRedisUrl: '' });
  const cache = await KvTierCache.create(tier, engine.kvLayout);
  const units = new UnitPolicy(engineUnitPort(engine), cache, options);
  const { scheduler, finished } = startScheduler({ engine, cache }, { units, retainSequences: options.retainSequences ?? 0 });
  const submit = async (id: string, tokens: number[], maxTokens = 6, tenantSalt = 'aa') => {
    scheduler.submit(schedulerJob(id, tokens, { tenantSalt }, maxTokens));
    const events = await finished(id);
    const error = events.find((e) => e.type === 'error');
    if (error) throw new Error(JSON.stringify(error));
    // the next request sees every unit this one wrote
    await tier.flush();
    return { cached: prefilledOf(events).cachedTokens, reply: tokensOf(events) };
  };
  try {
    return await run({ tier, cache, submit });
  } finally {
    await scheduler.close();
    await tier.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const vocab = () => engine.vocabSize;

describe('prefix units on the scheduler (lfm2)', () => {
  it('multi-turn: each turn hits the previous turn\'s end-of-output unit exactly (prompt + whole reply), replies equal cold greedy', async () => {
    await withRig({ intervalTokens: 0, commonPrefixRequests: 0 }, async ({ submit, tier }) => {
      let prompt = randomTokens(150, vocab(), 21);
      let expectCached = 0;
      for (let turn = 0; turn < 4; turn++) {
        const { cached, reply } = await submit(`t${turn}`, prompt, 6);
        expect(cached).toBe(expectCached);
        expect(reply).toEqual(greedyAlone(engine, prompt, 6));
        // the next prompt: this one, the whole reply, then a new message
        const next = [...prompt, ...reply, ...randomTokens(30, vocab(), 100 + turn)];
        expectCached = prompt.length + reply.length;
        prompt = next;
      }
      const u = tier.stats().units!;
      // two units per request (end of prompt, end of reply), three of them hit
      expect(u.written).toBe(8);
      expect(u.loaded).toBe(3);
    });
  });

  it('retained sequences: a next turn continues the previous turn\'s sequence in the engine (no unit read), replies equal cold greedy; a partial match is put back and the unit serves it', async () => {
    await withRig({ intervalTokens: 0, commonPrefixRequests: 0, retainSequences: 4 }, async ({ submit, tier }) => {
      let prompt = randomTokens(150, vocab(), 61);
      let expectCached = 0;
      for (let turn = 0; turn < 4; turn++) {
        const { cached, reply } = await submit(`r${turn}`, prompt, 6);
        expect(cached).toBe(expectCached);
        expect(reply).toEqual(greedyAlone(engine, prompt, 6));
        const next = [...prompt, ...reply, ...randomTokens(30, vocab(), 200 + turn)];
        expectCached = prompt.length + reply.length;
        prompt = next;
      }
      // every turn after the first continued its retained sequence: nothing was looked up in or read from the tier
      expect(tier.stats().units!.loaded).toBe(0);
      // A prompt sharing only part of the retained sequence cannot cut it back (the convolution state is at its end):
      // it hits the end-of-prompt unit of the first turn instead, and the retained sequence stays for its own conversation.
      const first = randomTokens(150, vocab(), 61);
      const branch = [...first, ...randomTokens(20, vocab(), 299)];
      const b = await submit('branch', branch, 6);
      expect(b.cached).toBe(150);
      expect(b.reply).toEqual(greedyAlone(engine, branch, 6));
      expect(tier.stats().units!.loaded).toBe(1);
      // the last turn's own retained sequence (prompt + reply) is still there: the follow-up of the latest turn continues it
      const last = await submit('r4', prompt, 6);
      expect(last.cached).toBe(expectCached);
      expect(last.reply).toEqual(greedyAlone(engine, prompt, 6));
      expect(tier.stats().units!.loaded).toBe(1);
    });
  });

  it('A+B then A+B+C hits A+B (the end-of-prompt unit); A+B then A+C misses; with K = 2 the second A+… writes a unit at A\'s last whole block, and the third hits exactly it', async () => {
    await withRig({ intervalTokens: 0, commonPrefixRequests: 2 }, async ({ submit }) => {
      const A = randomTokens(140, vocab(), 31);
      const ab = [...A, ...randomTokens(40, vocab(), 32)];
      expect((await submit('ab', ab)).cached).toBe(0);
      const abc = [...ab, ...randomTokens(20, vocab(), 33)];
      const r = await submit('abc', abc);
      // the longest unit whose whole prefix matches: the end of A+B's prompt (its end-of-output unit is not a prefix of A+B+C)
      expect(r.cached).toBe(180);
      expect(r.reply).toEqual(greedyAlone(engine, abc, 6));
      const ac = [...A, ...randomTokens(25, vocab(), 34)];
      // A's blocks were seen twice now (A+B, A+B+C) and A+C a third time: the prefix detection writes a unit at 128
      const miss = await submit('ac', ac);
      expect(miss.cached).toBe(0);
      const ad = [...A, ...randomTokens(25, vocab(), 35)];
      const hit = await submit('ad', ad);
      expect(hit.cached).toBe(128);
      expect(hit.reply).toEqual(greedyAlone(engine, ad, 6));
    });
  });

  it('without detection or intervals, A+C stays a miss; another tenant never hits', async () => {
    await withRig({ intervalTokens: 0, commonPrefixRequests: 0 }, async ({ submit }) => {
      const A = randomTokens(140, vocab(), 41);
      await submit('ab', [...A, ...randomTokens(40, vocab(), 42)]);
      await submit('ac', [...A, ...randomTokens(40, vocab(), 43)]);
      expect((await submit('ad', [...A, ...randomTokens(40, vocab(), 44)])).cached).toBe(0);
      expect((await submit('other', [...A, ...randomTokens(40, vocab(), 42)], 6, 'bb')).cached).toBe(0);
    });
  });

  it('interval units every N tokens of the prompt and the reply: A+C hits the last multiple of N inside A', async () => {
    await withRig({ intervalTokens: 96, commonPrefixRequests: 0 }, async ({ submit, tier }) => {
      const A = randomTokens(230, vocab(), 51);
      // prompt of 270: units at 96, 192 (intervals) and 270 (end of prompt); reply of 40 → 288 (interval) and 310 (end of reply)
      const first = await submit('ab', [...A, ...randomTokens(40, vocab(), 52)], 40);
      expect(first.reply).toHaveLength(40);
      expect(tier.stats().units!.written).toBe(5);
      const ac = [...A, ...randomTokens(30, vocab(), 53)];
      const r = await submit('ac', ac);
      expect(r.cached).toBe(192);
      expect(r.reply).toEqual(greedyAlone(engine, ac, 6));
    });
  });

  it('prefill/decode split: the prefill half stops at the prompt\'s last token but one and writes its unit; the decode half continues from it with the same reply', async () => {
    await withRig({ intervalTokens: 0, commonPrefixRequests: 0 }, async ({ cache, submit }) => {
      // the prefill worker: its own scheduler on the shared tier, a prefillOnly job (a multiple of 64 tokens: no whole-block shortcut)
      const prefill = startScheduler({ engine, cache }, { units: new UnitPolicy(engineUnitPort(engine), cache, { intervalTokens: 0, commonPrefixRequests: 0 }), retainSequences: 0 });
      const prompt = randomTokens(192, vocab(), 71);
      prefill.scheduler.submit(schedulerJob('p', prompt, { prefillOnly: true }));
      const events = await prefill.finished('p');
      expect(events.find((e) => e.type === 'error')).toBeUndefined();
      await prefill.scheduler.close();
      const decoded = await submit('d', prompt);
      expect(decoded.cached).toBe(191);
      expect(decoded.reply).toEqual(greedyAlone(engine, prompt, 6));
    });
  });
});
