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
import type { Sequence } from '../engine/sequence.ts';
import { EngineError } from '../engine/engine-errors.ts';
import { Prng, type SamplingOptions } from '../sampling/sampler.ts';
import { acceptGreedy, acceptSampled, logitRow } from './acceptance.ts';
import { DraftLengthPolicy, type DraftLengthOptions } from './draft-length.ts';
import { drafterMemory } from './drafter-memory.ts';
import { NgramIndex } from './ngram-draft.ts';
import type { TokenConstraint } from './grammar-cursor.ts';
import { ModelDraft, type ModelDraftResult } from './model-draft.ts';
import { probabilityOf, targetDistribution, type TokenDistribution } from './target-distribution.ts';

/** ngram: the context's own n-grams; draft: a draft model; mtp: the target's own MTP block (deepseek4, engine loaded with mtp). */
export type SpeculativeMode = 'ngram' | 'draft' | 'mtp';

export interface SpeculativeSessionOptions {
  target: Sequence;
  /** Prompt and tokens generated so far; the KV holds all but the last. Copied: the session keeps its own. */
  context: ArrayLike<number>;
  sampling: SamplingOptions;
  mode: SpeculativeMode;
  /** mode 'draft': an engine with the same vocabulary (e.g. a lower-bit copy of the target). */
  draftEngine?: Engine;
  /** Draft lengths; `memory` absent: a model drafter's shared memory (drafter-memory.ts), null: none. */
  length: DraftLengthOptions;
  /**
   * Constrained reply: the grammar after the context (the first token was
   * sampled under it). Drafts are cut at the first token it rejects, every
   * verified row is masked by it, and it advances over emitted tokens only.
   */
  constraint?: TokenConstraint;
}

export interface SpeculativeStats {
  /** Target forwards that were fed drafts. */
  verifications: number;
  /** Drafted tokens the target judged (verified, or checked), and those it took or would have taken. */
  proposed: number;
  accepted: number;
  emitted: number;
  steps: number;
  /** Drafted tokens checked against a plain step's row instead of verified (probes), and those that matched. */
  checked: number;
  checkHits: number;
}

export interface SpeculativePlan {
  /** Tokens to feed the target: [g, d1 … dk]. */
  tokens: number[];
}

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
  /** Constrained replies: the grammar after the context (its last token included). */
  private constraint: TokenConstraint | null;
  private pending: { draft: number[]; dists: (TokenDistribution | null)[]; matchN: number; cursors: TokenConstraint[] | null; check: ModelDraftResult['check'] } | null = null;
  readonly stats: SpeculativeStats = { verifications: 0, proposed: 0, accepted: 0, emitted: 0, steps: 0, checked: 0, checkHits: 0 };

  constructor(o: SpeculativeSessionOptions) {
    if (o.context.length === 0 || o.target.length !== o.context.length - 1) {
      throw new EngineError(
        'KVT_ERR_ENGINE_SEQUENCE_STATE',
        `a speculative session starts with the KV holding all of the context but its last token (KV ${o.target.length}, context ${o.context.length}); sample the first token before starting it`,
      );
    }
    if (o.mode === 'draft' && !o.draftEngine) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', "speculative mode 'draft' needs a draft engine; set KVTIER_DRAFT_MODEL or use mode 'ngram'");
    }
    if (o.mode === 'mtp' && !o.target.host.hasMtp) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', "speculative mode 'mtp' needs a deepseek4 engine loaded with mtp: true (KVTIER_SPECULATIVE=mtp) from a file with an MTP block");
    }
    if (o.draftEngine && o.draftEngine.vocabSize !== o.target.host.vocabSize) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `the draft model's vocabulary (${o.draftEngine.vocabSize}) differs from the target's (${o.target.host.vocabSize}); use a draft of the same model family`);
    }
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
    const room = Math.max(0, Math.min(limit - 1, this.target.host.contextLength - this.ctx.length));
    if (room > 0 && this.draftSeq) return new ModelDraft(this.draftEngine!, this.draftSeq, this.ctx, room, this.policy, this.sampling, this.stops, this.prng, this.constraint);
    if (room > 0 && this.mtp) {
      // The MTP block drafts right here (one row per step, on its own copy of its window): nothing for a batch to share.
      const md = new ModelDraft(this.target.host as Engine, this.target, this.ctx, room, this.policy, this.sampling, this.stops, this.prng, this.constraint);
      // the drafter (which keys the MTP window) only when the policy drafts this step; its making is the step's setup
      const t0 = performance.now();
      const stepper = md.feed() ? this.target.host.mtpDrafter!(this.target) : null;
      if (stepper) {
        this.policy.observeDraftSetup(performance.now() - t0);
        md.runWith((token) => stepper.step(token));
      }
      this.pending = { ...md.result(), matchN: 0 };
      return null;
    }
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
      const hit = this.greedy ? next === p.check.token : this.checkSampled(rows, p.check, maskOf(0));
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
    const { tokens } = this.plan(limit);
    const t0 = performance.now();
    const rows = this.target.prefill(tokens, { allLogits: true });
    const emitted = this.complete(rows);
    // A verified row costs its forward and its acceptance (the row's law, the residual): both are timed.
    this.policy.observeVerify(tokens.length, performance.now() - t0);
    return emitted;
  }

  /**
   * Whether the rejection rule would have accepted the check token against
   * row 0 (its own draw, after the emitted token's: that token's law is the
   * plain step's).
   */
  private checkSampled(rows: Float32Array, check: NonNullable<ModelDraftResult['check']>, mask: Uint32Array | null): boolean {
    const p = targetDistribution(logitRow(rows, this.target.host.vocabSize, 0), this.sampling, this.ctx, mask);
    const q = check.dist ? probabilityOf(check.dist, check.token) : 1;
    return q > 0 && this.prng.nextFloat() < Math.min(1, probabilityOf(p, check.token) / q);
  }

  /** Frees the draft model's sequence (the target sequence belongs to the caller). */
  free(): void {
    this.draftSeq?.free();
  }
}

/**
 * An n-gram draft cut before the first token the grammar rejects (and after a
 * stop token, which ends the reply), with the grammar at each position.
 */
function cutToGrammar(tokens: readonly number[], start: TokenConstraint, stops: ReadonlySet<number>): { tokens: number[]; cursors: TokenConstraint[] } {
  const cursors = [start];
  const kept: number[] = [];
  for (const t of tokens) {
    const at = cursors[cursors.length - 1];
    if (!maskHas(at.mask(), t)) break;
    kept.push(t);
    cursors.push(at.advance(t));
    if (stops.has(t)) break;
  }
  return { tokens: kept, cursors };
}

function maskHas(bits: Uint32Array, id: number): boolean {
  return (bits[id >>> 5] & (1 << (id & 31))) !== 0;
}
