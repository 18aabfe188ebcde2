/**
 * The worker's step loop with a draft model and batched planning
 * (planSpeculative = planSpeculativeBatch, as engine-thread wires it): several
 * replies' draft steps share draft-engine forwards, each reply equals plain
 * greedy decoding token for token, and the blocks the tier stores for prompt
 * + reply are byte-identical to a plain sequence's (cache equivalence).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadEngine, type LoadedEngine, type Sequence } from '../../../inference-core/index.ts';
import type { StepItem } from '../../../inference-core/engine/index.ts';
import { planSpeculativeBatch, SpeculativeSession } from '../../../inference-core/speculative/index.ts';
import type { KvTierCache } from '../../../src/scheduler/cache-adapter.ts';
import type { JobEvent, RequestSpec } from '../../../src/scheduler/job.ts';
import type { SchedulerOptions } from '../../../src/scheduler/prefill-scheduler.ts';
import { TEST_DATA_DIR, argmax, randomTokens } from '../../inference-core/engine-fixtures.ts';
import { BLOCK, blocksAlone, engineModel, greedyAlone, openSchedulerRig, runToEnd, schedulerJob, tokensOf, type SchedulerRig } from './scheduler-fixtures.ts';

let rig: SchedulerRig;
let engine: LoadedEngine;
let cache: KvTierCache;
let draft: LoadedEngine;

beforeAll(async () => {
  rig = await openSchedulerRig(64, 'kvtier-spec-draft-batch-');
  ({ engine, cache } = rig);
  draft = await loadEngine('synthetic:tiny', { dataDir: TEST_DATA_DIR, threads: 1, poolBytes: 16 * 2 ** 20, kvDtype: 'f16', weightType: 'q8_0' });
}, 120_000);

afterAll(async () => {
  draft?.destroy();
  await rig?.close();
});

function run(jobs: RequestSpec[], draftSteps: number[]): Promise<Map<string, JobEvent[]>> {
  const model = engineModel(engine, { maxLogitRows: engine.maxBatch });
  const step = draft.step.bind(draft);
  draft.step = (items: readonly StepItem[]) => {
    draftSteps.push(items.length);
    return step(items);
  };
  const decoders: SchedulerOptions['decoders'] = {
    create: (job) => ({
      sample: (logits) => argmax(logits),
      speculate: (sequence: Sequence, context) =>
        new SpeculativeSession({ target: sequence, context, sampling: { temperature: 0, stopTokens: job.sampling.stopTokenIds }, mode: 'draft', draftEngine: draft, length: { mode: 'fixed', fixed: 4 } }),
    }),
    planBatch: (batch: readonly { decoder: SpeculativeSession; limit: number }[]) => planSpeculativeBatch(batch.map(({ decoder, limit }) => ({ session: decoder, limit }))),
  };
  return runToEnd(model, cache, jobs, decoders).finally(() => {
    draft.step = step;
  });
}

const job = (id: string, tokens: number[], maxTokens: number, salt: string): RequestSpec => schedulerJob(id, tokens, { tenantSalt: salt }, maxTokens);

describe('batched draft-model drafting in the scheduler', () => {
  it('replies == plain greedy, draft forwards shared across sequences, stored blocks byte-identical', async () => {
    const prompts = [randomTokens(30, engine.vocabSize, 21, 4), randomTokens(75, engine.vocabSize, 22, 4), randomTokens(140, engine.vocabSize, 23, 4)];
    const salt = 'd4af7b01';
    const draftSteps: number[] = [];
    const events = await run(prompts.map((p, i) => job(`d${i}`, p, 80, salt)), draftSteps);
    expect(draftSteps.some((n) => n >= 2)).toBe(true);
    await cache.flush();
    for (let i = 0; i < prompts.length; i++) {
      const ev = events.get(`d${i}`)!;
      const reply = tokensOf(ev);
      expect(reply).toEqual(greedyAlone(engine, prompts[i], 80));
      const done = ev.find((e): e is Extract<JobEvent, { type: 'done' }> => e.type === 'done')!;
      expect(done.speculative!.proposed).toBeGreaterThan(0);
      const all = [...prompts[i], ...reply];
      const full = Math.floor(all.length / BLOCK);
      const hit = await cache.lookup(cache.namespace(engine.fingerprint, salt), Uint32Array.from(all), { tenant: 't', trafficClass: 'chat' }, full);
      expect(hit.blocks).toBe(full);
      const { payloads } = await cache.load(hit, full);
      const expected = blocksAlone(engine, all, full);
      for (let b = 0; b < full; b++) expect(Buffer.from(payloads[b]).equals(Buffer.from(expected[b]))).toBe(true);
    }
  }, 120_000);
});
