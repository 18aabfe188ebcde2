/**
 * Speculative decoding of one sequence: draft k tokens (n-gram lookup or a
 * draft model), verify them with one target forward over k+1 rows, keep the
 * accepted prefix and roll the rest back.
 *
 *   KV: [ … context … ]  g  │  d1 d2 … dk        one forward of [g d1 … dk] → k+1 logit rows
 *                           └ accepted a ┘       truncate the KV to context + g + d1..da
 *   emitted: d1 … da, t                         t (correction or bonus) is the new g, not yet in the KV
 *
 * Invariant between steps (as in plain decoding): the sequence's KV holds the
 * context but its last token. Rolled-back positions stay in the kept page
 * past the length, are never read (attention stops at each query's position)
 * and are overwritten by the next forward before the block can be full, so
 * exported blocks only ever hold accepted tokens (numerics contract: a row's
 * K/V does not depend on how rows are grouped into forward calls, so they are
 * bit-identical to plain decoding's).
 *
 * plan() + complete() split a step so a scheduler can verify several
 * sequences in one Engine.step (item logits: 'all'); next() does both alone.
 * plan() is itself beginPlan() + endPlan(), so several sequences' draft-model
 * steps can share draft-engine forwards too (draft-batch.ts).
 */
import type { Engine } from '../engine/engine.ts';
import { EngineError } from '../engine/engine-errors.ts';
import type { Sequence } from '../engine/sequence.ts';
import { Prng, type SamplingOptions } from '../sampling/sampler.ts';
import { acceptGreedy, acceptSampled, checkSampled, logitRow } from './acceptance.ts';
import { DraftLengthPolicy } from './draft-length.ts';
import { drafterMemory } from './drafter-memory.ts';
import { NgramIndex } from './ngram-draft.ts';
import { cutToGrammar, type TokenConstraint } from './grammar-cursor.ts';
import { ModelDraft, type ModelDraftResult } from './model-draft.ts';
import { drawFrom, greedyToken, targetDistribution, type TokenDistribution } from './target-distribution.ts';
import { checkSessionOptions, type SpeculativePlan, type SpeculativeSessionOptions, type SpeculativeStats } from './session-options.ts';

export type { SpeculativeMode, SpeculativePlan, SpeculativeSessionOptions, SpeculativeStats } from './session-options.ts';

export class SpeculativeSession {
  readonly policy: DraftLengthPolicy;
  private readonly target: Sequence;
  private readonly ctx: number[];
  private readonly ngram: NgramIndex | null;
  private readonly draftSeq: Sequence | null;
  private readonly sampling: SamplingOptions;
  private readonly greedy: boolean;
  private readonly stops: ReadonlySet<number>;
  private readonly prng: Prng;
  private readonly draftEngine: Engine | null;
  private readonly mtp: boolean;
  /** Drafts come from a model (a draft engine, or the target's MTP block): the length policy decides each step. */
  private readonly modelDrafter: boolean;
  /** Constrained replies: the grammar after the context (its last token included). */
  private constraint: TokenConstraint | null;
  private pending: { draft: readonly number[]; dists: readonly (TokenDistribution | null)[]; matchN: number; cursors: TokenConstraint[] | null; check: ModelDraftResult['check'] } | null = null;
  readonly stats: SpeculativeStats = { verifications: 0, proposed: 0, accepted: 0, emitted: 0, steps: 0, checked: 0, checkHits: 0 };

  constructor(o: SpeculativeSessionOptions) {
    checkSessionOptions(o);
    this.target = o.target;
    this.ctx = Array.from(o.context);
    this.sampling = o.sampling;
    this.greedy = (o.sampling.temperature ?? 0) === 0;
    this.stops = new Set(o.sampling.stopTokens ?? []);
    this.prng = new Prng((o.sampling.seed ?? 0) ^ 0x5bec);
    // model drafts (adaptive) start from what the drafter's earlier requests judged, unless the caller says otherwise
    const drafter = o.mode === 'mtp' ? o.target.host : o.mode === 'draft' ? o.draftEngine! : null;
    const memory = o.length.memory !== undefined || !drafter || o.length.mode !== 'adaptive' ? o.length.memory : drafterMemory(o.target.host, drafter);
    this.policy = new DraftLengthPolicy({ ...o.length, memory });
    this.ngram = o.mode === 'ngram' ? new NgramIndex() : null;
    this.ngram?.append(this.ctx);
    this.draftEngine = o.mode === 'draft' ? o.draftEngine! : null;
    this.draftSeq = this.draftEngine ? this.draftEngine.createSequence() : null;
    this.mtp = o.mode === 'mtp';
    this.modelDrafter = this.mtp || this.draftSeq !== null;
    this.constraint = o.constraint ?? null;
  }

