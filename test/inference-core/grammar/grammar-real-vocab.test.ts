/**
 * The token mask on real vocabularies (Llama 3.1 byte-level BPE, 128k; Llama 2
 * SentencePiece with byte fallback, 32k) against the brute-force twin at
 * every state of short constrained replies — the plain-string bitsets, the
 * walk of tokens leaving a frame, split UTF-8 and '▁' pieces included — and
 * the replies validate (ajv).
 */
import Ajv from 'ajv';
import { describe, expect, it } from 'vitest';

import { bruteForceMask, constrainedDecoder, grammarOf, masksOf, vocabOf } from '../../../inference-core/grammar/index.ts';
import { readGguf, Tokenizer, Xoshiro128 } from '../../../inference-core/index.ts';
import { buildRealVocabGguf, type RealVocabName } from '../../helpers/real-vocab-gguf.ts';

const SCHEMAS = [
  { type: 'object', properties: { name: { type: 'string', maxLength: 6 }, n: { type: 'integer', minimum: -5, maximum: 50 } }, required: ['name', 'n'], additionalProperties: false },
  { type: 'array', items: { anyOf: [{ type: 'number' }, { enum: ['ä', 'b"c'] }] }, maxItems: 3 },
  { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'], additionalProperties: { type: 'string', maxLength: 3 } },
];

function pick(bits: Uint32Array, rng: Xoshiro128): number {
  const ids: number[] = [];
  for (let w = 0; w < bits.length; w++) if (bits[w]) for (let b = 0; b < 32; b++) if (bits[w] & (1 << b)) ids.push(w * 32 + b);
  return ids[rng.nextU32() % ids.length];
}

describe.each(['llama3_1', 'llama2'] as RealVocabName[])('grammar mask on the %s vocabulary', (name) => {
  it('equals the brute-force twin along random replies; replies validate', () => {
    const tok = Tokenizer.fromGguf(readGguf(buildRealVocabGguf(name)));
    const stops = [...tok.eogIds];
    const ajv = new Ajv({ strict: false });
    SCHEMAS.forEach((schema, si) => {
      const rng = new Xoshiro128(11 + si);
      const maxTokens = 26;
      const spec = { kind: 'json_schema' as const, schema };
      const masks = masksOf(grammarOf(spec), vocabOf(tok));
      const dec = constrainedDecoder(spec, tok, maxTokens, stops);
      let state = masks.initial();
      const ids: number[] = [];
      for (let step = 0; step < maxTokens; step++) {
        const bits = dec.nextMask();
        const withoutStops = bits.slice();
        for (const t of stops) withoutStops[t >>> 5] &= ~(1 << (t & 31));
        const twin = bruteForceMask(masks, state, maxTokens - step - 2);
        expect(withoutStops.every((w, i) => w === twin[i]), `${name} schema ${si} step ${step}`).toBe(true);
        const token = pick(bits, rng);
        dec.accept(token);
        if (stops.includes(token)) break;
        ids.push(token);
        state = masks.advance(state, tok.tokenToPiece(token));
      }
      const text = tok.decode(ids);
      expect(ajv.compile(schema)(JSON.parse(text)), text).toBe(true);
    });
  }, 300_000);
});
