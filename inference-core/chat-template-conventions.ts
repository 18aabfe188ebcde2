/**
 * How a chat template reads the transcript, learned from its source, so
 * messages reach it in the shape it was written for (the shape transformers'
 * apply_chat_template users hand it):
 *
 *   content of a tool-call turn   null  when the template tests it (`content is none`,
 *                                       `is not none`, `is string`): DeepSeek V3 renders an
 *                                       assistant turn's tool calls only when its content is none;
 *                                 ""    otherwise: `'…' + message.content` or `content | trim`
 *                                       fail or print "None" on null (Llama 3, Qwen2.5, Qwen3).
 *   tool-call arguments           a JSON string when the template concatenates or prints them
 *                                       (`… + tool['function']['arguments'] + …`: DeepSeek V3),
 *                                 the object otherwise (`arguments | tojson`: Qwen2.5; Qwen3
 *                                       takes both, `is string`).
 *
 * A string the client sent stays byte for byte; an object becomes
 * json.dumps(obj, ensure_ascii=False), the text `tojson` would give it.
 */
import { pythonJsonDumps } from './chat-template-python.ts';

export interface TemplateConventions {
  /** The template tests message content against none (or for being a string): hand null over as null. */
  nullContent: boolean;
  /** How the template consumes `tool_call.function.arguments`. */
  argumentsAs: 'object' | 'string';
}

// `content is none`, `content'] is not none`, `content is string` (not `reasoning_content is not none`): the template decides what null means.
const TESTS_CONTENT = /(?<!\w)content['"]?\]?\s+is\s+(?:not\s+)?(?:none|string)\b/;
// `arguments | tojson`, `arguments is string`, `arguments is mapping`: the template handles an object.
const HANDLES_OBJECT_ARGUMENTS = /(?<!\w)arguments['"]?\]?\s*\|\s*tojson|(?<!\w)arguments['"]?\]?\s+is\s+(?:not\s+)?(?:string|mapping)\b/;
// `arguments + '…'` or `{{ tool_call.arguments }}`: the template uses the arguments as text.
const USES_ARGUMENTS_AS_TEXT = /(?<!\w)arguments['"]?\]?\s*\+|\{\{-?\s*[\w.[\]'"]*arguments['"]?\]?\s*-?\}\}/;

export function templateConventions(source: string): TemplateConventions {
  return {
    nullContent: TESTS_CONTENT.test(source),
    argumentsAs: USES_ARGUMENTS_AS_TEXT.test(source) && !HANDLES_OBJECT_ARGUMENTS.test(source) ? 'string' : 'object',
  };
}

interface ConventionMessage {
  content: unknown;
  tool_calls?: Array<{ function: { name: string; arguments: unknown }; rawArguments?: string }>;
}

/** `message` as `conventions` want it (a copy where anything changes; the input is not modified). */
export function applyConventions<M extends ConventionMessage>(message: M, conventions: TemplateConventions): M {
  let out = message;
  if (message.content === null && !conventions.nullContent) out = { ...out, content: '' };
  if (message.tool_calls) {
    out = {
      ...out,
      tool_calls: message.tool_calls.map((call) => {
        const { rawArguments, ...rest } = call;
        const args = call.function.arguments;
        if (conventions.argumentsAs === 'string' && typeof args !== 'string') {
          return { ...rest, function: { ...call.function, arguments: rawArguments ?? pythonJsonDumps(args) } };
        }
        return rawArguments === undefined ? call : rest;
      }),
    };
  }
  return out;
}
