/**
 * KVTIER_BLOCK_TOKENS against the engine's KV page size: a mismatch stops the
 * start with KVT_ERR_CONFIG_BLOCK_TOKENS naming both numbers (it used to start
 * and turn every store into a silent storage fault).
 */
import { describe, expect, it } from 'vitest';

import { ERROR_REGISTRY } from '../../../src/errors.ts';
import { checkBlockTokens } from '../../../src/scheduler/block-tokens-check.ts';
import { startTestServer } from '../serve/server-fixture.ts';

describe('KVTIER_BLOCK_TOKENS is checked against the engine page size at startup', () => {
  it('equal passes; different throws the typed config error naming both numbers', () => {
    expect(() => checkBlockTokens(64, 64)).not.toThrow();
    expect(() => checkBlockTokens(32, 64)).toThrow(expect.objectContaining({ code: 'KVT_ERR_CONFIG_BLOCK_TOKENS', message: expect.stringMatching(/\b32\b[\s\S]*\b64\b/) }));
    expect(ERROR_REGISTRY.KVT_ERR_CONFIG_BLOCK_TOKENS).toBeDefined();
  });

  it('a server configured with 32-token blocks on a 64-token-page engine does not start', async () => {
    const started = startTestServer({ blockTokens: 32 });
    await expect(started).rejects.toMatchObject({ code: 'KVT_ERR_CONFIG_BLOCK_TOKENS', message: expect.stringMatching(/KVTIER_BLOCK_TOKENS is 32 .* 64 tokens/) });
    const server = await started.catch(() => null);
    await server?.close();
  });
});
