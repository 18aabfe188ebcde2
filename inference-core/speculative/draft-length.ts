/**
 * How many drafted tokens to verify. Verifying k drafts costs one forward of
 * k+1 rows instead of 1 — relative cost 1 + β·k, β the marginal row cost —
 * and drafting them with a draft model costs γ·k (γ: a draft decode step over
 * a target decode step). With α_i the chance that draft i is accepted given
 * drafts 1..i-1 were, the tokens one verification yields are
 *
 *   E(k) = 1 + Σ_{i≤k} Π_{j≤i} α_j
 *
 * and the policy picks the k that maximizes E(k) / (1 + (β+γ)·k): an extra
 * draft is only verified while its expected tokens pay for its row. k = 0 is
 * plain decoding, so a workload whose drafts are useless falls back to it.
 *
 * α comes from what is known about each candidate: n-gram drafts use the
 * running acceptance per match length (longer matches are likelier to
 * continue), a Beta prior centred on the request's overall acceptance; a draft
 * model's token uses its own probability, blended with the request's running
 * acceptance (draft models are over-confident on text they copy badly). A
 * model drafter's request starts from what the drafter's earlier requests
 * judged (drafter-memory.ts) when there were any.
 * A drafting step may also pay a fixed setup σ before its first draft (the MTP
 * block keys the window rows fed since it last drafted): starting to draft is
 * worth it only when the first token's α beats β + γ + σ. β, γ and σ are
 * measured online (draft-costs.ts).
 */
import { DraftCosts } from './draft-costs.ts';
import type { DrafterMemory } from './drafter-memory.ts';
import { modelProbeGap } from './probe-schedule.ts';

export type DraftLengthMode = 'fixed' | 'adaptive';

export const DEFAULT_FIXED_DRAFT = 5;
export const DEFAULT_MAX_DRAFT = 12;
/** Pseudo-counts of the Beta prior of each match length's acceptance. */
const PRIOR_WEIGHT = 2;
/** After this many steps without drafting, one 1-token probe refreshes the statistics. */
const PROBE_AFTER = 64;
export interface DraftLengthOptions {
  mode: DraftLengthMode;
  fixed?: number;
  maxDraft?: number;
  /** Fixed costs (tests: deterministic lengths); absent: measured. */
  rowCost?: number;
  draftCost?: number;
  /** Fixed setup cost of a drafting step (tests); absent: measured (0 until observed). */
  setupCost?: number;
  /**
   * Model drafts: the drafter's memory across requests (drafter-memory.ts). One that knows the drafter
   * replaces the first-step probe and is kept up to date; null or absent: none (the first draft probes).
   */
  memory?: DrafterMemory | null;
}

export class DraftLengthPolicy {
  readonly mode: DraftLengthMode;
  readonly fixed: number;
  readonly maxDraft: number;
  private readonly costs: DraftCosts;
  private readonly memory: DrafterMemory | null;
  /** The drafter's remembered judgements (decayed counts): the acceptance prior beside the request's own. */
  private readonly priorProposed: number;
  private readonly priorAccepted: number;
  /** Per n-gram match length: positions tried and accepted. */
  private readonly tries = new Map<number, number>();
  private readonly hits = new Map<number, number>();
  proposed = 0;
  accepted = 0;
  verifications = 0;
  private idle = 0;
  private modelIdle = 0;
  /**
   * Steps left of a run that does not draft, decided at its first step: up to the probe that ends it, where the
   * costs and the acceptance are weighed again. Nothing judged changes within such a run (it drafts nothing), so
   * only drifting step times could have changed a decision in it, and a step inside it asks nothing.
   */
  private plainLeft = 0;
  /** The last probe was accepted (probe again next step); else failed probes since the last accepted one. */
  private probeHit = false;
  private failedProbes = 0;
  /** This step's model draft is a 1-token probe (checked against the step's own row, not verified). */
  private probing = false;
  get isProbe(): boolean {
    return this.probing;
  }
  /** Nothing is known of the drafter (no model draft of this request nor, in the memory, of earlier ones was judged): the next draft is a probe. */
  private unprobed = true;

