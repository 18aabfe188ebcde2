import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import { ensureSyntheticModel } from '../../../inference-core/index.ts';
import { ChatPromptBuilder, parseToolCalls, promptCodecFromGgufFile, ReplyMemory, type ChatMessage, type PromptCodec, type ToolSpec } from '../../../src/recipe/index.ts';

const TOOLS: ToolSpec[] = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
  { type: 'function', function: { name: 'run_tests', description: 'Run the tests', parameters: { type: 'object', properties: {} } } },
];

let codec: PromptCodec;

beforeAll(() => {
  const dataDir = mkdtempSync(join(tmpdir(), 'kvt-recipe-'));
  codec = promptCodecFromGgufFile(ensureSyntheticModel('tiny', { dataDir, progress: null }));
});

/** A deterministic "model": random non-special token ids, like the synthetic model emits. */
function sampledReply(seed: number, length: number): number[] {
  const ids: number[] = [];
  let x = seed * 2654435761;
  while (ids.length < length) {
    x = (Math.imul(x ^ (x >>> 15), 2246822519) + 374761393) >>> 0;
    const id = x % 500; // below the special ids of the tiny vocab
    ids.push(id);
  }
  return ids;
}

function startsWith(whole: ArrayLike<number>, prefix: readonly number[]): boolean {
  return prefix.length <= whole.length && prefix.every((id, i) => whole[i] === id);
}

describe('prefix-stable chat prompts', () => {
  it('turn n+1 starts with turn n prompt + sampled reply + end of turn, over 10 turns', () => {
    const memory = new ReplyMemory();
    const builder = new ChatPromptBuilder(codec, memory);
    const eot = codec.encode('<|im_end|>');
    const messages: ChatMessage[] = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Tell me about caches.' }];
    let previous: number[] | null = null;
    let previousReply: number[] = [];
    for (let turn = 0; turn < 10; turn++) {
      const prompt = builder.build(messages, undefined, 'tenant-a');
      expect(prompt.prefixStable).toBe(true);
      if (previous) expect(startsWith(prompt.tokens, [...previous, ...previousReply, ...eot])).toBe(true);
      const reply = sampledReply(turn + 1, 20 + turn);
      const text = codec.decode(reply);
      memory.remember('tenant-a', text, reply);
      messages.push({ role: 'assistant', content: text }, { role: 'user', content: `Question ${turn + 2}: and then? ✓` });
      previous = Array.from(prompt.tokens);
      previousReply = Array.from(reply);
    }
  });

  it('an agent loop with tools, tool calls and tool results is prefix-stable over 10 steps', () => {
    const memory = new ReplyMemory();
    const builder = new ChatPromptBuilder(codec, memory);
    const eot = codec.encode('<|im_end|>');
    const messages: ChatMessage[] = [{ role: 'system', content: 'You fix bugs.' }, { role: 'user', content: 'The build is red.' }];
    let previous: number[] | null = null;
    let previousReply: number[] = [];
    for (let step = 0; step < 10; step++) {
      const prompt = builder.build(messages, TOOLS, 'tenant-a');
      expect(prompt.prefixStable).toBe(true);
      if (previous) expect(startsWith(prompt.tokens, [...previous, ...previousReply, ...eot])).toBe(true);
      // The model emits a tool call in the template's own format (as a trained model would).
      const generatedText = `<tool_call>\n{"name": "read_file", "arguments": {"path": "src/file-${step}.ts"}}\n</tool_call>`;
      const reply = codec.encode(generatedText);
      memory.remember('tenant-a', codec.decode(reply), reply);
      const parsed = parseToolCalls(codec.decode(reply));
      expect(parsed.toolCalls).toHaveLength(1);
      expect(parsed.toolCalls[0].function).toEqual({ name: 'read_file', arguments: { path: `src/file-${step}.ts` } });
      // The client sends the structured call back, then the tool's result and a new user message.
      messages.push({ role: 'assistant', content: parsed.content, tool_calls: parsed.toolCalls });
      messages.push({ role: 'tool', content: `export const x${step} = ${step};`, tool_call_id: parsed.toolCalls[0].id });
      if (step % 2 === 1) messages.push({ role: 'user', content: 'Keep going.' });
      previous = Array.from(prompt.tokens);
      previousReply = Array.from(reply);
    }
  });

  it('without the reply memory the prompt is still the plain segment-wise encoding', () => {
    const builder = new ChatPromptBuilder(codec, null);
    const messages: ChatMessage[] = [{ role: 'user', content: 'Hello there' }];
    const prompt = builder.build(messages, undefined, 't');
    const whole = codec.encode(codec.renderChat(messages, { addGenerationPrompt: true }));
    expect(prompt.tokens).toEqual(whole);
  });

  it('one tenant never recalls another tenant\'s reply ids', () => {
    const memory = new ReplyMemory();
    memory.remember('a', 'hello', [1, 2, 3]);
    expect(memory.recall('b', 'hello')).toBeUndefined();
    expect(memory.recall('a', 'hello')).toEqual(Uint32Array.of(1, 2, 3));
  });

  it('the reply memory stays within its token budget, dropping the least recent', () => {
    const memory = new ReplyMemory(10);
    memory.remember('a', 'one', [1, 1, 1, 1]);
    memory.remember('a', 'two', [2, 2, 2, 2]);
    memory.recall('a', 'one');
    memory.remember('a', 'three', [3, 3, 3, 3]);
    expect(memory.recall('a', 'two')).toBeUndefined();
    expect(memory.recall('a', 'one')).toEqual(Uint32Array.of(1, 1, 1, 1));
  });
});

describe('tool call parsing', () => {
  it('plain text stays content', () => {
    expect(parseToolCalls('just words')).toEqual({ content: 'just words', toolCalls: [] });
  });
  it('malformed calls stay content', () => {
    const text = '<tool_call>\n{"name": broken}\n</tool_call>';
    expect(parseToolCalls(text).toolCalls).toEqual([]);
    expect(parseToolCalls(text).content).toBe(text);
  });
  it('several calls after content', () => {
    const parsed = parseToolCalls('Checking.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {"x": 1}}\n</tool_call>');
    expect(parsed.content).toBe('Checking.');
    expect(parsed.toolCalls.map((c) => c.function.name)).toEqual(['a', 'b']);
  });
});
