/**
 * IdealCache against the definition written the plain way (a Map from each
 * prefix, spelled out, to its last use), with and without a TTL, over enough
 * distinct prefixes that its edge table grows several times.
 */
import { describe, expect, it } from 'vitest';

import { IdealCache } from '../../../src/replay/index.ts';
import type { ReplayRequest } from '../../../src/replay/trace.ts';

function definition(requests: readonly { atMs: number; blocks: Uint32Array }[], ttlMs: number): number[] {
  const lastUse = new Map<string, number>();
  return requests.map(({ atMs, blocks }) => {
    let hit = 0;
    let missed = false;
    let prefix = '';
    for (const id of blocks) {
      prefix += `${id},`;
      const used = lastUse.get(prefix);
      if (!missed && used !== undefined && atMs - used < ttlMs) hit++;
      else missed = true;
      lastUse.set(prefix, atMs);
    }
    return hit;
  });
}

describe('IdealCache', () => {
  it('equals the definition request by request, with and without a TTL, across table growth', () => {
    // Conversations that resend a growing prefix, some ids shared across conversations, times moving on.
    let seed = 7;
    const random = () => ((seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32);
    const requests: ReplayRequest[] = [];
    const conversations = Array.from({ length: 400 }, () => [] as number[]);
    for (let r = 0; r < 6000; r++) {
      const conversation = conversations[Math.floor(random() * conversations.length)];
      const added = 1 + Math.floor(random() * 40);
      for (let k = 0; k < added; k++) conversation.push(random() < 0.2 ? Math.floor(random() * 50) : Math.floor(random() * 2 ** 32));
      requests.push({ atMs: r * 250, blocks: Uint32Array.from(conversation) } as ReplayRequest);
    }
    const blocks = requests.reduce((sum, request) => sum + request.blocks.length, 0);
    expect(blocks).toBeGreaterThan(1 << 17);
    for (const ttl of [Number.POSITIVE_INFINITY, 60_000, 600_000]) {
      const ideal = new IdealCache(ttl);
      expect(requests.map((request) => ideal.serve(request))).toEqual(definition(requests, ttl));
    }
  });
});
