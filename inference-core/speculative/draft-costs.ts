/**
 * The costs the draft-length policy (draft-length.ts) weighs, in target decode
 * steps: β, a verified row's marginal cost; γ, a draft step; σ, a drafting
 * step's fixed setup before its first draft (the MTP block keys the window
 * rows fed since it last drafted). Measured online from the step times, unless
 * fixed (tests).
 *
 * β is the slope of the fastest recent verification per row count: on a
 * shared machine a forward's time swings by several × with the load, and a
 * least-squares line through such times gave slopes anywhere from 0.04 to 0.9
 * on the same model; the minimum of a window is what the rows themselves cost.
 * γ is the fastest recent draft step (a first, cold one is not its cost); σ a
 * running mean of the setups.
 *
 * A request may start from a drafter's remembered times (drafter-memory.ts):
 * they stand in until its own steps are timed, so its first decision weighs
 * what drafting costs on this engine, not the defaults.
 */

/** Marginal verify-row cost before any step was timed (CPU, small batch). */
export const DEFAULT_ROW_COST = 0.15;
/** A draft step over a target step before either was timed. */
const DEFAULT_DRAFT_COST = 0.1;
/** Pseudo-samples of DEFAULT_ROW_COST in the measured row cost. */
const ROW_COST_PRIOR = 2;
/** Timings kept per row count, and draft steps kept (the fastest of them stands for them). */
const TIME_WINDOW = 16;
const EMA = 0.1;

export interface FixedCosts {
  rowCost?: number;
  draftCost?: number;
  setupCost?: number;
}

/** Times (ms) a drafter's last requests measured: a fresh request's stand-ins (0: not measured). */
export interface RememberedTimes {
  stepMs: number;
  draftMs: number;
  setupMs: number;
}

export class DraftCosts {
  /** The last TIME_WINDOW verification times (ms) by row count. */
  private readonly times = new Map<number, number[]>();
  private stepMs1 = 0;
  /** The last TIME_WINDOW draft step times (ms). */
  private readonly draftTimes: number[] = [];
  private setupMs = 0;
  /**
   * The derived figures, computed once per new timing: a decode step that drafts nothing asks for them several
   * times (whether to draft, the probe gap) and must not pay a scan of the windows each time (~0.1 ms of session
   * work per step was 2–3 % of a deepseek4-small step).
   */
  private cache: { rowCost: number; draftCost: number; setupCost: number; stepMs: number; draftMs: number } | null = null;

  constructor(
    private readonly fixed: FixedCosts,
    remembered?: RememberedTimes,
  ) {
    if (!remembered) return;
    // stand-ins: the running step estimate (replaced by the fastest timed 1-row step once there is one),
    // one draft step sample (aged out of the window by the request's own), the setup's running mean
    this.stepMs1 = remembered.stepMs;
    if (remembered.draftMs > 0) this.draftTimes.push(remembered.draftMs);
    this.setupMs = remembered.setupMs;
  }

  /** β: the marginal cost of one more verified row, over a target decode step. */
  get rowCost(): number {
    return this.fixed.rowCost ?? this.derived().rowCost;
  }

  /** γ: a draft step over a target decode step. */
  get draftCost(): number {
    return this.fixed.draftCost ?? this.derived().draftCost;
  }

  /** σ: a drafting step's setup (before its first draft step) over a target decode step. */
  get setupCost(): number {
    return this.fixed.setupCost ?? this.derived().setupCost;
  }

  /** A target decode step (ms): the fastest recent 1-row forward, else the running estimate. */
  get targetStepMs(): number {
    return this.derived().stepMs;
  }

  /** What a later request on the same drafter may start from. */
  remembered(): RememberedTimes {
    const d = this.derived();
    return { stepMs: d.stepMs, draftMs: d.draftMs, setupMs: this.setupMs };
  }

  /** Times a target forward of `rows` rows for one sequence, with its acceptance (ms). */
  observeVerify(rows: number, ms: number): void {
    this.cache = null;
    if (rows === 1) this.stepMs1 = ema(this.stepMs1, ms);
    let ts = this.times.get(rows);
    if (ts === undefined) this.times.set(rows, (ts = []));
    ts.push(ms);
    if (ts.length > TIME_WINDOW) ts.shift();
    if (this.stepMs1 === 0) this.stepMs1 = Math.max(1e-6, ms / (1 + this.rowCost * (rows - 1)));
    this.cache = null;
  }

  observeDraftStep(ms: number): void {
    this.cache = null;
    this.draftTimes.push(ms);
    if (this.draftTimes.length > TIME_WINDOW) this.draftTimes.shift();
  }

  observeDraftSetup(ms: number): void {
    this.cache = null;
    this.setupMs = ema(this.setupMs, ms);
  }

  private derived(): NonNullable<DraftCosts['cache']> {
    if (this.cache) return this.cache;
    const stepMs = this.fastest(1) ?? this.stepMs1;
    const draftMs = this.draftTimes.length > 0 ? Math.min(...this.draftTimes) : 0;
    const rowCost = this.measuredRowCost();
    const draftCost = stepMs <= 0 || this.draftTimes.length === 0 ? DEFAULT_DRAFT_COST : Math.min(1, Math.max(0.005, draftMs / stepMs));
    const setupCost = stepMs <= 0 || this.setupMs <= 0 ? 0 : Math.min(4, this.setupMs / stepMs);
    return (this.cache = { rowCost, draftCost, setupCost, stepMs, draftMs });
  }

  private measuredRowCost(): number {
    const one = this.fastest(1);
    if (one === undefined || one <= 0) return DEFAULT_ROW_COST;
    // Relative slope from 1 row to each other row count seen, weighted by how often it was seen,
    // with ROW_COST_PRIOR pseudo-samples of the default (one slow sample must not end drafting).
    let sum = ROW_COST_PRIOR * DEFAULT_ROW_COST;
    let weight = ROW_COST_PRIOR;
    for (const [rows, ts] of this.times) {
      if (rows === 1) continue;
      sum += ts.length * Math.min(1, Math.max(0.01, (Math.min(...ts) - one) / (rows - 1) / one));
      weight += ts.length;
    }
    return sum / weight;
  }

  private fastest(rows: number): number | undefined {
    const ts = this.times.get(rows);
    return ts && ts.length > 0 ? Math.min(...ts) : undefined;
  }
}

function ema(prev: number, x: number): number {
  return prev === 0 ? x : prev + EMA * (x - prev);
}
