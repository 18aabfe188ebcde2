/**
 * The linear prompt builder (one segmented render) against its reference twin
 * (a render of every prefix) on REAL vocabularies with their own chat
 * templates (GGUFs from test/helpers/real-vocab-gguf.ts: Llama 3, Qwen2.5,
 * Qwen3, DeepSeek V3), transcripts with tool calls (content null), several
 * tool results, unicode, and remembered replies:
 *
 *   always                                 the text of the template's whole render
 *   wherever the twin is prefix-stable     the twin's tokens
 *   Llama 3; Qwen2.5 and DeepSeek V3       the twin's tokens, message starts and stability
 *     without tools (Qwen3 re-renders earlier replies: not prefix-stable)
 *
 * and over several turns a prompt starts with the previous prompt, the
 * sampled reply ids and the end of turn (what the KV cache reuses).
 */
import { beforeAll, describe, expect, it } from 'vitest';

import { ChatPromptBuilder, ChatPromptBuilderReference, promptCodecFromGgufFile, ReplyMemory, type ChatMessage, type PromptCodec, type ToolSpec } from '../../../src/recipe/index.ts';
import { llamaCppTokenizeMany } from '../../helpers/llamacpp-tokenize.ts';
import { buildRealVocabGguf } from '../../helpers/real-vocab-gguf.ts';

type Model = 'llama3_1' | 'qwen2_5' | 'qwen3' | 'deepseek_v3';
const MODELS: Model[] = ['llama3_1', 'qwen2_5', 'qwen3', 'deepseek_v3'];
const codecs = new Map<Model, PromptCodec>();

beforeAll(() => {
  for (const model of MODELS) codecs.set(model, promptCodecFromGgufFile(buildRealVocabGguf(model)));
}, 300_000);

const TOOLS: ToolSpec[] = [{ type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } }];

/** Deterministic transcripts: system or not, turns, tool-call turns (content null, one or two calls) with their results, unicode. */
function transcript(seed: number, length: number, withTools: boolean): ChatMessage[] {
  let x = seed + 1;
  const next = () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) >>> 8) % 1000;
  const words = ['cache', 'block', ' prefix', 'héllo', '✓', '\n', '  spaced  ', 'tokens', '{"a": 1}', '64', '日本語', '🚀'];
  const text = () => Array.from({ length: 1 + (next() % 12) }, () => words[next() % words.length]).join(' ');
  const messages: ChatMessage[] = [];
  if (seed % 2 === 0) messages.push({ role: 'system', content: `You are terse. ${text()}` });
  while (messages.length < length) {
    messages.push({ role: 'user', content: text() });
    if (withTools && next() % 2 === 0) {
      const calls = Array.from({ length: 1 + (next() % 2) }, (_, k) => ({ id: `call_${messages.length}_${k}`, type: 'function' as const, function: { name: 'read_file', arguments: { path: `f${next()}.ts` } } }));
      messages.push({ role: 'assistant', content: null, tool_calls: calls });
      for (const call of calls) messages.push({ role: 'tool', content: text(), tool_call_id: call.id });
    }
    messages.push({ role: 'assistant', content: text() });
  }
  return messages;
}

/** Remembered reply ids that differ from the reply's re-encoding (one token per character), as sampled ids may. */
function rememberReplies(codec: PromptCodec, memory: ReplyMemory, messages: ChatMessage[]): void {
  for (const message of messages) {
    if (message.role === 'assistant' && typeof message.content === 'string' && message.content !== '' && !message.tool_calls) {
      memory.remember('t', message.content, Array.from(message.content).flatMap((ch) => Array.from(codec.encode(ch))));
    }
  }
}

