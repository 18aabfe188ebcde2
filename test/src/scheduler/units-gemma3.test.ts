/**
 * gemma3 served with prefix units (src/scheduler/units.ts unitServing): its
 * sliding layers' window goes in each unit's tail, its global layer in
 * 64-token blocks of that layer alone (their own namespace). Through the
 * worker's scheduler and a real KvTier over fs, on gemma3-tiny (window 40,
 * 7 sliding + 1 global layer): cached tokens are exactly the matched unit's
 * length at units written at the end of the input, the end of the output and
 * at intervals, with p inside a sliding window and across a block boundary;
 * every reply equals the engine's own greedy reply from one cold pass (bit
 * for bit: greedy over the same logits); the stored blocks hold one layer;
 * a unit whose blocks do not fit the engine is a miss, never a failed job.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { exportUnit, loadEngine, unitShapeOf, type LoadedEngine } from '../../../inference-core/engine/index.ts';
import { ensureGemma3Model } from '../../../inference-core/synthetic/gemma3-synthetic.ts';
import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { FetchOrRecompute } from '../../../src/cluster/index.ts';
import { KvTier, payloadBytesFor, TAIL_MAGIC } from '../../../src/kvtier/index.ts';
import { KvTierCache } from '../../../src/scheduler/cache-adapter.ts';
import { UnitPolicy, unitServing, type UnitPolicyOptions } from '../../../src/scheduler/units.ts';
import { TEST_DATA_DIR, randomTokens } from '../../inference-core/engine-fixtures.ts';
import { engineModel, greedyAlone, prefilledOf, schedulerJob, startScheduler, tokensOf } from './scheduler-fixtures.ts';

let engine: LoadedEngine;
beforeAll(async () => {
  engine = await loadEngine(ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR }), { kvDtype: 'f16', threads: 1, poolBytes: 32 * 2 ** 20, maxBatch: 4, prefillChunk: 48 });
}, 120_000);
afterAll(() => engine?.destroy());

type Submit = (id: string, tokens: number[], maxTokens?: number, extra?: { tenantSalt?: string; prefillOnly?: boolean }) => Promise<{ cached: number; reply: number[]; storageError?: string; recomputed?: number }>;

async function withRig<T>(options: UnitPolicyOptions, run: (r: { tier: KvTier; cache: KvTierCache; store: FsBlobStore; submit: Submit; fingerprint: string }) => Promise<T>, schedulerOptions: { fetchPolicy?: FetchOrRecompute; retainSequences?: number } = {}): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-units-gemma3-'));
  const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
  const tier = await KvTier.open({ dataDir: join(dir, 'index'), store, blockTokens: 64, hotCacheBytes: 0, metadataRedisUrl: '' });
  const serving = unitServing(engine);
  const cache = await KvTierCache.create(tier, serving.layout);
  const trace = startScheduler({ engine, cache }, { engine: { ...engineModel(engine), fingerprint: serving.fingerprint }, units: new UnitPolicy(serving.port!, cache, options), retainSequences: 0, ...schedulerOptions });
  const submit: Submit = async (id, tokens, maxTokens = 6, extra = {}) => {
    trace.scheduler.submit(schedulerJob(id, tokens, extra, maxTokens));
    const events = await trace.finished(id);
    const error = events.find((e) => e.type === 'error');
    if (error) throw new Error(JSON.stringify(error));
    await tier.flush();
    const p = prefilledOf(events);
    return { cached: p.cachedTokens, reply: tokensOf(events), ...(p.storageError ? { storageError: p.storageError } : {}), ...(p.recomputedHitTokens ? { recomputed: p.recomputedHitTokens } : {}) };
  };
  try {
    return await run({ tier, cache, store, submit, fingerprint: serving.fingerprint });
  } finally {
    await trace.scheduler.close();
    await tier.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const vocab = () => engine.vocabSize;

describe('gemma3 served with prefix units', () => {
  it('serving: units, blocks of the one global layer under their own namespace', () => {
    const serving = unitServing(engine);
    expect(serving.mode).toBe('units');
    expect(serving.layout.layers).toBe(1);
    expect(serving.fingerprint).toBe(`${engine.fingerprint}/unit-blocks:1`);
  });

  it('multi-turn: each turn hits the previous end-of-output unit (p inside a window, across block boundaries); replies equal cold greedy; blocks hold one layer', async () => {
    await withRig({ intervalTokens: 0, commonPrefixRequests: 0 }, async ({ submit, tier }) => {
      let prompt = randomTokens(150, vocab(), 61);
      let expectCached = 0;
      for (let turn = 0; turn < 4; turn++) {
        const { cached, reply } = await submit(`t${turn}`, prompt, 7);
        expect(cached).toBe(expectCached);
        expect(reply).toEqual(greedyAlone(engine, prompt, 7));
        expectCached = prompt.length + reply.length;
        prompt = [...prompt, ...reply, ...randomTokens(33, vocab(), 200 + turn)];
      }
      const u = tier.stats().units!;
      expect(u.written).toBe(8);
      expect(u.loaded).toBe(3);
      // the stored blocks are one layer's K|V: a unit-served gemma3 writes 1/8 of a whole page per block
      const s = unitShapeOf(engine);
      expect(payloadBytesFor(unitServing(engine).layout, 64)).toBe(engine.kvLayout.blockBytes / 8);
      expect(s.windowLayers).toHaveLength(7);
    });
  });

  it('retained sequences: each next turn continues the previous turn\'s sequence in the engine (its windows as they are, no unit read); replies equal cold greedy', async () => {
    await withRig(
      { intervalTokens: 0, commonPrefixRequests: 0 },
      async ({ submit, tier }) => {
        let prompt = randomTokens(150, vocab(), 71);
        let expectCached = 0;
        for (let turn = 0; turn < 4; turn++) {
          const { cached, reply } = await submit(`r${turn}`, prompt, 7);
          expect(cached).toBe(expectCached);
          expect(reply).toEqual(greedyAlone(engine, prompt, 7));
          expectCached = prompt.length + reply.length;
          prompt = [...prompt, ...reply, ...randomTokens(33, vocab(), 300 + turn)];
        }
        // units are still written (another worker, or a later turn after eviction, reads them), none was read
        expect(tier.stats().units!.written).toBe(8);
        expect(tier.stats().units!.loaded).toBe(0);
      },
      { retainSequences: 4 },
    );
  });

  it('end of input: A+B then A+B+C hits A+B (180, inside a window past block 2); A+C misses', async () => {
    await withRig({ intervalTokens: 0, commonPrefixRequests: 0 }, async ({ submit }) => {
      const A = randomTokens(140, vocab(), 71);
      const ab = [...A, ...randomTokens(40, vocab(), 72)];
      expect((await submit('ab', ab)).cached).toBe(0);
      const abc = [...ab, ...randomTokens(20, vocab(), 73)];
      const r = await submit('abc', abc);
      expect(r.cached).toBe(180);
      expect(r.reply).toEqual(greedyAlone(engine, abc, 6));
      expect((await submit('ac', [...A, ...randomTokens(25, vocab(), 74)])).cached).toBe(0);
    });
  });

  it('intervals of the prompt and the reply: A+C hits the last multiple of N inside A; the reply\'s interval unit serves a prompt that branches inside the reply', async () => {
    await withRig({ intervalTokens: 96, commonPrefixRequests: 0 }, async ({ submit, tier }) => {
      const A = randomTokens(230, vocab(), 81);
      const first = [...A, ...randomTokens(40, vocab(), 82)];
      const r1 = await submit('ab', first, 40);
      // prompt 270: units at 96, 192, 270; reply of 40 → 288 (interval) and 310 (end of reply)
      expect(tier.stats().units!.written).toBe(5);
      const ac = [...A, ...randomTokens(30, vocab(), 83)];
      const r = await submit('ac', ac);
      expect(r.cached).toBe(192);
      expect(r.reply).toEqual(greedyAlone(engine, ac, 6));
      // the first prompt + 18 reply tokens, then something else: the reply's interval unit at 288
      const branch = [...first, ...r1.reply.slice(0, 18), ...randomTokens(20, vocab(), 84)];
      const b = await submit('branch', branch);
      expect(b.cached).toBe(288);
      expect(b.reply).toEqual(greedyAlone(engine, branch, 6));
    });
  });

  it('prefill/decode split: the decode half continues from the unit at the prompt\'s last token but one', async () => {
    await withRig({ intervalTokens: 0, commonPrefixRequests: 0 }, async ({ submit }) => {
      const prompt = randomTokens(192, vocab(), 91);
      await submit('p', prompt, 6, { prefillOnly: true });
      const d = await submit('d', prompt);
      expect(d.cached).toBe(191);
      expect(d.reply).toEqual(greedyAlone(engine, prompt, 6));
    });
  });

  it('a unit whose blocks are whole pages (another layout) is a miss reported as a load fault, and the reply is still the cold one', async () => {
    await withRig({ intervalTokens: 0, commonPrefixRequests: 0 }, async ({ submit, tier, fingerprint }) => {
      const prompt = randomTokens(150, vocab(), 95);
      // what a writer with whole-page blocks would leave under this namespace: the unit at 149 with 2 whole pages
      const seq = engine.createSequence();
      seq.prefill(prompt.slice(0, 149));
      const unit = exportUnit(engine, seq);
      const pages = seq.exportBlocks(0, 2);
      seq.free();
      const ns = tier.namespace({ modelFingerprint: fingerprint, tenantSalt: 'aa' });
      const ids = Uint32Array.from(prompt.slice(0, 149));
      tier.store({ namespace: ns, tokens: ids, payloads: pages, layout: engine.kvLayout, tenant: 't', trafficClass: 'chat' });
      const s = unitShapeOf(engine);
      tier.storeUnit({ namespace: ns, tokens: ids, dtype: s.dtype, sections: unit.tail.map((t) => ({ ...t, kvHeads: s.kvHeads, headDim: s.headDim })), tenant: 't', trafficClass: 'chat' });
      await tier.flush();
      const r = await submit('stale', prompt);
      expect(r.cached).toBe(0);
      expect(r.storageError).toMatch(/KVT_ERR_ENGINE_BAD_BLOCK/);
      expect(r.reply).toEqual(greedyAlone(engine, prompt, 6));
    });
  });

  it('fetch-or-recompute: when reading a unit (its blocks and tail) is measured slower than prefilling its tokens, the request computes them, with the same reply', async () => {
    const policy = new FetchOrRecompute({ minSamples: 1 });
    await withRig({ intervalTokens: 0, commonPrefixRequests: 0 }, async ({ submit, tier }) => {
      const ab = randomTokens(180, vocab(), 111);
      await submit('ab', ab);
      // storage this slow (1 KB/s) loses to any prefill
      policy.observeLoad(1000, 1000);
      policy.observeLoad(1000, 1000);
      const abc = [...ab, ...randomTokens(20, vocab(), 112)];
      const r = await submit('abc', abc);
      expect(r.cached).toBe(0);
      expect(r.recomputed).toBe(180);
      expect(r.reply).toEqual(greedyAlone(engine, abc, 6));
      // nothing was read: the unit was found, not loaded
      expect(tier.stats().units).toMatchObject({ hits: 1, loaded: 0, loadFailed: 0 });
    }, { fetchPolicy: policy });
  });

  it('a corrupt tail file on the fs store is a miss: the request prefills from 0 with the cold reply, the next turn hits again', async () => {
    await withRig({ intervalTokens: 0, commonPrefixRequests: 0 }, async ({ submit, tier, store }) => {
      const ab = randomTokens(180, vocab(), 121);
      const first = await submit('ab', ab);
      // every tail on storage (end of prompt, end of output) gets one flipped payload byte
      let tails = 0;
      for await (const key of store.list()) {
        const bytes = (await store.get(key))!;
        if (new DataView(bytes.buffer, bytes.byteOffset).getUint32(0, true) !== TAIL_MAGIC) continue;
        bytes[bytes.byteLength - 3] ^= 0x10;
        await store.put(key, bytes);
        tails++;
      }
      expect(tails).toBe(2);
      const abc = [...ab, ...first.reply, ...randomTokens(20, vocab(), 122)];
      const r = await submit('abc', abc);
      expect(r.cached).toBe(0);
      expect(r.reply).toEqual(greedyAlone(engine, abc, 6));
      expect(tier.stats().units!.loadFailed).toBe(1);
      expect(tier.stats().errors.KVT_ERR_BLOCK_PAYLOAD_CHECKSUM).toBe(1);
      const abcd = [...abc, ...r.reply, ...randomTokens(20, vocab(), 123)];
      const next = await submit('abcd', abcd);
      expect(next.cached).toBe(abc.length + r.reply.length);
      expect(next.reply).toEqual(greedyAlone(engine, abcd, 6));
    });
  });
});
