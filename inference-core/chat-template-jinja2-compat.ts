/**
 * Where @huggingface/jinja prints values differently from Python jinja2 (the
 * engine transformers renders chat templates with), kvtier prints them as
 * jinja2 does. A template is a transformers artefact: `{{ flag }}` must read
 * `True`, `{{ value }}` of None `None`, `{{ [1, 'a'] }}` `[1, 'a']`, not the
 * JavaScript/JSON spellings (`true`, ``, `[1, "a"]`).
 *
 * How (no change to node_modules): after parsing, the template's AST is
 * rewritten so every printed expression, every `~` and every `| string`
 * goes through a node kvtier evaluates itself:
 *
 *   {{ expr }}      → KvtierPyStr(expr)            str(value)
 *   a ~ b           → KvtierPyConcat(a, b)         str(a) + str(b)
 *   expr | string   → KvtierPyStr(expr)
 *   sep.join(xs)    → xs | join(sep)               (the method is Python's, the filter the library's)
 *
 * and Interpreter.prototype.evaluate learns those two node types (every other
 * node goes to the library's own evaluate). `is float`, which jinja2 has and
 * the library lacks, is added to its table.
 *
 * Known differences left: a filter applied to None (`none | trim` is "None"
 * in jinja2, an error here), `'%s' % x` formatting, `{% raw %}`, tests with
 * arguments (`is divisibleby(3)`), one-element tuples (parse errors here),
 * `map('string')`, `items()`/`dictsort` printed as lists of lists, filters
 * it lacks (round, format, select, wordcount, attr), string methods it lacks
 * (find, center), `"1" == 1` (true here), `[] == []` (false here), and a float literal in JSON input that is integral (1.0
 * reaches JavaScript as 1). Real templates tested do not use them
 * (test/inference-core/chat-template-real.test.ts).
 */
import { Environment, Interpreter, Template } from '@huggingface/jinja';

import { walkTemplateAst } from './chat-template-ast-walk.ts';
import { pythonStr, type PyValue } from './chat-template-python.ts';

interface RuntimeValue {
  type: string;
  value: unknown;
}
interface AstNode {
  type: string;
  [key: string]: unknown;
}

const PY_STR = 'KvtierPyStr';
const PY_CONCAT = 'KvtierPyConcat';

/**
 * New nodes are made on the prototypes of the library's own AST classes: its
 * static walks (which special names a macro body reads: caller, varargs,
 * kwargs) visit only `instanceof Statement` nodes.
 */
const SAMPLE = (new Template('{{ a | join(b) }}') as unknown as { parsed: { body: AstNode[] } }).parsed.body[0];
const FILTER_PROTO = Object.getPrototypeOf(SAMPLE) as object;
const CALL_PROTO = Object.getPrototypeOf(SAMPLE.filter) as object;
const IDENTIFIER_PROTO = Object.getPrototypeOf((SAMPLE.filter as AstNode).callee) as object;
const EXPRESSION_PROTO = Object.getPrototypeOf(IDENTIFIER_PROTO) as object;

function makeNode(proto: object, fields: AstNode): AstNode {
  return Object.assign(Object.create(proto) as AstNode, fields);
}

/** A runtime value as the Python value jinja2 would hold. */
export function runtimeToPy(value: RuntimeValue): PyValue {
  switch (value.type) {
    case 'NullValue':
      return { kind: 'none' };
    case 'UndefinedValue':
      return { kind: 'undefined' };
    case 'BooleanValue':
      return { kind: 'bool', value: value.value as boolean };
    case 'IntegerValue':
      return { kind: 'int', value: value.value as number };
    case 'FloatValue':
      return { kind: 'float', value: value.value as number };
    case 'StringValue':
      return { kind: 'str', value: value.value as string };
    case 'ArrayValue':
    case 'TupleValue':
      return { kind: value.type === 'TupleValue' ? 'tuple' : 'list', items: (value.value as RuntimeValue[]).map(runtimeToPy) };
    case 'ObjectValue':
    case 'KeywordArgumentsValue':
      return { kind: 'dict', entries: Array.from(value.value as Map<string, RuntimeValue>, ([k, v]): [string, PyValue] => [k, runtimeToPy(v)]) };
    default:
      return { kind: 'other', text: String((value as { toString(): string }).toString()) };
  }
}

// The library's StringValue class is not exported: take it from a value it makes.
const StringValue = (new Environment().set('s', '') as unknown as { constructor: new (value: string) => RuntimeValue }).constructor;

type Evaluate = (this: unknown, node: AstNode, environment: unknown) => RuntimeValue;
const interpreterProto = Interpreter.prototype as unknown as { evaluate?: Evaluate };
const baseEvaluate = interpreterProto.evaluate;
/** False if a future library version renamed evaluate: templates then render with the library's own printing. */
export const JINJA2_PRINTING_AVAILABLE = typeof baseEvaluate === 'function';

