/**
 * The scheduler on the real engine (synthetic:tiny) and a real KvTier over an
 * fs block store: chunked prefill interleaved with decode, single flight,
 * prefill-only jobs (written through), fetch-or-recompute, cancel.
 */
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { LoadedEngine } from '../../../inference-core/index.ts';
import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { FetchOrRecompute } from '../../../src/cluster/index.ts';
import { KvTier } from '../../../src/kvtier/index.ts';
import type { JobEvent, RequestSpec } from '../../../src/scheduler/job.ts';
import type { SchedulerOptions } from '../../../src/scheduler/prefill-scheduler.ts';
import { randomTokens } from '../../inference-core/engine-fixtures.ts';
import { BLOCK, computedOf, greedyAlone, openSchedulerRig, prefilledOf, saltSource, schedulerJob, startScheduler, tokensOf, type SchedulerRig } from './scheduler-fixtures.ts';

let rig: SchedulerRig;
let engine: LoadedEngine;
let dir: string;
let tier: KvTier;
let store: FsBlobStore;

beforeAll(async () => {
  rig = await openSchedulerRig(8, 'kvtier-sched-');
  ({ engine, dir, tier, store } = rig);
});

afterAll(async () => {
  await rig?.close();
});

const start = (options: Partial<SchedulerOptions> = {}, onStep?: (stepTokens: number[]) => void) => startScheduler(rig, options, onStep);
const job = (id: string, tokens: number[], extra: Partial<RequestSpec> = {}) => schedulerJob(id, tokens, extra);
const freshSalt = saltSource(1);

