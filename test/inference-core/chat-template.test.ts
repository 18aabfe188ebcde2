import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHATML_END_OF_TURN,
  CHATML_TEMPLATE,
  ChatTemplate,
  ChatTemplateError,
  Tokenizer,
  ensureSyntheticModel,
  readGguf,
  type ChatMessage,
  type ToolSpec,
} from '../../inference-core/index.ts';

let dataDir: string;
let template: ChatTemplate;
let tok: Tokenizer;
beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-tpl-'));
  const g = readGguf(ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', progress: null }));
  template = ChatTemplate.fromGguf(g);
  tok = Tokenizer.fromGguf(g);
});
afterAll(() => {
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const TOOLS: ToolSpec[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
];

/** Checks text and token prefix stability of turn n → n+1 given the model's raw reply text. */
function expectPrefixStable(prev: string, reply: string, next: string): void {
  const expected = prev + reply + CHATML_END_OF_TURN;
  expect(next.startsWith(expected)).toBe(true);
  // Token level: the cached KV of turn n (prompt + reply + end-of-turn) is a token prefix of turn n+1.
  const a = tok.encode(expected, { addSpecial: false, parseSpecial: true });
  const b = tok.encode(next, { addSpecial: false, parseSpecial: true });
  expect(Array.from(b.subarray(0, a.length))).toEqual(Array.from(a));
}

describe('ChatML template of the synthetic models', () => {
  it('is the template the GGUF ships', () => {
    expect(template.source).toBe(CHATML_TEMPLATE);
  });

  it('renders system/user/assistant turns and the generation prompt', () => {
    const out = template.render({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
      addGenerationPrompt: true,
    });
    expect(out).toBe('<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
    expect(template.render({ messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }] })).toBe('<|im_start|>user\nab<|im_end|>\n');
  });

  it('is prefix-stable over a 10-turn conversation', () => {
    const messages: ChatMessage[] = [{ role: 'system', content: 'You are a helpful assistant.' }];
    let prev: string | undefined;
    let prevReply = '';
    for (let turn = 0; turn < 10; turn++) {
      messages.push({ role: 'user', content: `Question ${turn}: what is ${turn} × ${turn + 1}? Ünïcødé 東京 😀` });
      const prompt = template.render({ messages, addGenerationPrompt: true });
      if (prev !== undefined) expectPrefixStable(prev, prevReply, prompt);
      expect(prompt.endsWith('<|im_start|>assistant\n')).toBe(true);
      prevReply = `It is ${turn * (turn + 1)}.\n\nAnything else?`;
      messages.push({ role: 'assistant', content: prevReply });
      prev = prompt;
    }
  });

  it('is prefix-stable through a tool-using agent loop', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You are an agent.' },
      { role: 'user', content: 'What is the weather in Paris, and what is in notes.txt?' },
    ];
    // What the model writes after "<|im_start|>assistant\n", and the parsed message the API returns.
    const steps: Array<{ reply: string; message: ChatMessage; results: ChatMessage[] }> = [
      {
        reply: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        message: { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
        results: [{ role: 'tool', tool_call_id: 'c1', content: '{"temp_c": 14, "sky": "cloudy"}' }],
      },
      {
        reply: 'Now the file.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}\n</tool_call>',
        message: {
          role: 'assistant',
          content: 'Now the file.',
          tool_calls: [
            { id: 'c2', type: 'function', function: { name: 'read_file', arguments: '{"path": "notes.txt"}' } },
            { id: 'c3', type: 'function', function: { name: 'get_weather', arguments: { city: 'Lyon' } } },
          ],
        },
        results: [
          { role: 'tool', tool_call_id: 'c2', content: 'buy bread\ncall Maria' },
          { role: 'tool', tool_call_id: 'c3', content: '{"temp_c": 17}' },
        ],
      },
      {
        reply: 'Paris is 14 °C and cloudy; notes.txt says: buy bread, call Maria.',
        message: { role: 'assistant', content: 'Paris is 14 °C and cloudy; notes.txt says: buy bread, call Maria.' },
        results: [{ role: 'user', content: 'Thanks!' }],
      },
    ];
    let prompt = template.render({ messages, tools: TOOLS, addGenerationPrompt: true });
    expect(prompt).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');
    for (const step of steps) {
      messages.push(step.message, ...step.results);
      const next = template.render({ messages, tools: TOOLS, addGenerationPrompt: true });
      expectPrefixStable(prompt, step.reply, next);
      prompt = next;
    }
    expect(prompt).toContain('<|im_start|>tool\n<tool_response>\nbuy bread\ncall Maria\n</tool_response><|im_end|>\n');
  });

  it('renders real templates with bos/eos variables and gives typed errors', () => {
    const llama3ish = new ChatTemplate("{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}{% endfor %}", { bosToken: '<s>', eosToken: '</s>' });
    expect(llama3ish.render({ messages: [{ role: 'user', content: 'x' }] })).toBe('<s><|user|>x</s>');
    expect(() => new ChatTemplate('{% if %}')).toThrow(ChatTemplateError);
    const raising = new ChatTemplate("{{ raise_exception('no tools here') }}");
    try {
      raising.render({ messages: [] });
      expect.unreachable();
    } catch (err) {
      expect((err as ChatTemplateError).code).toBe('KVT_ERR_TEMPLATE_RENDER');
    }
  });
});
