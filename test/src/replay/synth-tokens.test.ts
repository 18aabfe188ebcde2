/**
 * The replay's token buffer against its plain twin, tokensForBlocks: the
 * same tokens for every request, whether the buffer grew, shrank its view or
 * was rewritten by the request before; and fillBlockTokens against the
 * definition written out with BigInt (a faster fill must not change a token).
 */
import { describe, expect, it } from 'vitest';

import { BlockTokenBuffer, fillBlockTokens, tokensForBlocks } from '../../../src/replay/index.ts';

/** The token definition, in exact integer arithmetic: the LCG from the mixed id, each state mod vocab. */
function referenceTokens(id: number, count: number, vocab: number): number[] {
  const M = 0xffffffffn;
  const mul = (a: bigint, b: bigint) => (a * b) & M;
  let x = mul(BigInt(id + 1), 0x9e3779b1n);
  x = mul(x ^ (x >> 16n), 0x7feb352dn);
  x = mul(x ^ (x >> 15n), 0x846ca68bn);
  x ^= x >> 16n;
  const out: number[] = [];
  for (let j = 0; j < count; j++) {
    x = (x * 0x2c9277b5n + 0x3c6ef35fn) & M;
    let t = x;
    if (vocab !== 0x7fffffff) {
      t = mul(x ^ (x >> 16n), 0x45d9f3bn);
      t ^= t >> 16n;
    }
    out.push(Number(t % BigInt(vocab)));
  }
  return out;
}

describe('BlockTokenBuffer', () => {
  it('gives tokensForBlocks exactly across requests of growing and shrinking size', () => {
    // Conversation-like requests: each resends a growing prefix of ids, interleaved across conversations.
    const requests: Uint32Array[] = [];
    for (let turn = 0; turn < 5; turn++) {
      for (let conversation = 0; conversation < 6; conversation++) {
        const ids: number[] = [];
        for (let t = 0; t <= turn; t++) for (let k = 0; k < 3; k++) ids.push(conversation * 1000 + t * 10 + k);
        requests.push(Uint32Array.from(ids));
      }
    }
    requests.push(Uint32Array.of(7), Uint32Array.of());
    for (const vocab of [undefined, 32_000]) {
      const buffer = new BlockTokenBuffer(16, vocab);
      for (const blocks of requests) expect(buffer.tokensFor(blocks)).toEqual(tokensForBlocks(blocks, 16, vocab));
    }
  });

  it('fillBlockTokens is the definition, token for token', () => {
    const out = new Uint32Array(64);
    for (const vocab of [0x7fffffff, 32_000, 151_936, 2]) {
      for (const id of [0, 1, 41, 65_535, 0x7ffffffe, 0xfffffffe]) {
        fillBlockTokens(out, 0, id, 64, vocab);
        expect([...out]).toEqual(referenceTokens(id, 64, vocab));
      }
    }
  });

  it('gives distinct ids distinct tokens, under any vocabulary (100,000 ids; a 256-token one: a power of two)', () => {
    for (const [vocab, tokens] of [[0x7fffffff, 4], [32_000, 4], [256, 8]]) {
      const out = new Uint32Array(tokens);
      const seen = new Set<string>();
      for (let id = 0; id < 100_000; id++) {
        fillBlockTokens(out, 0, id, tokens, vocab);
        seen.add(out.join(','));
      }
      expect(seen.size).toBe(100_000);
    }
  });
});