  constructor(o: DraftLengthOptions) {
    this.mode = o.mode;
    this.fixed = o.fixed ?? DEFAULT_FIXED_DRAFT;
    this.maxDraft = Math.max(this.fixed, o.maxDraft ?? DEFAULT_MAX_DRAFT);
    this.memory = o.memory ?? null;
    const known = this.memory?.known === true;
    this.costs = new DraftCosts(o, known ? this.memory!.times : undefined);
    this.memory?.follow(this.costs);
    // a drafter whose drafts were judged before: what they did stands in for this request's first-step probe
    if (known) this.unprobed = false;
    // the probe schedule goes on from the drafter's earlier requests (probe-schedule.ts: probes across requests)
    if (known) {
      this.failedProbes = this.memory!.failedProbes;
      this.modelIdle = this.memory!.idleSteps;
    }
    this.priorProposed = known ? this.memory!.proposed : 0;
    this.priorAccepted = known ? this.memory!.accepted : 0;
  }

  /** Running acceptance of the request (proposed drafts that were accepted; the drafter's memory's before them), with a weak optimistic prior. */
  get acceptanceRate(): number {
    return (this.accepted + this.priorAccepted + 1) / (this.proposed + this.priorProposed + 2);
  }

  get rowCost(): number {
    return this.costs.rowCost;
  }

  get draftCost(): number {
    return this.costs.draftCost;
  }

  /** σ: a drafting step's setup (before its first draft step) over a target decode step. */
  get setupCost(): number {
    return this.costs.setupCost;
  }

  /** Steps without drafting before the next 1-token probe (probe-schedule.ts). */
  get probeGap(): number {
    return modelProbeGap(this.probeHit, this.rowCost + this.draftCost + this.setupCost, this.failedProbes);
  }

  /** Acceptance estimate of one n-gram draft position for a suffix match of length n. */
  ngramAlpha(matchN: number): number {
    const prior = this.acceptanceRate;
    return ((this.hits.get(matchN) ?? 0) + PRIOR_WEIGHT * prior) / ((this.tries.get(matchN) ?? 0) + PRIOR_WEIGHT);
  }

  /** Drafts of an n-gram proposal of `available` tokens (match length `matchN`) worth verifying. */
  ngramLength(available: number, matchN: number): number {
    if (available === 0) return 0;
    if (this.mode === 'fixed') return Math.min(available, this.fixed);
    const k = bestLength(Math.min(available, this.maxDraft), () => this.ngramAlpha(matchN), this.rowCost);
    return this.probe(k);
  }

  /**
   * Draft model: whether drafting continues past `depth` tokens whose
   * cumulative acceptance estimates sum to `expected` − 1 and end at `reach`
   * (Π α so far). The next token's draft probability is known only after
   * drafting it, so the request's running acceptance stands in for it. One
   * more token raises tokens per step only when its expected gain beats its
   * cost (a row to verify, a draft step) times the current tokens per cost.
   */
  continueDrafting(depth: number, reach: number, expected = 1 + depth * reach): boolean {
    if (depth >= this.maxDraft || (this.probing && depth >= 1)) return false;
    if (this.mode === 'fixed') return depth < this.fixed;
    const perToken = this.rowCost + this.draftCost;
    const setup = this.setupCost;
    // the first token also pays the step's setup; a later one is weighed against the step's tokens per cost so far
    if (depth === 0) return reach * this.acceptanceRate >= perToken + setup;
    const ratio = expected / (1 + setup + perToken * depth);
    return reach * this.acceptanceRate >= perToken * ratio;
  }

