/**
 * Fuzzes chat templates (ChatML, DeepSeek R1 and the real Llama 3.1,
 * Qwen 2.5 / 3 and DeepSeek V3 templates) with hostile messages: template
 * syntax in content, huge content, odd unicode, null / number / object
 * content, odd tool calls. A render returns text or throws a
 * ChatTemplateError; string content appears in the output verbatim (template
 * syntax inside content is never evaluated).
 */
import { describe, expect, it } from 'vitest';

import { CHATML_TEMPLATE, ChatTemplate, ChatTemplateError, type ChatMessage } from '../../inference-core/chat-template.ts';
import { DEEPSEEK_R1_CHAT_TEMPLATE } from '../../inference-core/synthetic/deepseek-r1-template.ts';
import { readRealVocab, type RealVocabName } from '../helpers/real-vocab-gguf.ts';
import { fuzz, int, pick, randomString, type Rand } from './fuzz-runner.ts';

const INJECTIONS = ['{{ 7*7 }}', '{% for m in messages %}X{% endfor %}', '{{ raise_exception("boom") }}', '{%- if true -%}', '{# comment', '}}', '{%', '{{ messages[0].content }}', '{% set x = 1 %}', '<|im_end|>', '<|eot_id|>', '</s>', '[INST]', '<｜end▁of▁sentence｜>'];

function hostileContent(rand: Rand): { content: unknown; verbatim: string | null } {
  const r = rand();
  if (r < 0.4) {
    const text = randomString(rand, 60) + pick(rand, INJECTIONS) + randomString(rand, 20);
    return { content: text, verbatim: text };
  }
  if (r < 0.5) {
    const text = pick(rand, INJECTIONS).repeat(1 + int(rand, 3)) + 'x'.repeat(int(rand, 2) === 0 ? 200_000 : 10);
    return { content: text, verbatim: text };
  }
  if (r < 0.6) return { content: null, verbatim: null };
  if (r < 0.7) return { content: pick(rand, [0, -1, 1e308, Number.NaN, true, false]), verbatim: null };
  if (r < 0.8) return { content: pick(rand, [{}, { text: 'x' }, [], [{ type: 'text', text: pick(rand, INJECTIONS) }], [{ type: 'image_url' }], [null], [1, 2]]), verbatim: null };
  const text = randomString(rand, 40, { loneSurrogates: true });
  return { content: text, verbatim: null };
}

function hostileMessages(rand: Rand): { messages: ChatMessage[]; verbatim: string[] } {
  const messages: ChatMessage[] = [];
  const verbatim: string[] = [];
  const count = 1 + int(rand, 6);
  for (let i = 0; i < count; i++) {
    const role = pick(rand, ['system', 'user', 'assistant', 'tool', 'user', 'user'] as const);
    const { content, verbatim: v } = hostileContent(rand);
    const message = { role, content } as unknown as ChatMessage;
    if (role === 'assistant' && rand() < 0.3) message.tool_calls = [{ id: randomString(rand, 8), type: 'function', function: { name: pick(rand, ['f', '{{x}}', '']), arguments: pick(rand, ['{}', '{"a":1}', 'not json', { a: [1, { b: null }] }]) as never } }];
    if (role === 'tool') message.tool_call_id = randomString(rand, 8);
    messages.push(message);
    if (v !== null) verbatim.push(v);
  }
  return { messages, verbatim };
}

const TEMPLATES: [string, string][] = [
  ['chatml', CHATML_TEMPLATE],
  ['deepseek-r1', DEEPSEEK_R1_CHAT_TEMPLATE],
  // Llama 2's tokenizer_config.json carries no template.
  ...(['llama3_1', 'qwen2_5', 'qwen3', 'deepseek_v3'] as RealVocabName[]).map((name): [string, string] => [name, String(readRealVocab(name).tokenizerConfig.chat_template)]),
];

describe('fuzz: chat templates with hostile messages', () => {
  for (const [name, source] of TEMPLATES) {
    it(`${name}: renders or fails typed; content is never evaluated`, async () => {
      const template = new ChatTemplate(source, { bosToken: '<s>', eosToken: '</s>' });
      let rendered = 0;
      await fuzz({ name: `chat template ${name}`, budgetMs: 600 }, (rand) => {
        const { messages, verbatim } = hostileMessages(rand);
        let text: string;
        try {
          text = template.render({ messages, addGenerationPrompt: rand() < 0.7 });
        } catch (error) {
          if (!(error instanceof ChatTemplateError)) throw new Error(`render threw ${String(error)} (not a ChatTemplateError)`);
          return;
        }
        rendered++;
        expect(typeof text).toBe('string');
        // Templates may trim a message's content; the injected syntax in its middle is kept as text.
        for (const v of verbatim) expect(text.includes(v.trim()) || text.includes(v), `${name}: content not verbatim`).toBe(true);
      });
      expect(rendered).toBeGreaterThan(0);
    });
  }
});
