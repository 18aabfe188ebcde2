/**
 * Draft source (b): a draft model with the target's vocabulary, one
 * sequence's drafting as a resumable loop so that several sequences' draft
 * steps can go through one draft-engine forward (draft-batch.ts):
 *
 *   feed() ─▶ tokens for the draft sequence (first the context it lacks, then each draft) ─┐
 *   take(logits of the last fed token) ◀─ one engine step (alone, or batched with others) ─┘
 *   … until feed() returns null; result() = the drafts worth verifying
 *
 * A draft is picked from the draft model's law at the request's sampling
 * options (argmax when greedy), masked by the grammar when the reply is
 * constrained: a masked draft is always one the grammar allows, and its law q
 * is the one the rejection rule must use.
 */
import type { Engine } from '../engine/engine.ts';
import type { Sequence } from '../engine/sequence.ts';
import type { Prng, SamplingOptions } from '../sampling/sampler.ts';
import type { DraftLengthPolicy } from './draft-length.ts';
import type { TokenConstraint } from './grammar-cursor.ts';
import { drawFrom, greedyToken, probabilityOf, targetDistribution, type TokenDistribution } from './target-distribution.ts';

export interface ModelDraftResult {
  draft: number[];
  dists: (TokenDistribution | null)[];
  /** Constrained: cursors[i] is the grammar after the context and drafts 1..i (cursors[0]: after the context). */
  cursors: TokenConstraint[] | null;
  /**
   * Nothing verified (a probe, or no draft worth its row) though a token was
   * drafted: the first drafted token and its law, to check against the row the
   * step computes anyway, so the acceptance statistics still learn from it.
   */
  check: { token: number; dist: TokenDistribution | null } | null;
}

export class ModelDraft {
  private readonly draft: number[] = [];
  private readonly dists: (TokenDistribution | null)[] = [];
  private readonly alphas: number[] = [];
  private readonly history: number[];
  private readonly cursors: TokenConstraint[] | null;
  private reach = 1;
  private expected = 1;
  private toFeed: number[] | null;

  constructor(
    readonly engine: Engine,
    readonly seq: Sequence,
    context: readonly number[],
    private readonly room: number,
    private readonly policy: DraftLengthPolicy,
    private readonly sampling: SamplingOptions,
    private readonly stops: ReadonlySet<number>,
    private readonly prng: Prng,
    constraint: TokenConstraint | null,
  ) {
    // Drafts fed by a plan that was never verified (a step that failed and is planned again) are dropped.
    if (seq.length > context.length) seq.truncate(context.length);
    this.cursors = constraint ? [constraint] : null;
    // made for a step the policy drafts (a step that does not is planned without one: SpeculativeSession)
    this.toFeed = room > 0 ? context.slice(seq.length) : null;
    this.history = this.toFeed ? context.slice() : [];
  }

  /** Tokens the draft sequence is fed next (its logits go to take()), or null when drafting is over. */
  feed(): number[] | null {
    return this.toFeed;
  }

  /** The draft model's logits after the fed tokens: picks one draft and decides whether to go on. */
  take(logits: Float32Array): void {
    const mask = this.cursors ? this.cursors[this.cursors.length - 1].mask() : null;
    let d: number;
    let q: number;
    if ((this.sampling.temperature ?? 0) === 0) {
      d = greedyToken(logits, this.sampling, this.history, mask);
      // a greedy probe's confidence is never weighed (it stops after this token, verifies nothing and is
      // checked by equality): the softmax over the vocabulary (~0.3 ms at 129k) is skipped, not its pick
      q = this.policy.isProbe ? 0 : softmaxAt(logits, d, mask);
      this.dists.push(null);
    } else {
      const dist = targetDistribution(logits, this.sampling, this.history, mask);
      d = drawFrom(dist, this.prng.nextFloat());
      q = probabilityOf(dist, d);
      this.dists.push(dist);
    }
    this.draft.push(d);
    this.history.push(d);
    if (this.cursors) this.cursors.push(this.cursors[this.cursors.length - 1].advance(d));
    const a = this.policy.draftAlpha(q);
    this.alphas.push(a);
    this.reach *= a;
    this.expected += this.reach;
    const more = !this.stops.has(d) && this.draft.length < this.room && this.policy.continueDrafting(this.draft.length, this.reach, this.expected);
    this.toFeed = more ? [d] : null;
  }

  /** Drafting on this sequence alone (no batching): feeds and takes until done, timing the draft steps. */
  runAlone(): void {
    for (let tokens = this.feed(); tokens; tokens = this.feed()) {
      const t0 = performance.now();
      const logits = this.seq.prefill(tokens);
      this.observeStep(performance.now() - t0);
      this.take(logits);
    }
  }

  /**
   * Drafting with a stepper that takes one token and answers the logits after
   * it (a model's MTP block, whose sequence state already holds the context):
   * feed() gives the last context token first, then each draft.
   */
  runWith(step: (token: number) => Float32Array): void {
    for (let tokens = this.feed(); tokens; tokens = this.feed()) {
      const t0 = performance.now();
      this.take(step(tokens[tokens.length - 1]!));
      // every MTP step is a draft step (no context catch-up): the policy weighs all of them, the pick from
      // its vocabulary-sized logits (take) included
      this.policy.observeDraftStep(performance.now() - t0);
    }
  }

  /** Time (ms) of the step that fed what feed() returned: a draft step (after a draft token, not a context catch-up) goes to the policy. */
  observeStep(ms: number): void {
    if (this.draft.length > 0) this.policy.observeDraftStep(ms);
  }

  /** The drafts the policy says are worth verifying (a prefix of those drafted). */
  result(): ModelDraftResult {
    const k = this.policy.draftModelLength(this.alphas);
    const check = k === 0 && this.draft.length > 0 ? { token: this.draft[0]!, dist: this.dists[0]! } : null;
    return { draft: this.draft.slice(0, k), dists: this.dists.slice(0, k), cursors: this.cursors ? this.cursors.slice(0, k + 1) : null, check };
  }
}

/** Softmax probability (temperature 1, over the allowed ids when masked) of `token`: the draft's confidence in its greedy pick. */
function softmaxAt(logits: Float32Array, token: number, mask: Uint32Array | null): number {
  const n = logits.length;
  let max = -Infinity;
  let sum = 0;
  if (mask === null) {
    // unmasked (the common case): plain loops, no per-element call
    for (let i = 0; i < n; i++) if (logits[i] > max) max = logits[i];
    for (let i = 0; i < n; i++) sum += Math.exp(logits[i] - max);
    return Math.exp(logits[token] - max) / sum;
  }
  const allowed = (i: number) => (mask[i >>> 5] & (1 << (i & 31))) !== 0;
  for (let i = 0; i < n; i++) if (allowed(i) && logits[i] > max) max = logits[i];
  for (let i = 0; i < n; i++) if (allowed(i)) sum += Math.exp(logits[i] - max);
  return Math.exp(logits[token] - max) / sum;
}
