/**
 * The server end to end on real vocabularies with their own chat templates
 * (test/helpers/real-vocab-gguf.ts: Llama 3, Qwen2.5, Qwen3, DeepSeek V3
 * tokenizers, tiny random weights), through /v1/chat/completions:
 *
 *   - 3 chat turns, each sending back the server's reply: cached tokens grow
 *     each turn (the prompt is prefix-stable on the real template);
 *   - a tool loop (assistant tool call with content null and JSON-text
 *     arguments, then its result): the call is in the prompt;
 *   - usage.prompt_tokens equals llama.cpp's token count of the rendered
 *     prompt (+ BOS where the model adds it): every transcript is replayed by
 *     a second tenant, which has no reply memory, so the count is of the text;
 *     a turn with no server reply in it is compared for the first tenant too;
 *   - the rendered prompt is byte-identical to jinja2's render of the same
 *     messages (transformers' environment) for the plain turns.
 */
import { basename } from 'node:path';

import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { chatInputFromOpenAi, promptCodecFromGgufFile, type OpenAiChatRequestBody, type PromptCodec } from '../../../src/recipe/index.ts';
import { jinja2Render, transformersContext } from '../../helpers/jinja2-render.ts';
import { llamaCppTokenize } from '../../helpers/llamacpp-tokenize.ts';
import { buildRealVocabGguf, type RealVocabName } from '../../helpers/real-vocab-gguf.ts';
import { realTemplates } from '../../inference-core/chat-template-real-fixtures.ts';
import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;
type Usage = OpenAI.CompletionUsage;

const MODELS: Array<Exclude<RealVocabName, 'llama2' | 'gptoss' | 'gemma3'>> = ['llama3_1', 'qwen2_5', 'qwen3', 'deepseek_v3'];
const SYSTEM = 'You are kvtier, a terse assistant. ' + 'Answer in one short line, cite the cache, never apologise — ünïcödé ✓ 日本語. '.repeat(8);
const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file of the repository', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
];

for (const model of MODELS) {
  describe(`${model}: chat turns and a tool loop on the real vocabulary`, () => {
    let server: TestServer;
    let modelPath: string;
    let codec: PromptCodec;
    let alice: OpenAI;
    let bob: OpenAI;

    beforeAll(async () => {
      modelPath = buildRealVocabGguf(model);
      codec = promptCodecFromGgufFile(modelPath);
      server = await startTestServer({ model: modelPath });
      alice = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
      bob = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.bob, maxRetries: 0 });
    }, 300_000);

    afterAll(async () => {
      await server?.close();
    });

    const rendered = (messages: Message[], tools?: OpenAI.Chat.Completions.ChatCompletionTool[]) => {
      const input = chatInputFromOpenAi({ model, messages, tools } as OpenAiChatRequestBody);
      return codec.renderChat(input.messages, { tools: input.tools, addGenerationPrompt: true });
    };
    /** llama.cpp's count of the rendered prompt's tokens, with the BOS kvtier prepends when the text lacks it. */
    const llamaCppCounts = async (texts: string[]) =>
      (await llamaCppTokenize(modelPath, texts.map((text) => ({ text, parseSpecial: true })))).tokens.map((ids, i) => ids.length + (codec.bosTokenId !== null && !(codec.bosText !== null && texts[i].startsWith(codec.bosText)) ? 1 : 0));
    const ask = async (client: OpenAI, messages: Message[], tools?: OpenAI.Chat.Completions.ChatCompletionTool[]) => {
      const response = await client.chat.completions.create({ model: basename(modelPath, '.gguf'), messages, tools, max_tokens: 6, temperature: 0 });
      return { message: response.choices[0].message, usage: response.usage as Usage };
    };

    it('3 turns: cached tokens grow, prompt_tokens is llama.cpp\'s count of the rendered prompt, the render is jinja2\'s', async () => {
      const messages: Message[] = [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: 'What does a KV cache hold? ✓' },
      ];
      const transcripts: Message[][] = [];
      const usages: Usage[] = [];
      for (let turn = 0; turn < 3; turn++) {
        transcripts.push([...messages]);
        const { message, usage } = await ask(alice, messages);
        usages.push(usage);
        messages.push({ role: 'assistant', content: message.content ?? '' }, { role: 'user', content: `And then, turn ${turn + 2}? 日本語` });
      }
      const cached = usages.map((u) => u.prompt_tokens_details?.cached_tokens ?? 0);
      expect(cached[1]).toBeGreaterThan(cached[0]);
      expect(cached[2]).toBeGreaterThan(cached[1]);

      const texts = transcripts.map((t) => rendered(t));
      const counts = await llamaCppCounts(texts);
      expect(usages[0].prompt_tokens).toBe(counts[0]);
      for (let turn = 0; turn < 3; turn++) {
        const replay = await ask(bob, transcripts[turn]);
        expect(replay.usage.prompt_tokens, `turn ${turn}`).toBe(counts[turn]);
      }

      const [real] = realTemplates(model);
      const reference = jinja2Render(
        transcripts.map((t) => ({ template: real.source, context: transformersContext({ messages: t, addGenerationPrompt: true, specialTokens: real.specialTokens }) })),
      );
      reference.forEach((r, turn) => expect(texts[turn], `turn ${turn}`).toBe(r.text));
    }, 300_000);

    it('a tool loop: the call (content null, JSON-text arguments) and its result are in the prompt; counts match llama.cpp; cache grows', async () => {
      const messages: Message[] = [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: 'Read src/ä.ts please.' },
      ];
      const first = await ask(alice, messages, TOOLS);
      messages.push(
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read_file', arguments: '{"path":"src/ä.ts"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'export const ä = 1;' },
      );
      const second = await ask(alice, messages, TOOLS);
      expect(second.usage.prompt_tokens_details?.cached_tokens ?? 0).toBeGreaterThan(0);
      expect(second.usage.prompt_tokens).toBeGreaterThan(first.usage.prompt_tokens);

      const text = rendered(messages, TOOLS);
      expect(text).toContain('export const ä = 1;');
      // Llama 3's template has no tool calls; the others render the call.
      if (model !== 'llama3_1') expect(text).toContain('read_file');
      const [count] = await llamaCppCounts([text]);
      expect(second.usage.prompt_tokens).toBe(count);
      expect((await ask(bob, messages, TOOLS)).usage.prompt_tokens).toBe(count);
    }, 300_000);
  });
}
