/**
 * gpt-oss with its own vocabulary and OpenAI's gpt-oss template (synthetic:gpt-oss-tiny-harmony: the GGUF
 * carries llama.cpp's models/templates/openai-gpt-oss-120b.jinja, inference-core/synthetic/gptoss-template.ts)
 * served like `npm start`, through the openai SDK: a tool loop whose calls the model writes itself
 * (tool_choice naming a tool: the grammar holds the reply to the template's history form of a call,
 * ` to=functions.NAME<|channel|>commentary json<|message|>{…}` after `<|start|>assistant`, ending on <|call|>),
 * the client echoing each returned call and a tool result:
 *   - every call comes back as tool_calls (finish_reason tool_calls) with the arguments the model wrote;
 *   - each follow-up turn's cached tokens are exactly the previous turn's prompt: the echoed call renders the
 *     header and <|call|> the model sampled, but its arguments through the template's `| tojson` (Python's
 *     json.dumps: `{"filter": "…"}`, ensure_ascii), while the grammar writes compact JSON (`{"filter":"…"}`),
 *     so the re-rendered call leaves the sampled tokens inside the arguments and the reply-end unit is not
 *     a prefix of the next prompt; the previous prompt's end is;
 *   - the first turn sent cold (a fresh tenant) tokenizes to the same prompt and gives the identical
 *     greedy call (0 cached);
 *   - the same forced call streamed, through the Responses API and through Anthropic's messages.
 * The template's system message holds the local date, so the body runs again if it failed across midnight.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { KEYS, startTestServer } from './server-fixture.ts';
import { rerunAcrossMidnight } from '../../helpers/local-day.ts';

type Msg = OpenAI.Chat.Completions.ChatCompletionMessageParam;
const tool = (name: string, description: string): OpenAI.Chat.Completions.ChatCompletionFunctionTool => ({
  type: 'function',
  function: { name, description, parameters: { type: 'object', properties: { filter: { type: 'string', maxLength: 6 } }, required: ['filter'], additionalProperties: false } },
});
// One tool forced per step, so no two replies are the same text: the reply memory is keyed by text, and two equal
// texts sampled as different ids would leave only the later ids for both (a limit of the memory, not of harmony).
const TOOLS = [tool('run_tests', 'Run the test suite'), tool('read_log', 'Read the build log'), tool('git_diff', 'Show the diff')];

describe('gpt-oss harmony through the openai SDK', () => {
  it("a model-written tool loop: harmony calls parsed, each turn hits the previous prompt's end, the first turn replayed cold is equal", () => rerunAcrossMidnight(true, async () => {
    const model = 'synthetic:gpt-oss-tiny-harmony';
    const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-harmony-api-'));
    const coldKeys = Array.from({ length: 8 }, (_, i) => `sk-cold-${i}`);
    const keysFile = join(dataDir, 'harmony-keys.txt');
    writeFileSync(keysFile, `${KEYS.alice} alice\n${coldKeys.map((k, i) => `${k} cold-${i}`).join('\n')}\n`);
    const server = await startTestServer({ model, dataDir, apiKeysFile: keysFile });
    try {
      const alice = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
      let coldUsed = 0;
      const ask = (client: OpenAI, messages: Msg[], forced: string | null) =>
        client.chat.completions.create({ model, messages, tools: TOOLS, max_tokens: 160, temperature: 0, ...(forced ? { tool_choice: { type: 'function' as const, function: { name: forced } } } : {}) });
      const loop: Msg[] = [{ role: 'system', content: 'You fix builds. '.repeat(10) }, { role: 'user', content: 'The build is red, fix it.' }];
      let previousPrompt: number | undefined;
      for (let step = 1; step <= 4; step++) {
        const forced = step < 4 ? TOOLS[step - 1].function.name : null;
        const r = await ask(alice, loop, forced);
        const u = r.usage!;
        if (previousPrompt !== undefined) expect(u.prompt_tokens_details!.cached_tokens, `step ${step}`).toBe(previousPrompt);
        if (step === 1) {
          // before any model-written turn the conversation is all client text: a fresh tenant gets the same prompt and reply.
          // Later turns hold the model's own call, which alice's prompt keeps as the sampled ids (the model may spell
          // a marker in plain tokens) and a fresh tenant re-encodes: no cold twin there (units-archs-api covers client-written loops)
          const cold = await ask(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: coldKeys[coldUsed++], maxRetries: 0 }), loop, forced);
          expect(cold.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
          expect(cold.usage!.prompt_tokens).toBe(u.prompt_tokens);
          expect(cold.choices[0].message).toEqual(r.choices[0].message);
        }
        if (!forced) break;
        const message = r.choices[0].message;
        expect(r.choices[0].finish_reason).toBe('tool_calls');
        expect(message.content ?? '').toBe('');
        expect(message.tool_calls).toHaveLength(1);
        const call = message.tool_calls![0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
        expect(call.function.name).toBe(forced);
        expect(typeof (JSON.parse(call.function.arguments) as { filter: unknown }).filter).toBe('string');
        // the grammar's compact JSON, which the template's tojson re-renders with a space after the colon
        expect(call.function.arguments.startsWith('{"filter":"')).toBe(true);
        previousPrompt = u.prompt_tokens;
        loop.push({ role: 'assistant', content: null, tool_calls: [call] });
        loop.push({ role: 'tool', tool_call_id: call.id, content: `{"ok": false, "step": ${step}}` });
      }
      // the Responses API forces the same harmony call (its function_call item)
      const resp = await alice.responses.create({
        model,
        input: 'The build is red, fix it.',
        tools: [{ type: 'function', name: 'read_log', description: 'Read the build log', parameters: TOOLS[1].function.parameters ?? null, strict: false }],
        tool_choice: { type: 'function', name: 'read_log' },
        max_output_tokens: 160,
        temperature: 0,
      });
      const item = resp.output.find((o) => o.type === 'function_call');
      expect(item && item.type === 'function_call' ? [item.name, typeof (JSON.parse(item.arguments) as { filter: unknown }).filter] : null).toEqual(['read_log', 'string']);
      // streamed: the call arrives as a tool_calls delta with finish_reason tool_calls, no content text
      const stream = await alice.chat.completions.create({ model, messages: loop.slice(0, 2), tools: TOOLS, max_tokens: 160, temperature: 0, tool_choice: { type: 'function', function: { name: 'git_diff' } }, stream: true });
      let text = '';
      const deltas: OpenAI.Chat.Completions.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
      let finish: string | null = null;
      for await (const chunk of stream) {
        const c = chunk.choices[0];
        if (!c) continue;
        text += c.delta.content ?? '';
        deltas.push(...(c.delta.tool_calls ?? []));
        finish = c.finish_reason ?? finish;
      }
      expect([text, finish, deltas.map((d) => d.function?.name)]).toEqual(['', 'tool_calls', ['git_diff']]);
      // Anthropic's tool_choice {type: 'tool'} forces the same harmony call: a tool_use block
      const anthropic = new Anthropic({ baseURL: server.url, apiKey: KEYS.alice, maxRetries: 0 });
      const msg = await anthropic.messages.create({
        model,
        max_tokens: 160,
        messages: [{ role: 'user', content: 'The build is red, fix it.' }],
        tools: [{ name: 'run_tests', description: 'Run the test suite', input_schema: { type: 'object', properties: { filter: { type: 'string', maxLength: 6 } }, required: ['filter'] } }],
        tool_choice: { type: 'tool', name: 'run_tests' },
      });
      expect(msg.stop_reason).toBe('tool_use');
      const use = msg.content.find((b) => b.type === 'tool_use');
      expect(use && use.type === 'tool_use' ? [use.name, typeof (use.input as { filter?: unknown }).filter] : null).toEqual(['run_tests', 'string']);
    } finally {
      await server.close();
    }
  }), 300_000);
});
