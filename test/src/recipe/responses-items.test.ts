/**
 * The Responses codec's pure parts: input items as list items (ids, kinds),
 * the list's cursor pagination in both orders, the include values, and the
 * reasoning token a stateless client sends back.
 */
import { describe, expect, it } from 'vitest';

import { messagesFromResponsesInput } from '../../../src/recipe/responses-format.ts';
import { parseInclude, reasoningFromToken, reasoningToken } from '../../../src/recipe/responses-include.ts';
import { inputListItems, listPage, outputListItems, parseListQuery, type ResponsesListItem } from '../../../src/recipe/responses-items.ts';

const counterIds = () => {
  let n = 0;
  return (prefix: string) => `${prefix}${++n}`;
};

describe('inputListItems', () => {
  it('gives each item the reference shape and an id; given ids are kept unless already taken', () => {
    const taken = new Set<string>(['fc_old']);
    const items = inputListItems(
      [
        { role: 'developer', content: 'be brief' },
        { role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'input_text', text: 'b' }] },
        { role: 'assistant', content: 'hi', id: 'msg_kept' },
        { type: 'reasoning', content: [{ type: 'reasoning_text', text: 'hidden' }] },
        { type: 'function_call', id: 'fc_old', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'ok' },
      ],
      counterIds(),
      taken,
    );
    expect(items).toEqual([
      { id: 'msg_1', type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'be brief' }], status: 'completed' },
      { id: 'msg_2', type: 'message', role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'input_text', text: 'b' }], status: 'completed' },
      { id: 'msg_kept', type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'hi', annotations: [] }] },
      { id: 'fc_3', type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}', status: 'completed' },
      { id: 'fco_4', type: 'function_call_output', call_id: 'c1', output: 'ok', status: 'completed' },
    ]);
    expect([...taken].sort()).toEqual(['fc_3', 'fc_old', 'fco_4', 'msg_1', 'msg_2', 'msg_kept']);
    expect(inputListItems('plain', counterIds(), new Set())).toEqual([{ id: 'msg_1', type: 'message', role: 'user', content: [{ type: 'input_text', text: 'plain' }], status: 'completed' }]);
  });

  it('output items: messages and calls listed, reasoning left out (no ResponseItem variant)', () => {
    const items = outputListItems(
      [
        { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 't' }], status: 'completed' },
        { type: 'message', id: 'msg_9', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'x', annotations: [], logprobs: [] }] },
        { type: 'function_call', id: 'fc_9', call_id: 'c', name: 'f', arguments: '{}', status: 'completed' },
      ],
      new Set(),
    );
    expect(items.map((i) => i.id)).toEqual(['msg_9', 'fc_9']);
  });
});

describe('listPage', () => {
  const items: ResponsesListItem[] = ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id, type: 'message' }));
  const page = (query: Record<string, string>) => {
    const p = listPage(items, parseListQuery(query));
    return { ids: p.data.map((i) => i.id).join(''), more: p.has_more, first: p.first_id, last: p.last_id };
  };

  it('asc and desc (the default), limit, after, before, both', () => {
    expect(page({})).toEqual({ ids: 'edcba', more: false, first: 'e', last: 'a' });
    expect(page({ order: 'asc', limit: '2' })).toEqual({ ids: 'ab', more: true, first: 'a', last: 'b' });
    expect(page({ order: 'asc', limit: '2', after: 'b' })).toEqual({ ids: 'cd', more: true, first: 'c', last: 'd' });
    expect(page({ order: 'asc', limit: '2', after: 'd' })).toEqual({ ids: 'e', more: false, first: 'e', last: 'e' });
    expect(page({ order: 'asc', limit: '2', after: 'e' })).toEqual({ ids: '', more: false, first: null, last: null });
    expect(page({ limit: '2', after: 'd' })).toEqual({ ids: 'cb', more: true, first: 'c', last: 'b' });
    expect(page({ order: 'asc', limit: '2', before: 'd' })).toEqual({ ids: 'bc', more: true, first: 'b', last: 'c' });
    expect(page({ order: 'asc', limit: '5', before: 'c' })).toEqual({ ids: 'ab', more: false, first: 'a', last: 'b' });
    expect(page({ order: 'asc', after: 'a', before: 'e' })).toEqual({ ids: 'bcd', more: false, first: 'b', last: 'd' });
    expect(page({ order: 'asc', limit: '1', after: 'a', before: 'e' })).toEqual({ ids: 'b', more: true, first: 'b', last: 'b' });
  });

  it('bad queries name their field', () => {
    const param = (query: Record<string, unknown>) => {
      try {
        listPage(items, parseListQuery(query));
        return null;
      } catch (error) {
        return (error as { param: string }).param;
      }
    };
    expect(param({ limit: '0' })).toBe('limit');
    expect(param({ limit: '100' })).toBeNull();
    expect(param({ limit: '101' })).toBe('limit');
    expect(param({ limit: '1.5' })).toBe('limit');
    expect(param({ order: 'sideways' })).toBe('order');
    expect(param({ after: 'z' })).toBe('after');
    expect(param({ before: 'z' })).toBe('before');
    expect(param({ after: ['a', 'b'] })).toBe('after');
    expect(param({ 'include[]': ['nope'] })).toBe('include');
  });
});

describe('include and the reasoning token', () => {
  it('documented values pass, logprobs and unknown ones are 400s naming include', () => {
    expect(parseInclude(undefined)).toEqual({ reasoningToken: false });
    expect(parseInclude(['file_search_call.results', 'web_search_call.results', 'code_interpreter_call.outputs'])).toEqual({ reasoningToken: false });
    expect(parseInclude(['reasoning.encrypted_content'])).toEqual({ reasoningToken: true });
    expect(parseInclude('reasoning.encrypted_content')).toEqual({ reasoningToken: true });
    for (const bad of [['message.output_text.logprobs'], ['x'], [1], {}]) {
      expect(() => parseInclude(bad)).toThrow(expect.objectContaining({ code: 'KVT_ERR_REQUEST_INVALID', param: 'include' }));
    }
  });

  it('round-trips any text, refuses tokens it did not issue, and feeds the next assistant turn', () => {
    for (const text of ['', 'plain', 'ünïcödé 🙂\n<think>', 'x'.repeat(10_000)]) expect(reasoningFromToken(reasoningToken(text), 'p')).toBe(text);
    expect(() => reasoningFromToken('gAAAAABopenai', 'input[1].encrypted_content')).toThrow(expect.objectContaining({ param: 'input[1].encrypted_content' }));
    expect(() => reasoningFromToken('kvtr1.not base64!', 'p')).toThrow(expect.objectContaining({ param: 'p' }));
    const messages = messagesFromResponsesInput([
      { role: 'user', content: 'q' },
      { type: 'reasoning', encrypted_content: reasoningToken('because') },
      { role: 'assistant', content: 'a' },
    ]);
    expect(messages[1]).toEqual({ role: 'assistant', content: 'a', reasoning_content: 'because' });
  });
});
