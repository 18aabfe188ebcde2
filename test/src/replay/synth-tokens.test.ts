/**
 * The replay's block token cache against its plain twin, tokensForBlocks:
 * the same tokens for every request, whether a block was cached, made anew,
 * or made again after the cache was cleared for space.
 */
import { describe, expect, it } from 'vitest';

import { BlockTokenCache, tokensForBlocks } from '../../../src/replay/index.ts';

describe('BlockTokenCache', () => {
  it('gives tokensForBlocks exactly, across hits, misses and clears', () => {
    // Conversation-like requests: each resends a growing prefix of ids, so most blocks repeat.
    const requests: Uint32Array[] = [];
    for (let conversation = 0; conversation < 6; conversation++) {
      const ids: number[] = [];
      for (let turn = 0; turn < 5; turn++) {
        for (let k = 0; k < 3; k++) ids.push(conversation * 1000 + turn * 10 + k);
        requests.push(Uint32Array.from(ids));
      }
    }
    for (const vocab of [undefined, 32_000]) {
      const cache = new BlockTokenCache(16, vocab, 7); // capacity below one request's blocks: clears mid-request
      for (const blocks of requests) expect(cache.tokensFor(blocks)).toEqual(tokensForBlocks(blocks, 16, vocab));
    }
  });

  it('returns a fresh array each call (a caller may keep or change it)', () => {
    const cache = new BlockTokenCache(8);
    const first = cache.tokensFor(Uint32Array.of(1, 2));
    first.fill(0);
    expect(cache.tokensFor(Uint32Array.of(1, 2))).toEqual(tokensForBlocks(Uint32Array.of(1, 2), 8));
  });
});
