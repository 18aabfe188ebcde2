/**
 * schedule(): what the next engine step carries, as a plan (nano-vllm's
 * `Scheduler.schedule`); the loop runs it and hands plan and results to
 * postprocess(). Nothing here changes a sequence's status.
 *
 *   rows = engine.maxStepTokens (and maxLogitRows)
 *   ├─ 1 per decoding request (plain), or 1 + drafts (speculative, reserved at the plan's `limit`)
 *   └─ prefill chunks under the step budget (step-plan.ts; the whole engine chunk for a prompt alone)
 */
import { TokenIds } from '../../inference-core/index.ts';

import type { DecoderFactory, EngineModel, SpeculativeDecoder, StepItem } from './ports.ts';
import { SequenceStatus, type RequestSequence } from './sequence.ts';
import { planPrefillChunks } from './step-plan.ts';

/**
 * Per-step token budget while several sequences are active. On a CPU a
 * bigger batch of prompt tokens is not computed faster per token, only
 * finished later: one cached turn's suffix per step gives the lowest TTFT.
 */
export const DEFAULT_STEP_TOKENS = 128;
const AGING_STEPS = 4;

export type Row = { seq: RequestSequence; kind: 'decode' } | { seq: RequestSequence; kind: 'spec' } | { seq: RequestSequence; kind: 'prefill'; done: boolean };

export interface StepPlan {
  /** What the engine runs, row i owned by `rows[i]`. */
  items: StepItem[];
  rows: Row[];
  /** Sequences whose decoder threw while planning (a grammar dead end, a full pool): they fail alone. */
  failed: { seq: RequestSequence; error: unknown }[];
}

export function schedule(active: readonly RequestSequence[], engine: EngineModel, stepTokens: number, decoders: DecoderFactory): StepPlan {
  const plan: StepPlan = { items: [], rows: [], failed: [] };
  const decoding = active.filter((s) => s.status === SequenceStatus.Decode);
  const prefilling = active.filter((s) => s.status === SequenceStatus.Prefill);
  // Drafts take the rows and logit rows left after one row per decoding sequence and one logit row per prompt.
  let draftRows = Math.min(engine.maxStepTokens, engine.maxLogitRows ?? Infinity) - decoding.length - prefilling.length;
  let decodeRows = 0;
  const specBatch: { seq: RequestSequence; decoder: SpeculativeDecoder; limit: number }[] = [];
  for (const seq of decoding) {
    let spec: SpeculativeDecoder | null;
    try {
      spec = speculativeOf(seq);
    } catch (error) {
      plan.failed.push({ seq, error });
      continue;
    }
    if (spec) {
      const remaining = seq.spec.sampling.maxTokens - seq.generated.length;
      // Invariant: a decoder's plan emits at most `limit` tokens (limit − 1 drafts). Rows are reserved at that
      // bound, so all decoders can be planned in one batch below and the step never exceeds the engine's rows.
      const limit = Math.max(1, Math.min(remaining, 1 + Math.max(0, draftRows)));
      draftRows -= limit - 1;
      specBatch.push({ seq, decoder: spec, limit });
      continue;
    }
    decodeRows++;
    plan.items.push({ sequence: seq.kv!, tokens: [seq.lastToken], logits: true });
    plan.rows.push({ seq, kind: 'decode' });
  }
  for (const { seq, tokens } of planSpeculative(specBatch, decoders, plan)) {
    decodeRows += tokens.length;
    plan.items.push({ sequence: seq.kv!, tokens, logits: 'all' });
    plan.rows.push({ seq, kind: 'spec' });
  }
  const chunks = planPrefillChunks(
    prefilling.map((s) => ({ remaining: s.remainingPrompt, skipped: s.queue.skipped, order: s.queue.order })),
    // Alone, a prompt has nobody to interleave with: it takes the engine's whole chunk.
    { stepTokens: decoding.length + prefilling.length > 1 ? stepTokens : engine.maxStepTokens, maxRows: engine.maxStepTokens, agingSteps: AGING_STEPS, decodeRows },
  );
  prefilling.forEach((seq, i) => {
    if (chunks[i] === 0) {
      seq.queue.skipped++;
      return;
    }
    seq.queue.skipped = 0;
    const from = seq.fedTokens.length;
    // A prefix unit is written after exactly its tokens (units.ts): the chunk ends at the next unit stop.
    const take = Math.min(chunks[i], seq.tokensUntilUnit);
    const done = from + take >= seq.promptTarget;
    plan.items.push({ sequence: seq.kv!, tokens: seq.spec.tokens.subarray(from, from + take), logits: done && !seq.spec.prefillOnly });
    plan.rows.push({ seq, kind: 'prefill', done });
  });
  return plan;
}

/**
 * The step's drafts, batched by the factory's `planBatch` when it has one. A
 * batch that throws is planned again one decoder at a time, so an error (a
 * grammar dead end, a full pool) fails only the job it belongs to.
 */
function planSpeculative(batch: readonly { seq: RequestSequence; decoder: SpeculativeDecoder; limit: number }[], decoders: DecoderFactory, plan: StepPlan): { seq: RequestSequence; tokens: number[] }[] {
  if (batch.length === 0) return [];
  if (decoders.planBatch) {
    try {
      const plans = decoders.planBatch(batch);
      return batch.map(({ seq }, i) => ({ seq, tokens: plans[i].tokens }));
    } catch {
      // Re-planned alone below; the failing decoder throws again there and fails its own job.
    }
  }
  const planned: { seq: RequestSequence; tokens: number[] }[] = [];
  for (const { seq, decoder, limit } of batch) {
    try {
      planned.push({ seq, tokens: decoder.plan(limit).tokens });
    } catch (error) {
      plan.failed.push({ seq, error });
    }
  }
  return planned;
}

/** The sequence's speculative decoder, made at its first decode step (null: plain decoding). */
function speculativeOf(seq: RequestSequence): SpeculativeDecoder | null {
  const decoding = seq.decoding!;
  if (decoding.speculative === undefined) {
    const context = new TokenIds(seq.fedTokens.length + seq.generated.length);
    context.append(seq.fedTokens.view);
    context.append(seq.generated);
    decoding.speculative = decoding.decoder.speculate?.(seq.kv!, context.view) ?? null;
  }
  return decoding.speculative;
}