if (JINJA2_PRINTING_AVAILABLE) {
  interpreterProto.evaluate = function evaluateWithPythonPrinting(this: { evaluate: Evaluate }, node, environment) {
    // Operands go through this.evaluate: they may be rewritten nodes themselves (a ~ b ~ c).
    if (node?.type === PY_STR) return new StringValue(pythonStr(runtimeToPy(this.evaluate(node.operand as AstNode, environment))));
    if (node?.type === PY_CONCAT) {
      const left = pythonStr(runtimeToPy(this.evaluate(node.left as AstNode, environment)));
      return new StringValue(left + pythonStr(runtimeToPy(this.evaluate(node.right as AstNode, environment))));
    }
    return baseEvaluate!.call(this, node, environment);
  } as Evaluate;
}

// Jinja2 tests the library lacks that its parser can reach (it parses no test arguments: `is ne(2)` fails).
const tests = (Environment as unknown as { TESTS: Map<string, (...args: RuntimeValue[]) => boolean> }).TESTS;
const extraTests: Array<[string, (a: RuntimeValue) => boolean]> = [['float', (a) => a.type === 'FloatValue']];
for (const [name, test] of extraTests) if (!tests.has(name)) tests.set(name, test as (...args: RuntimeValue[]) => boolean);

// Statement lists (where a bare expression is printed output) by node type.
const BODY_KEYS = ['body', 'alternate', 'defaultBlock'];
const PRINTED = new Set([
  'Identifier',
  'MemberExpression',
  'CallExpression',
  'IntegerLiteral',
  'FloatLiteral',
  'ArrayLiteral',
  'TupleLiteral',
  'ObjectLiteral',
  'BinaryExpression',
  'FilterExpression',
  'SelectExpression',
  'TestExpression',
  'UnaryExpression',
  'SliceExpression',
  'Ternary',
  PY_CONCAT,
]);

function rewriteExpression(node: AstNode): AstNode {
  if (node.type === 'BinaryExpression' && (node.operator as { value?: unknown } | undefined)?.value === '~') {
    return makeNode(EXPRESSION_PROTO, { type: PY_CONCAT, left: node.left, right: node.right });
  }
  // Python's `sep.join(items)` (only strings have join): the library has the filter, not the method.
  if (node.type === 'CallExpression') {
    const callee = node.callee as AstNode | undefined;
    const property = callee?.property as AstNode | undefined;
    const args = node.args as AstNode[] | undefined;
    if (callee?.type === 'MemberExpression' && !callee.computed && property?.type === 'Identifier' && property.value === 'join' && args?.length === 1 && args[0].type !== 'KeywordArgumentExpression') {
      const filter = makeNode(CALL_PROTO, { type: 'CallExpression', callee: makeNode(IDENTIFIER_PROTO, { type: 'Identifier', value: 'join' }), args: [callee.object] });
      return makeNode(FILTER_PROTO, { type: 'FilterExpression', operand: args[0], filter });
    }
  }
  if (node.type === 'FilterExpression') {
    const filter = node.filter as AstNode | undefined;
    if (filter?.type === 'Identifier' && filter.value === 'string') return makeNode(EXPRESSION_PROTO, { type: PY_STR, operand: node.operand });
  }
  return node;
}

/**
 * Rewrites `parsed` (the library's Program node) in place. Statement arrays
 * keep their identity (chat-template-segments.ts keys loops by their body
 * arrays). Iterative: a template's nesting is bounded, but no recursion is needed.
 */
export function rewriteForPythonPrinting(parsed: unknown): void {
  if (!JINJA2_PRINTING_AVAILABLE) return;
  walkTemplateAst(parsed, (node, push) => {
    const record = node as Record<string, unknown>;
    const isStatement = typeof record.type === 'string';
    for (const [key, child] of Object.entries(record)) {
      if (Array.isArray(child)) {
        const printsItems = isStatement && (BODY_KEYS.includes(key) || (record.type === 'Program' && key === 'body'));
        for (let i = 0; i < child.length; i++) {
          const item = child[i] as AstNode | null;
          if (item === null || typeof item !== 'object' || typeof item.type !== 'string') {
            push(item);
            continue;
          }
          let replaced = rewriteExpression(item);
          if (printsItems && PRINTED.has(replaced.type)) replaced = makeNode(EXPRESSION_PROTO, { type: PY_STR, operand: replaced });
          child[i] = replaced;
          push(replaced);
        }
      } else if (child instanceof Map) {
        // ObjectLiteral: key and value expressions.
        for (const [k, v] of Array.from(child)) {
          if (v !== null && typeof v === 'object' && typeof (v as AstNode).type === 'string') child.set(k, rewriteExpression(v as AstNode));
          push(k, child.get(k));
        }
      } else if (child !== null && typeof child === 'object' && typeof (child as AstNode).type === 'string') {
        record[key] = rewriteExpression(child as AstNode);
        push(record[key]);
      } else if (child !== null && typeof child === 'object') {
        push(child);
      }
    }
  });
}
