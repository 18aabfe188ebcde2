/**
 * Structured output of the request APIs → one grammar constraint for the
 * worker's sampler (inference-core/grammar):
 *
 *   OpenAI  response_format {type:'json_schema', json_schema:{schema}}   → the schema
 *           response_format {type:'json_object'}                         → any JSON object
 *           tool_choice {type:'function', function:{name}} | 'required'  → one tool call (Hermes envelope) of
 *                                                                          that tool / any tool, arguments
 *                                                                          held to its parameters
 *   Anthropic tool_choice {type:'tool', name} | {type:'any'}             → likewise
 *
 * The constraint is compiled here, so a schema the grammar cannot enforce
 * is a 400 naming the keyword's place in the request before anything runs.
 */
import { GrammarError, grammarOf, minReplyTokens, type ConstraintSpec, type ToolCallFormat } from '../../inference-core/index.ts';
import { KvtError } from '../errors.ts';
import type { ToolSpec } from './types.ts';

export type { ConstraintSpec };

/** `/properties/a/pattern` under `response_format.json_schema.schema` → `response_format.json_schema.schema.properties.a.pattern`. */
function paramOf(base: string, pointer: string): string {
  if (pointer === '') return base;
  return base + pointer.split('/').slice(1).map((p) => `.${p.replace(/~1/g, '/').replace(/~0/g, '~')}`).join('');
}

/** Compiles `spec` (cached) or throws the 400 that names where the request's schema fails. */
function checked(spec: ConstraintSpec, paramFor: (pointer: string) => string): ConstraintSpec {
  try {
    grammarOf(spec);
  } catch (error) {
    if (error instanceof GrammarError) throw new KvtError('KVT_ERR_REQUEST_INVALID', error.message, { param: paramFor(error.path) });
    throw error;
  }
  return spec;
}

function invalid(message: string, param: string): KvtError {
  return new KvtError('KVT_ERR_REQUEST_INVALID', message, { param });
}

function toolConstraint(tools: readonly ToolSpec[] | undefined, names: string[] | null, param: string, toolsParam: string, schemaField: string, optional?: { strict: (tool: ToolSpec) => boolean }, format: ToolCallFormat = 'hermes'): ConstraintSpec {
  if (!tools || tools.length === 0) throw invalid(`${param} forces a tool call but the request has no tools`, param);
  const chosen = names === null ? tools : names.map((name) => {
    const tool = tools.find((t) => t.function.name === name);
    if (!tool) throw invalid(`${param} names tool "${name}", which is not in ${toolsParam}`, param);
    return tool;
  });
  // Optional calls (tool_choice auto): a strict tool's arguments follow its parameters, another's are any object.
  const parametersOf = (t: ToolSpec): unknown => (optional && !optional.strict(t) ? { type: 'object' } : (t.function.parameters ?? { type: 'object' }));
  const spec: ConstraintSpec = { kind: 'tool_call', tools: chosen.map((t) => ({ name: t.function.name, parameters: parametersOf(t) })), ...(optional ? { optional: true } : {}), ...(format === 'harmony' ? { format } : {}) };
  // Paths of a tool-call grammar's errors start with the tool's index among `chosen`.
  return checked(spec, (pointer) => {
    const [, index, ...rest] = pointer.split('/');
    const at = tools.indexOf(chosen[Number(index)] ?? chosen[0]);
    return paramOf(`${toolsParam}[${at}].${schemaField}`, rest.length > 0 ? `/${rest.join('/')}` : '');
  });
}

/**
 * OpenAI chat: response_format, a forced tool call, or (tool_choice auto) strict tools' arguments when the reply calls one.
 * `format` 'harmony' (gpt-oss) writes forced calls as harmony commentary messages; strict tools under auto stay
 * unconstrained there (a harmony reply picks its channels freely, so no grammar can wait for the call to start).
 */
export function constraintFromOpenAi(
  body: { response_format?: unknown; tool_choice?: unknown; tools?: Array<{ function: { name: string; strict?: boolean | null } }> },
  tools: readonly ToolSpec[] | undefined,
  format: ToolCallFormat = 'hermes',
): ConstraintSpec | undefined {
  const choice = body.tool_choice;
  if (choice === 'required') return toolConstraint(tools, null, 'tool_choice', 'tools', 'function.parameters', undefined, format);
  if (choice !== null && typeof choice === 'object') {
    const name = (choice as { function?: { name?: unknown } }).function?.name;
    if ((choice as { type?: unknown }).type !== 'function' || typeof name !== 'string') throw invalid('tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": …}}', 'tool_choice');
    return toolConstraint(tools, [name], 'tool_choice', 'tools', 'function.parameters', undefined, format);
  }
  const responseFormat = body.response_format;
  const strictNames = new Set((body.tools ?? []).filter((t) => t.function?.strict === true).map((t) => t.function.name));
  if ((responseFormat === undefined || responseFormat === null) && tools && strictNames.size > 0 && format !== 'harmony' && (choice === undefined || choice === null || choice === 'auto')) {
    return toolConstraint(tools, null, 'tools', 'tools', 'function.parameters', { strict: (t) => strictNames.has(t.function.name) });
  }
  if (responseFormat === undefined || responseFormat === null) return undefined;
  if (typeof responseFormat !== 'object') throw invalid('response_format must be an object with a type', 'response_format');
  const type = (responseFormat as { type?: unknown }).type;
  if (type === 'text') return undefined;
  if (type === 'json_object') return checked({ kind: 'json_object' }, () => 'response_format');
  if (type !== 'json_schema') throw invalid(`response_format.type "${String(type)}" is not one of text, json_object, json_schema`, 'response_format.type');
  const js = (responseFormat as { json_schema?: { schema?: unknown; name?: unknown } }).json_schema;
  if (!js || typeof js !== 'object') throw invalid('response_format.json_schema is required for type json_schema', 'response_format.json_schema');
  const schema = js.schema === undefined ? {} : js.schema;
  if (schema === null || (typeof schema !== 'object' && typeof schema !== 'boolean')) throw invalid('response_format.json_schema.schema must be a JSON Schema object', 'response_format.json_schema.schema');
  return checked({ kind: 'json_schema', schema }, (pointer) => paramOf('response_format.json_schema.schema', pointer));
}

/** Anthropic messages: tool_choice {type:'tool', name} or {type:'any'}. */
export function constraintFromAnthropic(body: { tool_choice?: { type: string; name?: unknown } }, tools: readonly ToolSpec[] | undefined, format: ToolCallFormat = 'hermes'): ConstraintSpec | undefined {
  const choice = body.tool_choice;
  if (!choice) return undefined;
  if (choice.type === 'any') return toolConstraint(tools, null, 'tool_choice', 'tools', 'input_schema', undefined, format);
  if (choice.type !== 'tool') return undefined;
  if (typeof choice.name !== 'string') throw invalid('tool_choice.name is required for type "tool"', 'tool_choice.name');
  return toolConstraint(tools, [choice.name], 'tool_choice.name', 'tools', 'input_schema', undefined, format);
}

/** Throws the 400 of a max_tokens too small for the shortest reply the constraint allows. */
export function checkConstraintBudget(spec: ConstraintSpec | undefined, maxTokens: number): void {
  if (!spec) return;
  const need = minReplyTokens(grammarOf(spec));
  if (need > maxTokens) {
    throw new KvtError('KVT_ERR_REQUEST_INVALID', `max_tokens ${maxTokens} is too small for the required format: its shortest reply takes ${need} tokens; raise max_tokens`, { param: 'max_tokens' });
  }
}
