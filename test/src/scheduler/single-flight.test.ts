/**
 * Single flight through the scheduler and the tier (src/workers/single-flight.ts):
 * N concurrent requests on one uncached prefix compute it once; a no-store
 * request is never served to another (and nobody waits for it); a purge right
 * after blocks were handed to the tier leaves nothing a later lookup finds;
 * and the one registry (src/kvtier/block-flights.ts) across a block's whole
 * flight: a request arriving while another computes the prefix, and one
 * arriving while it is being written, both reuse it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { LoadedEngine } from '../../../inference-core/index.ts';
import type { KvTier } from '../../../src/kvtier/index.ts';
import type { KvTierCache } from '../../../src/scheduler/cache-adapter.ts';
import type { JobEvent, RequestSpec } from '../../../src/scheduler/job.ts';
import type { CacheTier } from '../../../src/scheduler/ports.ts';
import { HeldPutsStore } from '../../helpers/held-puts-store.ts';
import { randomTokens } from '../../inference-core/engine-fixtures.ts';
import { BLOCK, computedOf, greedyAlone, openSchedulerRig, prefilledOf, saltSource, schedulerJob, startScheduler, tokensOf, type SchedulerRig } from './scheduler-fixtures.ts';

let rig: SchedulerRig;
let engine: LoadedEngine;
let tier: KvTier;
let cache: KvTierCache;

beforeAll(async () => {
  rig = await openSchedulerRig(8, 'kvtier-flight-');
  ({ engine, tier, cache } = rig);
});

afterAll(async () => {
  await rig?.close();
});

const start = (tier: CacheTier = cache) => startScheduler(rig, { cache: tier, stepTokens: 128 });
const freshSalt = saltSource(0x100);
const job = (id: string, tokens: number[], tenantSalt: string, extra: Partial<RequestSpec> = {}) => schedulerJob(id, tokens, { tenantSalt, ...extra }, 4);
const cachedOf = (events: JobEvent[]) => prefilledOf(events).cachedTokens;

describe('single flight', () => {
  it('four concurrent requests on one uncached prefix compute it once, and each reply equals its solo run', async () => {
    const { scheduler, finished } = start();
    const salt = freshSalt();
    const shared = randomTokens(6 * BLOCK, engine.vocabSize, 301);
    const prompts = [0, 1, 2, 3].map((i) => [...shared, ...randomTokens(20 + 9 * i, engine.vocabSize, 310 + i)]);
    prompts.forEach((tokens, i) => scheduler.submit(job(`r${i}`, tokens, salt)));
    const results = await Promise.all(prompts.map((_, i) => finished(`r${i}`)));
    const computed = results.reduce((sum, events) => sum + computedOf(events), 0);
    const total = prompts.reduce((sum, tokens) => sum + tokens.length, 0);
    expect(computed).toBe(total - 3 * shared.length);
    expect(results.map(cachedOf)).toEqual([0, shared.length, shared.length, shared.length]);
    results.forEach((events, i) => expect(tokensOf(events)).toEqual(greedyAlone(engine, prompts[i], 4)));
    // Bounded: with every request ended, the registry holds nothing.
    expect(scheduler.computing.size).toBe(0);
    await scheduler.close();
  });

  it('a lookup that was in flight while another request stored the blocks looks again instead of computing them', async () => {
    // B's first lookup is held until A has finished (stored its blocks and ended): it misses, and nobody computes them any more.
    let releaseB!: () => void;
    const bHeld = new Promise<void>((resolve) => (releaseB = resolve));
    const salt = freshSalt();
    const shared = randomTokens(5 * BLOCK, engine.vocabSize, 351);
    const a = [...shared, ...randomTokens(11, engine.vocabSize, 352)];
    const b = [...shared, ...randomTokens(13, engine.vocabSize, 353)];
    // B's own lookup, told by its tokens: the lookups of A and B may complete in either order, and holding A's would hold A on itself.
    let bLookups = 0;
    const isB = (tokens: Uint32Array) => tokens.length > shared.length && tokens[shared.length] === b[shared.length];
    const slow: CacheTier = {
      flights: cache.flights,
      blockBytes: cache.blockBytes,
      namespace: (fingerprint, salt) => cache.namespace(fingerprint, salt),
      prefixKeys: (namespace, tokens) => cache.prefixKeys(namespace, tokens),
      lookup: async (namespace, tokens, context, maxBlocks, keys) => {
        const hit = await cache.lookup(namespace, tokens, context, maxBlocks, keys);
        if (isB(tokens) && ++bLookups === 1) await bHeld;
        return hit;
      },
      load: (hit, maxBlocks, fromBlock) => cache.load(hit, maxBlocks, fromBlock),
      store: (request) => cache.store(request),
      flush: () => cache.flush(),
    };
    const { scheduler, finished } = start(slow);
    scheduler.submit(job('a', a, salt));
    scheduler.submit(job('b', b, salt));
    const ea = await finished('a');
    releaseB();
    const eb = await finished('b');
    expect(cachedOf(ea)).toBe(0);
    // Its held lookup missed; the second found what A stored.
    expect(bLookups).toBe(2);
    expect(cachedOf(eb)).toBe(shared.length);
    expect(computedOf(eb)).toBe(b.length - shared.length);
    expect(tokensOf(eb)).toEqual(greedyAlone(engine, b, 4));
    expect(scheduler.computing.size).toBe(0);
    await scheduler.close();
  });

  it('a no-store request is never served to another, concurrent or after it', async () => {
    const { scheduler, finished } = start();
    const salt = freshSalt();
    const prompt = randomTokens(5 * BLOCK + 7, engine.vocabSize, 321);
    scheduler.submit(job('private', prompt, salt, { retention: { noStore: true } }));
    scheduler.submit(job('beside', [...prompt, 1, 2, 3], salt, { retention: { noStore: true } }));
    const [first, beside] = await Promise.all([finished('private'), finished('beside')]);
    expect(cachedOf(first)).toBe(0);
    expect(cachedOf(beside)).toBe(0);
    expect(computedOf(beside)).toBe(prompt.length + 3);
    await tier.flush();
    scheduler.submit(job('after', prompt, salt));
    const after = await finished('after');
    expect(cachedOf(after)).toBe(0);
    expect(tokensOf(after)).toEqual(greedyAlone(engine, prompt, 4));
    await scheduler.close();
  });

  it('a purge right after the blocks were handed over: the next request finds none of them', async () => {
    const { scheduler, finished } = start();
    const salt = freshSalt();
    const prompt = randomTokens(4 * BLOCK + 3, engine.vocabSize, 331);
    scheduler.submit(job('before', prompt, salt));
    await finished('before');
    // The blocks were handed to the tier's write-behind queue; the purge is issued before anyone waits for them.
    scheduler.dropRetained();
    await tier.purge({ all: true });
    scheduler.submit(job('after', prompt, salt));
    const after = await finished('after');
    expect(cachedOf(after)).toBe(0);
    expect(computedOf(after)).toBe(prompt.length);
    await scheduler.close();
  });

  it('the cache adapter: a block handed to store is found at once, and not after a purge', async () => {
    const namespace = cache.namespace(engine.fingerprint, freshSalt());
    const tokens = randomTokens(2 * BLOCK, engine.vocabSize, 341);
    const seq = engine.createSequence();
    seq.prefill(tokens);
    const payloads = seq.exportBlocks(0, 2);
    seq.free();
    const scope = { tenant: 't', trafficClass: 'chat' };
    const ids = Uint32Array.from(tokens);
    const keys = cache.prefixKeys(namespace, ids);
    void cache.store({ namespace, tokens: ids, fromBlock: 0, payloads, ...scope, keys });
    const hit = await cache.lookup(namespace, ids, scope, 2, keys);
    expect(hit.blocks).toBe(2);
    expect((await cache.load(hit, 2)).payloads).toEqual(payloads);
    await tier.purge({ all: true });
    // Nothing purged is found or served.
    const after = await cache.lookup(namespace, ids, scope, 2, keys);
    expect(after.blocks).toBe(0);
    expect((await cache.load(after, 2)).payloads).toEqual([]);
  });

  it('one registry from computing to written: a request arriving while the prefix is computed and one arriving while it is written both reuse it', async () => {
    let held!: HeldPutsStore;
    const heldRig = await openSchedulerRig(8, 'kvtier-flight-held-', (fs) => (held = new HeldPutsStore(fs)));
    try {
      const { scheduler, finished } = startScheduler(heldRig, { stepTokens: 128 });
      held.hold();
      const salt = freshSalt();
      const shared = randomTokens(5 * BLOCK, engine.vocabSize, 361);
      const [a, b, c] = [362, 363, 364].map((seed, i) => [...shared, ...randomTokens(9 + 2 * i, engine.vocabSize, seed)]);
      // B arrives while A is computing the shared prefix.
      scheduler.submit(job('a', a, salt));
      scheduler.submit(job('b', b, salt));
      const [ea, eb] = await Promise.all([finished('a'), finished('b')]);
      // Their writes are held: every shared block is in the registry as being written, none on storage.
      const keys = heldRig.cache.prefixKeys(heldRig.cache.namespace(engine.fingerprint, salt), Uint32Array.from(shared));
      const sharedKeys = Array.from({ length: 5 }, (_, i) => keys.keyHex(i));
      expect(sharedKeys.map((key) => heldRig.tier.flights.readable(key))).toEqual([true, true, true, true, true]);
      expect(await heldRig.store.has(sharedKeys)).toEqual([false, false, false, false, false]);
      // C arrives while they are being written.
      scheduler.submit(job('c', c, salt));
      const ec = await finished('c');
      expect([ea, eb, ec].map(cachedOf)).toEqual([0, shared.length, shared.length]);
      expect(computedOf(eb)).toBe(b.length - shared.length);
      expect(computedOf(ec)).toBe(c.length - shared.length);
      [ea, eb, ec].forEach((events, i) => expect(tokensOf(events)).toEqual(greedyAlone(heldRig.engine, [a, b, c][i], 4)));
      held.release();
      await heldRig.tier.flush();
      expect(sharedKeys.map((key) => heldRig.tier.flights.readable(key))).toEqual([false, false, false, false, false]);
      expect(await heldRig.store.has(sharedKeys)).toEqual([true, true, true, true, true]);
      expect(scheduler.computing.size).toBe(0);
      await scheduler.close();
    } finally {
      held.release();
      await heldRig.close();
    }
  });
});
