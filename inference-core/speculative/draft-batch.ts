/**
 * Plans several sequences' speculative steps together: their draft-model
 * steps go through one draft-engine forward per draft position, as the
 * target verifies all sequences in one step, instead of one forward per
 * sequence and position.
 *
 *   position 0:  [ s1: ctx it lacks ][ s2: ctx it lacks ][ s3: … ]   one Engine.step → each one's first draft
 *   position 1:  [ s1: d1 ][ s2: d1 ][ s3: d1 ]                      one Engine.step
 *   position 2:  [ s1: d2 ][ s3: d2 ]                                s2's policy stopped drafting
 *   …
 *
 * Outputs equal planning each session alone (numerics contract: a row's
 * logits do not depend on how rows are grouped into forwards), so greedy
 * drafts are the same tokens and sampled drafts the same draws (each session
 * keeps its own PRNG stream in its own order).
 */
import type { Engine, StepItem } from '../engine/engine.ts';
import type { ModelDraft } from './model-draft.ts';
import type { SpeculativePlan, SpeculativeSession } from './speculative-session.ts';

export interface PlanRequest {
  session: SpeculativeSession;
  /** At most this many tokens emitted by the verification (so limit − 1 drafts). */
  limit: number;
}

/** plan() of every session, draft-model steps batched across sessions. */
export function planSpeculativeBatch(requests: readonly PlanRequest[]): SpeculativePlan[] {
  const drafts = requests.map((r) => r.session.beginPlan(r.limit));
  driveDrafts(drafts.filter((d): d is ModelDraft => d !== null));
  return requests.map((r, i) => r.session.endPlan(drafts[i]));
}

/** Runs the drafts to their end, one draft-engine step per position for all of them (per engine). */
export function driveDrafts(drafts: readonly ModelDraft[]): void {
  for (;;) {
    const active = drafts.filter((d) => d.feed() !== null);
    if (active.length === 0) return;
    const byEngine = new Map<Engine, ModelDraft[]>();
    for (const d of active) {
      const group = byEngine.get(d.engine);
      if (group) group.push(d);
      else byEngine.set(d.engine, [d]);
    }
    for (const [engine, group] of byEngine) stepGroup(engine, group);
  }
}

/** One position of every draft in `group`, in as few forwards as the engine's step limits allow. */
function stepGroup(engine: Engine, group: readonly ModelDraft[]): void {
  const maxRows = engine.prefillChunk;
  let part: ModelDraft[] = [];
  let rows = 0;
  const flush = () => {
    if (part.length === 0) return;
    const t0 = performance.now();
    const items: StepItem[] = part.map((d) => ({ seq: d.seq, tokens: d.feed()!, logits: true }));
    const out = engine.step(items);
    // A shared forward's time, split evenly: each draft step's share is what the length policy weighs.
    const ms = (performance.now() - t0) / part.length;
    part.forEach((d, i) => {
      d.observeStep(ms);
      d.take(out[i]!);
    });
    part = [];
    rows = 0;
  };
  for (const d of group) {
    const n = d.feed()!.length;
    if (n > maxRows) {
      // A long catch-up (the first draft of a long prompt) alone: Sequence.prefill chunks it.
      d.take(d.seq.prefill(d.feed()!));
      continue;
    }
    if (rows + n > maxRows || part.length >= engine.maxBatch) flush();
    part.push(d);
    rows += n;
  }
  flush();
}
