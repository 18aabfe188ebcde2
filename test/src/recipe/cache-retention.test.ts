/** Client retention hints: each API's fields map onto a TTL cap or no-store; bad values name their field. */
import { describe, expect, it } from 'vitest';

import { retentionFromAnthropic, retentionFromOpenAi, retentionOrUndefined } from '../../../src/recipe/cache-retention.ts';

const HOUR = 3_600_000;

function paramOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    expect((error as { code?: string }).code).toBe('KVT_ERR_REQUEST_INVALID');
    return (error as { param?: string }).param;
  }
  throw new Error('expected a KVT_ERR_REQUEST_INVALID');
}

describe('retentionFromOpenAi', () => {
  it('maps prompt_cache_retention onto a TTL cap and the no-store switches onto noStore', () => {
    expect(retentionFromOpenAi({ prompt_cache_retention: '24h' })).toEqual({ ttlMs: 24 * HOUR });
    expect(retentionFromOpenAi({ prompt_cache_retention: 'in_memory' })).toEqual({ ttlMs: 10 * 60_000 });
    expect(retentionFromOpenAi({ prompt_cache_key: 'session-42' })).toEqual({});
    expect(retentionFromOpenAi({}, 'no-store')).toEqual({ noStore: true });
    expect(retentionFromOpenAi({ kvtier_cache: 'no-store' })).toEqual({ noStore: true });
    expect(retentionFromOpenAi({ kvtier_cache: 'store' }, 'store')).toEqual({});
    expect(retentionOrUndefined(retentionFromOpenAi({ prompt_cache_retention: null }))).toBeUndefined();
  });

  it('refuses bad values with a 400 naming the field', () => {
    expect(paramOf(() => retentionFromOpenAi({ prompt_cache_retention: '48h' }))).toBe('prompt_cache_retention');
    expect(paramOf(() => retentionFromOpenAi({ prompt_cache_key: 'x'.repeat(1025) }))).toBe('prompt_cache_key');
    expect(paramOf(() => retentionFromOpenAi({}, 'never'))).toBe('x-kvtier-cache');
    expect(paramOf(() => retentionFromOpenAi({ kvtier_cache: false }))).toBe('kvtier_cache');
  });
});

describe('retentionFromAnthropic', () => {
  it('takes the longest cache_control ttl of system, tool and message blocks (default 5m)', () => {
    expect(retentionFromAnthropic({ system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral' } }] })).toEqual({ ttlMs: 5 * 60_000 });
    expect(
      retentionFromAnthropic({
        tools: [{ name: 't', input_schema: {}, cache_control: { type: 'ephemeral', ttl: '1h' } }],
        messages: [{ role: 'user', content: [{ type: 'text', text: 'u', cache_control: { type: 'ephemeral', ttl: '5m' } }] }],
      }),
    ).toEqual({ ttlMs: HOUR });
    expect(retentionFromAnthropic({ messages: [{ role: 'user', content: 'plain' }] })).toEqual({});
    expect(retentionFromAnthropic({ messages: [{ role: 'user', content: 'plain' }] }, 'no-store')).toEqual({ noStore: true });
  });

  it('names the bad marker by its place', () => {
    const body = { messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b', cache_control: { type: 'ephemeral', ttl: '2h' } }] }] };
    expect(paramOf(() => retentionFromAnthropic(body))).toBe('messages[0].content[1].cache_control.ttl');
    expect(paramOf(() => retentionFromAnthropic({ system: [{ type: 'text', text: 's', cache_control: { type: 'persistent' } }] }))).toBe('system[0].cache_control.type');
    const nested = { messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text: 'r', cache_control: { type: 'ephemeral', ttl: 60 } }] }] }] };
    expect(paramOf(() => retentionFromAnthropic(nested))).toBe('messages[0].content[0].content[0].cache_control.ttl');
  });
});
