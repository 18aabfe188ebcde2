/**
 * The JSON Schema vocabulary the compiler knows (schema-builder.ts): which
 * keywords are annotations, which it enforces, the JSON types, and the
 * helpers that read counts, bounds and JSON pointers from a schema.
 */
import { GrammarError } from './grammar-errors.ts';
import type { NumBounds } from './grammar-nodes.ts';

export const utf8 = new TextEncoder();

export const ANNOTATIONS = new Set(['title', 'description', 'default', 'examples', '$comment', '$schema', '$id', 'deprecated', 'readOnly', 'writeOnly', '$defs', 'definitions', 'strict', 'nullable']);
export const HANDLED = new Set([
  'type', 'enum', 'const', 'properties', 'required', 'additionalProperties', 'items', 'minItems', 'maxItems', 'minLength', 'maxLength',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'anyOf', 'oneOf', 'allOf', '$ref',
]);
export const JSON_TYPES = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'] as const;
export type JsonType = (typeof JSON_TYPES)[number];
/** Extra keys are checked against declared names with a bitmask: at most this many names. */
export const MAX_EXCLUDED_KEYS = 30;

export type Schema = boolean | Record<string, unknown>;

export function escapePointer(name: string): string {
  return name.replace(/~/g, '~0').replace(/\//g, '~1');
}

export function isOfType(v: unknown, t: JsonType): boolean {
  switch (t) {
    case 'null':
      return v === null;
    case 'boolean':
      return typeof v === 'boolean';
    case 'string':
      return typeof v === 'string';
    case 'number':
      return typeof v === 'number';
    case 'integer':
      return Number.isInteger(v);
    case 'array':
      return Array.isArray(v);
    case 'object':
      return v !== null && typeof v === 'object' && !Array.isArray(v);
  }
}

export function count(v: unknown, path: string, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', `${path} must be an integer ≥ 0`, path);
  return v;
}

export function bounds(o: Record<string, unknown>, path: string): NumBounds | null {
  const num = (k: string): number | null => {
    const v = o[k];
    if (v === undefined || typeof v === 'boolean') return null;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', `${path}/${k} must be a finite number`, `${path}/${k}`);
    return v;
  };
  let lo = num('minimum');
  let hi = num('maximum');
  let loExclusive = false;
  let hiExclusive = false;
  // draft 4: exclusiveMinimum: true makes minimum exclusive; draft 6+: a number.
  if (o.exclusiveMinimum === true) loExclusive = lo !== null;
  const exMin = num('exclusiveMinimum');
  if (exMin !== null && (lo === null || exMin >= lo)) {
    lo = exMin;
    loExclusive = true;
  }
  if (o.exclusiveMaximum === true) hiExclusive = hi !== null;
  const exMax = num('exclusiveMaximum');
  if (exMax !== null && (hi === null || exMax <= hi)) {
    hi = exMax;
    hiExclusive = true;
  }
  return lo === null && hi === null ? null : { lo, loExclusive, hi, hiExclusive };
}
