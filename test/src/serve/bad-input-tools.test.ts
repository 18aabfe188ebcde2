/**
 * Tool histories and tool definitions the reference APIs refuse → 400 naming
 * the field; a matching history is still a reply. Before: every case here was
 * a 200 (the template rendered a result that answered nothing, or a schema
 * that is not a schema).
 */
import { describe, expect, it } from 'vitest';

import { startTestServer } from './server-fixture.ts';
import { expectRefused, expectStillServes, MODEL, send, validBody } from './bad-input-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer(), (s) => s.close());

const call = (id: string) => ({ id, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } });
const WEATHER = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };

describe('tool histories that do not hold together', () => {
  it('chat: a tool result whose tool_call_id no earlier assistant call has → 400 naming messages[i].tool_call_id', async () => {
    const cases: Array<[unknown[], string]> = [
      [[{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'call_9', content: 'r' }], 'messages[1].tool_call_id'],
      [[{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [call('call_1')] }, { role: 'tool', tool_call_id: 'call_2', content: 'r' }], 'messages[2].tool_call_id'],
      // The result comes before the call that it names.
      [[{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'call_1', content: 'r' }, { role: 'assistant', content: null, tool_calls: [call('call_1')] }], 'messages[1].tool_call_id'],
      [[{ role: 'user', content: 'x' }, { role: 'tool', content: 'r' }], 'messages[1].tool_call_id'],
    ];
    for (const [messages, param] of cases) {
      expectRefused(await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions', { messages })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param }, param);
    }
    const matched = [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [call('call_1'), call('call_2')] }, { role: 'tool', tool_call_id: 'call_2', content: 'r' }, { role: 'tool', tool_call_id: 'call_1', content: 'r' }];
    expect((await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions', { messages: matched }))).status).toBe(200);
  });

  it('messages: a tool_result without tool_use_id, or naming no earlier tool_use; a tool_use without id or name → 400 naming the block', async () => {
    const use = { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } };
    const cases: Array<[unknown[], string]> = [
      [[{ role: 'user', content: 'x' }, { role: 'assistant', content: [use] }, { role: 'user', content: [{ type: 'tool_result', content: 'r' }] }], 'messages[2].content[0].tool_use_id'],
      [[{ role: 'user', content: 'x' }, { role: 'assistant', content: [use] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: '', content: 'r' }] }], 'messages[2].content[0].tool_use_id'],
      [[{ role: 'user', content: 'x' }, { role: 'assistant', content: [use] }, { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'tool_result', tool_use_id: 'toolu_9', content: 'r' }] }], 'messages[2].content[1].tool_use_id'],
      [[{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'r' }] }], 'messages[0].content[0].tool_use_id'],
      [[{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', name: 'get_weather', input: {} }] }], 'messages[1].content[0].id'],
      [[{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', input: {} }] }], 'messages[1].content[0].name'],
    ];
    for (const [messages, param] of cases) {
      expectRefused(await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { messages })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param }, param);
    }
    const matched = [{ role: 'user', content: 'x' }, { role: 'assistant', content: [use] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] }];
    expect((await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { messages: matched }))).status).toBe(200);
  });

  it('responses: a function_call_output whose call_id no earlier function_call (input or chained response) has → 400 naming input[i].call_id', async () => {
    const fc = { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{}' };
    const cases: Array<[unknown[], string]> = [
      [[{ type: 'function_call_output', call_id: 'call_1', output: 'r' }], 'input[0].call_id'],
      [[{ role: 'user', content: 'x' }, fc, { type: 'function_call_output', call_id: 'call_2', output: 'r' }], 'input[2].call_id'],
    ];
    for (const [input, param] of cases) {
      expectRefused(await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { input })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param }, param);
    }
    expect((await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { input: [{ role: 'user', content: 'x' }, fc, { type: 'function_call_output', call_id: 'call_1', output: 'r' }] }))).status).toBe(200);
    // A call made in the previous response is answered in the chained turn: accepted; an id it never made is not.
    const first = await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { input: [{ role: 'user', content: 'x' }, fc], max_output_tokens: 2 }));
    expect(first.status).toBe(200);
    const previous = (first.json as { id: string }).id;
    expect((await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { previous_response_id: previous, input: [{ type: 'function_call_output', call_id: 'call_1', output: 'r' }] }))).status).toBe(200);
    expectRefused(await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { previous_response_id: previous, input: [{ type: 'function_call_output', call_id: 'call_7', output: 'r' }] })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'input[0].call_id' });
    await expectStillServes(server().url);
  });
});

