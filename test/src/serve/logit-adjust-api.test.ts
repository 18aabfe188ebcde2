/**
 * logit_bias, presence_penalty and frequency_penalty through the server: they
 * change the reply as OpenAI documents (they were accepted and ignored before),
 * the same with speculative decoding on (such a request decodes plainly) and
 * off, and a request without them is unchanged.
 */
import { describe, expect, it } from 'vitest';

import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const MAX_TOKENS = 12;
const base = {
  model: 'synthetic:tiny',
  // The tiny random model loops on a repetitive prompt, so a frequency penalty has repeats to act on.
  messages: [{ role: 'user', content: 'copy this: alpha beta gamma delta alpha beta gamma delta alpha beta gamma delta' }],
  max_tokens: MAX_TOKENS,
  temperature: 0,
};

interface Reply {
  content: string;
  finish: string;
  completionTokens: number;
}

async function chat(server: TestServer, extra: Record<string, unknown>): Promise<Reply> {
  const res = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' }, body: JSON.stringify({ ...base, ...extra }) });
  expect(res.status).toBe(200);
  const json = (await res.json()) as { choices: { message: { content: string }; finish_reason: string }[]; usage: { completion_tokens: number } };
  return { content: json.choices[0].message.content, finish: json.choices[0].finish_reason, completionTokens: json.usage.completion_tokens };
}

/** True when `text` is one piece repeated `times` times (a reply of a single forced token). */
function isRepeated(text: string, times: number): boolean {
  if (text.length === 0 || text.length % times !== 0) return false;
  return text.slice(0, text.length / times).repeat(times) === text;
}

describe('logit adjustments in the server', () => {
  const plain = suiteFixture(() => startTestServer({ speculative: 'off' }), (s) => s.close(), 60_000);
  const spec = suiteFixture(() => startTestServer({ speculative: 'ngram' }), (s) => s.close(), 60_000);

  it('a +100 bias forces one token for the whole reply, with speculative decoding on and off', async () => {
    const unbiased = await chat(plain(), {});
    for (const server of [plain(), spec()]) {
      const forced = await chat(server, { logit_bias: { '300': 100 } });
      expect(forced.finish).toBe('length');
      expect(forced.completionTokens).toBe(MAX_TOKENS);
      expect(isRepeated(forced.content, MAX_TOKENS)).toBe(true);
      expect(forced.content).not.toBe(unbiased.content);
      // another forced token, another reply: the bias names the token
      expect((await chat(server, { logit_bias: { '301': 100 } })).content).not.toBe(forced.content);
    }
  }, 60_000);

  it('penalties act on generated tokens: a frequency penalty ends a biased repeat, a negative presence penalty makes one; zero values change nothing', async () => {
    const unpenalized = await chat(plain(), {});
    expect(await chat(plain(), { frequency_penalty: 0, presence_penalty: 0, logit_bias: {} })).toEqual(unpenalized);
    expect(await chat(spec(), {})).toEqual(unpenalized);
    // A +8 bias makes token 300 the greedy pick every time (this model's margins are smaller) ...
    const biased = await chat(plain(), { logit_bias: { '300': 8 } });
    expect(isRepeated(biased.content, MAX_TOKENS)).toBe(true);
    const piece = biased.content.slice(0, biased.content.length / MAX_TOKENS);
    // ... until a frequency penalty of 2 per repeat has taken the margin away: it repeats a few times, then stops.
    const frequency = await chat(plain(), { logit_bias: { '300': 8 }, frequency_penalty: 2 });
    expect(frequency.content.startsWith(piece.repeat(2))).toBe(true);
    expect(frequency.content.startsWith(piece.repeat(MAX_TOKENS))).toBe(false);
    // A negative presence penalty favours what was already said: the reply changes into a repeat.
    const presence = await chat(plain(), { presence_penalty: -2 });
    expect(presence.content).not.toBe(unpenalized.content);
    for (const [extra, expected] of [[{ logit_bias: { '300': 8 }, frequency_penalty: 2 }, frequency], [{ presence_penalty: -2 }, presence]] as const) {
      expect(await chat(spec(), extra)).toEqual(expected);
    }
  }, 60_000);
});