describe('linear chat prompts on real vocabularies and templates', () => {
  for (const model of MODELS) {
    it(`${model}: the template's text always, the twin's tokens wherever the twin is prefix-stable`, () => {
      const codec = codecs.get(model)!;
      let compared = 0;
      for (const withTools of [false, true]) {
        for (let seed = 0; seed < 6; seed++) {
          for (const length of [1, 2, 3, 7, 14]) {
            const messages = transcript(seed, length, withTools);
            const tools = withTools ? TOOLS : undefined;
            const label = `${model} tools=${withTools} seed ${seed} length ${length}`;
            // The segmented render works on the real template: every message the transcript loop visits has a start.
            const segmented = codec.renderChatSegmented(messages, { tools, addGenerationPrompt: false });
            expect(segmented, label).not.toBeNull();

            const plain = new ChatPromptBuilder(codec, null).build(messages, tools, 't');
            expect(codec.decode(plain.tokens), label).toBe(codec.decode(codec.encode(codec.renderChat(messages, { tools, addGenerationPrompt: true }))));

            const memory = new ReplyMemory();
            rememberReplies(codec, memory, messages);
            const fast = new ChatPromptBuilder(codec, memory).build(messages, tools, 't');
            const reference = new ChatPromptBuilderReference(codec, memory).build(messages, tools, 't');
            if (reference.prefixStable) {
              expect(fast.tokens, label).toEqual(reference.tokens);
              compared++;
            }
            if ((!withTools && model !== 'qwen3') || model === 'llama3_1') {
              expect(fast.tokens, label).toEqual(reference.tokens);
              expect(fast.messageStarts, label).toEqual(reference.messageStarts);
              expect(fast.prefixStable, label).toBe(reference.prefixStable);
            }
          }
        }
      }
      expect(compared).toBeGreaterThan(20);
    });
  }

  it('prompt ids are llama.cpp\'s ids of the rendered text, with one BOS (Llama 3 prints its BOS with the first message: it was doubled)', async () => {
    // Chat turns: every segment boundary is at a special token, so segment-wise ids are the whole text's.
    // Consecutive tool results (Qwen's `</tool_response>\n<tool_response>`) have a plain-text boundary a merge may straddle: one BOS, same text.
    const transcripts = [transcript(0, 5, false), transcript(1, 4, false), transcript(2, 9, true), transcript(3, 12, true)];
    const textsOf = (model: Model) => transcripts.map((messages, i) => codecs.get(model)!.renderChat(messages, { tools: i >= 2 ? TOOLS : undefined, addGenerationPrompt: true }));
    const references = await llamaCppTokenizeMany(MODELS.map((model) => ({ modelPath: buildRealVocabGguf(model), items: textsOf(model).map((text) => ({ text, parseSpecial: true })) })));
    MODELS.forEach((model, m) => {
      const codec = codecs.get(model)!;
      const reference = references[m].tokens;
      transcripts.forEach((messages, i) => {
        const tools = i >= 2 ? TOOLS : undefined;
        const expected = codec.bosTokenId !== null && reference[i][0] !== codec.bosTokenId ? [codec.bosTokenId, ...reference[i]] : reference[i];
        const fast = Array.from(new ChatPromptBuilder(codec, null).build(messages, tools, 't').tokens);
        const twin = Array.from(new ChatPromptBuilderReference(codec, null).build(messages, tools, 't').tokens);
        if (i < 2 || model === 'llama3_1' || model === 'deepseek_v3') {
          expect(fast, `${model} transcript ${i}`).toEqual(expected);
          expect(twin, `${model} transcript ${i} (twin)`).toEqual(expected);
        }
        expect(fast.filter((id) => id === codec.bosTokenId).length, `${model} transcript ${i} BOS`).toBe(expected.filter((id) => id === codec.bosTokenId).length);
        expect(codec.decode(fast)).toBe(codec.decode(expected));
      });
    });
  }, 120_000);

  const endOfTurn: Record<Model, string> = { llama3_1: '<|eot_id|>', qwen2_5: '<|im_end|>\n', qwen3: '<|im_end|>\n', deepseek_v3: '<｜end▁of▁sentence｜>' };
  for (const model of ['llama3_1', 'qwen2_5', 'deepseek_v3'] as const) {
    it(`${model}: over 6 turns a prompt starts with the previous prompt, the sampled reply ids and the end of turn`, () => {
      const codec = codecs.get(model)!;
      const memory = new ReplyMemory();
      const builder = new ChatPromptBuilder(codec, memory);
      const eot = codec.encode(endOfTurn[model]);
      const messages: ChatMessage[] = [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Tell me about caches ✓' },
      ];
      let previous: number[] | null = null;
      for (let turn = 0; turn < 6; turn++) {
        const prompt = builder.build(messages, undefined, 't');
        expect(prompt.prefixStable).toBe(true);
        if (previous) expect(Array.from(prompt.tokens.slice(0, previous.length))).toEqual(previous);
        const replyText = `Réponse ${turn}: blocks of 64 tokens, 日本語 🚀`;
        const sampled = Array.from(replyText).flatMap((ch) => Array.from(codec.encode(ch)));
        memory.remember('t', codec.decode(sampled), sampled);
        previous = [...prompt.tokens, ...sampled, ...eot];
        messages.push({ role: 'assistant', content: codec.decode(sampled) }, { role: 'user', content: `And then, ${turn}?` });
      }
    });
  }
});
