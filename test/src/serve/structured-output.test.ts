/**
 * Structured output through the real server on the random-weight synthetic
 * model (only constrained decoding makes its replies parse): ≥ 50 schemas ×
 * temperature {0, 1} (half streamed), json_object, forced tool calls
 * (OpenAI named / required, Anthropic tool / any), and the 400 of a keyword
 * the grammar cannot enforce. ajv is the independent validator.
 */
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { STRUCTURED_SCHEMAS, UNSUPPORTED_SCHEMAS } from '../../helpers/structured-schemas.ts';
import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';

let server: TestServer;
let openai: OpenAI;
let anthropic: Anthropic;
const ajv = new Ajv({ strict: false });
const MODEL = 'synthetic:tiny';

beforeAll(async () => {
  server = await startTestServer();
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: KEYS.alice, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
});

async function chatJson(schema: Record<string, unknown>, temperature: number, stream: boolean, seed: number): Promise<{ text: string; finish: string | null }> {
  const request = {
    model: MODEL,
    messages: [{ role: 'user' as const, content: `Reply with JSON (${seed}).` }],
    max_tokens: 96,
    temperature,
    seed,
    response_format: { type: 'json_schema' as const, json_schema: { name: 'reply', schema, strict: true } },
  };
  if (!stream) {
    const r = await openai.chat.completions.create(request);
    return { text: r.choices[0].message.content ?? '', finish: r.choices[0].finish_reason };
  }
  let text = '';
  let finish: string | null = null;
  for await (const chunk of await openai.chat.completions.create({ ...request, stream: true })) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { text, finish };
}

describe('response_format json_schema', () => {
  expect(STRUCTURED_SCHEMAS.length).toBeGreaterThanOrEqual(50);
  for (const temperature of [0, 1]) {
    it(`${STRUCTURED_SCHEMAS.length} schemas at temperature ${temperature}: every reply parses, validates and stops`, async () => {
      const failures: string[] = [];
      for (const [i, { name, schema }] of STRUCTURED_SCHEMAS.entries()) {
        const validate = ajv.compile(schema);
        const { text, finish } = await chatJson(schema, temperature, i % 2 === 1, i);
        let ok = false;
        try {
          ok = validate(JSON.parse(text));
        } catch {
          ok = false;
        }
        if (!ok || finish !== 'stop') failures.push(`${name}: finish=${finish} ${text} ${JSON.stringify(validate.errors)}`);
      }
      expect(failures).toEqual([]);
    }, 600_000);
  }

  it('json_object: any JSON object', async () => {
    for (const temperature of [0, 1]) {
      const r = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 48, temperature, response_format: { type: 'json_object' } });
      const value = JSON.parse(r.choices[0].message.content ?? '') as unknown;
      expect(value !== null && typeof value === 'object' && !Array.isArray(value)).toBe(true);
      expect(r.choices[0].finish_reason).toBe('stop');
    }
  });

  it('a keyword the grammar cannot enforce is a 400 naming it', async () => {
    for (const { schema, path } of UNSUPPORTED_SCHEMAS) {
      const response = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.alice}` },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 16, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } }),
      });
      expect(response.status).toBe(400);
      const body = (await response.json()) as { error: { param: string; message: string } };
      const param = `response_format.json_schema.schema${path.split('/').slice(1).map((p) => `.${p}`).join('')}`;
      expect(body.error.param).toBe(param);
      expect(body.error.message).toContain(path.split('/').pop()!);
    }
  });

  it('max_tokens below the shortest valid reply is a 400 on max_tokens', async () => {
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.alice}` },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 4, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', minLength: 10 } } } }),
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { param: string } }).error.param).toBe('max_tokens');
  });
});

const TOOLS: OpenAI.Chat.Completions.ChatCompletionFunctionTool[] = [
  { type: 'function', function: { name: 'get_weather', strict: true, parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'add', strict: true, parameters: { type: 'object', properties: { a: { type: 'integer', minimum: 0, maximum: 100 }, b: { type: 'integer', minimum: 0, maximum: 100 } }, required: ['a', 'b'], additionalProperties: false } } },
  { type: 'function', function: { name: 'search', parameters: { type: 'object', properties: { query: { type: 'string' }, limit: { type: 'integer', minimum: 1, maximum: 5 }, tags: { type: 'array', items: { type: 'string', maxLength: 5 }, maxItems: 2 } }, required: ['query'] } } },
];

