/**
 * `npm run bench -- speculative`, workload batch: BATCH_SEQS concurrent
 * replies with the draft model (adaptive length, greedy), verified together
 * in one target step per round as the worker's scheduler does. Drafting one
 * sequence at a time (a draft-engine forward per sequence and draft
 * position) vs batched (planSpeculativeBatch: one forward per position for
 * all sequences). Same models, same run; the replies must be identical.
 */
import type { LoadedEngine } from '../inference-core/index.ts';
import { Sampler } from '../inference-core/sampling/sampler.ts';
import { planSpeculativeBatch, SpeculativeSession } from '../inference-core/speculative/index.ts';

export const BATCH_SEQS = 4;
const BATCH_GEN = 48;

/** BATCH_SEQS replies with the draft model, verified together each round; drafting batched or one sequence at a time. */
function generateConcurrent(target: LoadedEngine, draft: LoadedEngine, prompts: number[][], batched: boolean): { tokens: number[][]; ms: number; draftForwards: number } {
  const seqs = prompts.map(() => target.createSequence());
  let draftForwards = 0;
  const step = draft.step.bind(draft);
  const runPrefill = draft.runPrefill.bind(draft);
  draft.step = (items) => (draftForwards++, step(items));
  draft.runPrefill = (seq, tokens, all) => (draftForwards++, runPrefill(seq, tokens, all));
  try {
    const runs = prompts.map((p, i) => {
      const first = new Sampler({ temperature: 0 }).sample(seqs[i].prefill(p));
      const session = new SpeculativeSession({ target: seqs[i], context: [...p, first], sampling: { temperature: 0 }, mode: 'draft', draftEngine: draft, length: { mode: 'adaptive', maxDraft: 7 } });
      return { session, out: [first] };
    });
    draftForwards = 0;
    const t0 = performance.now();
    for (;;) {
      const active = runs.filter((r) => r.out.length < BATCH_GEN);
      if (active.length === 0) break;
      const requests = active.map((r) => ({ session: r.session, limit: Math.min(8, BATCH_GEN - r.out.length) }));
      const plans = batched ? planSpeculativeBatch(requests) : requests.map((q) => q.session.plan(q.limit));
      const rows = target.step(active.map((r, i) => ({ seq: seqs[runs.indexOf(r)], tokens: plans[i].tokens, logits: 'all' })));
      active.forEach((r, i) => r.out.push(...r.session.complete(rows[i]!)));
    }
    const ms = performance.now() - t0;
    for (const r of runs) r.session.free();
    return { tokens: runs.map((r) => r.out), ms, draftForwards };
  } finally {
    draft.step = step;
    draft.runPrefill = runPrefill;
    for (const s of seqs) s.free();
  }
}

export function batchWorkload(target: LoadedEngine, draft: LoadedEngine, rounds: number, prompts: number[][]): { fields: Record<string, number>; identical: boolean } {
  const ms = { per_seq: 0, batched: 0 };
  const tokens = { per_seq: 0, batched: 0 };
  const forwards = { per_seq: 0, batched: 0 };
  let identical = true;
  generateConcurrent(target, draft, prompts, true);
  for (let r = 0; r < rounds; r++) {
    const outs: Record<string, string> = {};
    for (const c of ['per_seq', 'batched'] as const) {
      const run = generateConcurrent(target, draft, prompts, c === 'batched');
      ms[c] += run.ms;
      tokens[c] += run.tokens.reduce((s, t) => s + t.length - 1, 0);
      forwards[c] += run.draftForwards;
      outs[c] = JSON.stringify(run.tokens);
    }
    identical &&= outs.per_seq === outs.batched;
    console.error(`[bench] speculative batch: round ${r + 1}/${rounds}`);
  }
  const round = (x: number, d = 2) => Number(x.toFixed(d));
  return {
    identical,
    fields: {
      spec_batch_seqs: BATCH_SEQS,
      spec_batch_tps_per_seq: round((tokens.per_seq * 1000) / ms.per_seq),
      spec_batch_tps_batched: round((tokens.batched * 1000) / ms.batched),
      spec_batch_batched_over_per_seq: round((tokens.batched / ms.batched) / (tokens.per_seq / ms.per_seq), 3),
      spec_batch_draft_forwards_per_token_per_seq: round(forwards.per_seq / tokens.per_seq, 3),
      spec_batch_draft_forwards_per_token_batched: round(forwards.batched / tokens.batched, 3),
    },
  };
}
