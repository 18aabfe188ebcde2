/**
 * Speculative decoding of grammar-constrained replies on the random-weight
 * synthetic model (only the grammar makes its replies parse):
 *  - the speculative grammar cursor's masks equal ConstrainedDecoder.nextMask
 *    at every step of seeded replies (budget narrowing included), and a
 *    cursor is not moved by advancing it (rejected drafts never reach it);
 *  - greedy: speculative output (n-gram and draft model) == plain constrained
 *    output, token for token, for every test schema;
 *  - temperature 1 with speculation on: every reply parses, validates (ajv)
 *    and ends on a stop token.
 * The rejection rule with masked rows is checked on a tiny vocabulary in
 * speculative-sampling-masked.test.ts.
 */
import Ajv from 'ajv';
import { describe, expect, it } from 'vitest';

import { constrainedDecoder, grammarOf, masksOf, vocabOf, type ConstraintSpec } from '../../inference-core/grammar/index.ts';
import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { Prng, Sampler, type SamplingOptions } from '../../inference-core/sampling/sampler.ts';
import { GrammarCursor, SpeculativeSession, type SpeculativeMode } from '../../inference-core/speculative/index.ts';
import type { DraftLengthOptions } from '../../inference-core/speculative/index.ts';
import { STRUCTURED_SCHEMAS } from '../helpers/structured-schemas.ts';
import { draftPairForSuite } from '../helpers/suite-fixture.ts';
import { randomTokens } from './engine-fixtures.ts';

const MAX_TOKENS = 64;
let target: LoadedEngine;
let draft: LoadedEngine;
let stops: number[];
draftPairForSuite((pair) => ({ target, draft, stops } = pair));

const specOf = (schema: Record<string, unknown>): ConstraintSpec => ({ kind: 'json_schema', schema });

/** A prompt whose JSON-looking spans recur, so n-gram lookups find continuations the grammar may allow. */
function prompt(seed: number): number[] {
  const json = Array.from(target.tokenizer.encode('{"name": "abc", "items": [1, 2, 3], "ok": true, "v": null}'));
  return [...randomTokens(24, target.vocabSize, seed, 4), ...json, ...randomTokens(8, target.vocabSize, seed + 1, 4), ...json, ...json.slice(0, 6)];
}

/** Plain constrained decoding, the server's path with speculation off. */
function plain(p: number[], spec: ConstraintSpec, sampling: SamplingOptions): number[] {
  const seq = target.createSequence();
  const sampler = new Sampler({ ...sampling, stopTokens: stops });
  const dec = constrainedDecoder(spec, target.tokenizer, MAX_TOKENS, stops);
  let logits = seq.prefill(p);
  const out: number[] = [];
  for (;;) {
    const t = sampler.sample(logits, dec.nextMask());
    dec.accept(t);
    out.push(t);
    if (stops.includes(t) || out.length >= MAX_TOKENS) break;
    logits = seq.decode(t);
  }
  seq.free();
  return out;
}

/** The server's path with speculation on: first token through the cursor, then a constrained session. */
function speculative(p: number[], spec: ConstraintSpec, sampling: SamplingOptions, mode: SpeculativeMode, length: DraftLengthOptions) {
  const seq = target.createSequence();
  const sampler = new Sampler({ ...sampling, stopTokens: stops });
  let cursor = GrammarCursor.start(masksOf(grammarOf(spec), vocabOf(target.tokenizer)), MAX_TOKENS, stops);
  const first = sampler.sample(seq.prefill(p), cursor.mask());
  cursor = cursor.advance(first);
  const out = [first];
  let proposed = 0;
  let accepted = 0;
  if (!stops.includes(first)) {
    const session = new SpeculativeSession({ target: seq, context: [...p, first], sampling: { ...sampling, stopTokens: stops }, mode, length, constraint: cursor, ...(mode === 'draft' ? { draftEngine: draft } : {}) });
    while (out.length < MAX_TOKENS && !stops.includes(out[out.length - 1])) out.push(...session.next(MAX_TOKENS - out.length));
    ({ proposed, accepted } = session.stats);
    session.free();
  }
  seq.free();
  return { tokens: out, proposed, accepted };
}

function randomAllowed(bits: Uint32Array, prng: Prng): number {
  const ids: number[] = [];
  for (let w = 0; w < bits.length; w++) for (let b = 0; b < 32; b++) if (bits[w] & (1 << b)) ids.push(w * 32 + b);
  return ids[Math.floor(prng.nextFloat() * ids.length)];
}