  get context(): readonly number[] {
    return this.ctx;
  }

  /** Drafts (at most `limit` − 1 tokens, so one verification emits at most `limit`) and returns what to feed. */
  plan(limit: number): SpeculativePlan {
    const modelDraft = this.beginPlan(limit);
    modelDraft?.runAlone();
    return this.endPlan(modelDraft);
  }

  /**
   * First half of plan(): n-gram drafts are planned at once (null returned);
   * a draft model's drafting is returned for the caller to drive — alone, or
   * batched with other sequences' (draft-batch.ts) — then given to endPlan().
   */
  beginPlan(limit: number): ModelDraft | null {
    const room = this.room(limit);
    if (this.modelDrafter) return this.beginModelPlan(room, room > 0 && this.policy.startDrafting());
    let draft: number[] = [];
    let cursors: TokenConstraint[] | null = this.constraint ? [this.constraint] : null;
    let matchN = 0;
    if (room > 0 && this.ngram) {
      const found = this.ngram.lookup(Math.min(room, this.policy.maxDraft));
      matchN = found.matchN;
      let tokens = found.tokens;
      if (this.constraint) ({ tokens, cursors } = cutToGrammar(tokens, this.constraint, this.stops));
      draft = tokens.slice(0, this.policy.ngramLength(tokens.length, matchN));
      cursors = cursors?.slice(0, draft.length + 1) ?? null;
    }
    this.pending = { draft, dists: draft.map(() => null), matchN, cursors, check: null };
    return null;
  }

  /** Second half of plan(): the tokens to verify ([g, d1 … dk]). */
  endPlan(modelDraft: ModelDraft | null): SpeculativePlan {
    // a draft-model draft is handed back here; n-gram and MTP drafts were planned in beginPlan
    if (modelDraft) this.pending = { ...modelDraft.result(), matchN: 0 };
    return { tokens: [this.ctx[this.ctx.length - 1], ...this.pending!.draft] };
  }

  /** Drafts this step may hold (so that one verification emits at most `limit` tokens and the context fits). */
  private room(limit: number): number {
    return Math.max(0, Math.min(limit - 1, this.target.host.contextLength - this.ctx.length));
  }

  /** A model drafter's plan once the policy decided whether this step drafts (`drafting`, with `room` > 0). */
  private beginModelPlan(room: number, drafting: boolean): ModelDraft | null {
    if (!drafting) {
      // nothing drafted: no draft object, no copies (complete() takes the plain step's path)
      this.pending = { draft: NO_DRAFT, dists: NO_DISTS, matchN: 0, cursors: this.constraint ? [this.constraint] : null, check: null };
      return null;
    }
    if (this.draftSeq) return new ModelDraft(this.draftEngine!, this.draftSeq, this.ctx, room, this.policy, this.sampling, this.stops, this.prng, this.constraint);
    // The MTP block drafts right here (one row per step, on its own copy of its window): nothing for a batch to share.
    const md = new ModelDraft(this.target.host as Engine, this.target, this.ctx, room, this.policy, this.sampling, this.stops, this.prng, this.constraint);
    // the drafter (which keys the MTP window) only now that the policy drafts this step; its making is the step's setup
    const t0 = performance.now();
    const stepper = this.target.host.mtpDrafter!(this.target);
    if (stepper) {
      this.policy.observeDraftSetup(performance.now() - t0);
      md.runWith((token) => stepper.step(token));
    }
    this.pending = { ...md.result(), matchN: 0 };
    return null;
  }

