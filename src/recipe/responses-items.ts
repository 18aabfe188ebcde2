/**
 * GET /v1/responses/{id}/input_items: the items a response was generated
 * from, as the reference lists them (the SDK's ResponseItem shapes, each with
 * an id), and the cursor pagination of its list.
 *
 * A chained response (previous_response_id) lists the whole context it ran
 * on: the previous response's input items, then its output items, then this
 * request's input — the reference's conversation state. Instructions are not
 * items. Reasoning items are left out: the reference's ResponseItem union has
 * no reasoning variant (their text stays in the conversation the model sees).
 * Items the request sent with an id keep it (a client replaying output items);
 * the others get one here (msg_, fc_, fco_), unique within the list.
 */
import { KvtError } from '../errors.ts';
import { parseInclude } from './responses-include.ts';
import type { ResponsesOutputItem, ResponsesRequestBody } from './responses-format.ts';

export type ResponsesListItem = { id: string; type: string } & Record<string, unknown>;

type Part = { type: string; text?: string };

function inputParts(content: string | Part[] | undefined): Array<{ type: 'input_text'; text: string }> {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return [{ type: 'input_text', text: content }];
  return content.map((part) => ({ type: 'input_text', text: part.text ?? '' }));
}

function outputParts(content: string | Part[] | undefined): Array<{ type: 'output_text'; text: string; annotations: unknown[] }> {
  return inputParts(content).map((part) => ({ type: 'output_text', text: part.text, annotations: [] }));
}

/**
 * This request's input as list items. `taken` holds the ids already in the
 * list (a chained history), and gains these.
 */
export function inputListItems(input: ResponsesRequestBody['input'], newId: (prefix: string) => string, taken: Set<string>): ResponsesListItem[] {
  if (input === undefined) return [];
  const idOf = (given: unknown, prefix: string): string => {
    const id = typeof given === 'string' && given !== '' && !taken.has(given) ? given : newId(prefix);
    taken.add(id);
    return id;
  };
  if (typeof input === 'string') return [{ id: idOf(undefined, 'msg_'), type: 'message', role: 'user', content: inputParts(input), status: 'completed' }];
  const items: ResponsesListItem[] = [];
  for (const item of input) {
    const type = item.type ?? 'message';
    if (type === 'message') {
      const content = item.content as string | Part[] | undefined;
      if (item.role === 'assistant') items.push({ id: idOf(item.id, 'msg_'), type: 'message', role: 'assistant', status: 'completed', content: outputParts(content) });
      else items.push({ id: idOf(item.id, 'msg_'), type: 'message', role: item.role ?? 'user', content: inputParts(content), status: 'completed' });
    } else if (type === 'function_call') {
      items.push({ id: idOf(item.id, 'fc_'), type: 'function_call', call_id: item.call_id ?? '', name: item.name ?? '', arguments: item.arguments ?? '', status: 'completed' });
    } else if (type === 'function_call_output') {
      items.push({ id: idOf(item.id, 'fco_'), type: 'function_call_output', call_id: item.call_id ?? '', output: item.output ?? '', status: 'completed' });
    }
  }
  return items;
}

/** A response's output items as list items (what the next chained response lists after its predecessor's input). */
export function outputListItems(output: readonly ResponsesOutputItem[], taken: Set<string>): ResponsesListItem[] {
  const items: ResponsesListItem[] = [];
  for (const item of output) {
    if (item.type === 'reasoning') continue;
    taken.add(item.id);
    items.push({ ...item });
  }
  return items;
}

export interface ListQuery {
  after: string | null;
  before: string | null;
  limit: number;
  order: 'asc' | 'desc';
}

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 100;

function invalid(message: string, param: string): KvtError {
  return new KvtError('KVT_ERR_REQUEST_INVALID', message, { param });
}

/** The query string of a list call (`include[]=…` as the SDK sends it, or repeated `include=…`). */
export function parseListQuery(query: Record<string, unknown>): ListQuery {
  parseInclude(query['include[]'] ?? query.include);
  const text = (name: string): string | null => {
    const value = query[name];
    if (value === undefined || value === '') return null;
    if (typeof value !== 'string') throw invalid(`${name} must be given once`, name);
    return value;
  };
  const limitText = text('limit');
  const limit = limitText === null ? DEFAULT_LIMIT : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw invalid(`limit must be an integer from 1 to ${MAX_LIMIT} (got ${JSON.stringify(limitText)})`, 'limit');
  // The reference lists input items newest first unless told otherwise.
  const order = text('order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw invalid(`order must be "asc" or "desc" (got ${JSON.stringify(order)})`, 'order');
  return { after: text('after'), before: text('before'), limit, order };
}

export interface ListPage {
  object: 'list';
  data: ResponsesListItem[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

/**
 * One page of `items` (kept oldest first): in `order`, the items after the
 * `after` cursor and before the `before` cursor; `limit` of them, nearest to
 * `after` (or, with `before` alone, nearest to `before`).
 */
export function listPage(items: readonly ResponsesListItem[], query: ListQuery): ListPage {
  const ordered = query.order === 'asc' ? [...items] : [...items].reverse();
  const at = (id: string, param: string): number => {
    const index = ordered.findIndex((item) => item.id === id);
    if (index === -1) throw invalid(`${param} "${id}" is not an item of this list`, param);
    return index;
  };
  const start = query.after === null ? 0 : at(query.after, 'after') + 1;
  const end = query.before === null ? ordered.length : at(query.before, 'before');
  let data: ResponsesListItem[];
  let hasMore: boolean;
  if (query.before !== null && query.after === null) {
    const from = Math.max(start, end - query.limit);
    data = ordered.slice(from, end);
    hasMore = from > start;
  } else {
    data = ordered.slice(start, Math.max(start, Math.min(end, start + query.limit)));
    hasMore = start + query.limit < end;
  }
  return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null, has_more: hasMore };
}
