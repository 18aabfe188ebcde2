/**
 * The UTF-8 memo the index and the plane encode class, tenant and writer
 * with: the bytes Buffer.from gives, the same buffer again for the same
 * string, and a bound that starts it over instead of growing with tenants.
 */
import { describe, expect, it } from 'vitest';

import { Utf8Cache } from '../../../src/kvtier/utf8-cache.ts';

describe('Utf8Cache', () => {
  it('gives the UTF-8 bytes of each string, the same buffer on a repeat', () => {
    const cache = new Utf8Cache();
    for (const text of ['chat', '', 'tenant-ü', '租户', 'chat']) expect(cache.of(text).equals(Buffer.from(text))).toBe(true);
    expect(cache.of('chat')).toBe(cache.of('chat'));
  });

  it('starts over past its bound, still giving the right bytes', () => {
    const cache = new Utf8Cache(4);
    const first = cache.of('t0');
    for (let i = 1; i < 10; i++) expect(cache.of(`t${i}`).toString()).toBe(`t${i}`);
    const again = cache.of('t0');
    expect(again.toString()).toBe('t0');
    expect(again).not.toBe(first);
  });
});
