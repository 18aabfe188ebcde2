/** computeWhatIf from hand-made histogram counters: sums of whole buckets, exact vs lower bound, storage byte-days, net value. */
import { expect, it } from 'vitest';

import { DEFAULT_PRICING, computeWhatIf, gapCounter } from '../../../src/stats/index.ts';

it('sums whole buckets below each TTL, marks TTLs past the one in force as lower bounds, prices storage', () => {
  const counters: Record<string, number> = {
    // 3 hit blocks of 64 tokens with gaps in [2 min, 5 min): 150 s each
    [gapCounter('chat', 300_000, 'tokens')]: 192,
    [gapCounter('chat', 300_000, 'blocks')]: 3,
    [gapCounter('chat', 300_000, 'ms')]: 450_000,
    // 2 hit blocks with gaps in [30 min, 1 h): 40 min each
    [gapCounter('chat', 3_600_000, 'tokens')]: 128,
    [gapCounter('chat', 3_600_000, 'blocks')]: 2,
    [gapCounter('chat', 3_600_000, 'ms')]: 4_800_000,
  };
  const gauges = { 'c:chat|bytes': 1_000_000, 'c:chat|blocks': 10 };
  const pricing = { ...DEFAULT_PRICING, storageUsdPerGbMonth: 0.03 };
  const whatIf = computeWhatIf({ counters, gauges }, pricing, { chat: 3_600_000, agent: 3 * 86_400_000 });
  const chat = whatIf.classes.find((c) => c.trafficClass === 'chat')!;
  expect(chat.bytesPerBlock).toBe(100_000);
  const row = (ttl: string) => chat.rows.find((r) => r.ttl === ttl)!;
  expect(row('5m')).toMatchObject({ hitTokens: 192, exact: true });
  // Under 5 min the two 40-minute gaps are held 5 minutes each.
  expect(row('5m').storageByteDays).toBeCloseTo((100_000 * (450_000 + 2 * 300_000)) / 86_400_000, 6);
  expect(row('1h')).toMatchObject({ hitTokens: 320, exact: true });
  expect(row('24h')).toMatchObject({ hitTokens: 320, exact: false });
  expect(row('current')).toMatchObject({ ttlMs: 3_600_000, hitTokens: 320, exact: true });
  const r = row('1h');
  expect(r.savedUsd).toBeCloseTo((320 * (0.14 - 0.0028)) / 1e6, 9);
  expect(r.storageUsd).toBeCloseTo((r.storageByteDays / 1e9 / 30) * 0.03, 9);
  expect(r.netUsd).toBeCloseTo(r.savedUsd - r.storageUsd, 9);
  // A class in the policy with no hits yet still has its rows (zeros).
  expect(whatIf.classes.find((c) => c.trafficClass === 'agent')!.rows.every((x) => x.hitTokens === 0)).toBe(true);
});
