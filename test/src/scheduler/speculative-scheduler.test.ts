/**
 * Speculative decoding in the worker's step loop (real engine, real KvTier):
 * several replies verified in one engine step with plain decode rows and
 * prefill chunks, each reply equal token for token to plain greedy decoding,
 * the blocks the tier stores for prompt + reply byte-identical to those of a
 * plain sequence (rejected drafts never reach the tier), a stop token met
 * inside accepted drafts ends the reply there, and the done event carries the
 * acceptance counts.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type LoadedEngine, type Sequence } from '../../../inference-core/index.ts';
import { SpeculativeSession } from '../../../inference-core/speculative/index.ts';
import { KvTierCache } from '../../../src/scheduler/cache-adapter.ts';
import type { JobEvent, RequestSpec } from '../../../src/scheduler/job.ts';
import { argmax, randomTokens } from '../../inference-core/engine-fixtures.ts';
import { BLOCK, blocksAlone, engineModel, greedyAlone, openSchedulerRig, runToEnd, schedulerJob, tokensOf, type SchedulerRig } from './scheduler-fixtures.ts';

let rig: SchedulerRig;
let engine: LoadedEngine;
let cache: KvTierCache;

beforeAll(async () => {
  rig = await openSchedulerRig(64, 'kvtier-spec-sched-');
  ({ engine, cache } = rig);
});

afterAll(async () => {
  await rig?.close();
});

function run(jobs: RequestSpec[], speculative: boolean, stepRows: number[][]): Promise<Map<string, JobEvent[]>> {
  const model = engineModel(engine, {
    maxLogitRows: engine.maxBatch,
    onStep: (items) => stepRows.push(items.map((i) => (i.logits === 'all' ? -i.tokens.length : i.tokens.length))),
  });
  return runToEnd(model, cache, jobs, {
    create: (job: RequestSpec) => ({
      sample: (logits: Float32Array) => argmax(logits),
      ...(speculative
        ? {
            speculate: (sequence: Sequence, context: ArrayLike<number>) =>
              new SpeculativeSession({ target: sequence, context, sampling: { temperature: 0, stopTokens: job.sampling.stopTokenIds }, mode: 'ngram', length: { mode: 'fixed', fixed: 5 } }),
          }
        : {}),
    }),
  });
}

function job(id: string, tokens: number[], maxTokens: number, salt: string, stopTokenIds: number[] = []): RequestSpec {
  const spec = schedulerJob(id, tokens, { tenantSalt: salt }, maxTokens);
  return { ...spec, sampling: { ...spec.sampling, stopTokenIds } };
}

function copyPrompt(n: number, seed: number): number[] {
  const span = randomTokens(20, engine.vocabSize, seed, 4);
  return [...randomTokens(n, engine.vocabSize, seed + 1, 4), ...span, ...randomTokens(7, engine.vocabSize, seed + 2, 4), ...span];
}

describe('speculative decoding in the scheduler', () => {
  it('batched verification: replies == plain greedy, stored blocks byte-identical, acceptance reported', async () => {
    const prompts = [copyPrompt(30, 1), copyPrompt(75, 2), copyPrompt(140, 3)];
    const salt = 'c0ffee01';
    const steps: number[][] = [];
    const events = await run(
      prompts.map((p, i) => job(`s${i}`, p, 90, salt)),
      true,
      steps,
    );
    // Some step verified drafts of two sequences in one forward.
    expect(steps.some((s) => s.filter((r) => r < -1).length >= 2)).toBe(true);
    await cache.flush();
    for (let i = 0; i < prompts.length; i++) {
      const ev = events.get(`s${i}`)!;
      const reply = tokensOf(ev);
      expect(reply).toEqual(greedyAlone(engine, prompts[i], 90));
      const done = ev.find((e): e is Extract<JobEvent, { type: 'done' }> => e.type === 'done')!;
      expect(done.completionTokens).toBe(90);
      expect(done.speculative!.proposed).toBeGreaterThan(0);
      expect(done.speculative!.accepted).toBeLessThanOrEqual(done.speculative!.proposed);
      // Everything the reply completed is stored; the tier's blocks equal a plain sequence's.
      const all = [...prompts[i], ...reply];
      const full = Math.floor(all.length / BLOCK);
      const ns = cache.namespace(engine.fingerprint, salt);
      const hit = await cache.lookup(ns, Uint32Array.from(all), { tenant: 't', trafficClass: 'chat' }, full);
      expect(hit.blocks).toBe(full);
      const { payloads } = await cache.load(hit, full);
      const expected = blocksAlone(engine, all, full);
      for (let b = 0; b < full; b++) expect(Buffer.from(payloads[b]).equals(Buffer.from(expected[b]))).toBe(true);
    }
  }, 60_000);

  it('a stop token inside accepted drafts ends the reply at it, as plain decoding', async () => {
    const prompt = copyPrompt(40, 9);
    const plain = greedyAlone(engine, prompt, 60);
    // Stop at a token that appears late in the plain reply (the first time it appears).
    const stop = plain[40];
    const cut = plain.indexOf(stop) + 1;
    const events = await run([job('stop', prompt, 60, 'c0ffee02', [stop])], true, []);
    expect(tokensOf(events.get('stop')!)).toEqual(plain.slice(0, cut));
    const done = events.get('stop')!.find((e) => e.type === 'done') as Extract<JobEvent, { type: 'done' }>;
    expect(done.finishReason).toBe('stop');
  }, 60_000);
});