  /**
   * Draft model: whether this step drafts at all (once per step): as
   * continueDrafting(0), else, after a run of steps that did not, a 1-token
   * probe (its verification is recorded like any other).
   */
  startDrafting(): boolean {
    this.probing = false;
    if (this.plainLeft > 0) {
      this.plainLeft--;
      return this.idleStep();
    }
    if (this.unprobed && this.mode === 'adaptive' && this.maxDraft > 0) return this.drafts(true);
    if (this.continueDrafting(0, 1, 1)) return this.drafts(false);
    if (this.mode === 'fixed' || this.maxDraft === 0) return false;
    const gap = this.probeGap;
    if (this.modelIdle + 1 >= gap) return this.drafts(true);
    this.plainLeft = gap - this.modelIdle - 2;
    return this.idleStep();
  }

  private idleStep(): false {
    this.modelIdle++;
    if (this.memory) this.memory.idleSteps++;
    return false;
  }

  private drafts(probe: boolean): true {
    this.modelIdle = 0;
    if (this.memory) this.memory.idleSteps = 0;
    this.probing = probe;
    return true;
  }

  /** Draft model: α of a drafted token whose draft probability is `q`. */
  draftAlpha(q: number): number {
    return 0.5 * q + 0.5 * this.acceptanceRate;
  }

  /**
   * Draft model: how many of the drafted tokens (their α) to verify. A
   * drafted first token not verified is still checked against the step's own
   * row (SpeculativeSession), which is how a probe is checked: 0 for a probe.
   */
  draftModelLength(alphas: readonly number[]): number {
    if (this.mode === 'fixed') return Math.min(alphas.length, this.fixed);
    if (this.probing) return 0;
    return bestLength(alphas.length, (i) => alphas[i], this.rowCost);
  }

  /**
   * Records a verification of `proposed` drafts of which `accepted` were
   * taken (matchN: n-gram source), or a drafted token checked against the
   * step's own row as one of 1 draft.
   */
  record(proposed: number, accepted: number, matchN = 0): void {
    if (this.probing && proposed > 0) {
      // accepted: probe again next step; failed: the gap doubles (back to the first gap after an accepted
      // probe), but not for the request's first draft, which only stood in for the unknown acceptance
      if (accepted > 0) this.failedProbes = 0;
      else if (!this.probeHit && !this.unprobed) this.failedProbes++;
      if (accepted > 0 || (!this.probeHit && !this.unprobed)) this.memory?.noteProbe(accepted > 0);
      this.probeHit = accepted > 0;
    }
    if (proposed > 0) this.unprobed = false;
    this.probing = false;
    if (proposed === 0) return;
    // n-gram drafts have no memory: they depend on the request's own text
    if (matchN === 0) this.memory?.noteJudged(proposed, accepted);
    this.verifications++;
    this.proposed += proposed;
    this.accepted += accepted;
    if (matchN > 0) {
      const tried = accepted < proposed ? accepted + 1 : accepted;
      this.tries.set(matchN, (this.tries.get(matchN) ?? 0) + tried);
      this.hits.set(matchN, (this.hits.get(matchN) ?? 0) + accepted);
    }
  }

  /** Times of a target forward of `rows` rows for one sequence, with its acceptance (ms). */
  observeVerify(rows: number, ms: number): void {
    this.costs.observeVerify(rows, ms);
  }

  observeDraftStep(ms: number): void {
    this.costs.observeDraftStep(ms);
  }

  /** Times a drafting step's setup before its first draft step (the MTP block keying its window), ms. */
  observeDraftSetup(ms: number): void {
    this.costs.observeDraftSetup(ms);
  }

  private probe(k: number): number {
    if (k > 0) {
      this.idle = 0;
      return k;
    }
    if (++this.idle < PROBE_AFTER) return 0;
    this.idle = 0;
    return 1;
  }
}

/** argmax over k in [0, max] of E(k) / (1 + cost·k), E as in the file comment. */
export function bestLength(max: number, alpha: (i: number) => number, cost: number): number {
  let best = 0;
  let bestRatio = 1;
  let reach = 1;
  let expected = 1;
  for (let k = 1; k <= max; k++) {
    reach *= alpha(k - 1);
    expected += reach;
    const ratio = expected / (1 + cost * k);
    if (ratio > bestRatio) {
      bestRatio = ratio;
      best = k;
    }
  }
  return best;
}
