/**
 * The rig the scheduler tests run on: the tiny engine and a real KvTier over
 * an fs block store in a temp dir; a PrefillScheduler on it that records
 * every event; jobs and the figures their events report.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { LoadedEngine, Sequence } from '../../../inference-core/index.ts';
import { FsBlobStore, type BlobStore } from '../../../storage-adapters/index.ts';
import { KvTier } from '../../../src/kvtier/index.ts';
import { KvTierCache } from '../../../src/scheduler/cache-adapter.ts';
import type { JobEvent, RequestSpec } from '../../../src/scheduler/job.ts';
import type { EngineModel } from '../../../src/scheduler/ports.ts';
import { PrefillScheduler, type SchedulerOptions } from '../../../src/scheduler/prefill-scheduler.ts';
import { argmax, tinyEngine } from '../../inference-core/engine-fixtures.ts';

export const BLOCK = 64;

export interface SchedulerRig {
  engine: LoadedEngine;
  dir: string;
  store: FsBlobStore;
  tier: KvTier;
  cache: KvTierCache;
  close(): Promise<void>;
}

/** `wrapStore`: what the tier writes and reads through, over the rig's fs store (e.g. one that holds puts). */
export async function openSchedulerRig(maxBatch: number, tempPrefix: string, wrapStore?: (store: FsBlobStore) => BlobStore): Promise<SchedulerRig> {
  const engine = await tinyEngine({ weightType: 'f16', kvDtype: 'f16', poolBytes: 32 * 2 ** 20, maxBatch });
  const dir = mkdtempSync(join(tmpdir(), tempPrefix));
  const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
  const tier = await KvTier.open({ dataDir: join(dir, 'index'), store: wrapStore?.(store) ?? store, blockTokens: BLOCK, hotCacheBytes: 0 });
  const cache = await KvTierCache.create(tier, engine.kvLayout);
  return {
    engine, dir, store, tier, cache,
    async close() {
      await tier.close();
      await store.close();
      engine.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The reply token ids a job streamed. */
export const tokensOf = (events: JobEvent[]): number[] => events.flatMap((e) => (e.type === 'tokens' ? e.ids : []));

/** Greedy reply of the engine alone (one prefill call, then decode): what a batched or speculative reply must equal. */
export function greedyAlone(engine: LoadedEngine, tokens: number[], n: number): number[] {
  const seq = engine.createSequence();
  let logits = seq.prefill(tokens);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    out.push(argmax(logits));
    if (i + 1 < n) logits = seq.decode(out[i]);
  }
  seq.free();
  return out;
}

/** The first `blocks` full blocks of `tokens` as a sequence of its own exports them: what the tier must hold. */
export function blocksAlone(engine: LoadedEngine, tokens: number[], blocks: number): Uint8Array[] {
  const seq = engine.createSequence();
  seq.prefill(tokens.slice(0, blocks * BLOCK));
  const out = seq.exportBlocks(0, blocks);
  seq.free();
  return out;
}

type StepItems = Parameters<EngineModel['step']>[0];

/** The scheduler's engine port over a loaded engine; `onStep` sees each step's items before it runs; `maxLogitRows` as the port's. */
export function engineModel(engine: LoadedEngine, options: { onStep?: (items: StepItems) => void; maxLogitRows?: number } = {}): EngineModel {
  return {
    fingerprint: engine.fingerprint,
    contextLength: engine.contextLength,
    maxStepTokens: engine.prefillChunk,
    ...(options.maxLogitRows !== undefined ? { maxLogitRows: options.maxLogitRows } : {}),
    createSequence: () => engine.createSequence(),
    freeBlocks: () => engine.pool.freePages,
    totalBlocks: () => engine.pool.pages,
    step: (items) => {
      options.onStep?.(items);
      return engine.step(items.map(({ sequence, tokens, logits }) => ({ seq: sequence as Sequence, tokens, logits })));
    },
  };
}

export interface Trace {
  events: Array<{ jobId: string; event: JobEvent }>;
  scheduler: PrefillScheduler;
  /** Every event of `jobId` once it is done (or failed). */
  finished(jobId: string): Promise<JobEvent[]>;
}

/** A greedy PrefillScheduler (batch 8) on the rig's engine and cache; `options` override (e.g. `cache`, `stepTokens`). */
export function startScheduler(rig: Pick<SchedulerRig, 'engine' | 'cache'>, options: Partial<SchedulerOptions> = {}, onStep?: (stepTokens: number[]) => void): Trace {
  const events: Trace['events'] = [];
  const waiters = new Map<string, () => void>();
  const scheduler = new PrefillScheduler({
    engine: engineModel(rig.engine, { onStep: onStep && ((items) => onStep(items.map((item) => item.tokens.length))) }),
    cache: rig.cache,
    blockTokens: BLOCK,
    maxBatch: 8,
    decoders: { create: () => ({ sample: (logits) => argmax(logits) }) },
    emit: (jobId, event) => {
      events.push({ jobId, event });
      if (event.type === 'done' || event.type === 'error') waiters.get(jobId)?.();
    },
    ...options,
  });
  return {
    events,
    scheduler,
    finished: (jobId) =>
      new Promise((resolve) => {
        const collect = () => resolve(events.filter((e) => e.jobId === jobId).map((e) => e.event));
        if (events.some((e) => e.jobId === jobId && (e.event.type === 'done' || e.event.type === 'error'))) collect();
        else waiters.set(jobId, collect);
      }),
  };
}

/** Runs `jobs` to their end on one scheduler over `model` that retains no sequence; each job's events, in order. */
export function runToEnd(model: EngineModel, cache: KvTierCache, jobs: RequestSpec[], decoders: SchedulerOptions['decoders']): Promise<Map<string, JobEvent[]>> {
  const events = new Map<string, JobEvent[]>(jobs.map((j) => [j.id, []]));
  let left = jobs.length;
  return new Promise((resolve) => {
    const scheduler = new PrefillScheduler({
      engine: model,
      cache,
      blockTokens: BLOCK,
      maxBatch: 8,
      retainSequences: 0,
      decoders,
      emit: (jobId, event) => {
        events.get(jobId)!.push(event);
        if ((event.type === 'done' || event.type === 'error') && --left === 0) void scheduler.close().then(() => resolve(events));
      },
    });
    for (const j of jobs) scheduler.submit(j);
  });
}

/** A greedy chat job of tenant `t` replying `maxTokens` tokens. */
export function schedulerJob(id: string, tokens: number[], extra: Partial<RequestSpec> = {}, maxTokens = 6): RequestSpec {
  return {
    id,
    model: 'synthetic:tiny',
    tenant: 't',
    tenantSalt: 'aa',
    trafficClass: 'chat',
    tokens: Uint32Array.from(tokens),
    sampling: { maxTokens, temperature: 0, topP: 1, topK: 0, seed: 1, stopTokenIds: [] },
    submittedAt: Date.now(),
    ...extra,
  };
}

/** Tenant salts never used before in this file's run (8 hex digits from `first` on). */
export function saltSource(first: number): () => string {
  let next = first;
  return () => (next++).toString(16).padStart(8, '0');
}

export const prefilledOf = (events: JobEvent[]) => events.find((e): e is Extract<JobEvent, { type: 'prefilled' }> => e.type === 'prefilled')!;
/** Prompt tokens the job computed (not cached). */
export const computedOf = (events: JobEvent[]) => (events.find((e) => e.type === 'done') as Extract<JobEvent, { type: 'done' }>).prefillTokens;
