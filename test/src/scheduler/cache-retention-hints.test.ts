/**
 * A client's retention hint through the worker's cache adapter into the
 * tier, on an injected clock: a 24 h hint under a policy that allows client
 * hints of at most 1 h expires 1 h after the block's last use (a block
 * without a hint keeps its class TTL); a no-store request leaves no block on
 * storage and nothing a later lookup finds, even before the tier's writes land.
 */
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { HOUR_MS, KvTier, ManualClock } from '../../../src/kvtier/index.ts';
import { KvTierCache } from '../../../src/scheduler/cache-adapter.ts';
import { LAYOUT, payloadFor, tempDir, tokensOf } from '../kvtier/fixtures.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function rig() {
  const dir = await tempDir('kvtier-hints-');
  const clock = new ManualClock();
  const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
  const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, clock, metadataRedisUrl: '', hotCacheBytes: 0 });
  const cache = await KvTierCache.create(tier, LAYOUT);
  cleanups.push(dir.remove, () => store.close(), () => tier.close());
  const ns = tier.namespace({ modelFingerprint: 'hints-test', tenantSalt: 'salt' });
  const blocksOnStorage = async () => {
    let n = 0;
    for await (const _ of store.list()) n++;
    return n;
  };
  return { clock, store, tier, cache, ns, blocksOnStorage };
}

const scope = { tenant: 'acme', trafficClass: 'agent' };

describe('client retention hints through the cache adapter', () => {
  it('a 24 h hint capped to 1 h by the policy expires 1 h after the last use; no hint keeps the class TTL', async () => {
    const { clock, tier, cache, ns } = await rig();
    await tier.policy.update((doc) => ({ ...doc, clientTtlMaxMs: HOUR_MS }));
    const hinted = tokensOf(128, 1);
    const plain = tokensOf(128, 2);
    await cache.store({ namespace: ns, tokens: hinted, fromBlock: 0, payloads: [payloadFor(1, 0), payloadFor(1, 1)], ...scope, retention: { ttlMs: 24 * HOUR_MS } });
    await cache.store({ namespace: ns, tokens: plain, fromBlock: 0, payloads: [payloadFor(2, 0), payloadFor(2, 1)], ...scope });
    await tier.flush();
    const hits = async (tokens: Uint32Array) => (await tier.lookup(ns, tokens, scope)).hitBlocks;

    clock.advance(HOUR_MS - 1000);
    expect(await hits(hinted), 'just inside the hour').toBe(2); // a hit renews: the hour starts again
    await tier.flush();
    clock.advance(HOUR_MS - 1000);
    expect(await hits(hinted), 'an hour after the renewal, less a second').toBe(2);
    await tier.flush();
    clock.advance(HOUR_MS + 1000);
    expect(await hits(hinted), 'an hour and a second after the last use').toBe(0);
    expect(await hits(plain), 'no hint: the agent class keeps it 3 days').toBe(2);
  });

  it('without a policy cap the hint itself is the TTL, and never longer than the class TTL', async () => {
    const { clock, tier, cache, ns } = await rig();
    const tokens = tokensOf(64, 3);
    await cache.store({ namespace: ns, tokens, fromBlock: 0, payloads: [payloadFor(3, 0)], ...scope, retention: { ttlMs: HOUR_MS } });
    await tier.flush();
    clock.advance(HOUR_MS + 1000);
    expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(0);
  });

  it('a no-store request leaves no block', async () => {
    const { tier, cache, ns, blocksOnStorage } = await rig();
    const tokens = tokensOf(128, 4);
    await cache.store({ namespace: ns, tokens, fromBlock: 0, payloads: [payloadFor(4, 0), payloadFor(4, 1)], ...scope, retention: { noStore: true } });
    await tier.flush();
    expect(await blocksOnStorage()).toBe(0);
    const hit = await cache.lookup(ns, tokens, scope, 2);
    expect(hit.blocks).toBe(0);
    await cache.store({ namespace: ns, tokens, fromBlock: 0, payloads: [payloadFor(4, 0), payloadFor(4, 1)], ...scope });
    await tier.flush();
    expect(await blocksOnStorage()).toBe(2);
  });
});
