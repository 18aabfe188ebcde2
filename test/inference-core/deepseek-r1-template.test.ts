/**
 * DEEPSEEK_R1_CHAT_TEMPLATE (inference-core/synthetic/deepseek-r1-template.ts):
 * it is DeepSeek V3's template with exactly R1's two edits, and kvtier renders
 * it byte for byte as jinja2 does (transformers' apply_chat_template set-up)
 * over the shared conversation shapes and R1's own ones (reasoning in the
 * history, several `</think>`, reasoning after tool outputs, which R1 keeps),
 * with and without the generation prompt.
 */
import { describe, expect, it } from 'vitest';

import { ChatTemplate, type ChatMessage } from '../../inference-core/index.ts';
import { DEEPSEEK_R1_CHAT_TEMPLATE } from '../../inference-core/synthetic/deepseek-r1-template.ts';
import { jinja2Render, transformersContext } from '../helpers/jinja2-render.ts';
import { realTemplates, shapes, TOOLS, WEATHER_ARGS, pythonJson, type Shape } from './chat-template-real-fixtures.ts';

const v3 = realTemplates('deepseek_v3')[0];
const call = { id: 'call_1', type: 'function' as const, function: { name: 'get_weather', arguments: pythonJson(WEATHER_ARGS) } };

/** R1's own shapes: where reasoning sits in the history. */
const R1_SHAPES: Shape[] = [
  {
    name: 'reasoning in the history is dropped',
    messages: [
      { role: 'system', content: 'Think, then answer.' },
      { role: 'user', content: 'What is 2+2?' },
      { role: 'assistant', content: '<think>\nAdd them.\n</think>\n\n4' },
      { role: 'user', content: 'And 3+3?' },
    ],
  },
  {
    name: 'everything up to the last </think> goes',
    messages: [
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'a</think>b</think>\n\nc' },
      { role: 'user', content: 'Again' },
    ],
  },
  { name: 'a reply that is only reasoning leaves an empty turn', messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: '<think>\nhm\n</think>' }] },
  {
    name: 'tool call with content null, result, answer with reasoning (kept after tool outputs, as R1 does)',
    tools: TOOLS,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', content: '{"temp": 21}', tool_call_id: 'call_1' },
      { role: 'assistant', content: '<think>\nWarm.\n</think>\n\nIt is 21 °C.' },
      { role: 'user', content: 'Thanks' },
      { role: 'assistant', content: '<think>\nPolite.\n</think>\n\nYou are welcome.' },
    ],
  },
  { name: 'two system messages, a think-less history', messages: [{ role: 'system', content: 'A.' }, { role: 'system', content: 'B.' }, { role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' }, { role: 'user', content: 'Bye' }] },
];

describe('DeepSeek R1 chat template', () => {
  it("is V3's template with R1's history split and <think> generation prompt, nothing else", () => {
    const split = "{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<｜Assistant｜>' + content + ";
    expect(DEEPSEEK_R1_CHAT_TEMPLATE.split(split)).toHaveLength(2);
    const undone = DEEPSEEK_R1_CHAT_TEMPLATE.replace(split, "{{'<｜Assistant｜>' + message['content'] + ").replace("{{'<｜Assistant｜><think>\\n'}}{% endif %}", "{{'<｜Assistant｜>'}}{% endif %}");
    expect(undone).toBe(v3.source);
  });

  it('kvtier renders every shape byte-identical to jinja2, with and without the generation prompt', () => {
    const all = [...shapes('string'), ...R1_SHAPES];
    expect(all.length).toBeGreaterThanOrEqual(8);
    const cases = all.flatMap((shape) => [false, true].map((gen) => ({ shape, gen })));
    const template = new ChatTemplate(DEEPSEEK_R1_CHAT_TEMPLATE, { bosToken: v3.specialTokens.bos_token as string, eosToken: v3.specialTokens.eos_token as string });
    expect(template.conventions.nullContent).toBe(true);
    const reference = jinja2Render(
      cases.map(({ shape, gen }) => ({ template: DEEPSEEK_R1_CHAT_TEMPLATE, context: transformersContext({ messages: shape.messages, tools: shape.tools, addGenerationPrompt: gen, specialTokens: v3.specialTokens }) })),
    );
    cases.forEach(({ shape, gen }, i) => {
      const label = `${shape.name}, add_generation_prompt=${gen}`;
      expect(reference[i].error, label).toBeUndefined();
      expect(template.render({ messages: shape.messages, tools: shape.tools, addGenerationPrompt: gen }), label).toBe(reference[i].text);
    });
  });

  it("drops the history's reasoning and opens <think> in the generation prompt", () => {
    const template = new ChatTemplate(DEEPSEEK_R1_CHAT_TEMPLATE, { bosToken: '<｜begin▁of▁sentence｜>' });
    const messages: ChatMessage[] = [{ role: 'user', content: 'Q' }, { role: 'assistant', content: '<think>\nR\n</think>\n\nA' }, { role: 'user', content: 'Q2' }];
    expect(template.render({ messages, addGenerationPrompt: true })).toBe('<｜begin▁of▁sentence｜><｜User｜>Q<｜Assistant｜>\n\nA<｜end▁of▁sentence｜><｜User｜>Q2<｜Assistant｜><think>\n');
  });
});
