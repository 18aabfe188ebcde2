/**
 * synthetic:deepseek-r1-tiny served like `npm start` (deepseek2 MLA + MoE,
 * DeepSeek-V3's vocabulary, R1's chat template whose generation prompt opens
 * `<think>\n`), driven by the OpenAI SDK:
 *
 *   - the reply is reasoning until `</think>`, so it reaches
 *     message.reasoning_content (streamed: delta.reasoning_content), never
 *     content, and streamed == not streamed;
 *   - R1's template drops the history's reasoning: content sent back with its
 *     think block renders as what follows `</think>` alone, and
 *     reasoning_content sent beside the content is not rendered;
 *   - a multi-turn chat keeps the previous prompt cached every turn (less the
 *     generation prompt's `<think>\n`, which the history does not repeat), so
 *     cached tokens grow.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';
import { collectReasoningStream } from './reasoning-stream.ts';

const MODEL = 'synthetic:deepseek-r1-tiny';
const BLOCK = 64;
const SYSTEM = 'You are kvtier on DeepSeek R1, a terse assistant. ' + 'Think first, then answer in one short line and cite the cache. '.repeat(10);
const floorBlocks = (n: number) => Math.floor(n / BLOCK) * BLOCK;

type Message = OpenAI.Chat.Completions.ChatCompletionMessage & { reasoning_content?: string };

let server: TestServer;
let client: OpenAI;

beforeAll(async () => {
  server = await startTestServer({ model: MODEL });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
}, 300_000);

afterAll(async () => {
  await server?.close();
});

describe('DeepSeek R1 template (synthetic:deepseek-r1-tiny) through the API', () => {
  const first: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: 'What does a KV cache hold?' },
  ];

  it('the reply opened by the generation prompt goes to reasoning_content, streamed == not streamed', async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: first, max_tokens: 12, temperature: 0 });
    const message = r.choices[0].message as Message;
    expect(typeof message.reasoning_content).toBe('string');
    expect(message.reasoning_content!.length).toBeGreaterThan(0);
    expect(message.reasoning_content).not.toContain('<think>');
    expect(message.content ?? '').not.toContain(message.reasoning_content!);

    const stream = await client.chat.completions.create({ model: MODEL, messages: first, max_tokens: 12, temperature: 0, stream: true });
    const { reasoning, content } = await collectReasoningStream(stream);
    expect(reasoning).toBe(message.reasoning_content);
    expect(content).toBe(message.content ?? '');
  });

  it('history reasoning is dropped by the template: a think block in content, reasoning_content beside it', async () => {
    const promptTokens = async (assistant: Record<string, unknown>) => {
      const r = await client.chat.completions.create({
        model: MODEL,
        messages: [...first, { role: 'assistant', ...assistant } as OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam, { role: 'user', content: 'And then?' }],
        max_tokens: 2,
        temperature: 0,
      });
      return r.usage!.prompt_tokens;
    };
    // R1 keeps what follows the last `</think>`, its blank line included
    const afterThink = await promptTokens({ content: '\n\nIt holds keys and values.' });
    expect(await promptTokens({ content: '<think>\nRecall attention.\n</think>\n\nIt holds keys and values.' })).toBe(afterThink);
    expect(await promptTokens({ content: 'Recall attention.\n</think>\n\nIt holds keys and values.' })).toBe(afterThink);
    // reasoning_content sent back is not rendered: the same prompt as the content alone
    const bare = await promptTokens({ content: 'It holds keys and values.' });
    expect(await promptTokens({ content: 'It holds keys and values.', reasoning_content: 'Recall attention.' })).toBe(bare);
    expect(afterThink).toBeGreaterThan(bare);
  });

  it('multi-turn: every turn keeps the previous prompt cached, cached tokens grow', async () => {
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Turn 1: what is MLA?' }];
    let previousPrompt = 0;
    let previousCached = -1;
    for (let turn = 1; turn <= 4; turn++) {
      const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 0 });
      const usage = r.usage!;
      const cached = usage.prompt_tokens_details!.cached_tokens!;
      const message = r.choices[0].message as Message;
      expect(message.reasoning_content?.length ?? 0, `turn ${turn}`).toBeGreaterThan(0);
      if (turn > 1) {
        // the previous prompt less its generation prompt's `<think>`, `\n` (the history renders `<｜Assistant｜>` + content)
        expect(cached, `turn ${turn}`).toBeGreaterThanOrEqual(floorBlocks(previousPrompt - 2));
        expect(cached, `turn ${turn}`).toBeGreaterThan(previousCached);
      }
      previousCached = cached;
      previousPrompt = usage.prompt_tokens;
      // sent back as a DeepSeek client does: the content, reasoning left out
      messages.push({ role: 'assistant', content: message.content ?? '' });
      messages.push({ role: 'user', content: `Turn ${turn + 1}: and then? ` + 'Keep citing the cache. '.repeat(8) });
    }
  });
});
