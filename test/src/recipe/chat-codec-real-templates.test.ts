/**
 * The request codecs (OpenAI chat completions, Anthropic messages) end to end
 * to the text real models' chat templates render, against jinja2 rendering
 * the transcript in the shape each template was written for:
 *
 *   DeepSeek V3   tool-call turn content None (its calls render only then), arguments a JSON string
 *   Qwen2.5       arguments an object (`| tojson`), content "" or None alike
 *   Qwen3         arguments an object or a string (`is string`), content "" (None fails in jinja2)
 *   Llama 3       content "" (None renders as the text "None")
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import { ChatTemplate, ensureSyntheticModel, readGguf, Tokenizer } from '../../../inference-core/index.ts';
import { chatInputFromAnthropic, chatInputFromOpenAi, promptCodecFrom, type AnthropicRequestBody, type OpenAiChatRequestBody } from '../../../src/recipe/index.ts';
import { jinja2Render, transformersContext } from '../../helpers/jinja2-render.ts';
import { realTemplates, type RealModel } from '../../inference-core/chat-template-real-fixtures.ts';

let tokenizer: Tokenizer;

beforeAll(() => {
  const gguf = readGguf(ensureSyntheticModel('tiny', { dataDir: mkdtempSync(join(tmpdir(), 'kvt-codec-real-')), progress: null }), { rejectUnsupportedTypes: false });
  tokenizer = Tokenizer.fromGguf(gguf);
  gguf.close();
});

const WEATHER_TOOL = { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
const FILE_TOOL = { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } };

/** A tool loop as an OpenAI client sends it: arguments as JSON text (compact, as most SDKs write it), content null. */
function openAiLoop(content: null | '' | undefined): OpenAiChatRequestBody {
  const assistant: OpenAiChatRequestBody['messages'][number] = {
    role: 'assistant',
    tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
      { id: 'call_2', type: 'function', function: { name: 'read_file', arguments: '{"path":"ä.ts"}' } },
    ],
  };
  if (content !== undefined) assistant.content = content;
  return {
    model: 'm',
    tools: [
      { type: 'function', function: WEATHER_TOOL },
      { type: 'function', function: FILE_TOOL },
    ],
    messages: [
      { role: 'system', content: 'Use tools.' },
      { role: 'user', content: 'Weather in Paris, and the file?' },
      assistant,
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
      { role: 'tool', tool_call_id: 'call_2', content: 'export {};' },
      { role: 'assistant', content: 'Sunny, 21 °C.' },
      { role: 'user', content: 'Thanks!' },
    ],
  };
}

/** The same loop as an Anthropic client sends it: tool_use input objects, tool_result blocks. */
const ANTHROPIC_LOOP: AnthropicRequestBody = {
  model: 'm',
  max_tokens: 16,
  system: 'Use tools.',
  tools: [
    { name: WEATHER_TOOL.name, description: WEATHER_TOOL.description, input_schema: WEATHER_TOOL.parameters },
    { name: FILE_TOOL.name, description: FILE_TOOL.description, input_schema: FILE_TOOL.parameters },
  ],
  messages: [
    { role: 'user', content: 'Weather in Paris, and the file?' },
    {
      role: 'assistant',
      content: [
        { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
        { type: 'tool_use', id: 'call_2', name: 'read_file', input: { path: 'ä.ts' } },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'call_1', content: '{"temp": 21}' },
        { type: 'tool_result', tool_use_id: 'call_2', content: [{ type: 'text', text: 'export {};' }] },
      ],
    },
    { role: 'assistant', content: 'Sunny, 21 °C.' },
    { role: 'user', content: 'Thanks!' },
  ],
};

type Form = { content: null | ''; args: 'string' | 'object' };
const FORM: Record<Exclude<RealModel, 'llama2'>, Form> = {
  deepseek_v3: { content: null, args: 'string' },
  qwen2_5: { content: null, args: 'object' },
  qwen3: { content: '', args: 'object' },
  llama3_1: { content: '', args: 'object' },
};

