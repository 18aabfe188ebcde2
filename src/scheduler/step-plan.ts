/**
 * What one engine step carries, chosen under a token budget (chunked prefill,
 * as vLLM's scheduler does with max_num_batched_tokens):
 *
 *   budget = stepTokens
 *   ├─ 1 row per decoding sequence, always (a reply never stalls behind a prompt)
 *   └─ the rest goes to prompts being prefilled, shortest remaining first:
 *      a cached turn's short suffix gets its first token in the next step
 *      instead of waiting behind another session's cold 3k-token prompt,
 *      which is cut into chunks around it. A prompt passed over `agingSteps`
 *      times goes first, so a long prompt is never starved by short ones.
 *
 * Pure: the scheduler owns the state, this only decides.
 */

const MIN_FILL_TOKENS = 32;

export interface PrefillCandidate {
  /** Prompt tokens still to prefill (> 0). */
  remaining: number;
  /** Steps this prompt got no tokens in (reset when it gets some). */
  skipped: number;
  /** Admission order, for ties. */
  order: number;
}

export interface PlanOptions {
  stepTokens: number;
  /** Rows one engine forward can carry at all. */
  maxRows: number;
  agingSteps: number;
  /** Rows of the step already taken by decoding sequences. */
  decodeRows: number;
}

/** Tokens each candidate gets this step (same order as `candidates`; 0 = passed over). */
export function planPrefillChunks(candidates: readonly PrefillCandidate[], options: PlanOptions): number[] {
  const chunks = candidates.map(() => 0);
  if (candidates.length === 0) return chunks;
  // Decoders never take the whole step: the first prompt always moves by at least a small chunk.
  let budget = Math.min(Math.max(options.stepTokens - options.decodeRows, Math.min(32, options.stepTokens)), options.maxRows - options.decodeRows);
  const byPriority = candidates
    .map((candidate, index) => ({ candidate, index }))
    .sort((a, b) => {
      const agedA = a.candidate.skipped >= options.agingSteps;
      const agedB = b.candidate.skipped >= options.agingSteps;
      if (agedA !== agedB) return agedA ? -1 : 1;
      return a.candidate.remaining - b.candidate.remaining || a.candidate.order - b.candidate.order;
    });
  for (const { candidate, index } of byPriority) {
    // A sliver of a second prompt only makes this step longer; it finishes no sooner.
    if (budget <= 0 || (index !== byPriority[0].index && budget < MIN_FILL_TOKENS && candidate.remaining > budget)) break;
    chunks[index] = Math.min(candidate.remaining, budget);
    budget -= chunks[index];
  }
  return chunks;
}
