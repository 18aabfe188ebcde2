import type { RequestSpec } from './job.ts';
import type { EngineModel } from './ports.ts';
import type { RetainedSequences } from './retained-sequences.ts';
import type { RequestSequence } from './sequence.ts';

/**
 * KV pool admission: a job starts only when its whole sequence (prompt +
 * max_tokens) fits next to the admitted ones, so a busy worker queues
 * requests instead of failing them. Alone, a job always starts (and gets
 * the engine's typed pool error if it cannot fit at all). Retained
 * sequences are evicted, oldest first, to make the room.
 */
export function fitsInPool(
  spec: RequestSpec,
  loop: { engine: EngineModel; blockTokens: number; active: readonly RequestSequence[]; retained: RetainedSequences },
): boolean {
  const { engine, blockTokens } = loop;
  const pages = Math.ceil((spec.tokens.length + spec.sampling.maxTokens) / blockTokens);
  const stillToTake = loop.active.reduce((sum, seq) => sum + seq.pagesStillToTake(blockTokens), 0);
  // Retained sequences are a cache: their pages go before any request waits for room.
  while (engine.freeBlocks() - stillToTake < pages && loop.retained.evictOldest());
  return loop.active.length === 0 || engine.freeBlocks() - stillToTake >= pages;
}
