/**
 * What a drafter's drafts did lately, across the requests it drafted for.
 *
 * Acceptance is a property of the model and the traffic more than of one
 * request, so a request on an engine whose drafts keep failing should not pay
 * a probe at its first step to learn that again (on deepseek4-small's MTP
 * block on CPU that probe cost ~4 ms, ~1 % of a 128-token reply). A memory
 * holds:
 *   - the drafts judged (verified, or checked against a plain step's row) and
 *     how many were taken, decayed so that about the last RECENT weigh: a new
 *     request's acceptance prior;
 *   - the drafter's times (a target step, a draft step, a drafting step's
 *     setup): a new request's stand-ins until its own steps are timed.
 *
 *   - the probe schedule: probes that failed in a row (a hit resets it) and
 *     the decode steps its requests ran without drafting since its last draft
 *     (summed over them).
 *
 * A request on a drafter with a memory skips the first-step probe and decides
 * as a request that already knows the acceptance (draft-length.ts): it drafts,
 * verified, from its first step when the remembered acceptance pays for the
 * drafting, else it starts with drafting off and goes on with the drafter's
 * probe schedule: its gap doubles with the failed probes of earlier requests
 * too, and the steps they ran since the last probe count towards it. So on
 * a drafter whose drafts keep failing, short requests share one probe instead
 * of paying one each. The bound: the gap is at most MODEL_PROBE_MAX steps (probe-schedule.ts), so
 * once the drafter's requests have run that many steps without a draft, the
 * next request to start probes at its first step, and any request probes
 * within its own first MODEL_PROBE_MAX steps; a hit resets the schedule
 * (probe again the next step, then the first gap) and raises the acceptance.
 * A drafter nothing was judged on yet has no memory, so its first request
 * probes at once.
 *
 * A request reads the memory once, when it starts (its policy copies the
 * counts and times), writes every judgement to it, and its timings become
 * the memory's from then on (read when the next request starts). So a
 * request's draft lengths do not depend on how its steps interleave with
 * other requests' (batched in one step or not), only on what had been judged
 * before it started.
 *
 * Output never depends on the memory: it only picks how many tokens to draft,
 * and every draft is verified or checked exactly (greedy output unchanged,
 * the sampled law kept; rollback as without it).
 *
 * Keyed by (target engine, drafter engine); for MTP both are the target.
 * Weak maps: an engine's memory goes with the engine.
 */
import type { RememberedTimes } from './draft-costs.ts';
import { MAX_PROBE_DOUBLINGS } from './probe-schedule.ts';

/** Judged drafts that weigh in the memory's acceptance (older ones decay by 1 − 1/RECENT per new one). */
const RECENT = 8;
const DECAY = 1 - 1 / RECENT;

/** Where a memory reads the drafter's latest times: the costs of the last request that started on it. */
export interface TimesSource {
  remembered(): RememberedTimes;
}

export class DrafterMemory {
  /** Judged drafts and the taken ones, decayed (see RECENT). */
  proposed = 0;
  accepted = 0;
  /** Probes judged failed in a row, over requests (a hit resets it): the probe gap's doublings. */
  failedProbes = 0;
  /** Decode steps of the drafter's requests since its last draft or probe, summed over them. */
  idleSteps = 0;
  private kept: RememberedTimes = { stepMs: 0, draftMs: 0, setupMs: 0 };
  /**
   * The times are read from the latest request's costs when a request starts, not written at every step: a
   * write per step (an object, a scan of the timing windows) was ~15 µs of a decode step that drafts nothing.
   */
  private source: TimesSource | null = null;

  /** The drafter's latest measured times (a request that has not timed something yet leaves the older figure). */
  get times(): RememberedTimes {
    if (this.source) this.noteTimes(this.source.remembered());
    return this.kept;
  }

  /** Makes `costs` (a request starting on the drafter) the source of its times from now on, keeping the last source's. */
  follow(costs: TimesSource): void {
    if (this.source) this.noteTimes(this.source.remembered());
    this.source = costs;
  }

  /** Whether any draft of this drafter was judged: a request may then skip its first-step probe. */
  get known(): boolean {
    return this.proposed > 0;
  }

  /** One judgement: `proposed` drafts of which `accepted` were taken. */
  noteJudged(proposed: number, accepted: number): void {
    this.proposed = this.proposed * DECAY + proposed;
    this.accepted = this.accepted * DECAY + accepted;
  }

  /** A probe judged: a hit resets the schedule, a failure doubles the next gap (bounded: see the file comment). */
  noteProbe(hit: boolean): void {
    this.failedProbes = hit ? 0 : Math.min(MAX_PROBE_DOUBLINGS, this.failedProbes + 1);
  }

  /** The drafter's latest measured times (0 where not measured: the older figure stays). */
  noteTimes(t: RememberedTimes): void {
    this.kept = {
      stepMs: t.stepMs > 0 ? t.stepMs : this.kept.stepMs,
      draftMs: t.draftMs > 0 ? t.draftMs : this.kept.draftMs,
      setupMs: t.setupMs > 0 ? t.setupMs : this.kept.setupMs,
    };
  }
}

const memories = new WeakMap<object, WeakMap<object, DrafterMemory>>();

/** The memory of `drafter` drafting for `target` (made empty on first use). */
export function drafterMemory(target: object, drafter: object): DrafterMemory {
  let byDrafter = memories.get(target);
  if (!byDrafter) memories.set(target, (byDrafter = new WeakMap()));
  let m = byDrafter.get(drafter);
  if (!m) byDrafter.set(drafter, (m = new DrafterMemory()));
  return m;
}
