/**
 * Acceptance of drafted tokens against the target's verification logits.
 *
 * Verification feeds [g, d1 … dk] (g: the last accepted token, not yet in the
 * KV) and gets k+1 logit rows; row i predicts the token after d_i (row 0:
 * after g). The result is `accepted` drafts plus one more token from the
 * target (the correction at the first rejection, or a bonus after all k), so
 * every verification yields at least one token.
 *
 * Greedy: accept d_i while the target's argmax of row i-1 equals d_i; the
 * output equals plain greedy decoding token for token.
 *
 * Sampling (Leviathan et al. / Chen et al.): accept d_i with probability
 * min(1, p(d_i)/q(d_i)); on rejection draw from normalize(max(0, p − q)).
 * The emitted tokens are then distributed exactly as the target's own
 * samples. An n-gram draft is a point mass q = δ(d_i): accept with p(d_i),
 * else draw from p with d_i removed.
 *
 * Constrained replies: `maskOf(i)` is the grammar's mask for row i (the state
 * after the accepted tokens and d1..di). Every row's p is the masked law, the
 * one plain constrained decoding samples from, so greedy output stays equal
 * to plain constrained greedy and sampled output keeps that law; drafts were
 * cut at the first token the grammar rejects, so each d_i is allowed by row
 * i−1's mask.
 */
import type { SamplingOptions } from '../sampling/sampler.ts';
import type { Prng } from '../sampling/sampler.ts';
import { drawFrom, greedyToken, probabilityOf, targetDistribution, type TokenDistribution } from './target-distribution.ts';

export interface AcceptResult {
  /** Drafts accepted (a prefix of the draft). */
  accepted: number;
  /** The target's token after the accepted drafts. */
  next: number;
}

/** Row `i` of a [rows][vocab] logits block. */
export function logitRow(all: Float32Array, vocab: number, i: number): Float32Array {
  return all.subarray(i * vocab, (i + 1) * vocab);
}

/** Row i's grammar mask (null: unconstrained). */
export type RowMask = (row: number) => Uint32Array | null;
const NO_MASK: RowMask = () => null;

export function acceptGreedy(rows: Float32Array, vocab: number, draft: readonly number[], o: SamplingOptions, history: readonly number[], maskOf: RowMask = NO_MASK): AcceptResult {
  // the history grows by the accepted drafts: copied only when there are drafts (a plain step reads it as it is)
  const h = draft.length > 0 ? history.slice() : null;
  for (let i = 0; i < draft.length; i++) {
    const want = greedyToken(logitRow(rows, vocab, i), o, h!, maskOf(i));
    if (want !== draft[i]) return { accepted: i, next: want };
    h!.push(draft[i]);
  }
  return { accepted: draft.length, next: greedyToken(logitRow(rows, vocab, draft.length), o, h ?? history, maskOf(draft.length)) };
}

/**
 * One position of the rejection rule. `q` is the draft's distribution
 * (null: a point mass on `drafted`). Returns the drafted token when accepted,
 * else a draw from the residual, with `accepted` saying which.
 */
export function acceptOne(p: TokenDistribution, q: TokenDistribution | null, drafted: number, prng: Prng): { accepted: boolean; token: number } {
  const pd = probabilityOf(p, drafted);
  const qd = q ? probabilityOf(q, drafted) : 1;
  if (qd > 0 && prng.nextFloat() < Math.min(1, pd / qd)) return { accepted: true, token: drafted };
  // Residual max(0, p − q), normalized.
  const ids: number[] = [];
  const mass: number[] = [];
  let total = 0;
  for (let i = 0; i < p.ids.length; i++) {
    const id = p.ids[i];
    const r = p.probs[i] - (q ? probabilityOf(q, id) : id === drafted ? 1 : 0);
    if (r > 0) {
      ids.push(id);
      mass.push(r);
      total += r;
    }
  }
  // p == q exactly (rejection then has probability 0 but rounding can reach it): p itself is the right law.
  if (total <= 0) return { accepted: false, token: drawFrom(p, prng.nextFloat()) };
  const residual: TokenDistribution = { ids: Int32Array.from(ids), probs: Float64Array.from(mass, (m) => m / total) };
  return { accepted: false, token: drawFrom(residual, prng.nextFloat()) };
}

export function acceptSampled(
  rows: Float32Array,
  vocab: number,
  draft: readonly number[],
  draftDists: readonly (TokenDistribution | null)[],
  o: SamplingOptions,
  history: readonly number[],
  prng: Prng,
  maskOf: RowMask = NO_MASK,
): AcceptResult {
  const h = history.slice();
  for (let i = 0; i < draft.length; i++) {
    const p = targetDistribution(logitRow(rows, vocab, i), o, h, maskOf(i));
    const r = acceptOne(p, draftDists[i] ?? null, draft[i], prng);
    if (!r.accepted) return { accepted: i, next: r.token };
    h.push(draft[i]);
  }
  const p = targetDistribution(logitRow(rows, vocab, draft.length), o, h, maskOf(draft.length));
  return { accepted: draft.length, next: drawFrom(p, prng.nextFloat()) };
}

/**
 * Whether the rejection rule would have accepted a checked draft `check` (a
 * probe's token, not verified) against `row0`, the step's own row: its own
 * draw, after the emitted token's (that token's law is the plain step's).
 */
export function checkSampled(row0: Float32Array, check: { token: number; dist: TokenDistribution | null }, o: SamplingOptions, history: readonly number[], mask: Uint32Array | null, prng: Prng): boolean {
  const p = targetDistribution(row0, o, history, mask);
  const q = check.dist ? probabilityOf(check.dist, check.token) : 1;
  return q > 0 && prng.nextFloat() < Math.min(1, probabilityOf(p, check.token) / q);
}
