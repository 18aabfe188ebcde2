/**
 * Builds the node table of a Grammar from a JSON Schema (the keywords of
 * schema-keywords.ts); compileConstraint (schema-compiler.ts) drives it.
 */
import { GrammarError } from './grammar-errors.ts';
import type { GrammarNode, ObjProp } from './grammar-nodes.ts';
import { ANNOTATIONS, bounds, count, escapePointer, HANDLED, isOfType, JSON_TYPES, MAX_EXCLUDED_KEYS, utf8, type JsonType, type Schema } from './schema-keywords.ts';

export class Builder {
  readonly nodes: GrammarNode[] = [];
  private readonly refs = new Map<string, number>();
  private anyId = -1;

  constructor(private readonly root: unknown) {}

  add(node: GrammarNode): number {
    this.nodes.push(node);
    return this.nodes.length - 1;
  }

  lit(text: string): number {
    return this.add({ kind: 'lit', bytes: utf8.encode(text) });
  }

  /** Any JSON value (`{}` / `true` schemas, json_object members). */
  any(): number {
    if (this.anyId >= 0) return this.anyId;
    const alt = this.add({ kind: 'alt', alts: [] });
    this.anyId = alt;
    const key = this.add({ kind: 'str', min: 0, max: Infinity, exclude: null });
    const obj = this.add({ kind: 'obj', props: [], extra: alt, extraKey: key });
    const arr = this.add({ kind: 'arr', item: alt, min: 0, max: Infinity });
    const str = this.add({ kind: 'str', min: 0, max: Infinity, exclude: null });
    const num = this.add({ kind: 'num', integer: false, bounds: null });
    (this.nodes[alt] as { alts: number[] }).alts.push(obj, arr, str, num, this.lit('true'), this.lit('false'), this.lit('null'));
    return alt;
  }

  anyObject(): number {
    return this.add({ kind: 'obj', props: [], extra: this.any(), extraKey: this.add({ kind: 'str', min: 0, max: Infinity, exclude: null }) });
  }

