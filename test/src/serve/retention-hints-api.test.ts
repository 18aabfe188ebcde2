/**
 * Retention hints over HTTP (embedded server): a bad value is a 400 naming
 * the field; an accepted hint reaches the stored blocks and shows in the
 * admin listing and inspect (what `kvtier ls` / `kvtier inspect` print); a
 * no-store request adds no block.
 */
import { describe, expect, it } from 'vitest';

import { admin, LONG_SYSTEM, waitFor } from './admin-fixtures.ts';
import { KEYS, startTestServer } from './server-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer(), (s) => s.close(), 120_000);

async function post(path: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<{ status: number; body: { error?: { param?: string; code?: string } } }> {
  const response = await fetch(`${server().url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.alice}`, ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as { error?: { param?: string; code?: string } } };
}

const chatBody = (user: string, extra: Record<string, unknown> = {}) => ({
  model: 'synthetic:tiny',
  messages: [
    { role: 'system', content: LONG_SYSTEM },
    { role: 'user', content: user },
  ],
  max_tokens: 2,
  temperature: 0,
  ...extra,
});

interface Listing {
  blocks: Array<{ key: string; ttlCapMs?: number }>;
  matched: number;
}

describe('retention hints over HTTP', () => {
  it('bad values are 400s naming the field', async () => {
    const bad = await post('/v1/chat/completions', chatBody('x', { prompt_cache_retention: '7d' }));
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'KVT_ERR_REQUEST_INVALID', param: 'prompt_cache_retention' });
    const header = await post('/v1/chat/completions', chatBody('x'), { 'x-kvtier-cache': 'sometimes' });
    expect(header.status).toBe(400);
    expect(header.body.error?.param).toBe('x-kvtier-cache');
    const anthropic = await post('/v1/messages', {
      model: 'synthetic:tiny',
      max_tokens: 2,
      system: [{ type: 'text', text: LONG_SYSTEM, cache_control: { type: 'ephemeral', ttl: '1d' } }],
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(anthropic.status).toBe(400);
    expect(anthropic.body.error?.param).toBe('system[0].cache_control.ttl');
  });

  it('a hint shows on the stored blocks (ls, inspect); no-store adds none', async () => {
    const listAll = async () => (await admin<Listing>(server().url, '/admin/blocks?limit=1000')).body;
    const before = (await listAll()).matched;
    const noStore = await post('/v1/chat/completions', chatBody('first, not stored'), { 'x-kvtier-cache': 'no-store' });
    expect(noStore.status).toBe(200);
    const hinted = await post('/v1/messages', {
      model: 'synthetic:tiny',
      max_tokens: 2,
      system: [{ type: 'text', text: LONG_SYSTEM, cache_control: { type: 'ephemeral', ttl: '1h' } }],
      messages: [{ role: 'user', content: 'second, kept an hour' }],
    });
    expect(hinted.status).toBe(200);
    await waitFor(async () => (await listAll()).matched > before, 'the hinted blocks to be written');
    const listing = await listAll();
    const fresh = listing.blocks.filter((b) => b.ttlCapMs !== undefined);
    expect(fresh.length).toBe(listing.matched - before); // every new block is the hinted request's: the no-store one left none
    expect(fresh.every((b) => b.ttlCapMs === 3_600_000)).toBe(true);
    const detail = (await admin<{ ttlMs: number }>(server().url, `/admin/blocks/${fresh[0].key}`)).body;
    expect(detail.ttlMs).toBe(3_600_000);
  });
});
