/**
 * Real models' chat templates (tokenizer_config.json of Llama 3 (the
 * llama3_1 package ships Meta-Llama-3's template), Qwen2.5, Qwen3, DeepSeek
 * V3) rendered by kvtier (@huggingface/jinja through ChatTemplate) and by
 * jinja2 set up as transformers' apply_chat_template sets it up: byte for
 * byte the same text, over every conversation shape, with and without the
 * generation prompt. A tool-call turn's content None reaches only templates
 * that test for it (DeepSeek V3); the others get "" (jinja2 fails on None in
 * Qwen3 and prints "None" in Llama 3).
 */
import { describe, expect, it } from 'vitest';

import { ChatTemplate, ChatTemplateError, readGguf } from '../../inference-core/index.ts';
import { gv } from '../../inference-core/gguf/index.ts';
import { jinja2Render, transformersContext } from '../helpers/jinja2-render.ts';
import { buildRealVocabGguf } from '../helpers/real-vocab-gguf.ts';
import { qwen3Shapes, realTemplates, REAL_MODELS, shapes, type ArgumentsForm, type RealTemplate, type Shape } from './chat-template-real-fixtures.ts';

function kvtierTemplate(real: RealTemplate): ChatTemplate {
  const token = (key: string) => real.specialTokens[key] as string | undefined;
  return new ChatTemplate(real.source, { bosToken: token('bos_token'), eosToken: token('eos_token'), unkToken: token('unk_token'), padToken: token('pad_token') });
}

/** Each shape through both renderers; returns [kvtier, jinja2] pairs with a label. */
function renderBoth(real: RealTemplate, all: Shape[]): Array<{ label: string; kvtier: string; jinja2: string }> {
  const cases = all.flatMap((shape) => [false, true].map((gen) => ({ shape, gen })));
  const template = kvtierTemplate(real);
  // kvtier hands content None over only to templates that test for it; the others get "" (see the Llama 3 case below).
  const asHandedOver = (messages: Shape['messages']) => (template.conventions.nullContent ? messages : messages.map((m) => (m.content === null ? { ...m, content: '' } : m)));
  const reference = jinja2Render(
    cases.map(({ shape, gen }) => ({
      template: real.source,
      context: transformersContext({ messages: asHandedOver(shape.messages), tools: shape.tools, addGenerationPrompt: gen, specialTokens: real.specialTokens, extra: shape.extra }),
    })),
  );
  return cases.map(({ shape, gen }, i) => {
    let kvtier: string;
    try {
      kvtier = template.render({ messages: shape.messages, tools: shape.tools, addGenerationPrompt: gen, extra: shape.extra });
    } catch (error) {
      expect(error).toBeInstanceOf(ChatTemplateError);
      kvtier = 'ERROR';
    }
    const r = reference[i];
    return { label: `${shape.name}, add_generation_prompt=${gen}`, kvtier, jinja2: r.error !== undefined ? 'ERROR' : r.text };
  });
}

/** Arguments as each template consumes them: DeepSeek V3 concatenates them (a string), the others apply tojson (an object). */
const ARGUMENTS: Record<string, ArgumentsForm> = { deepseek_v3: 'string', qwen2_5: 'object', qwen3: 'object', llama3_1: 'object' };