describe('grammar cursor', () => {
  it('masks equal ConstrainedDecoder.nextMask at every step (all schemas, budget narrowing); advancing leaves a cursor as it was', () => {
    let steps = 0;
    for (const { name, schema } of STRUCTURED_SCHEMAS) {
      for (const seed of [1, 2]) {
        const prng = new Prng(seed * 131 + name.length);
        const maxTokens = 12 + Math.floor(prng.nextFloat() * 40);
        const spec = specOf(schema);
        let dec;
        try {
          dec = constrainedDecoder(spec, target.tokenizer, maxTokens, stops);
        } catch (error) {
          expect((error as { code?: string }).code).toBe('KVT_ERR_GRAMMAR_BUDGET');
          expect(() => GrammarCursor.start(masksOf(grammarOf(spec), vocabOf(target.tokenizer)), maxTokens, stops)).toThrow(/KVT_ERR_GRAMMAR_BUDGET/);
          continue;
        }
        let cursor = GrammarCursor.start(masksOf(grammarOf(spec), vocabOf(target.tokenizer)), maxTokens, stops);
        for (let i = 0; i < maxTokens; i++) {
          const bits = dec.nextMask();
          expect(Buffer.from(cursor.mask().buffer).equals(Buffer.from(bits.buffer)), `${name} seed ${seed} step ${i}`).toBe(true);
          const before = cursor.mask().slice();
          // A sibling branch (another allowed token) taken from the same cursor: the cursor itself does not move.
          cursor.advance(randomAllowed(bits, prng));
          expect(Buffer.from(cursor.mask().buffer).equals(Buffer.from(before.buffer))).toBe(true);
          const t = randomAllowed(bits, prng);
          dec.accept(t);
          cursor = cursor.advance(t);
          steps++;
          if (stops.includes(t)) break;
        }
        expect(cursor.finished).toBe(true);
      }
    }
    expect(steps).toBeGreaterThan(500);
  }, 300_000);

  it('advancing over a token the mask forbids is a typed dead end', () => {
    const cursor = GrammarCursor.start(masksOf(grammarOf(specOf({ type: 'integer' })), vocabOf(target.tokenizer)), 16, stops);
    const bits = cursor.mask();
    let forbidden = 0;
    while (bits[forbidden >>> 5] & (1 << (forbidden & 31))) forbidden++;
    expect(() => cursor.advance(forbidden)).toThrow(/KVT_ERR_GRAMMAR_DEAD_END/);
  });
});

describe('speculative constrained decoding', () => {
  for (const mode of ['ngram', 'draft'] as const) {
    it(`greedy, ${mode} drafts: every schema's reply equals plain constrained greedy, token for token`, () => {
      let proposed = 0;
      let accepted = 0;
      for (const [i, { name, schema }] of STRUCTURED_SCHEMAS.entries()) {
        const p = prompt(100 + i);
        const want = plain(p, specOf(schema), { temperature: 0 });
        for (const length of [{ mode: 'fixed', fixed: 5 }, { mode: 'adaptive', rowCost: 0.1, draftCost: 0.05 }] as DraftLengthOptions[]) {
          const got = speculative(p, specOf(schema), { temperature: 0 }, mode, length);
          expect(got.tokens, `${name} ${length.mode}`).toEqual(want);
          proposed += got.proposed;
          accepted += got.accepted;
        }
      }
      // Drafts were verified and many accepted (the test must be able to tell speculation from none).
      expect(proposed).toBeGreaterThan(200);
      expect(accepted).toBeGreaterThan(100);
    }, 600_000);
  }

  it('temperature 1, n-gram and draft drafts: every reply parses, validates and ends on a stop token', () => {
    const ajv = new Ajv({ strict: false });
    const failures: string[] = [];
    let proposed = 0;
    for (const [i, { name, schema }] of STRUCTURED_SCHEMAS.entries()) {
      const validate = ajv.compile(schema);
      for (const mode of ['ngram', 'draft'] as const) {
        const got = speculative(prompt(300 + i), specOf(schema), { temperature: 1, seed: i }, mode, { mode: 'fixed', fixed: 4 });
        proposed += got.proposed;
        const last = got.tokens[got.tokens.length - 1];
        const text = target.tokenizer.decode(got.tokens.slice(0, -1));
        let ok = false;
        try {
          ok = validate(JSON.parse(text)) && stops.includes(last);
        } catch {
          ok = false;
        }
        if (!ok) failures.push(`${name} ${mode}: ${text} ${JSON.stringify(validate.errors)}`);
      }
    }
    expect(failures).toEqual([]);
    expect(proposed).toBeGreaterThan(200);
  }, 600_000);
});
