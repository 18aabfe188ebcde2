/**
 * KVTIER_SPECULATIVE=mtp on synthetic:deepseek4-tiny served like `npm start`:
 * the model's own MTP block drafts (deepseek4-mtp.ts), a greedy chat reply is
 * the same as with speculation off, and /metrics counts the verified drafts.
 * With prefix units (deepseek4-unit.ts) the unit at the end of a drafted
 * reply (after rejected drafts were rolled back) carries the MTP window: the
 * next turn hits it exactly and replies as the server without drafting does.
 * A model without an MTP block cannot serve mode mtp (typed error at load,
 * deepseek4-mtp.test.ts); the config takes the mode.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadConfig } from '../../../src/config.ts';
import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';

const body = {
  model: 'synthetic:deepseek4-tiny',
  messages: [{ role: 'user', content: 'Count the compressed groups: one two three four five six seven eight nine ten eleven twelve.' }],
  max_tokens: 40,
  temperature: 0,
};

async function chat(server: TestServer): Promise<string> {
  const res = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  const json = (await res.json()) as { choices: { message: { content: string } }[]; usage: { completion_tokens: number } };
  expect(json.usage.completion_tokens).toBeGreaterThan(8);
  return json.choices[0].message.content;
}

describe('MTP drafting in the server (deepseek4)', () => {
  let mtp: TestServer;
  let plain: TestServer;
  beforeAll(async () => {
    mtp = await startTestServer({ model: body.model, speculative: 'mtp' });
    plain = await startTestServer({ model: body.model, speculative: 'off' });
  }, 300_000);
  afterAll(async () => {
    await mtp?.close();
    await plain?.close();
  });

  it('same greedy reply as without drafting; the drafts are verified (metrics)', async () => {
    expect(await chat(mtp)).toBe(await chat(plain));
    const metrics = await (await fetch(`${mtp.url}/metrics`)).text();
    expect(metrics).toMatch(/kvtier_speculative_acceptance_ratio_count 1\b/);
    const rejected = /kvtier_speculative_draft_tokens_total\{result="rejected"\} (\d+)/.exec(metrics);
    expect(Number(rejected?.[1] ?? 0)).toBeGreaterThan(0);
  }, 120_000);

  it('a second turn hits the unit at the drafted reply\'s end and replies as without drafting', async () => {
    const turn = async (server: TestServer, messages: unknown[]) => {
      const res = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEYS.bob}`, 'content-type': 'application/json' }, body: JSON.stringify({ ...body, messages }) });
      expect(res.status).toBe(200);
      const json = (await res.json()) as { choices: { message: { content: string } }[]; usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } };
      return { reply: json.choices[0].message.content, usage: json.usage };
    };
    const replies: string[] = [];
    for (const server of [mtp, plain]) {
      const first = await turn(server, body.messages);
      // the API keeps the reply's own tokens for the echoed assistant turn: the prompt starts with the unit at its end
      const second = await turn(server, [...body.messages, { role: 'assistant', content: first.reply }, { role: 'user', content: 'And then? Go on counting.' }]);
      expect(second.usage.prompt_tokens_details?.cached_tokens).toBe(first.usage.prompt_tokens + first.usage.completion_tokens);
      replies.push(second.reply);
    }
    expect(replies[0]).toBe(replies[1]);
  }, 120_000);

  it('KVTIER_SPECULATIVE=mtp is a config value', () => {
    expect(loadConfig({ KVTIER_SPECULATIVE: 'mtp' }).speculative).toBe('mtp');
  });
});
