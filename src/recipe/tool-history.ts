/**
 * Tool histories that hold together: a tool result answers a call an earlier
 * assistant turn made. A result whose id no call has (or no id at all) is a
 * 400 naming the field, as the reference APIs answer: rendered anyway, the
 * template would pair it with nothing and the model would read a transcript
 * no client meant.
 */
import { KvtError } from '../errors.ts';
import type { ChatMessage } from './types.ts';

function invalid(message: string, param: string): KvtError {
  return new KvtError('KVT_ERR_REQUEST_INVALID', message, { param });
}

/** The ids of the tool calls the assistant turns of `messages` made. */
export function toolCallIds(messages: readonly ChatMessage[], into = new Set<string>()): Set<string> {
  for (const message of messages) if (message.role === 'assistant' && message.tool_calls) for (const call of message.tool_calls) into.add(call.id);
  return into;
}

/**
 * Throws when a tool message of `messages` answers no call made before it
 * (`earlier`: ids of calls made before the first message, e.g. a chained
 * response's history). `paramOf(index)` names the result's id field.
 */
export function checkToolResults(messages: readonly ChatMessage[], paramOf: (index: number) => string, earlier: ReadonlySet<string> = new Set()): void {
  const made = new Set(earlier);
  for (let index = 0; index < messages.length; index++) {
    const message = messages[index];
    if (message.role === 'assistant' && message.tool_calls) for (const call of message.tool_calls) made.add(call.id);
    if (message.role !== 'tool') continue;
    const id = message.tool_call_id;
    if (typeof id !== 'string' || id === '') throw invalid(`${paramOf(index)} is required: name the tool call this result answers`, paramOf(index));
    if (!made.has(id)) throw invalid(`${paramOf(index)} "${id}" answers no tool call: no earlier assistant turn made a call with this id`, paramOf(index));
  }
}

/**
 * Responses input items: each function_call_output's call_id names a
 * function_call earlier in the input or in the chained history's calls.
 */
export function checkResponsesToolOutputs(input: unknown, earlier: ReadonlySet<string>): void {
  if (!Array.isArray(input)) return;
  const made = new Set(earlier);
  for (let index = 0; index < input.length; index++) {
    const item = input[index] as { type?: unknown; call_id?: unknown } | null;
    if (item === null || typeof item !== 'object') continue;
    if (item.type === 'function_call' && typeof item.call_id === 'string') made.add(item.call_id);
    if (item.type !== 'function_call_output' || typeof item.call_id !== 'string') continue;
    if (!made.has(item.call_id)) {
      throw invalid(`input[${index}].call_id "${item.call_id}" answers no function call: no earlier function_call item (in this input or the previous response) has this call_id`, `input[${index}].call_id`);
    }
  }
}
