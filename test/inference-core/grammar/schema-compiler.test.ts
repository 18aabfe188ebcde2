/**
 * The compiler's refusals (typed, naming keyword and path), its shortest
 * replies (what max_tokens must at least be) and a few forms that need care:
 * draft-4 boolean exclusive bounds, recursion without a base case, extra keys
 * that must not repeat a declared name.
 */
import { describe, expect, it } from 'vitest';

import { compileConstraint, GrammarError, GrammarMasks, minReplyTokens } from '../../../inference-core/grammar/index.ts';
import { vocabIndexOf } from '../../../inference-core/grammar/vocab-index.ts';
import { UNSUPPORTED_SCHEMAS } from '../../helpers/structured-schemas.ts';

const enc = new TextEncoder();

function matches(schema: unknown, text: string): boolean {
  const grammar = compileConstraint({ kind: 'json_schema', schema });
  const vocab = vocabIndexOf({}, 1, () => Uint8Array.of(0x20));
  const masks = new GrammarMasks(grammar, vocab);
  const state = masks.advance(masks.initial(), enc.encode(text));
  return state.stacks.length > 0 && masks.accepts(state);
}

describe('schema compiler', () => {
  it('refuses what it cannot enforce with a typed error naming the keyword path', () => {
    for (const { schema, path } of UNSUPPORTED_SCHEMAS) {
      let error: unknown;
      try {
        compileConstraint({ kind: 'json_schema', schema });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(GrammarError);
      expect((error as GrammarError).code).toBe('KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD');
      expect((error as GrammarError).path).toBe(path);
    }
  });

  it('refuses unsatisfiable schemas', () => {
    const bad = [false, { type: 'string', minLength: 3, maxLength: 2 }, { $defs: { a: { type: 'object', properties: { a: { $ref: '#/$defs/a' } }, required: ['a'] } }, $ref: '#/$defs/a' }, { type: 'integer', minimum: 3, maximum: 2 }, { type: 'object', required: ['x'], additionalProperties: false }];
    for (const schema of bad) expect(() => compileConstraint({ kind: 'json_schema', schema }), JSON.stringify(schema)).toThrow(/KVT_ERR_GRAMMAR_UNSATISFIABLE/);
  });

  it('knows the shortest reply (bytes + the stop token)', () => {
    const min = (schema: unknown): number => minReplyTokens(compileConstraint({ kind: 'json_schema', schema }));
    expect(min({ type: 'string', minLength: 4 })).toBe(7); // "aaaa" + stop
    expect(min({ type: 'integer', minimum: 1000 })).toBe(5);
    expect(min({ type: 'number', minimum: 0.25, maximum: 0.3 })).toBe(4); // 0.3 (3 bytes) beats 0.25
    expect(min({ type: 'object', properties: { a: { type: 'integer' }, b: { type: 'string' } }, required: ['a'] })).toBe('{"a":0}'.length + 1);
    expect(min({ type: 'array', items: { type: 'boolean' }, minItems: 2 })).toBe('[true,true]'.length + 1);
  });

  it('enforces draft-4 boolean exclusive bounds and number bounds exactly', () => {
    const schema = { type: 'number', minimum: 1, exclusiveMinimum: true, maximum: 3 };
    expect(matches(schema, '1')).toBe(false);
    expect(matches(schema, '1.0001')).toBe(true);
    expect(matches(schema, '3')).toBe(true);
    expect(matches(schema, '3.01')).toBe(false);
    expect(matches({ type: 'integer', minimum: -20, maximum: 300 }, '-21')).toBe(false);
    expect(matches({ type: 'integer', minimum: -20, maximum: 300 }, '-0')).toBe(true);
  });

  it('extra members never repeat a declared name; strings count code points', () => {
    const schema = { type: 'object', properties: { id: { type: 'integer' } } };
    expect(matches(schema, '{"id":1,"idx":2}')).toBe(true);
    expect(matches(schema, '{"id":1,"id":2}')).toBe(false);
    expect(matches(schema, '{"x":1}')).toBe(true);
    expect(matches({ type: 'string', maxLength: 2 }, '"é😀"')).toBe(true);
    expect(matches({ type: 'string', maxLength: 2 }, '"é😀a"')).toBe(false);
    expect(matches({ type: 'string' }, '"\\ud800"')).toBe(false); // no surrogate escapes
  });
});