function validateCall(name: string, args: unknown): boolean {
  const tool = TOOLS.find((t) => t.function.name === name)!;
  return ajv.compile(tool.function.parameters as object)(args);
}

describe('forced tool calls', () => {
  for (const temperature of [0, 1]) {
    it(`OpenAI tool_choice named and required at temperature ${temperature}`, async () => {
      for (const [i, choice] of [
        { type: 'function' as const, function: { name: 'get_weather' } },
        { type: 'function' as const, function: { name: 'add' } },
        { type: 'function' as const, function: { name: 'search' } },
        'required' as const,
        'required' as const,
      ].entries()) {
        const r = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `Call a tool (${i})` }], tools: TOOLS, tool_choice: choice, max_tokens: 96, temperature, seed: i });
        const message = r.choices[0].message;
        expect(r.choices[0].finish_reason).toBe('tool_calls');
        expect(message.tool_calls).toHaveLength(1);
        const call = message.tool_calls![0] as { function: { name: string; arguments: string } };
        if (typeof choice === 'object') expect(call.function.name).toBe(choice.function.name);
        expect(validateCall(call.function.name, JSON.parse(call.function.arguments))).toBe(true);
      }
    }, 120_000);
  }

  it('streamed forced tool call', async () => {
    const stream = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'add' }], tools: TOOLS, tool_choice: { type: 'function', function: { name: 'add' } }, max_tokens: 96, temperature: 1, stream: true });
    let args = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      for (const call of chunk.choices[0]?.delta?.tool_calls ?? []) args += call.function?.arguments ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe('tool_calls');
    expect(validateCall('add', JSON.parse(args))).toBe(true);
  });

  it('Anthropic tool_choice tool and any', async () => {
    const tools = TOOLS.map((t) => ({ name: t.function.name, input_schema: t.function.parameters as Anthropic.Tool.InputSchema }));
    const choices: Anthropic.ToolChoice[] = [{ type: 'tool', name: 'add' }, { type: 'tool', name: 'get_weather' }, { type: 'any' }];
    for (const [i, choice] of choices.entries()) {
      const r = await anthropic.messages.create({ model: MODEL, max_tokens: 96, messages: [{ role: 'user', content: `tool ${i}` }], tools, tool_choice: choice });
      expect(r.stop_reason).toBe('tool_use');
      const use = r.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock;
      if (choice.type === 'tool') expect(use.name).toBe(choice.name);
      expect(validateCall(use.name, use.input)).toBe(true);
    }
  });

  it('strict tools under tool_choice auto: a reply is text, or a call whose arguments validate; a strict schema is compiled (400 names its keyword)', async () => {
    for (let seed = 0; seed < 6; seed++) {
      const r = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `maybe call (${seed})` }], tools: TOOLS, max_tokens: 48, temperature: 1, seed });
      const choice = r.choices[0];
      if (choice.finish_reason === 'tool_calls') {
        const call = choice.message.tool_calls![0] as { function: { name: string; arguments: string } };
        if (call.function.name !== 'search') expect(validateCall(call.function.name, JSON.parse(call.function.arguments))).toBe(true);
      } else expect(['stop', 'length']).toContain(choice.finish_reason);
    }
    const strictBad = [...TOOLS, { type: 'function' as const, function: { name: 'bad', strict: true, parameters: { type: 'object', properties: { s: { type: 'string', pattern: 'x' } } } } }];
    await expect(openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], tools: strictBad, max_tokens: 16 })).rejects.toMatchObject({ status: 400, param: 'tools[3].function.parameters.properties.s.pattern' });
  });

  it('a forced tool that is not in tools is a 400', async () => {
    await expect(openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } }, max_tokens: 16 })).rejects.toMatchObject({ status: 400 });
  });
});
