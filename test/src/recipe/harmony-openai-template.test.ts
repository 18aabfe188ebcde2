/**
 * OpenAI's own gpt-oss chat template (the one llama.cpp ships as
 * models/templates/openai-gpt-oss-120b.jinja in the release node-llama-cpp
 * 3.21.1 bundles, what a converted gpt-oss GGUF carries, and what
 * inference-core/synthetic/gptoss-template.ts carries into the harmony GGUF):
 * kvtier's template engine renders it as Python jinja2 does, the prompt codec
 * of a file with it is harmony (forced calls in harmony form, replies split by
 * channel), and the splitter reads its tool-call ordering (recipient before
 * the channel), the ordering the forced-call grammar writes.
 */
import { describe, expect, it } from 'vitest';
import { ChatTemplate, type ChatMessage, type ToolSpec } from '../../../inference-core/chat-template.ts';
import { compileConstraint, GrammarMasks } from '../../../inference-core/grammar/index.ts';
import { vocabIndexOf } from '../../../inference-core/grammar/vocab-index.ts';
import { readGguf, Tokenizer } from '../../../inference-core/index.ts';
import { ensureGptOssModel } from '../../../inference-core/synthetic/gptoss-synthetic.ts';
import { promptCodecFrom } from '../../../src/recipe/gguf-codec.ts';
import { splitHarmony } from '../../../src/recipe/harmony.ts';
import { jinja2Render, transformersContext } from '../../helpers/jinja2-render.ts';
import { llamaCppReleaseFile } from '../../helpers/llamacpp-source.ts';
import { TEST_DATA_DIR } from '../../inference-core/engine-fixtures.ts';

const TOOLS: ToolSpec[] = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string', description: 'City name' }, days: { type: 'integer' } }, required: ['city'] } } }];
const MESSAGES: ChatMessage[] = [
  { role: 'system', content: 'Be terse.' },
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
  { role: 'tool', tool_call_id: 'c1', content: '{"temp": 21}' },
  { role: 'assistant', content: '21C' },
  { role: 'user', content: 'Thanks' },
];

describe("OpenAI's gpt-oss template", () => {
  const source = llamaCppReleaseFile('models/templates/openai-gpt-oss-120b.jinja');
  const template = new ChatTemplate(source);

  it('renders as Python jinja2 renders it (strftime_now: the same date on both sides)', () => {
    const ours = template.render({ messages: MESSAGES, tools: TOOLS, addGenerationPrompt: true });
    const [ref] = jinja2Render([{ template: source, context: transformersContext({ messages: MESSAGES, tools: TOOLS, addGenerationPrompt: true }) }]);
    // strftime_now is the day's date on both sides; a render straddling midnight is the only way they differ
    expect(ours).toBe(ref.text ?? ref.error);
    expect(ours).toContain('<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>');
    expect(ours.endsWith('<|start|>user<|message|>Thanks<|end|><|start|>assistant')).toBe(true);
  });

  it("the forced-call grammar writes the template's call header; its arguments are compact JSON where the template's tojson spaces them", () => {
    const rendered = template.render({ messages: MESSAGES, tools: TOOLS, addGenerationPrompt: true });
    // what follows the generation prompt `<|start|>assistant` in the history call, up to its arguments
    const header = /<\|start\|>assistant( to=functions\.get_weather<\|channel\|>[^<]*<\|message\|>)/.exec(rendered)![1];
    const grammar = compileConstraint({ kind: 'tool_call', tools: [{ name: 'get_weather', parameters: TOOLS[0].function.parameters }], format: 'harmony' });
    const masks = new GrammarMasks(grammar, vocabIndexOf({}, 1, () => Uint8Array.of(0x20)));
    const accepts = (text: string) => {
      const state = masks.advance(masks.initial(), new TextEncoder().encode(text));
      return state.stacks.length > 0 && masks.accepts(state);
    };
    expect(accepts(`${header}{"city":"Paris"}`)).toBe(true);
    // the history form of the same call (json.dumps separators): a sampled call never re-renders as its own tokens
    expect(rendered).toContain(`${header}{"city": "Paris"}<|call|>`);
    expect(accepts(`${header}{"city": "Paris"}`)).toBe(false);
    // the channel-first form (harmony's other ordering) is not what the grammar writes
    expect(accepts('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}')).toBe(false);
  });

  it('makes a harmony codec, and its tool-call ordering splits into the same call', () => {
    const g = readGguf(ensureGptOssModel('gpt-oss-tiny', { dataDir: TEST_DATA_DIR, vocab: 'o200k-harmony' }));
    let tokenizer: Tokenizer;
    try {
      tokenizer = Tokenizer.fromGguf(g);
    } finally {
      g.close();
    }
    const codec = promptCodecFrom(tokenizer, template);
    expect(codec.harmony).toEqual({ callTokenId: 200012 });
    // the reply a model trained on this template writes for a call (after the generation prompt <|start|>assistant)
    const reply = ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}';
    const split = splitHarmony(reply);
    expect([split.content, split.toolCalls.map((c) => [c.function.name, c.function.arguments])]).toEqual(['', [['get_weather', '{"city": "Oslo"}']]]);
  }, 120_000);
});
