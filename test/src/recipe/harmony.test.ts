/**
 * recipe/harmony.ts on harmony replies as gpt-oss writes them, fed token by token through the
 * o200k_harmony vocabulary's detokenizer (the markers are tokens that decode to their text):
 * analysis → reasoning, final → content, commentary to=functions.X → tool calls; streaming
 * gives what the whole-text split gives; a reply without a header is all content.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadEngine, type LoadedEngine } from '../../../inference-core/engine/index.ts';
import { ensureGptOssModel } from '../../../inference-core/synthetic/gptoss-synthetic.ts';
import { HarmonySplitter, promptOpensHarmony, splitHarmony } from '../../../src/recipe/harmony.ts';
import { TEST_DATA_DIR } from '../../inference-core/engine-fixtures.ts';

let engine: LoadedEngine;
beforeAll(async () => {
  engine = await loadEngine(ensureGptOssModel('gpt-oss-tiny', { dataDir: TEST_DATA_DIR, vocab: 'o200k-harmony' }), { threads: 1, poolBytes: 4 * 2 ** 20 });
  return () => engine.destroy();
}, 120_000);

/** The reply as the server sees it: sampled ids (stop token excluded) → detokenizer pieces. */
function pieces(reply: string): string[] {
  const ids = engine.tokenizer.encode(reply, { addSpecial: false, parseSpecial: true });
  const d = engine.tokenizer.createDetokenizer();
  const out = Array.from(ids, (id) => d.push(id));
  out.push(d.flush());
  return out;
}

function streamed(reply: string) {
  const s = new HarmonySplitter();
  let reasoning = '';
  let content = '';
  const ps = pieces(reply);
  for (const p of ps) {
    const r = s.push(p);
    reasoning += r.reasoning;
    content += r.content;
  }
  const r = s.finish();
  reasoning += r.reasoning;
  content += r.content;
  return { reasoning: s.opened ? reasoning : null, content, toolCalls: s.toolCalls(ps.join('')) };
}

describe('harmony replies', () => {
  it('a reply with no header streams as content from its first piece; a header start is held until it resolves', () => {
    const plain = new HarmonySplitter();
    expect(plain.push('Hello')).toEqual({ reasoning: '', content: 'Hello' });
    const headed = new HarmonySplitter();
    expect(headed.push('<|channel|>')).toEqual({ reasoning: '', content: '' });
    expect(headed.push('final<|message|>Hi')).toEqual({ reasoning: '', content: 'Hi' });
  });

  it('the markers decode to their text, so the splitter sees them', () => {
    expect(pieces('<|channel|>final<|message|>Hi<|end|><|start|>assistant')).toEqual(['<|channel|>', 'final', '<|message|>', 'Hi', '<|end|>', '<|start|>', 'assistant', '']);
    expect(promptOpensHarmony(engine.tokenizer.decode(engine.tokenizer.encode('<|end|><|start|>assistant', { addSpecial: false, parseSpecial: true })))).toBe(true);
  });

  it.each([
    ['final only', '<|channel|>final<|message|>Paris is sunny.', { reasoning: null, content: 'Paris is sunny.', calls: [] }],
    ['analysis then final', '<|channel|>analysis<|message|>User asks. Answer briefly.<|end|><|start|>assistant<|channel|>final<|message|>4', { reasoning: 'User asks. Answer briefly.', content: '4', calls: [] }],
    ['analysis then a tool call', '<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Tokyo"}', { reasoning: 'Need weather.', content: '', calls: [['get_weather', { city: 'Tokyo' }]] }],
    ['recipient before the channel', ' to=functions.run_tests<|channel|>commentary json<|message|>{}', { reasoning: null, content: '', calls: [['run_tests', {}]] }],
    ['a preamble, then a call', '<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": [1, 2]}', { reasoning: null, content: 'Checking.', calls: [['f', { a: [1, 2] }]] }],
    ['no header at all (a model ignoring the format)', 'just text, 你好 👋', { reasoning: null, content: 'just text, 你好 👋', calls: [] }],
    ['unterminated analysis (max tokens)', '<|channel|>analysis<|message|>Thinking about', { reasoning: 'Thinking about', content: '', calls: [] }],
  ])('%s', (_label, reply, want) => {
    const whole = splitHarmony(reply);
    const s = streamed(reply);
    expect({ reasoning: s.reasoning, content: s.content }).toEqual({ reasoning: whole.reasoning, content: whole.content });
    expect(s.toolCalls).toEqual(whole.toolCalls);
    expect({ reasoning: whole.reasoning, content: whole.content }).toEqual({ reasoning: want.reasoning, content: want.content });
    expect(whole.toolCalls.map((c) => [c.function.name, JSON.parse(c.function.arguments as string)])).toEqual(want.calls);
    // the arguments are the text the model wrote (a client echoing them renders the same bytes)
    for (const c of whole.toolCalls) expect(reply).toContain(`<|message|>${c.function.arguments as string}`);
    for (const c of whole.toolCalls) expect(c.id).toMatch(/^call_[0-9a-f]{24}$/);
  });
});