/** The loop as transformers' users hand it to `template`: the form it was written for. `argsText` is the arguments' text for string-consuming templates. */
function canonicalLoop(form: Form, argsText: [string, string]) {
  const args = (i: number, obj: Record<string, unknown>) => (form.args === 'string' ? argsText[i] : obj);
  return [
    { role: 'system', content: 'Use tools.' },
    { role: 'user', content: 'Weather in Paris, and the file?' },
    {
      role: 'assistant',
      content: form.content,
      tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: args(0, { city: 'Paris' }) } },
        { id: 'call_2', type: 'function', function: { name: 'read_file', arguments: args(1, { path: 'ä.ts' }) } },
      ],
    },
    { role: 'tool', content: '{"temp": 21}', tool_call_id: 'call_1' },
    { role: 'tool', content: 'export {};', tool_call_id: 'call_2' },
    { role: 'assistant', content: 'Sunny, 21 °C.' },
    { role: 'user', content: 'Thanks!' },
  ];
}

const TOOL_SPECS = [
  { type: 'function', function: WEATHER_TOOL },
  { type: 'function', function: FILE_TOOL },
];

for (const model of Object.keys(FORM) as Array<keyof typeof FORM>) {
  const [real] = realTemplates(model);
  const form = FORM[model];
  describe(`${model}: request codecs → its chat template`, () => {
    const render = (messages: Parameters<ReturnType<typeof promptCodecFrom>['renderChat']>[0], tools: Parameters<ReturnType<typeof promptCodecFrom>['renderChat']>[1]['tools']) => {
      const template = new ChatTemplate(real.source, { bosToken: real.specialTokens.bos_token as string | undefined, eosToken: real.specialTokens.eos_token as string | undefined });
      return promptCodecFrom(tokenizer, template).renderChat(messages, { tools, addGenerationPrompt: true });
    };
    const reference = (argsText: [string, string]) => {
      const [result] = jinja2Render([
        { template: real.source, context: transformersContext({ messages: canonicalLoop(form, argsText), tools: TOOL_SPECS, addGenerationPrompt: true, specialTokens: real.specialTokens }) },
      ]);
      expect(result.error).toBeUndefined();
      return result.text!;
    };

    for (const content of [null, '', undefined] as const) {
      it(`OpenAI tool loop (assistant content ${JSON.stringify(content) ?? 'absent'}) renders as jinja2 renders the template's own form`, () => {
        const input = chatInputFromOpenAi(openAiLoop(content));
        const text = render(input.messages, input.tools);
        // A string-consuming template gets the client's bytes, compact as they came.
        expect(text).toBe(reference(['{"city":"Paris"}', '{"path":"ä.ts"}']));
        // Llama 3's template has no tool calls (its content "" renders an empty turn); the others show both calls.
        if (model !== 'llama3_1') for (const name of ['get_weather', 'read_file', 'Paris']) expect(text).toContain(name);
      });
    }

    it('Anthropic tool loop renders to the same text as the OpenAI one, arguments as json.dumps writes them', () => {
      const input = chatInputFromAnthropic(ANTHROPIC_LOOP);
      const text = render(input.messages, input.tools);
      expect(text).toBe(reference(['{"city": "Paris"}', '{"path": "ä.ts"}']));
      if (form.args === 'object') expect(text).toBe(render(chatInputFromOpenAi(openAiLoop(null)).messages, chatInputFromOpenAi(openAiLoop(null)).tools));
    });
  });
}

describe('the codecs keep a tool-call turn without text as content null', () => {
  it('OpenAI: null, absent and "" content beside tool_calls → null; text stays text; arguments parsed, client text kept', () => {
    for (const content of [null, '', undefined] as const) {
      const [, , assistant] = chatInputFromOpenAi(openAiLoop(content)).messages;
      expect(assistant.content).toBeNull();
      expect(assistant.tool_calls![0].function.arguments).toEqual({ city: 'Paris' });
      expect(assistant.tool_calls![0].rawArguments).toBe('{"city":"Paris"}');
    }
    const plain = chatInputFromOpenAi({ model: 'm', messages: [{ role: 'assistant', content: null }] }).messages[0];
    expect(plain.content).toBe('');
  });

  it('Anthropic: tool_use blocks alone → null; with text → the text', () => {
    expect(chatInputFromAnthropic(ANTHROPIC_LOOP).messages[2].content).toBeNull();
    const withText = chatInputFromAnthropic({
      model: 'm',
      max_tokens: 1,
      messages: [{ role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, { type: 'tool_use', id: 'c', name: 'get_weather', input: {} }] }],
    });
    expect(withText.messages[0].content).toBe('Checking.');
  });
});