  /**
   * Takes the target's logits of the planned tokens ([k+1][vocab]; the
   * sequence has advanced by k+1), rolls back the rejected tail, returns the
   * emitted tokens (accepted drafts, then the target's own token; cut after a
   * stop token).
   */
  complete(rows: Float32Array): number[] {
    const p = this.pending;
    if (!p) throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_STATE', 'complete() without plan(); call plan() first');
    this.pending = null;
    const vocab = this.target.host.vocabSize;
    // nothing drafted nor checked: the plain step's pick, without the acceptance's bookkeeping
    if (p.draft.length === 0 && p.check === null && rows.length === vocab) {
      this.policy.record(0, 0, p.matchN);
      return this.emitOne(rows, p.cursors ? p.cursors[0] : null);
    }
    const cursors = p.cursors;
    // A row after a drafted stop token has no grammar left (and its token is dropped below): unmasked.
    const maskOf = (row: number) => (cursors && !cursors[row].finished ? cursors[row].mask() : null);
    const r = this.greedy
      ? acceptGreedy(rows, vocab, p.draft, this.sampling, this.ctx, maskOf)
      : acceptSampled(rows, vocab, p.draft, p.dists, this.sampling, this.ctx, this.prng, maskOf);
    let accepted = r.accepted;
    let next = r.next;
    if (p.check) {
      // the row that made `next` is the one a verification of the check token would have weighed it by
      const hit = this.greedy ? next === p.check.token : checkSampled(logitRow(rows, vocab, 0), p.check, this.sampling, this.ctx, maskOf(0), this.prng);
      this.policy.record(1, hit ? 1 : 0);
      this.stats.checked++;
      this.stats.proposed++;
      if (hit) {
        this.stats.checkHits++;
        this.stats.accepted++;
      }
    }
    // A stop token among the accepted drafts ends the reply there: it becomes the emitted last token.
    for (let i = 0; i < accepted; i++) {
      if (this.stops.has(p.draft[i])) {
        next = p.draft[i];
        accepted = i;
        break;
      }
    }
    if (!p.check) this.policy.record(p.draft.length, r.accepted, p.matchN);
    this.stats.steps++;
    if (p.draft.length > 0) this.stats.verifications++;
    this.stats.proposed += p.draft.length;
    this.stats.accepted += accepted;
    // KV keeps g and the accepted drafts.
    const valid = this.ctx.length + accepted;
    this.target.truncate(valid);
    if (this.draftSeq && this.draftSeq.length > valid) this.draftSeq.truncate(valid);
    const emitted = [...p.draft.slice(0, accepted), next];
    // The grammar carries on from the accepted prefix: rejected drafts were only ever fed to copies.
    if (cursors) this.constraint = cursors[accepted].advance(next);
    for (const t of emitted) this.ctx.push(t);
    this.ngram?.append(emitted);
    this.stats.emitted += emitted.length;
    return emitted;
  }

  /** One speculative step on this sequence alone. */
  next(limit = Number.MAX_SAFE_INTEGER): number[] {
    if (this.modelDrafter) {
      const room = this.room(limit);
      // a step that drafts nothing is a plain decode step: the decode, the pick, and the step's time for the policy
      if (room === 0 || !this.policy.startDrafting()) return this.plainStep();
      const modelDraft = this.beginModelPlan(room, true);
      modelDraft?.runAlone();
      return this.verify(this.endPlan(modelDraft).tokens);
    }
    return this.verify(this.plan(limit).tokens);
  }

  private verify(tokens: number[]): number[] {
    const t0 = performance.now();
    const rows = this.target.prefill(tokens, { allLogits: true });
    const emitted = this.complete(rows);
    // A verified row costs its forward and its acceptance (the row's law, the residual): both are timed.
    this.policy.observeVerify(tokens.length, performance.now() - t0);
    return emitted;
  }

  private plainStep(): number[] {
    const t0 = performance.now();
    const row = this.target.decode(this.ctx[this.ctx.length - 1]);
    const emitted = this.emitOne(row, this.constraint);
    this.policy.observeVerify(1, performance.now() - t0);
    return emitted;
  }

  /**
   * The step's token from its one row (`cursor`: the grammar after the context), as complete() picks it with
   * no drafts: the same argmax, or the same draw from the same law on the same PRNG stream.
   */
  private emitOne(row: Float32Array, cursor: TokenConstraint | null): number[] {
    const mask = cursor && !cursor.finished ? cursor.mask() : null;
    const next = this.greedy ? greedyToken(row, this.sampling, this.ctx, mask) : drawFrom(targetDistribution(row, this.sampling, this.ctx, mask), this.prng.nextFloat());
    // a draft model's sequence may hold drafts of a plan that was never completed (a failed step): not context
    if (this.draftSeq && this.draftSeq.length > this.ctx.length) this.draftSeq.truncate(this.ctx.length);
    if (cursor) this.constraint = cursor.advance(next);
    this.ctx.push(next);
    this.ngram?.append([next]);
    this.stats.steps++;
    this.stats.emitted++;
    return [next];
  }

  /** Frees the draft model's sequence (the target sequence belongs to the caller). */
  free(): void {
    this.draftSeq?.free();
  }
}

/** The plan of a step that drafts nothing (shared: a plan's arrays are only read). */
const NO_DRAFT: readonly number[] = Object.freeze([]);
const NO_DISTS: readonly (TokenDistribution | null)[] = Object.freeze([]);
