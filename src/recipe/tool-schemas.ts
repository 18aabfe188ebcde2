/**
 * A tool's parameter schema must be a JSON Schema: checked against the JSON
 * Schema 2020-12 meta-schema (ajv), so `{"type": "objectx"}` or
 * `{"properties": 5}` is a 400 naming the keyword's place in the request, as
 * the reference APIs answer, instead of a template rendering nonsense to the
 * model. Unknown keywords pass (the meta-schema allows them), as do schemas
 * the grammar cannot enforce: only a forced or strict tool's schema is
 * compiled to a grammar (structured-output.ts).
 *
 * The schema's nesting is already bounded by KVTIER_MAX_JSON_DEPTH (the
 * request preflight), which bounds ajv's recursive meta-schema walk.
 */
import Ajv2020Module from 'ajv/dist/2020.js';

import { KvtError } from '../errors.ts';

type MetaValidator = { validateSchema(schema: unknown): boolean | Promise<unknown>; errors?: Array<{ instancePath: string; message?: string }> | null };

let validator: MetaValidator | null = null;

function metaValidator(): MetaValidator {
  if (validator === null) {
    const Ajv2020 = ((Ajv2020Module as unknown as { default?: unknown }).default ?? Ajv2020Module) as new (options: object) => MetaValidator;
    // Formats are not checked (a client's `format` names need no plugin here); strict off: unknown keywords are allowed.
    validator = new Ajv2020({ strict: false, validateFormats: false, validateSchema: true });
  }
  return validator;
}

/** `/properties/a/type` under `tools[0].function.parameters` → `tools[0].function.parameters.properties.a.type`. */
function paramOf(base: string, pointer: string): string {
  if (pointer === '') return base;
  return base + pointer.split('/').slice(1).map((p) => `.${p.replace(/~1/g, '/').replace(/~0/g, '~')}`).join('');
}

/** Throws a 400 naming where `schema` (at request field `param`) is not a valid JSON Schema. */
export function checkJsonSchema(schema: unknown, param: string): void {
  const meta = metaValidator();
  if (meta.validateSchema(schema) === true) return;
  const first = meta.errors?.[0];
  const at = paramOf(param, first?.instancePath ?? '');
  throw new KvtError('KVT_ERR_REQUEST_INVALID', `${at} ${first?.message ?? 'is invalid'}: ${param} must be a valid JSON Schema`, { param: at });
}