describe('real chat templates render as transformers renders them', () => {
  it('every real model package but Llama 2 ships a template (Llama 2 has none to render)', () => {
    expect(REAL_MODELS.filter((m) => realTemplates(m).length === 0)).toEqual(['llama2']);
  });

  for (const model of REAL_MODELS) {
    for (const real of realTemplates(model)) {
      it(`${model} (${real.name}): every shape byte-identical to jinja2`, () => {
        const all = [...shapes(ARGUMENTS[model]), ...(model === 'qwen3' ? qwen3Shapes() : [])];
        const results = renderBoth(real, all);
        for (const { label, kvtier, jinja2 } of results) expect(kvtier, label).toBe(jinja2);
        expect(results.filter((r) => r.jinja2 === 'ERROR').map((r) => r.label)).toEqual([]);
      });
    }
  }

  it('a tool-call turn with content None: jinja2 prints the text "None" in Llama 3 and fails in Qwen3; kvtier hands both ""', () => {
    const [real] = realTemplates('llama3_1');
    const messages = [
      { role: 'user' as const, content: 'Weather?' },
      { role: 'assistant' as const, content: null, tool_calls: [{ id: 'c', type: 'function' as const, function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    ];
    const [withNone, withEmpty] = jinja2Render([
      { template: real.source, context: transformersContext({ messages, specialTokens: real.specialTokens }) },
      { template: real.source, context: transformersContext({ messages: [messages[0], { ...messages[1], content: '' }], specialTokens: real.specialTokens }) },
    ]);
    expect(withNone.text).toContain('\n\nNone<|eot_id|>');
    expect(kvtierTemplate(real).render({ messages })).toBe(withEmpty.text);
    const [qwen3] = realTemplates('qwen3');
    const [qwen3None, qwen3Empty] = jinja2Render([
      { template: qwen3.source, context: transformersContext({ messages, specialTokens: qwen3.specialTokens }) },
      { template: qwen3.source, context: transformersContext({ messages: [messages[0], { ...messages[1], content: '' }], specialTokens: qwen3.specialTokens }) },
    ]);
    expect(qwen3None.error).toMatch(/NoneType/);
    expect(kvtierTemplate(qwen3).render({ messages })).toBe(qwen3Empty.text);
  });

  it('DeepSeek V3 keeps content None for a tool-call turn and gets arguments as text, even when handed an object', () => {
    const [real] = realTemplates('deepseek_v3');
    const template = kvtierTemplate(real);
    expect(template.conventions).toEqual({ nullContent: true, argumentsAs: 'string' });
    const messages = [
      { role: 'user' as const, content: 'Weather?' },
      { role: 'assistant' as const, content: null, tool_calls: [{ id: 'c', type: 'function' as const, function: { name: 'get_weather', arguments: { city: 'Paris', days: [1, 2.5] } } }] },
    ];
    const [reference] = jinja2Render([
      {
        template: real.source,
        context: transformersContext({
          messages: [messages[0], { ...messages[1], tool_calls: [{ ...messages[1].tool_calls![0], function: { name: 'get_weather', arguments: '{"city": "Paris", "days": [1, 2.5]}' } }] }],
          specialTokens: real.specialTokens,
          addGenerationPrompt: true,
        }),
      },
    ]);
    expect(template.render({ messages, addGenerationPrompt: true })).toBe(reference.text);
    expect(reference.text).toContain('```json\n{"city": "Paris", "days": [1, 2.5]}\n```');
  });

  it('the other templates read content and arguments as the transformers convention has them', () => {
    expect(kvtierTemplate(realTemplates('qwen2_5')[0]).conventions).toEqual({ nullContent: false, argumentsAs: 'object' });
    expect(kvtierTemplate(realTemplates('qwen3')[0]).conventions).toEqual({ nullContent: false, argumentsAs: 'object' });
    expect(kvtierTemplate(realTemplates('llama3_1')[0]).conventions).toEqual({ nullContent: false, argumentsAs: 'object' });
  });

  it('a tokenizer with named templates renders requests with tools with its tool_use template, as transformers picks it', () => {
    const DEFAULT = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}";
    const TOOL_USE = "Tools: {{ tools | tojson }}\n{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}\n{% endfor %}";
    const file = buildRealVocabGguf('llama2', {
      chatTemplate: DEFAULT,
      variant: 'named-templates',
      extraMetadata: [
        ['tokenizer.chat_templates', gv.strings(['tool_use'])],
        ['tokenizer.chat_template.tool_use', gv.str(TOOL_USE)],
      ],
    });
    const gguf = readGguf(file, { rejectUnsupportedTypes: false });
    const template = ChatTemplate.fromGguf(gguf);
    gguf.close();
    const messages = [
      { role: 'user' as const, content: 'Weather?' },
      { role: 'assistant' as const, content: 'Checking.', tool_calls: [{ id: 'c', type: 'function' as const, function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    ];
    const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object' } } }];
    const [withTools, without] = jinja2Render([
      { template: TOOL_USE, context: transformersContext({ messages, tools, addGenerationPrompt: true }) },
      { template: DEFAULT, context: transformersContext({ messages, addGenerationPrompt: true }) },
    ]);
    expect(template.render({ messages, tools, addGenerationPrompt: true })).toBe(withTools.text);
    expect(template.render({ messages, addGenerationPrompt: true })).toBe(without.text);
    expect(template.renderWithMessageStarts({ messages, tools, addGenerationPrompt: true })?.text).toBe(withTools.text);
  });
});