describe('tool definitions', () => {
  const invalidSchemas: Array<[unknown, string]> = [
    [{ type: 'objectx' }, '.type'],
    [{ type: 'object', properties: 5 }, '.properties'],
    [{ type: 'object', required: 'city' }, '.required'],
    [{ type: 'object', properties: { city: { type: 7 } } }, '.properties.city.type'],
    [{ type: 'object', properties: { city: { minLength: -1 } } }, '.properties.city.minLength'],
    [{ type: 'object', additionalProperties: 'no' }, '.additionalProperties'],
  ];

  it('a tool parameter schema that is not a JSON Schema → 400 naming the keyword, on chat, messages and responses', async () => {
    for (const [schema, suffix] of invalidSchemas) {
      const chat = await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions', { tools: [{ type: 'function', function: { name: 'ok_tool', parameters: WEATHER } }, { type: 'function', function: { name: 'get_weather', parameters: schema } }] }));
      expectRefused(chat, 400, { code: 'KVT_ERR_REQUEST_INVALID', param: `tools[1].function.parameters${suffix}`, mentions: /valid JSON Schema/ }, `chat ${suffix}`);
      const messages = await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { tools: [{ name: 'get_weather', input_schema: schema }] }));
      expectRefused(messages, 400, { code: 'KVT_ERR_REQUEST_INVALID', param: `tools[0].input_schema${suffix}` }, `messages ${suffix}`);
      const responses = await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { tools: [{ type: 'function', name: 'get_weather', parameters: schema }] }));
      expectRefused(responses, 400, { code: 'KVT_ERR_REQUEST_INVALID', param: `tools[0].parameters${suffix}` }, `responses ${suffix}`);
    }
    // Valid schemas pass, keywords the grammar does not enforce included (only a forced or strict tool's schema is compiled).
    const loose = { type: 'object', properties: { when: { type: 'string', format: 'date-time' }, n: { type: 'integer', multipleOf: 3 } }, $defs: { x: { type: 'string' } }, 'x-vendor': true };
    expect((await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions', { tools: [{ type: 'function', function: { name: 'get_weather', parameters: loose } }] }))).status).toBe(200);
    expect((await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { tools: [{ name: 'get_weather', input_schema: loose }] }))).status).toBe(200);
    await expectStillServes(server().url);
  });

  it('response_format / text.format schemas that are not JSON Schema, and forced tools with such schemas → 400 naming the place, never a 5xx', async () => {
    const hostile: unknown[] = [{ type: 'objectx' }, { type: 7 }, { properties: 5 }, { enum: 5 }, { anyOf: 5 }, { items: 'x' }, { required: 'a' }, { $ref: '#/nope' }, { pattern: '(' }, { type: 'string', pattern: '(' }, { minLength: -1 }, { allOf: [] }, { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } }];
    for (const schema of hostile) {
      const chat = await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions', { max_tokens: 32, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } }));
      expect(chat.status, `chat ${JSON.stringify(schema)}: ${chat.text.slice(0, 200)}`).toBe(400);
      expect((chat.json!.error as { param: string }).param, JSON.stringify(schema)).toMatch(/^response_format\.json_schema\.schema/);
      const responses = await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { max_output_tokens: 32, text: { format: { type: 'json_schema', name: 'x', schema } } }));
      expect(responses.status, `responses ${JSON.stringify(schema)}: ${responses.text.slice(0, 200)}`).toBe(400);
      const forced = await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { max_tokens: 32, tools: [{ name: 'f', input_schema: { type: 'object', properties: { a: schema } } }], tool_choice: { type: 'tool', name: 'f' } }));
      expect(forced.status, `forced ${JSON.stringify(schema)}: ${forced.text.slice(0, 200)}`).toBe(400);
    }
    await expectStillServes(server().url);
  });

  it('tool names with spaces, NUL, punctuation or past 64 characters → 400 naming the name', async () => {
    for (const name of ['get weather', 'f\u0000', 'a.b', '{{x}}', 'n'.repeat(65), '']) {
      const chat = await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions', { tools: [{ type: 'function', function: { name, parameters: WEATHER } }] }));
      expectRefused(chat, 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'tools[0].function.name' }, `chat ${JSON.stringify(name)}`);
      const messages = await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { tools: [{ name, input_schema: WEATHER }] }));
      expectRefused(messages, 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'tools[0].name' }, `messages ${JSON.stringify(name)}`);
    }
    await expectStillServes(server().url);
  });

  it('tool_choice naming a tool the request does not define → 400 naming tool_choice', async () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: WEATHER } }];
    expectRefused(await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions', { tools, tool_choice: { type: 'function', function: { name: 'nope' } } })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'tool_choice' });
    expectRefused(await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { tools: [{ name: 'get_weather', input_schema: WEATHER }], tool_choice: { type: 'tool', name: 'nope' } })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'tool_choice.name' });
    expect(MODEL).toBe('synthetic:tiny');
  });
});
