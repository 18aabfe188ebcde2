/**
 * `{% break %}` / `{% continue %}` as jinja2 runs them: what the iteration
 * printed before the control statement stays in the output. @huggingface/jinja
 * drops it (its loop body accumulates text in a local and throws past it):
 *
 *   {% for m in messages %}{{ m.role }}{% if loop.index == 2 %}{% break %}{% endif %}{% endfor %}
 *     jinja2: "systemuser"        library alone: "system"
 *
 * How (no change to node_modules): a statement list that can reach a
 * break/continue without entering another loop is rendered one statement at
 * a time through the library's own renderBlock, so the text before the
 * control statement is known; it rides on the control exception outwards.
 * At the loop body, a continue becomes a normal end of the iteration with
 * that text, and a break's text is appended after the loop's output.
 *
 * Left as the library does it: `{% for %}…{% else %}` after a break in the
 * first iteration renders the else block (jinja2 does not).
 *
 * chat-template-segments.ts wraps renderBlock too and must wrap this one
 * (it keys loop bodies by their statement arrays, which this layer passes
 * through unchanged); it imports this module first.
 */
import { Environment, Interpreter } from '@huggingface/jinja';

import { objectChildren, walkTemplateAst } from './chat-template-ast-walk.ts';

interface AstNode {
  type: string;
  [key: string]: unknown;
}
type RenderBlock = (this: unknown, statements: AstNode[], environment: unknown) => string;
type RenderFor = (this: unknown, node: AstNode, environment: unknown) => string;

const proto = Interpreter.prototype as unknown as { renderBlock?: RenderBlock; renderFor?: RenderFor; evaluate?: (node: AstNode, environment: unknown) => unknown };
const baseRenderBlock = proto.renderBlock;
const baseRenderFor = proto.renderFor;

/** The library's (unexported) control exception classes, taken from what it throws. */
function controlClass(type: 'Break' | 'Continue'): (abstract new () => Error) | null {
  try {
    const environment = new Environment();
    new Interpreter(environment).evaluate({ type } as never, environment);
  } catch (error) {
    return (error as Error).constructor as abstract new () => Error;
  }
  return null;
}
const BreakControl = controlClass('Break');
const ContinueControl = controlClass('Continue');

export const LOOP_CONTROLS_AVAILABLE = typeof baseRenderBlock === 'function' && typeof baseRenderFor === 'function' && BreakControl !== null && ContinueControl !== null;

/** Statement lists rendered one statement at a time (they can reach a break/continue). */
const controlLists = new WeakSet<object>();
/** For-loop bodies among them. */
const loopBodies = new WeakSet<object>();
/** Text of the iteration a break ended, per loop body, until the loop returns. */
const breakText = new Map<unknown, string>();
const PARTIAL = Symbol('kvtier partial output');

type ControlError = Error & { [PARTIAL]?: string };

function isControl(error: unknown): error is ControlError {
  return (BreakControl !== null && error instanceof BreakControl) || (ContinueControl !== null && error instanceof ContinueControl);
}

if (LOOP_CONTROLS_AVAILABLE) {
  proto.renderBlock = function renderBlockKeepingOutput(statements, environment) {
    if (!controlLists.has(statements)) return baseRenderBlock!.call(this, statements, environment);
    let text = '';
    try {
      for (const statement of statements) text += baseRenderBlock!.call(this, [statement], environment);
    } catch (error) {
      if (!isControl(error)) throw error;
      const partial = text + (error[PARTIAL] ?? '');
      if (!loopBodies.has(statements)) {
        error[PARTIAL] = partial;
        throw error;
      }
      if (ContinueControl !== null && error instanceof ContinueControl) return partial;
      breakText.set(statements, partial);
      (error as ControlError)[PARTIAL] = '';
      throw error;
    }
    return text;
  };
  proto.renderFor = function renderForKeepingBreakText(node, environment) {
    const text = baseRenderFor!.call(this, node, environment);
    const tail = breakText.get(node.body);
    if (tail === undefined) return text;
    breakText.delete(node.body);
    return text + tail;
  };
}

/** Marks the statement lists of `parsed` (the library's Program) that can reach a break/continue of their own loop. */
export function markLoopControls(parsed: unknown): void {
  if (!LOOP_CONTROLS_AVAILABLE) return;
  // Whether a list reaches a control statement through If branches (a nested loop catches its own).
  const reaches = (list: unknown): boolean => {
    if (!Array.isArray(list)) return false;
    let found = false;
    for (const node of list as AstNode[]) {
      if (node?.type === 'Break' || node?.type === 'Continue') found = true;
      else if (node?.type === 'If' && (reaches(node.body) || reaches(node.alternate))) found = true;
    }
    if (found) controlLists.add(list as object);
    return found;
  };
  walkTemplateAst(parsed, (node, push) => {
    const record = node as AstNode;
    if (record.type === 'For' && reaches(record.body)) loopBodies.add(record.body as object);
    push(...objectChildren(record));
  });
}