  schema(s: unknown, path: string): number {
    if (s === true) return this.any();
    if (s === false) throw new GrammarError('KVT_ERR_GRAMMAR_UNSATISFIABLE', `the schema at ${path || '/'} is false: no value satisfies it`, path);
    if (s === null || typeof s !== 'object' || Array.isArray(s)) {
      throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', `the schema at ${path || '/'} must be an object or a boolean`, path);
    }
    const o = s as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      if (!ANNOTATIONS.has(k) && !HANDLED.has(k)) {
        throw new GrammarError('KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD', `JSON Schema keyword "${k}" at ${path}/${k} cannot be enforced while decoding; remove it or express it with the supported keywords`, `${path}/${k}`);
      }
    }
    if (o.$ref !== undefined) return this.ref(o, path);
    for (const comb of ['anyOf', 'oneOf', 'allOf'] as const) {
      if (o[comb] === undefined) continue;
      const list = o[comb];
      if (!Array.isArray(list) || list.length === 0) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', `${path}/${comb} must be a non-empty array of schemas`, `${path}/${comb}`);
      const siblings = Object.keys(o).filter((k) => k !== comb && !ANNOTATIONS.has(k));
      if (siblings.length > 0) {
        throw new GrammarError('KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD', `"${siblings[0]}" beside "${comb}" at ${path} cannot be enforced (no schema intersection); move it into each alternative`, `${path}/${siblings[0]}`);
      }
      if (comb === 'allOf') {
        if (list.length !== 1) throw new GrammarError('KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD', `"allOf" with ${list.length} schemas at ${path}/allOf cannot be enforced; merge them into one schema`, `${path}/allOf`);
        return this.nullable(o, this.schema(list[0], `${path}/allOf/0`));
      }
      const alts = list.map((sub, i) => this.schema(sub, `${path}/${comb}/${i}`));
      return this.nullable(o, this.add({ kind: 'alt', alts }));
    }
    if (o.const !== undefined) return this.nullable(o, this.lit(JSON.stringify(o.const)));
    if (o.enum !== undefined) {
      if (!Array.isArray(o.enum) || o.enum.length === 0) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', `${path}/enum must be a non-empty array`, `${path}/enum`);
      const types = this.types(o, path);
      const values = o.enum.filter((v) => types === null || types.some((t) => isOfType(v, t)));
      if (values.length === 0) throw new GrammarError('KVT_ERR_GRAMMAR_UNSATISFIABLE', `no value of ${path}/enum has the schema's type`, `${path}/enum`);
      return this.nullable(o, this.add({ kind: 'alt', alts: [...new Set(values.map((v) => JSON.stringify(v)))].map((t) => this.lit(t)) }));
    }
    let types = this.types(o, path);
    if (types === null) {
      // No type: what the keywords imply, else anything.
      if (o.properties !== undefined || o.required !== undefined || o.additionalProperties !== undefined) types = ['object'];
      else if (o.items !== undefined || o.minItems !== undefined || o.maxItems !== undefined) types = ['array'];
      else if (o.minLength !== undefined || o.maxLength !== undefined) types = ['string'];
      else if (['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'].some((k) => o[k] !== undefined)) types = ['number'];
      else return this.any();
    }
    if (o.nullable === true && !types.includes('null')) types = [...types, 'null'];
    const alts = types.map((t) => this.typed(t, o, path));
    return alts.length === 1 ? alts[0] : this.add({ kind: 'alt', alts });
  }

  private nullable(o: Record<string, unknown>, node: number): number {
    return o.nullable === true ? this.add({ kind: 'alt', alts: [node, this.lit('null')] }) : node;
  }

  private types(o: Record<string, unknown>, path: string): JsonType[] | null {
    if (o.type === undefined) return null;
    const list = Array.isArray(o.type) ? o.type : [o.type];
    if (list.length === 0) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', `${path}/type must name at least one type`, `${path}/type`);
    for (const t of list) {
      if (!JSON_TYPES.includes(t as JsonType)) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', `${path}/type "${String(t)}" is not a JSON Schema type`, `${path}/type`);
    }
    // integer ⊂ number: "number" alone covers both.
    const set = [...new Set(list as JsonType[])];
    return set.includes('number') ? set.filter((t) => t !== 'integer') : set;
  }

  private typed(t: JsonType, o: Record<string, unknown>, path: string): number {
    switch (t) {
      case 'null':
        return this.lit('null');
      case 'boolean':
        return this.add({ kind: 'alt', alts: [this.lit('true'), this.lit('false')] });
      case 'string': {
        const min = count(o.minLength, `${path}/minLength`, 0);
        const max = count(o.maxLength, `${path}/maxLength`, Infinity);
        if (min > max) throw new GrammarError('KVT_ERR_GRAMMAR_UNSATISFIABLE', `${path}: minLength ${min} > maxLength ${max}`, `${path}/minLength`);
        return this.add({ kind: 'str', min, max, exclude: null });
      }
      case 'number':
      case 'integer':
        return this.add({ kind: 'num', integer: t === 'integer', bounds: bounds(o, path) });
      case 'array': {
        if (Array.isArray(o.items)) throw new GrammarError('KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD', `tuple "items" (an array) at ${path}/items cannot be enforced; use one schema for every item`, `${path}/items`);
        const item = o.items === undefined ? this.any() : this.schema(o.items, `${path}/items`);
        const min = count(o.minItems, `${path}/minItems`, 0);
        const max = count(o.maxItems, `${path}/maxItems`, Infinity);
        if (min > max) throw new GrammarError('KVT_ERR_GRAMMAR_UNSATISFIABLE', `${path}: minItems ${min} > maxItems ${max}`, `${path}/minItems`);
        return this.add({ kind: 'arr', item, min, max });
      }
      case 'object':
        return this.object(o, path);
    }
  }

  private object(o: Record<string, unknown>, path: string): number {
    const props = (o.properties ?? {}) as Record<string, unknown>;
    if (typeof props !== 'object' || props === null || Array.isArray(props)) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', `${path}/properties must be an object`, `${path}/properties`);
    const required = o.required ?? [];
    if (!Array.isArray(required) || required.some((r) => typeof r !== 'string')) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', `${path}/required must be an array of names`, `${path}/required`);
    const add = o.additionalProperties;
    const extraAllowed = add !== false;
    const declared: Array<[string, unknown]> = Object.entries(props);
    for (const r of required as string[]) {
      if (Object.hasOwn(props, r)) continue;
      if (!extraAllowed) throw new GrammarError('KVT_ERR_GRAMMAR_UNSATISFIABLE', `${path}/required names "${r}", which is not in properties and additionalProperties is false`, `${path}/required`);
      declared.push([r, add === undefined || add === true ? true : add]);
    }
    const requiredSet = new Set(required as string[]);
    const objNode = this.add({ kind: 'obj', props: [], extra: null, extraKey: -1 });
    const list: ObjProp[] = declared.map(([name, sub]) => ({
      name,
      key: this.lit(`${JSON.stringify(name)}:`),
      value: this.schema(sub, `${path}/properties/${escapePointer(name)}`),
      required: requiredSet.has(name),
    }));
    let extra: number | null = null;
    let extraKey = -1;
    if (extraAllowed) {
      if (list.length > MAX_EXCLUDED_KEYS) {
        throw new GrammarError('KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD', `${path} declares ${list.length} properties and allows others; set additionalProperties to false (at most ${MAX_EXCLUDED_KEYS} declared names with extra members)`, `${path}/additionalProperties`);
      }
      extra = add === undefined || add === true ? this.any() : this.schema(add, `${path}/additionalProperties`);
      extraKey = this.add({ kind: 'str', min: 0, max: Infinity, exclude: list.length > 0 ? list.map((p) => utf8.encode(p.name)) : null });
    }
    this.nodes[objNode] = { kind: 'obj', props: list, extra, extraKey };
    return objNode;
  }

  private ref(o: Record<string, unknown>, path: string): number {
    const ref = o.$ref;
    const siblings = Object.keys(o).filter((k) => k !== '$ref' && !ANNOTATIONS.has(k));
    if (siblings.length > 0) throw new GrammarError('KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD', `"${siblings[0]}" beside "$ref" at ${path} cannot be enforced; move it into the referenced schema`, `${path}/${siblings[0]}`);
    if (typeof ref !== 'string' || !ref.startsWith('#')) throw new GrammarError('KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD', `$ref "${String(ref)}" at ${path}/$ref: only references into this schema (#/…) are supported`, `${path}/$ref`);
    const known = this.refs.get(ref);
    if (known !== undefined) return known;
    let target: unknown = this.root;
    for (const raw of ref.slice(1).split('/').slice(1)) {
      const part = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
      target = target !== null && typeof target === 'object' ? (target as Record<string, unknown>)[part] : undefined;
      if (target === undefined) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', `$ref "${ref}" at ${path}/$ref points at nothing`, `${path}/$ref`);
    }
    // A placeholder alternative first, so a recursive reference finds it.
    const id = this.add({ kind: 'alt', alts: [] });
    this.refs.set(ref, id);
    const body = this.schema(target as Schema, ref.slice(1));
    (this.nodes[id] as { alts: number[] }).alts.push(body);
    return id;
  }
}
