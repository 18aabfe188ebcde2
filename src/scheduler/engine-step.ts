/**
 * One engine forward: every decoding request's next token (or its
 * speculative drafts) plus the prefill chunks step-plan.ts chooses, then
 * each row's result handed to the phase it belongs to.
 *
 *   rows = engine.maxStepTokens (and maxLogitRows)
 *   ├─ 1 per decoding request (plain), or 1 + drafts (speculative, reserved at the plan's `limit`)
 *   └─ prefill chunks under the step budget (whole engine chunk for a prompt alone)
 */
import { TokenIds } from '../../inference-core/index.ts';

import type { DecodePhase } from './decode-phase.ts';
import type { StoreWriter } from './store-writer.ts';
import type { EngineSequence, SpeculativeDecoder } from './ports.ts';
import type { SchedulerContext } from './scheduler-context.ts';
import type { RequestSequence } from './sequence.ts';
import { planPrefillChunks } from './step-plan.ts';

/**
 * Per-step token budget while several sequences are active. On a CPU a
 * bigger batch of prompt tokens is not computed faster per token, only
 * finished later: one cached turn's suffix per step gives the lowest TTFT.
 */
export const DEFAULT_STEP_TOKENS = 128;
const AGING_STEPS = 4;

type Row = { seq: RequestSequence; kind: 'decode' } | { seq: RequestSequence; kind: 'spec' } | { seq: RequestSequence; kind: 'prefill'; done: boolean };

export class EngineStep {
  constructor(
    private readonly ctx: SchedulerContext,
    private readonly stepTokens: number,
    private readonly decode: DecodePhase,
    private readonly store: StoreWriter,
    private readonly countStep: () => void,
  ) {}

  run(): void {
    const { ctx } = this;
    const { engine, fetchPolicy } = ctx.options;
    const decoding = ctx.active.filter((s) => s.phase === 'decode');
    const prefilling = ctx.active.filter((s) => s.phase === 'prefill');
    const items: { sequence: EngineSequence; tokens: ArrayLike<number>; logits: boolean | 'all' }[] = [];
    const owners: Row[] = [];
    // Drafts take the rows and logit rows left after one row per decoding sequence and one logit row per prompt.
    let draftRows = Math.min(engine.maxStepTokens, engine.maxLogitRows ?? Infinity) - decoding.length - prefilling.length;
    let decodeRows = 0;
    const specBatch: { seq: RequestSequence; decoder: SpeculativeDecoder; limit: number }[] = [];
    for (const seq of decoding) {
      let spec: SpeculativeDecoder | null;
      try {
        spec = this.speculativeOf(seq);
      } catch (error) {
        ctx.fail(seq, error);
        continue;
      }
      if (spec) {
        const remaining = seq.job.sampling.maxTokens - seq.generated.length;
        // Invariant: a decoder's plan emits at most `limit` tokens (limit − 1 drafts). Rows are reserved at that
        // bound, so all decoders can be planned in one batch below and the step never exceeds the engine's rows.
        const limit = Math.max(1, Math.min(remaining, 1 + Math.max(0, draftRows)));
        draftRows -= limit - 1;
        specBatch.push({ seq, decoder: spec, limit });
        continue;
      }
      decodeRows++;
      items.push({ sequence: seq.kv!, tokens: [seq.generated[seq.generated.length - 1]], logits: true });
      owners.push({ seq, kind: 'decode' });
    }
    for (const { seq, tokens } of this.planSpeculative(specBatch)) {
      decodeRows += tokens.length;
      items.push({ sequence: seq.kv!, tokens, logits: 'all' });
      owners.push({ seq, kind: 'spec' });
    }
    const chunks = planPrefillChunks(
      prefilling.map((s) => ({ remaining: s.promptTarget - s.fedTokens.length, skipped: s.skipped, order: s.order })),
      // Alone, a prompt has nobody to interleave with: it takes the engine's whole chunk.
      { stepTokens: decoding.length + prefilling.length > 1 ? this.stepTokens : engine.maxStepTokens, maxRows: engine.maxStepTokens, agingSteps: AGING_STEPS, decodeRows },
    );
    prefilling.forEach((seq, i) => {
      if (chunks[i] === 0) {
        seq.skipped++;
        return;
      }
      seq.skipped = 0;
      const from = seq.fedTokens.length;
      const tokens = seq.job.tokens.subarray(from, from + chunks[i]);
      const done = from + chunks[i] >= seq.promptTarget;
      items.push({ sequence: seq.kv!, tokens, logits: done && !seq.job.prefillOnly });
      owners.push({ seq, kind: 'prefill', done });
    });
    const stepStart = ctx.now();
    let results: (Float32Array | null)[];
    this.countStep();
    try {
      results = engine.step(items);
    } catch (error) {
      for (const { seq } of owners) ctx.fail(seq, error);
      return;
    }
    const prefillRows = items.reduce((sum, item, i) => sum + (owners[i].kind === 'prefill' ? item.tokens.length : 0), 0);
    if (prefillRows > 0) fetchPolicy?.observePrefill(prefillRows, ctx.now() - stepStart);
    owners.forEach((owner, i) => {
      const { seq } = owner;
      seq.fedTokens.append(items[i].tokens);
      if (owner.kind === 'decode') return this.decode.sampleNext(seq, results[i]!);
      if (owner.kind === 'spec') return this.decode.acceptSpeculative(seq, items[i].tokens.length, results[i]!);
      seq.prefillTokens += items[i].tokens.length;
      this.store.storeNewBlocks(seq);
      if (owner.done) ctx.promptDone(seq, results[i]);
    });
  }

  /**
   * The step's drafts, batched by `planSpeculative` when given. A batch that
   * throws is planned again one decoder at a time, so an error (a grammar dead
   * end, a full pool) fails only the job it belongs to.
   */
  private planSpeculative(batch: readonly { seq: RequestSequence; decoder: SpeculativeDecoder; limit: number }[]): { seq: RequestSequence; tokens: number[] }[] {
    if (batch.length === 0) return [];
    const together = this.ctx.options.planSpeculative;
    if (together) {
      try {
        const plans = together(batch);
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
        this.ctx.fail(seq, error);
      }
    }
    return planned;
  }

  private speculativeOf(seq: RequestSequence): SpeculativeDecoder | null {
    if (seq.speculative === undefined) {
      const context = new TokenIds(seq.fedTokens.length + seq.generated.length);
      context.append(seq.fedTokens.view);
      context.append(seq.generated);
      seq.speculative = this.ctx.options.createSpeculative?.(seq.job, seq.kv!, context.view) ?? null;
    }
    return seq.speculative;
  }
}
