import type { DraftLengthPolicy } from '../../inference-core/speculative/index.ts';

/** Steps (1-based) at which `policy` starts a draft over `steps` steps (probes included), each judged as `accepted(step)`. */
export function draftingSteps(policy: DraftLengthPolicy, steps: number, accepted: (step: number) => boolean): number[] {
  const out: number[] = [];
  for (let s = 1; s <= steps; s++) {
    if (!policy.startDrafting()) {
      policy.record(0, 0);
      continue;
    }
    out.push(s);
    const k = Math.max(1, policy.draftModelLength([0.9, 0.9, 0.9]));
    policy.record(k, accepted(s) ? k : 0);
  }
  return out;
}
