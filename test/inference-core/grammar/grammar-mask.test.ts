/**
 * The token mask against its reference twin (every token's bytes through the
 * matcher, one by one) on small vocabularies, along seeded random walks of
 * constrained replies — every state a reply visits, with the budget shrinking
 * to the end — and every finished reply parses and validates with ajv.
 */
import Ajv from 'ajv';
import { describe, expect, it } from 'vitest';

import { bruteForceMask, constrainedDecoder, grammarOf, maskHas, masksOf, vocabOf } from '../../../inference-core/grammar/index.ts';
import { Xoshiro128 } from '../../../inference-core/index.ts';
import { STRUCTURED_SCHEMAS } from '../../helpers/structured-schemas.ts';
import { smallVocab } from './small-vocab.ts';

const STOP = -1; // replaced by the vocabulary's control token below

function randomAllowed(bits: Uint32Array, rng: Xoshiro128): number {
  const ids: number[] = [];
  for (let w = 0; w < bits.length; w++) for (let b = 0; b < 32; b++) if (bits[w] & (1 << b)) ids.push(w * 32 + b);
  return ids[rng.nextU32() % ids.length];
}

describe('grammar token mask', () => {
  const vocab = smallVocab(7);
  const stop = vocab.pieces.findIndex((p) => p.length === 0);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const ajv = new Ajv({ strict: false });

  for (const { name, schema } of STRUCTURED_SCHEMAS) {
    it(`${name}: mask equals the brute-force twin at every step, and the reply validates`, () => {
      const validate = ajv.compile(schema);
      for (const seed of [1, 2, 3]) {
        const rng = new Xoshiro128(seed * 7919 + name.length);
        const maxTokens = 8 + (rng.nextU32() % 60);
        const spec = { kind: 'json_schema' as const, schema };
        const masks = masksOf(grammarOf(spec), vocabOf(vocab));
        let dec;
        try {
          dec = constrainedDecoder(spec, vocab, maxTokens, [stop]);
        } catch (error) {
          expect((error as { code?: string }).code).toBe('KVT_ERR_GRAMMAR_BUDGET');
          continue;
        }
        const bytes: number[] = [];
        let state = masks.initial();
        for (let step = 0; step < maxTokens; step++) {
          const remaining = maxTokens - step;
          const bits = dec.nextMask();
          const twin = bruteForceMask(masks, state, remaining - 2);
          const withoutStop = bits.slice();
          withoutStop[stop >>> 5] &= ~(1 << (stop & 31));
          if (remaining >= 2) expect([...withoutStop]).toEqual([...twin]);
          else expect(withoutStop.every((w) => w === 0)).toBe(true);
          const token = randomAllowed(bits, rng);
          dec.accept(token);
          if (token === stop) break;
          for (const b of vocab.pieces[token]) bytes.push(b);
          state = masks.advance(state, vocab.pieces[token]);
          expect(masks.cost(state)).toBeLessThanOrEqual(remaining - 2);
        }
        expect(dec.finished).toBe(true);
        const text = decoder.decode(Uint8Array.from(bytes));
        const value = JSON.parse(text) as unknown;
        expect(validate(value), `${text}: ${JSON.stringify(validate.errors)}`).toBe(true);
      }
    });
  }

  it('optional tool call (strict tools, tool_choice auto): free text, or text then one valid call; mask equals the twin', () => {
    const tools = [
      { name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'], additionalProperties: false } },
      { name: 'echo', parameters: { type: 'object', properties: { text: { type: 'string', maxLength: 5 } }, required: ['text'], additionalProperties: false } },
    ];
    const spec = { kind: 'tool_call' as const, tools, optional: true };
    const masks = masksOf(grammarOf(spec), vocabOf(vocab));
    const marker = vocab.pieces.findIndex((p) => new TextDecoder().decode(p) === '<tool_call>');
    let calls = 0;
    for (let seed = 1; seed <= 12; seed++) {
      const rng = new Xoshiro128(seed);
      const maxTokens = 60;
      const dec = constrainedDecoder(spec, vocab, maxTokens, [stop]);
      let state = masks.initial();
      const bytes: number[] = [];
      for (let step = 0; step < maxTokens; step++) {
        const bits = dec.nextMask();
        const withoutStop = bits.slice();
        withoutStop[stop >>> 5] &= ~(1 << (stop & 31));
        expect([...withoutStop]).toEqual([...bruteForceMask(masks, state, maxTokens - step - 2)]);
        // Steer towards the marker now and then, so calls happen.
        const token = step === 3 && seed % 2 === 0 && maskHas(bits, marker) ? marker : randomAllowed(bits, rng);
        dec.accept(token);
        if (token === stop) break;
        for (const b of vocab.pieces[token]) bytes.push(b);
        state = masks.advance(state, vocab.pieces[token]);
      }
      const text = new TextDecoder().decode(Uint8Array.from(bytes));
      const at = text.indexOf('<tool_call>');
      if (at === -1) continue;
      calls++;
      const body = text.slice(at + '<tool_call>'.length);
      expect(body.endsWith('}\n</tool_call>')).toBe(true);
      const call = JSON.parse(body.slice(0, -'\n</tool_call>'.length)) as { name: string; arguments: unknown };
      const tool = tools.find((t) => t.name === call.name)!;
      expect(ajv.compile(tool.parameters)(call.arguments)).toBe(true);
    }
    expect(calls).toBeGreaterThan(0);
  });

  it('a budget below the shortest reply is refused up front', () => {
    expect(() => constrainedDecoder({ kind: 'json_schema', schema: { type: 'string', minLength: 20 } }, vocab, 10, [stop])).toThrow(/KVT_ERR_GRAMMAR_BUDGET/);
  });

  it('stop tokens are allowed only where the reply may end', () => {
    const dec = constrainedDecoder({ kind: 'json_schema', schema: { type: 'integer' } }, vocab, 10, [stop]);
    expect(maskHas(dec.nextMask(), stop)).toBe(false);
    dec.accept(vocab.pieces.findIndex((p) => p.length === 1 && p[0] === 0x37)); // "7"
    const bits = dec.nextMask();
    expect(maskHas(bits, stop)).toBe(true);
    expect(maskHas(bits, vocab.pieces.findIndex((p) => p.length === 1 && p[0] === 0x38))).toBe(true); // "78" goes on
  });
  void STOP;
});