describe('PrefillScheduler', () => {
  it('cuts a long prompt into chunks around a short one, and both replies equal their solo runs', async () => {
    const steps: number[][] = [];
    const { scheduler, events, finished } = start({ stepTokens: 64 }, (rows) => steps.push(rows));
    const salt = freshSalt();
    const long = randomTokens(900, engine.vocabSize, 11);
    const short = randomTokens(40, engine.vocabSize, 12);
    scheduler.submit(job('long', long, { tenantSalt: salt }));
    scheduler.submit(job('short', short, { tenantSalt: salt }));
    const [longEvents, shortEvents] = await Promise.all([finished('long'), finished('short')]);
    expect(tokensOf(longEvents)).toEqual(greedyAlone(engine, long, 6));
    expect(tokensOf(shortEvents)).toEqual(greedyAlone(engine, short, 6));
    // The short prompt's whole reply streamed while the long one was still being prefilled.
    const order = events.map((e) => `${e.jobId}:${e.event.type}`);
    expect(order.indexOf('short:done')).toBeLessThan(order.indexOf('long:prefilled'));
    // Decode rows rode along in the steps that carried the long prompt's chunks.
    expect(steps.some((rows) => rows.length === 2 && rows.includes(1) && rows.some((n) => n > 1))).toBe(true);
    // The budget holds while two sequences share the engine; alone, the long prompt takes whole engine chunks.
    expect(Math.max(...steps.filter((rows) => rows.length > 1).map((rows) => rows.reduce((x, y) => x + y, 0)))).toBeLessThanOrEqual(64);
    expect(steps.some((rows) => rows.length === 1 && rows[0] === engine.prefillChunk)).toBe(true);
    await scheduler.close();
  });

  it('single flight: concurrent prompts sharing an uncached prefix compute it once', async () => {
    const { scheduler, finished } = start({ stepTokens: 128 });
    const salt = freshSalt();
    const shared = randomTokens(10 * BLOCK, engine.vocabSize, 21);
    const a = [...shared, ...randomTokens(30, engine.vocabSize, 22)];
    const b = [...shared, ...randomTokens(50, engine.vocabSize, 23)];
    scheduler.submit(job('a', a, { tenantSalt: salt }));
    scheduler.submit(job('b', b, { tenantSalt: salt }));
    const [ea, eb] = await Promise.all([finished('a'), finished('b')]);
    expect(prefilledOf(ea).cachedTokens).toBe(0);
    expect(prefilledOf(eb).cachedTokens).toBe(10 * BLOCK);
    expect(computedOf(ea) + computedOf(eb)).toBe(a.length + b.length - 10 * BLOCK);
    expect(tokensOf(eb)).toEqual(greedyAlone(engine, b, 6));
    await scheduler.close();
  });

  it('a prefill-only job samples nothing and ends once its blocks are in storage, where another node finds them', async () => {
    const { scheduler, finished } = start({ retainSequences: 0 });
    const salt = freshSalt();
    const prompt = randomTokens(5 * BLOCK + 17, engine.vocabSize, 31);
    scheduler.submit(job('p', prompt, { tenantSalt: salt, prefillOnly: true }));
    const events = await finished('p');
    expect(events.map((e) => e.type)).toEqual(['prefilled', 'done']);
    expect(prefilledOf(events).storedPromptTokens).toBe(5 * BLOCK);
    // A second tier over the same storage (another node's index): the blocks are already there.
    const other = await KvTier.open({ dataDir: join(dir, 'other-index'), store, blockTokens: BLOCK, hotCacheBytes: 0 });
    try {
      const lookup = await other.lookup(other.namespace({ modelFingerprint: engine.fingerprint, tenantSalt: salt }), Uint32Array.from(prompt), { tenant: 't', trafficClass: 'chat' });
      expect(lookup.hitBlocks).toBe(5);
    } finally {
      await other.close();
    }
    // The decode half: loads them and computes only the partial last block.
    scheduler.submit(job('d', prompt, { tenantSalt: salt }));
    const decoded = await finished('d');
    expect(prefilledOf(decoded).cachedTokens).toBe(5 * BLOCK);
    expect((decoded.at(-1) as Extract<JobEvent, { type: 'done' }>).prefillTokens).toBe(17);
    expect(tokensOf(decoded)).toEqual(greedyAlone(engine, prompt, 6));
    await scheduler.close();
  });

  it('fetch-or-recompute: when reads are measured slower than prefill, a hit is computed instead, with the same reply', async () => {
    const policy = new FetchOrRecompute({ minSamples: 1 });
    const { scheduler, finished } = start({ fetchPolicy: policy, retainSequences: 0 });
    const salt = freshSalt();
    const prompt = randomTokens(4 * BLOCK + 9, engine.vocabSize, 41);
    scheduler.submit(job('warm', prompt, { tenantSalt: salt }));
    await finished('warm');
    await tier.flush();
    // Storage this slow (1 KB/s) loses to any prefill.
    policy.observeLoad(1000, 1000);
    policy.observeLoad(1000, 1000);
    scheduler.submit(job('again', prompt, { tenantSalt: salt }));
    const events = await finished('again');
    const prefilled = prefilledOf(events);
    expect(prefilled.cachedTokens).toBe(0);
    expect(prefilled.recomputedHitTokens).toBe(4 * BLOCK);
    expect(tokensOf(events)).toEqual(greedyAlone(engine, prompt, 6));
    await scheduler.close();
  });

  it("a conversation's next turn continues the finished sequence: its partial last block is not recomputed", async () => {
    const { scheduler, finished } = start();
    const salt = freshSalt();
    const turn1 = randomTokens(3 * BLOCK + 20, engine.vocabSize, 71);
    scheduler.submit(job('t1', turn1, { tenantSalt: salt }));
    const first = await finished('t1');
    const reply = tokensOf(first);
    const turn2 = [...turn1, ...reply, ...randomTokens(30, engine.vocabSize, 72)];
    scheduler.submit(job('t2', turn2, { tenantSalt: salt }));
    const second = await finished('t2');
    // The sequence held prompt + reply except the last sampled token (never fed): all of it is reused.
    const held = turn1.length + reply.length - 1;
    expect(prefilledOf(second).cachedTokens).toBe(held);
    expect((second.at(-1) as Extract<JobEvent, { type: 'done' }>).prefillTokens).toBe(turn2.length - held);
    expect(tokensOf(second)).toEqual(greedyAlone(engine, turn2, 6));
    // Another tenant with the same tokens reuses nothing of it.
    scheduler.submit(job('other', turn2, { tenantSalt: freshSalt() }));
    expect(prefilledOf(await finished('other')).cachedTokens).toBe(0);
    await scheduler.close();
  });

  it('a retained sequence continues with the blocks another worker stored past it (the decode half of a split)', async () => {
    const decodeWorker = start();
    const prefillWorker = start({ retainSequences: 0 });
    const salt = freshSalt();
    const turn1 = randomTokens(2 * BLOCK + 10, engine.vocabSize, 81);
    decodeWorker.scheduler.submit(job('t1', turn1, { tenantSalt: salt }));
    const reply = tokensOf(await decodeWorker.finished('t1'));
    const turn2 = [...turn1, ...reply, ...randomTokens(3 * BLOCK, engine.vocabSize, 82)];
    // The prefill half on the other worker stores turn 2's full blocks.
    prefillWorker.scheduler.submit(job('p2', turn2, { tenantSalt: salt, prefillOnly: true }));
    await prefillWorker.finished('p2');
    const loadedBefore = tier.stats().loadedBlocks;
    decodeWorker.scheduler.submit(job('d2', turn2, { tenantSalt: salt }));
    const decoded = await decodeWorker.finished('d2');
    const wholeBlocks = Math.floor((turn2.length - 1) / BLOCK) * BLOCK;
    // Read from storage: only the blocks past the retained sequence's two whole ones.
    expect(tier.stats().loadedBlocks - loadedBefore).toBe(wholeBlocks / BLOCK - 2);
    expect(prefilledOf(decoded).cachedTokens).toBe(wholeBlocks);
    expect((decoded.at(-1) as Extract<JobEvent, { type: 'done' }>).prefillTokens).toBe(turn2.length - wholeBlocks);
    expect(tokensOf(decoded)).toEqual(greedyAlone(engine, turn2, 6));
    await decodeWorker.scheduler.close();
    await prefillWorker.scheduler.close();
  });

  it('a job cancelled while its prompt is being prefilled ends as cancelled and frees its pages', async () => {
    // Cancel from inside the first prefill chunk, not after a delay: a fast
    // machine prefilled all 1200 tokens within 5 ms and emitted a token first.
    let steps = 0;
    const { scheduler, finished } = start({ stepTokens: 32 }, () => {
      if (++steps === 1) scheduler.cancel('c');
    });
    const free = engine.pool.freePages;
    scheduler.submit(job('c', randomTokens(1200, engine.vocabSize, 51), { tenantSalt: freshSalt() }));
    const events = await finished('c');
    const done = events.at(-1) as Extract<JobEvent, { type: 'done' }>;
    expect(done.type).toBe('done');
    expect(done.finishReason).toBe('cancelled');
    expect(done.completionTokens).toBe(0);
    expect(steps).toBeLessThan(Math.ceil(1200 / 32));
    expect(engine.pool.freePages).toBe(free);
    await scheduler.close();
  });
});
