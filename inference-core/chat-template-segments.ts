/**
 * One render of a chat template that also says where each message's output
 * begins, so a prompt can be cut into per-message segments in time linear in
 * the transcript (rendering every prefix m[0..i] to diff them costs O(n²):
 * 4,000 messages took ~14 s).
 *
 * How: while a recording render runs, each iteration of a `{% for %}` loop
 * whose loop variable is one of the transcript's messages prefixes its output
 * with a marker `\uFDD0<loop>:<message index>\uFDD1` and ends it with `\uFDD0e\uFDD1`
 * (text after a loop is no iteration's). Markers are noncharacters
 * (U+FDD0/U+FDD1), so they cannot come from a template, and a transcript that
 * contains them is not recorded (null → the caller encodes the whole render).
 *
 *   text    = header ‖ iter(m_a) ‖ iter(m_b) ‖ … ‖ trailer
 *   starts  = [-1 | offset of iter(m_i) in text]  per message i
 *
 * A template may loop over the messages more than once (Qwen3 scans them in
 * reverse for the last user query, DeepSeek V3 first collects the system
 * messages) or skip some (Llama 3 hoists the system message into the header
 * with `messages[1:]`): the loop whose iterations produce the most text is
 * the transcript loop; its message indices must
 * increase, else the render is not segmentable (null). When no loop visited
 * any message, every start is -1 (the whole text is message 0's).
 *
 * The hook sits on @huggingface/jinja's Interpreter.prototype.renderBlock (the
 * method that renders a loop body once per iteration). It is inert unless a
 * recording render is running, and renders are synchronous, so one module-level
 * slot is enough. If a future version of the library renames the method, the
 * check below fails at import and every render is simply not segmentable.
 */
import { Interpreter, type Template } from '@huggingface/jinja';

// The loop-control layer patches renderBlock too; it must sit below this hook (see that file).
import './chat-template-loop-controls.ts';
import { objectChildren, walkTemplateAst } from './chat-template-ast-walk.ts';

const OPEN = '\uFDD0';
const CLOSE = '\uFDD1';
/** Body of the marker that closes an iteration (`\uFDD0e\uFDD1`): text after a loop is no iteration's. */
const END = 'e';

interface Recording {
  /** For-loop body (statement array) → [loop id, loop variable name]. */
  loops: Map<unknown, [number, string]>;
  /** The transcript's runtime message objects → index; captured at the first block rendered (the program body, before any `set`). */
  messageIndex: Map<unknown, number> | null;
}

let active: Recording | null = null;

type RenderBlock = (this: unknown, statements: unknown, environment: { variables: Map<string, unknown> }) => string;
const proto = Interpreter.prototype as unknown as { renderBlock?: RenderBlock };
const baseRenderBlock = proto.renderBlock;
export const SEGMENTED_RENDER_AVAILABLE = typeof baseRenderBlock === 'function';

if (SEGMENTED_RENDER_AVAILABLE) {
  proto.renderBlock = function renderBlockRecorded(statements, environment) {
    const recording = active;
    if (recording === null) return baseRenderBlock!.call(this, statements, environment);
    if (recording.messageIndex === null) recording.messageIndex = indexMessages(environment.variables.get('messages'));
    const loop = recording.loops.get(statements);
    if (loop !== undefined) {
      const index = recording.messageIndex.get(environment.variables.get(loop[1]));
      if (index !== undefined) return `${OPEN}${loop[0]}:${index}${CLOSE}${baseRenderBlock!.call(this, statements, environment)}${OPEN}${END}${CLOSE}`;
    }
    return baseRenderBlock!.call(this, statements, environment);
  };
}

function indexMessages(value: unknown): Map<unknown, number> {
  const index = new Map<unknown, number>();
  const items = (value as { value?: unknown } | undefined)?.value;
  if (Array.isArray(items)) items.forEach((item, i) => index.set(item, i));
  return index;
}

