import OpenAI from 'openai';
import { it } from 'vitest';
import { KEYS, startTestServer } from '../src/serve/server-fixture.ts';
const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file of the repository', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
  { type: 'function', function: { name: 'run_tests', description: 'Run the test suite', parameters: { type: 'object', properties: { filter: { type: 'string' } } } } },
];
it('probe', async () => {
  const s = await startTestServer();
  const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
  const memory = (s.built.context.prompts as any).options.memory;
  const orig = memory.recall.bind(memory);
  let log: string[] = [];
  memory.recall = (scope: string, text: string) => { const r = orig(scope, text); log.push(`${r ? 'HIT' : 'miss'} ${JSON.stringify(text).slice(0, 80)}`); return r; };
  for (const variant of [
    { max_tokens: 16, temperature: 0 },
    { tool_choice: 'required' as const, max_tokens: 64, temperature: 1, seed: 9 },
    { max_tokens: 16, temperature: 1, seed: 7 },
    { max_tokens: 64, temperature: 1, seed: 8 },
  ]) {
    const messages: any[] = [{ role: 'system', content: 'sys '.repeat(50) }, { role: 'user', content: 'x' + JSON.stringify(variant) }];
    const r = await c.chat.completions.create({ model: 'synthetic:tiny', messages, tools: TOOLS, ...variant } as never);
    const reply = r.choices[0].message;
    const assistant: any = { role: 'assistant', content: reply.content ?? '' };
    if (reply.tool_calls) assistant.tool_calls = reply.tool_calls;
    messages.push(assistant);
    for (const call of reply.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: call.id, content: 'ok' });
    messages.push({ role: 'user', content: 'next' });
    log = [];
    await c.chat.completions.create({ model: 'synthetic:tiny', messages, tools: TOOLS, max_tokens: 4, temperature: 0 } as never);
    console.log('PROBE', JSON.stringify(variant), JSON.stringify(reply.content).slice(0, 80), log.join(' | '));
  }
  await s.close();
}, 120000);
