/**
 * KVTIER_BLOCK_TOKENS must equal the engine's KV page size: the tier keys and
 * stores blocks of that many tokens, exported page by page from the engine's
 * pool. A mismatch used to start fine and then turn every store into a
 * storage fault (counted, degraded to a miss, never a hit); it now stops the
 * engine thread at startup, naming both numbers.
 */
import { KvtError } from '../errors.ts';

export function checkBlockTokens(configured: number, enginePageTokens: number): void {
  if (configured === enginePageTokens) return;
  throw new KvtError(
    'KVT_ERR_CONFIG_BLOCK_TOKENS',
    `KVTIER_BLOCK_TOKENS is ${configured} but the engine's KV pages hold ${enginePageTokens} tokens: set KVTIER_BLOCK_TOKENS=${enginePageTokens} (or leave it unset)`,
  );
}
