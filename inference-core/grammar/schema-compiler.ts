/**
 * JSON Schema (the subset a decoder can enforce byte by byte) → Grammar.
 *
 * Enforced: type (and type arrays), enum, const, properties / required /
 * additionalProperties (false, true, a schema; absent = true), items,
 * minItems / maxItems, minLength / maxLength, minimum / maximum /
 * exclusiveMinimum / exclusiveMaximum (draft-4 boolean form too),
 * anyOf / oneOf (as alternatives), a one-element allOf, nullable,
 * $ref into the document (#, #/$defs/…, #/definitions/…) including
 * recursion, boolean schemas. Annotations are ignored. Any other keyword is
 * refused with a GrammarError naming it and its path, so a client learns
 * that the reply would not be held to it.
 *
 * Members are written in declared order (optional ones may be skipped),
 * extra members after them; oneOf is not made exclusive (alternatives that
 * overlap may produce a value matching two of them).
 */
import { GrammarError } from './grammar-errors.ts';
import { minLengths } from './grammar-min-length.ts';
import type { Grammar, GrammarNode } from './grammar-nodes.ts';
import { Builder } from './schema-builder.ts';
import { utf8 } from './schema-keywords.ts';

export type ConstraintSpec =
  | { kind: 'json_schema'; schema: unknown }
  | { kind: 'json_object' }
  /**
   * One `<tool_call>` envelope (Hermes format) of one of these tools, arguments held to `parameters`: the whole
   * reply, or with `optional` free content that may end in one (strict tools under tool_choice auto).
   */
  | { kind: 'tool_call'; tools: Array<{ name: string; parameters: unknown }>; optional?: boolean; format?: ToolCallFormat };

/**
 * How a forced tool call is written: 'hermes' (default) the `<tool_call>` envelope; 'harmony' (gpt-oss) a
 * commentary message to the function, ` to=functions.NAME<|channel|>commentary json<|message|>{…}`, after the
 * generation prompt's `<|start|>assistant` (the reply then ends on <|call|>, an end-of-generation id). The header
 * is recipient-first because OpenAI's gpt-oss template writes history calls that way
 * (inference-core/synthetic/gptoss-template.ts): an echoed call re-renders with the header the model sampled.
 */
export type ToolCallFormat = 'hermes' | 'harmony';

function finish(b: Builder, root: number, key: string, path: string): Grammar {
  const minLen = minLengths(b.nodes);
  if (minLen[root] === Infinity) throw new GrammarError('KVT_ERR_GRAMMAR_UNSATISFIABLE', `no finite JSON value satisfies the schema at ${path || '/'} (a required recursion without a base case, or empty bounds)`, path);
  return { nodes: b.nodes, root, minLen, key };
}

/** Compiles a constraint; throws GrammarError naming the keyword and path it cannot enforce. */
export function compileConstraint(spec: ConstraintSpec): Grammar {
  const key = JSON.stringify(spec);
  if (spec.kind === 'json_object') {
    const b = new Builder({});
    return finish(b, b.anyObject(), key, '');
  }
  if (spec.kind === 'json_schema') {
    const b = new Builder(spec.schema);
    return finish(b, b.schema(spec.schema, ''), key, '');
  }
  if (spec.tools.length === 0) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', 'a tool call constraint needs at least one tool', '');
  if (spec.format === 'harmony' && spec.optional) throw new GrammarError('KVT_ERR_GRAMMAR_INVALID_SCHEMA', 'an optional tool call has no harmony form (the reply chooses its channel freely)', '');
  const b = new Builder(null);
  const alts = spec.tools.map((tool, i) => {
    const sub = new Builder(tool.parameters ?? { type: 'object' });
    // Each tool's $refs resolve in its own parameters document: compile it in a builder of its own, then splice its nodes in.
    const params = sub.schema(tool.parameters ?? { type: 'object' }, `/${i}`);
    const offset = b.nodes.length;
    for (const nd of sub.nodes) b.add(shift(nd, offset));
    if (spec.format === 'harmony') return b.add({ kind: 'seq', parts: [b.lit(` to=functions.${tool.name}<|channel|>commentary json<|message|>`), params + offset] });
    const open = spec.optional ? '\n' : '<tool_call>\n';
    return b.add({ kind: 'seq', parts: [b.lit(`${open}{"name": ${JSON.stringify(tool.name)}, "arguments": `), params + offset, b.lit('}\n</tool_call>')] });
  });
  const call = alts.length === 1 ? alts[0] : b.add({ kind: 'alt', alts });
  if (!spec.optional) return finish(b, call, key, '');
  const marker = utf8.encode('<tool_call>');
  return finish(b, b.add({ kind: 'trig', marker, fail: kmpFailure(marker), then: call }), key, '');
}

function kmpFailure(m: Uint8Array): Int32Array {
  const fail = new Int32Array(m.length);
  for (let i = 1, k = 0; i < m.length; i++) {
    while (k > 0 && m[i] !== m[k]) k = fail[k - 1];
    if (m[i] === m[k]) k++;
    fail[i] = k;
  }
  return fail;
}

function shift(nd: GrammarNode, by: number): GrammarNode {
  switch (nd.kind) {
    case 'obj':
      return { ...nd, props: nd.props.map((p) => ({ ...p, key: p.key + by, value: p.value + by })), extra: nd.extra === null ? null : nd.extra + by, extraKey: nd.extraKey < 0 ? -1 : nd.extraKey + by };
    case 'arr':
      return { ...nd, item: nd.item + by };
    case 'alt':
      return { kind: 'alt', alts: nd.alts.map((a) => a + by) };
    case 'seq':
      return { kind: 'seq', parts: nd.parts.map((p) => p + by) };
    case 'trig':
      return { ...nd, then: nd.then + by };
    default:
      return nd;
  }
}
