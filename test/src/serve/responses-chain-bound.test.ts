/**
 * A previous_response_id chain cannot grow a stored response without bound.
 * Each record holds the whole conversation so far, and `truncation: "auto"`
 * lets a chain outgrow the context, so before the bound every turn stored a
 * larger record (kept even past KVTIER_RESPONSE_MEMORY_BYTES as "the
 * newest"). Now the turn whose record would pass the bound is a 400
 * KVT_ERR_RESPONSE_TOO_LARGE naming previous_response_id, before any compute;
 * the chain up to it stays readable, and `store: false` continues it.
 */
import { expect, it } from 'vitest';

import { KEYS, startTestServer } from './server-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const LIMIT = 40_000;
const server = suiteFixture(() => startTestServer({ responseMemoryBytes: LIMIT }), (s) => s.close());

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> & { error?: { code?: string; param?: string } } }> {
  const res = await fetch(`${server().url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEYS.alice}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as never };
}

const filler = (turn: number) => `turn ${turn}: ` + 'the cache tier keeps every block of the prefix warm and cheap to load again. '.repeat(6);

it('a chain with truncation auto is refused (400, previous_response_id) at the turn whose record would pass the bound; earlier turns stay readable', async () => {
  let previous: string | undefined;
  let refused: { turn: number; code?: string; param?: string } | undefined;
  for (let turn = 0; turn < 60 && refused === undefined; turn++) {
    const reply = await call('POST', '/v1/responses', {
      model: 'synthetic:tiny',
      input: filler(turn),
      max_output_tokens: 4,
      temperature: 0,
      truncation: 'auto',
      ...(previous ? { previous_response_id: previous } : {}),
    });
    if (reply.status === 400) {
      refused = { turn, code: reply.json.error?.code, param: reply.json.error?.param };
      break;
    }
    expect(reply.status, JSON.stringify(reply.json).slice(0, 300)).toBe(200);
    previous = reply.json.id as string;
  }
  // ~1.1 KB of input per turn (twice in a record) against 40 000 bytes: refused after a few dozen turns, not never.
  expect(refused).toMatchObject({ code: 'KVT_ERR_RESPONSE_TOO_LARGE', param: 'previous_response_id' });
  expect(refused!.turn).toBeGreaterThan(5);
  // The last stored turn is intact and listable; the conversation can go on without storing.
  expect((await call('GET', `/v1/responses/${previous}`)).status).toBe(200);
  expect((await call('GET', `/v1/responses/${previous}/input_items?limit=100`)).status).toBe(200);
  const unstored = await call('POST', '/v1/responses', { model: 'synthetic:tiny', input: 'and then?', max_output_tokens: 4, temperature: 0, truncation: 'auto', previous_response_id: previous, store: false });
  expect(unstored.status).toBe(200);
});

it('one request whose own input would pass the bound is refused naming input, before it runs', async () => {
  const reply = await call('POST', '/v1/responses', { model: 'synthetic:tiny', input: 'word '.repeat(5_000), max_output_tokens: 4, truncation: 'auto' });
  expect(reply.status).toBe(400);
  expect(reply.json.error).toMatchObject({ code: 'KVT_ERR_RESPONSE_TOO_LARGE', param: 'input' });
});