/** Every `{% for <name> in … %}` body of the template's AST (the template is the server's, not a client's: its depth is bounded). */
function forLoops(parsed: unknown): Map<unknown, [number, string]> {
  const loops = new Map<unknown, [number, string]>();
  walkTemplateAst(parsed, (node, push) => {
    const record = node as { type?: unknown; body?: unknown; loopvar?: { type?: unknown; value?: unknown } };
    if (record.type === 'For' && Array.isArray(record.body) && record.loopvar?.type === 'Identifier' && typeof record.loopvar.value === 'string') {
      loops.set(record.body, [loops.size, record.loopvar.value]);
    }
    push(...objectChildren(node));
  });
  return loops;
}

const loopCache = new WeakMap<Template, Map<unknown, [number, string]>>();

export interface SegmentedRender {
  /** The rendered text, markers removed. */
  text: string;
  /** Offset in `text` where message i's loop iteration begins, or -1 when the transcript loop did not visit it. */
  starts: number[];
}

/**
 * `template.render(context)` with per-message offsets, or null when the
 * output cannot be attributed to messages (no transcript loop, loop order not
 * increasing). The caller checks the context for marker characters first
 * (`containsMarkerChars`).
 */
export function renderSegmented(template: Template, context: Record<string, unknown>, messageCount: number): SegmentedRender | null {
  if (!SEGMENTED_RENDER_AVAILABLE) return null;
  let loops = loopCache.get(template);
  if (!loops) {
    loops = forLoops((template as unknown as { parsed: unknown }).parsed);
    loopCache.set(template, loops);
  }
  if (loops.size === 0) return null;
  active = { loops, messageIndex: null };
  let raw: string;
  try {
    raw = template.render(context);
  } finally {
    active = null;
  }
  return parseMarkers(raw, messageCount);
}

function parseMarkers(raw: string, messageCount: number): SegmentedRender | null {
  const pieces: string[] = [];
  const marks: Array<{ loop: number; message: number; at: number; end: number }> = [];
  const open: number[] = [];
  let length = 0;
  let cursor = 0;
  for (;;) {
    const at = raw.indexOf(OPEN, cursor);
    const piece = raw.slice(cursor, at === -1 ? raw.length : at);
    pieces.push(piece);
    length += piece.length;
    if (at === -1) break;
    const close = raw.indexOf(CLOSE, at);
    if (close === -1) return null;
    const body = raw.slice(at + 1, close);
    if (body === END) {
      const mark = open.pop();
      if (mark === undefined) return null;
      marks[mark].end = length;
    } else {
      const [loop, message] = body.split(':').map(Number);
      open.push(marks.length);
      marks.push({ loop, message, at: length, end: -1 });
    }
    cursor = close + 1;
  }
  // An iteration a loop control cut short lost its end marker with its start: every start here has its end.
  if (open.length > 0) return null;
  const text = pieces.join('');
  // Text each loop's iterations produced (nested loops' text counts for the iteration holding them).
  const produced = new Map<number, number>();
  for (const mark of marks) produced.set(mark.loop, (produced.get(mark.loop) ?? 0) + (mark.end - mark.at));
  let best = -1;
  let bestChars = -1;
  for (const [loop, chars] of produced) {
    if (chars > bestChars) [best, bestChars] = [loop, chars];
  }
  // No loop visited a message (a lone system message the template hoists into its header): all of it is message 0's.
  const starts = new Array<number>(messageCount).fill(-1);
  let previous = -1;
  for (const mark of marks) {
    if (mark.loop !== best) continue;
    if (mark.message <= previous || mark.message >= messageCount) return null;
    starts[mark.message] = mark.at;
    previous = mark.message;
  }
  return { text, starts };
}

/** Whether any string in `value` holds a marker character (iterative: the value is client JSON). */
export function containsMarkerChars(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'string') {
      if (item.includes(OPEN) || item.includes(CLOSE)) return true;
    } else if (item !== null && typeof item === 'object') {
      for (const [key, child] of Object.entries(item)) {
        if (key.includes(OPEN) || key.includes(CLOSE)) return true;
        stack.push(child);
      }
    }
  }
  return false;
}
