/**
 * kvtier's harmony chat template (inference-core/synthetic/gptoss-template.ts) renders what
 * node-llama-cpp 3.21.1's HarmonyChatWrapper renders for the same conversations (with the
 * template's documented differences applied to the wrapper's text, and nothing else), Python
 * jinja2 renders it as kvtier's template engine does, and the harmony GGUF carries it.
 */
import { HarmonyChatWrapper, type ChatHistoryItem, type ChatModelFunctions } from 'node-llama-cpp';
import { describe, expect, it } from 'vitest';
import { ChatTemplate, type ChatMessage, type ToolSpec } from '../../inference-core/chat-template.ts';
import { readGguf } from '../../inference-core/gguf/index.ts';
import { GPTOSS_HARMONY_TEMPLATE } from '../../inference-core/synthetic/gptoss-template.ts';
import { ensureGptOssModel } from '../../inference-core/synthetic/gptoss-synthetic.ts';
import { jinja2Render, transformersContext } from '../helpers/jinja2-render.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';

const TOOLS: ToolSpec[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string', description: 'City name' }, unit: { enum: ['c', 'f'] }, days: { type: 'integer' }, hours: { type: 'array', items: { type: 'number' } } }, required: ['city'] },
    },
  },
  { type: 'function', function: { name: 'run_tests', description: 'Run the test suite\nof this repository', parameters: { type: 'object', properties: { filter: { type: 'string' }, flags: { type: 'object', properties: { fast: { type: 'boolean' } } } } } } },
];
const FUNCTIONS = Object.fromEntries(TOOLS.map((t) => [t.function.name, { description: t.function.description, params: t.function.parameters }])) as ChatModelFunctions;

/** Arguments and results as both sides write them: the client's JSON text is the wrapper's jsonDumps of the value. */
const dumps = (v: unknown) => JSON.stringify(v, null, 1).split('\n').map((l) => (l.trim().endsWith(',') ? l.trim() + ' ' : l.trim())).join('');

interface Case {
  label: string;
  messages: ChatMessage[];
  tools?: ToolSpec[];
  history: ChatHistoryItem[];
}

const CASES: Case[] = [
  {
    label: 'user only',
    messages: [{ role: 'user', content: 'Hi 你好 👋' }],
    history: [{ type: 'user', text: 'Hi 你好 👋' }, { type: 'model', response: [] }],
  },
  {
    label: 'system, multi-turn chat',
    messages: [
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'What is 2+2?' },
      { role: 'assistant', content: '4' },
      { role: 'user', content: 'And 3+3?' },
    ],
    history: [{ type: 'system', text: 'Be terse.' }, { type: 'user', text: 'What is 2+2?' }, { type: 'model', response: ['4'] }, { type: 'user', text: 'And 3+3?' }, { type: 'model', response: [] }],
  },
  {
    label: 'earlier reasoning dropped, the current turn keeps it',
    messages: [
      { role: 'user', content: 'Q1' },
      { role: 'assistant', content: 'A1', reasoning_content: 'old thought' } as ChatMessage,
      { role: 'user', content: 'Q2' },
      { role: 'assistant', content: null, reasoning_content: 'need the weather', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: dumps({ city: 'Paris' }) } }] } as ChatMessage,
      { role: 'tool', tool_call_id: 'c1', content: dumps({ temp: 21 }) },
    ],
    tools: TOOLS,
    history: [
      { type: 'user', text: 'Q1' },
      { type: 'model', response: [{ type: 'segment', segmentType: 'thought', text: 'old thought', ended: true }, 'A1'] },
      { type: 'user', text: 'Q2' },
      { type: 'model', response: [{ type: 'segment', segmentType: 'thought', text: 'need the weather', ended: true }, { type: 'functionCall', name: 'get_weather', description: '', params: { city: 'Paris' }, result: { temp: 21 } }] },
    ],
  },
  {
    label: 'tool loop, system and tools, two calls then an answer',
    messages: [
      { role: 'system', content: 'You fix builds.' },
      { role: 'user', content: 'The build is red, fix it.' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function', function: { name: 'run_tests', arguments: dumps({ filter: 'suite-1' }) } }] },
      { role: 'tool', tool_call_id: 'a', content: dumps({ ok: false, step: 1 }) },
      { role: 'assistant', content: null, tool_calls: [{ id: 'b', type: 'function', function: { name: 'run_tests', arguments: dumps({ filter: 'suite-2', flags: { fast: true } }) } }] },
      { role: 'tool', tool_call_id: 'b', content: dumps({ ok: true }) },
      { role: 'assistant', content: 'Fixed.' },
      { role: 'user', content: 'Thanks' },
    ],
    tools: TOOLS,
    history: [
      { type: 'system', text: 'You fix builds.' },
      { type: 'user', text: 'The build is red, fix it.' },
      {
        type: 'model',
        response: [
          { type: 'functionCall', name: 'run_tests', description: '', params: { filter: 'suite-1' }, result: { ok: false, step: 1 } },
          { type: 'functionCall', name: 'run_tests', description: '', params: { filter: 'suite-2', flags: { fast: true } }, result: { ok: true } },
          'Fixed.',
        ],
      },
      { type: 'user', text: 'Thanks' },
      { type: 'model', response: [] },
    ],
  },
  {
    label: 'a preamble (content beside a tool call) goes to the commentary channel',
    messages: [
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: 'Checking the weather.', tool_calls: [{ id: 'w', type: 'function', function: { name: 'get_weather', arguments: dumps({ city: 'Oslo', days: 2 }) } }] },
      { role: 'tool', tool_call_id: 'w', content: dumps({ temp: -3 }) },
    ],
    tools: TOOLS,
    history: [
      { type: 'user', text: 'Weather in Oslo?' },
      { type: 'model', response: [{ type: 'segment', segmentType: 'comment', text: 'Checking the weather.', ended: true }, { type: 'functionCall', name: 'get_weather', description: '', params: { city: 'Oslo', days: 2 }, result: { temp: -3 } }] },
    ],
  },
  {
    label: 'tools without a system message',
    messages: [{ role: 'user', content: 'Weather?' }],
    tools: TOOLS,
    history: [{ type: 'user', text: 'Weather?' }, { type: 'model', response: [] }],
  },
];

