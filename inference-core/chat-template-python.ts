/**
 * Python's text for values, as jinja2 (under transformers) writes them:
 * `json.dumps(x, ensure_ascii=False)` (its `tojson`) and `str(x)` (what
 * `{{ x }}`, `x ~ y` and `x | string` print: True, None, ['a', 1], {'k': 2.5}).
 *
 * Values are JSON-shaped (from a request or a template literal). A number
 * with no fraction is an int: JSON text `1.0` reaches JavaScript as 1, so
 * where Python would print `1.0` this prints `1` (the one known difference).
 */

/** repr(float) for a finite non-integral or huge number: shortest round-trip digits, exponent outside [1e-4, 1e16). */
export function pythonFloatRepr(value: number): string {
  if (Number.isNaN(value)) return 'nan';
  if (!Number.isFinite(value)) return value > 0 ? 'inf' : '-inf';
  const [mantissa, exponentText] = value.toExponential().split('e');
  const exponent = Number(exponentText);
  if (exponent < -4 || exponent >= 16) {
    return `${mantissa}e${exponent < 0 ? '-' : '+'}${String(Math.abs(exponent)).padStart(2, '0')}`;
  }
  const negative = value < 0;
  const digits = mantissa.replace('-', '').replace('.', '');
  const point = exponent + 1;
  let text: string;
  if (point <= 0) text = `0.${'0'.repeat(-point)}${digits}`;
  else if (point >= digits.length) text = `${digits}${'0'.repeat(point - digits.length)}.0`;
  else text = `${digits.slice(0, point)}.${digits.slice(point)}`;
  return negative ? `-${text}` : text;
}

function pythonNumber(value: number, float: boolean): string {
  if (!float && Number.isInteger(value)) return BigInt(value).toString();
  return pythonFloatRepr(value);
}

/** json.dumps(value, ensure_ascii=False) with its default separators (', ', ': '). */
export function pythonJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') return Number.isFinite(value) ? pythonNumber(value, false) : value > 0 ? 'Infinity' : Number.isNaN(value) ? 'NaN' : '-Infinity';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(', ')}]`;
  if (typeof value === 'object') {
    return `{${Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${JSON.stringify(k)}: ${pythonJsonDumps(v)}`)
      .join(', ')}}`;
  }
  return JSON.stringify(String(value));
}

// str.isprintable() is false for these categories (the space itself is printable).
const NOT_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;

/** repr(str): single quotes unless the text has ' and no ", \\ \n \r \t escaped, unprintable characters as \xNN, \uNNNN, \UNNNNNNNN. */
export function pythonStrRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of text) {
    if (ch === quote || ch === '\\') out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch !== ' ' && NOT_PRINTABLE.test(ch)) {
      const code = ch.codePointAt(0)!;
      out += code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : code < 0x10000 ? `\\u${code.toString(16).padStart(4, '0')}` : `\\U${code.toString(16).padStart(8, '0')}`;
    } else out += ch;
  }
  return out + quote;
}

/**
 * A template value as Python sees it: the JSON-shaped value plus what only
 * the template runtime knows (a float that happens to be integral, a tuple).
 */
export type PyValue =
  | { kind: 'none' | 'undefined' }
  | { kind: 'bool'; value: boolean }
  | { kind: 'int' | 'float'; value: number }
  | { kind: 'str'; value: string }
  | { kind: 'list' | 'tuple'; items: PyValue[] }
  | { kind: 'dict'; entries: Array<[string, PyValue]> }
  | { kind: 'other'; text: string };

/** repr(value): how a value prints inside a container. */
export function pythonRepr(value: PyValue): string {
  switch (value.kind) {
    case 'str':
      return pythonStrRepr(value.value);
    case 'undefined':
      return '';
    default:
      return pythonStr(value);
  }
}

/** str(value): what `{{ value }}` prints (an undefined value prints nothing, as jinja2's Undefined does). */
export function pythonStr(value: PyValue): string {
  switch (value.kind) {
    case 'none':
      return 'None';
    case 'undefined':
      return '';
    case 'bool':
      return value.value ? 'True' : 'False';
    case 'int':
      return pythonNumber(value.value, false);
    case 'float':
      return pythonNumber(value.value, true);
    case 'str':
      return value.value;
    case 'list':
      return `[${value.items.map(pythonRepr).join(', ')}]`;
    case 'tuple':
      return value.items.length === 1 ? `(${pythonRepr(value.items[0])},)` : `(${value.items.map(pythonRepr).join(', ')})`;
    case 'dict':
      return `{${value.entries.map(([k, v]) => `${pythonStrRepr(k)}: ${pythonRepr(v)}`).join(', ')}}`;
    case 'other':
      return value.text;
  }
}
