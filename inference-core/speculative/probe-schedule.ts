/**
 * When a draft model (or MTP) probes while its drafts do not pay (draft-length.ts decides the
 * rest): steps without drafting before the first 1-token probe; each failed probe doubles the gap up to the longest, an accepted one
 * probes again the next step, so drafting comes back once the acceptance
 * (a drafter whose text started to match) pays for it again. A probe is not
 * verified: its token is checked against the row the step computes anyway
 * (the target's own next token), so a failing probe costs its draft step and
 * setup, not a second verified row (on CPU ~0.7 of a target step for the MTP
 * block's trunk, as much as the draft itself). The first draft of a request
 * is such a probe too when nothing is known of the drafter yet (no memory of
 * it from earlier requests, drafter-memory.ts); a miss there does not double
 * the gap. The first gap is β + γ + σ (in target steps) over
 * PROBE_BUDGET, within [MODEL_PROBE_AFTER, MODEL_PROBE_FIRST_MAX]. A probe no
 * longer pays β, but β stays in the gap: σ is the setup measured at the last
 * draft, and the MTP block's setup grows with the gap (it keys every row fed
 * since its last draft, ~0.06 ms a row here), so a gap from γ + σ alone would
 * shrink until keying alone passed the budget. A drafter that starts matching
 * waits at most MODEL_PROBE_FIRST_MAX steps (a cheap draft model probes after
 * 16 steps; deepseek4's MTP block on CPU after 60–64) once the gap was reset
 * by a hit; while probes keep failing it waits at most MODEL_PROBE_MAX.
 *
 * PROBES ACROSS REQUESTS: with a drafter memory a request goes on with the
 * drafter's schedule (its failed probes in a row, its steps since its last
 * draft), so short requests share probes; the bound on how late drafts that
 * start paying are seen is stated in drafter-memory.ts (MODEL_PROBE_MAX).
 */
const MODEL_PROBE_AFTER = 16;
const MODEL_PROBE_FIRST_MAX = 64;
const PROBE_BUDGET = 0.01;
/** The longest gap, whatever the failed probes: the bound drafter-memory.ts states. */
const MODEL_PROBE_MAX = 1024;
/** More doublings than any gap needs to reach MODEL_PROBE_MAX, which bounds it. */
export const MAX_PROBE_DOUBLINGS = 20;

/**
 * Steps without drafting before the next 1-token probe: 1 after an accepted probe, else the first gap
 * (β + γ + σ over PROBE_BUDGET, in target steps, within [MODEL_PROBE_AFTER, MODEL_PROBE_FIRST_MAX])
 * doubled per failed probe in a row, at most MODEL_PROBE_MAX.
 */
export function modelProbeGap(lastProbeHit: boolean, stepCost: number, failedProbes: number): number {
  if (lastProbeHit) return 1;
  const first = Math.min(MODEL_PROBE_FIRST_MAX, Math.max(MODEL_PROBE_AFTER, Math.ceil(stepCost / PROBE_BUDGET)));
  return Math.min(MODEL_PROBE_MAX, first * 2 ** Math.min(failedProbes, MAX_PROBE_DOUBLINGS));
}