/** The wrapper's text with the template's documented differences applied (gptoss-template.ts). */
function wrapperText(c: Case): string {
  const w = new HarmonyChatWrapper({ todayDate: null });
  const hasTools = c.tools !== undefined;
  const { contextText } = w.generateContextState({ chatHistory: c.history, ...(hasTools ? { availableFunctions: FUNCTIONS } : {}) });
  let text = contextText.toString();
  if (!hasTools) text = text.replace('<|message|># Instruction\n\n', '<|message|># Instructions\n\n');
  return text.replace(/( to=functions\.\w+)<\|constrain\|>/g, '$1 <|constrain|>');
}

describe('gpt-oss harmony chat template', () => {
  const template = new ChatTemplate(GPTOSS_HARMONY_TEMPLATE);
  const render = (c: Case) => template.render({ messages: c.messages, ...(c.tools ? { tools: c.tools } : {}), addGenerationPrompt: true });

  it.each(CASES.map((c) => [c.label, c] as const))('%s: == HarmonyChatWrapper', (_label, c) => {
    expect(render(c)).toBe(wrapperText(c));
  });

  it('the differences are only those documented: without them the texts differ', () => {
    const c = CASES.find((x) => x.label.startsWith('tool loop'))!;
    const w = new HarmonyChatWrapper({ todayDate: null });
    const raw = w.generateContextState({ chatHistory: c.history, availableFunctions: FUNCTIONS }).contextText.toString();
    expect(render(c)).not.toBe(raw);
    expect(render(c)).toContain('<|start|>assistant<|channel|>commentary to=functions.run_tests <|constrain|>json<|message|>{"filter": "suite-1"}<|call|><|start|>functions.run_tests to=assistant<|channel|>commentary<|message|>{"ok": false, "step": 1}<|end|>');
    expect(render(CASES[2])).not.toContain('old thought');
    expect(render(CASES[2])).toContain('<|start|>assistant<|channel|>analysis<|message|>need the weather<|end|>');
  });

  it('Python jinja2 renders every case as kvtier does (transformers context), current_date and reasoning_effort included', () => {
    const extra = { current_date: '2026-12-06', reasoning_effort: 'high' };
    const ours = CASES.flatMap((c) => [render(c), template.render({ messages: c.messages, ...(c.tools ? { tools: c.tools } : {}), addGenerationPrompt: false, extra })]);
    const ref = jinja2Render(
      CASES.flatMap((c) => [
        { template: GPTOSS_HARMONY_TEMPLATE, context: transformersContext({ messages: c.messages, tools: c.tools, addGenerationPrompt: true }) },
        { template: GPTOSS_HARMONY_TEMPLATE, context: transformersContext({ messages: c.messages, tools: c.tools, addGenerationPrompt: false, extra }) },
      ]),
    );
    ref.forEach((r, i) => expect(r.text ?? r.error, `render ${i}`).toBe(ours[i]));
    expect(ours[1]).toContain('Current date: 2026-12-06\n\nReasoning: high');
  });

  it('the harmony GGUF carries it as tokenizer.chat_template', () => {
    const g = readGguf(ensureGptOssModel('gpt-oss-tiny', { dataDir: TEST_DATA_DIR, vocab: 'o200k-harmony' }));
    try {
      expect(g.getString('tokenizer.chat_template')).toBe(GPTOSS_HARMONY_TEMPLATE);
      expect(ChatTemplate.fromGguf(g).render({ messages: CASES[1].messages, addGenerationPrompt: true })).toBe(render(CASES[1]));
    } finally {
      g.close();
    }
  }, 120_000);
});
