/** The hot-set registry and routing against a real redis-server. */
import { Redis } from 'ioredis';
import { beforeEach, describe, expect, it } from 'vitest';

import { CacheAwareRouter, routeKeys } from '../../../src/cluster/index.ts';
import { tokensOf } from '../kvtier/fixtures.ts';
import { redisForSuite } from '../../helpers/suite-fixture.ts';

let client: Redis;
redisForSuite((_server, c) => {
  client = c;
});
beforeEach(async () => {
  await client.flushall();
});

describe('routeKeys', () => {
  it('chains per full block: a shared prefix shares keys, one changed token changes every later key', () => {
    const a = tokensOf(64 * 4 + 10, 1);
    const b = a.slice();
    b[64 * 2 + 5] ^= 1;
    const ka = routeKeys('model|salt', a, 64);
    const kb = routeKeys('model|salt', b, 64);
    expect(ka).toHaveLength(4);
    expect(kb.slice(0, 2)).toEqual(ka.slice(0, 2));
    expect(kb[2]).not.toBe(ka[2]);
    expect(kb[3]).not.toBe(ka[3]);
    expect(routeKeys('model|other-tenant', a, 64)[0]).not.toBe(ka[0]);
    expect(() => routeKeys('s', a, 0)).toThrow(expect.objectContaining({ code: 'KVT_ERR_CLUSTER_BAD_OPTION' }));
  });
});

describe('CacheAwareRouter', () => {
  const session = (seed: number, blocks: number) => routeKeys('m|t', tokensOf(64 * blocks, seed), 64);

  it('routes to the worker holding the longest prefix, and to none when nobody has it', async () => {
    const router = new CacheAwareRouter(client);
    const s1 = session(1, 6);
    await router.announce('w-a', s1.slice(0, 2));
    await router.announce('w-b', s1.slice(0, 5));
    await router.announce('w-c', session(2, 6));
    expect(Object.fromEntries(await router.coverage(s1))).toEqual({ 'w-a': 2, 'w-b': 5, 'w-c': 0 });
    expect(await router.route(s1, new Map(), 8)).toEqual({ workerId: 'w-b', coveredBlocks: 5 });
    expect(await router.route(session(3, 6), new Map(), 8)).toBeNull();
  });

  it('a prefix ends at the first block a worker lacks', async () => {
    const router = new CacheAwareRouter(client);
    const s1 = session(4, 5);
    await router.announce('w-a', [s1[0], s1[2], s1[3], s1[4]]);
    expect((await router.coverage(s1)).get('w-a')).toBe(1);
  });

  it('a worker at the load cap loses its preference; ties go to the less loaded', async () => {
    const router = new CacheAwareRouter(client);
    const s1 = session(5, 4);
    await router.announce('w-hot', s1);
    await router.announce('w-warm', s1.slice(0, 3));
    await router.announce('w-twin', s1.slice(0, 3));
    expect((await router.route(s1, new Map([['w-hot', 3]]), 4))?.workerId).toBe('w-hot');
    expect(await router.route(s1, new Map([['w-hot', 4], ['w-warm', 2], ['w-twin', 1]]), 4)).toEqual({ workerId: 'w-twin', coveredBlocks: 3 });
    expect(await router.route(s1, new Map([['w-hot', 9], ['w-warm', 9], ['w-twin', 9]]), 4)).toBeNull();
  });

  it('forgets workers that stop announcing, and withdrawn ones at once', async () => {
    const router = new CacheAwareRouter(client, { ttlMs: 1000 });
    const s1 = session(6, 3);
    const t0 = Date.now();
    await router.announce('w-old', s1, t0);
    await router.announce('w-new', s1.slice(0, 1), t0 + 900);
    expect(await router.liveWorkers(t0 + 500)).toEqual(['w-old', 'w-new']);
    expect(await router.route(s1, new Map(), 8, t0 + 1500)).toEqual({ workerId: 'w-new', coveredBlocks: 1 });
    await router.withdraw('w-new');
    expect(await router.route(s1, new Map(), 8, t0 + 1500)).toBeNull();
  });

  it('keeps only the newest maxKeys per worker', async () => {
    const router = new CacheAwareRouter(client, { maxKeys: 4 });
    const s1 = session(7, 6);
    await router.announce('w', s1.slice(0, 3), 1000);
    await router.announce('w', s1.slice(3, 6), 2000);
    expect(await client.zcard('kvtier:{hot}:w')).toBe(4);
    // The first block went out: the prefix from block 0 is no longer hot there.
    expect((await router.coverage(s1, 2000)).get('w')).toBe(0);
  });

  it('counts live workers per role and routes a split half only among workers of its role', async () => {
    const router = new CacheAwareRouter(client);
    const s1 = session(8, 4);
    await router.announce('w-both', s1, Date.now(), 'both');
    await router.announce('w-pre', s1.slice(0, 2), Date.now(), 'prefill');
    await router.announce('w-dec', s1.slice(0, 1), Date.now(), 'decode');
    expect(await router.liveRoles()).toEqual({ both: 1, prefill: 1, decode: 1 });
    const asked: string[][] = [];
    const waitingOf = async (ids: string[]) => (asked.push(ids), new Map(ids.map((id) => [id, 0])));
    const options = { maxQueued: 2, slack: 1, waitingOf };
    expect(await router.routeAmong(s1, options)).toEqual({ workerId: 'w-both', coveredBlocks: 4 });
    expect(await router.routeAmong(s1, { ...options, role: 'prefill' })).toEqual({ workerId: 'w-pre', coveredBlocks: 2 });
    expect(await router.routeAmong(s1, { ...options, role: 'decode' })).toEqual({ workerId: 'w-dec', coveredBlocks: 1 });
    // Nobody covers it: no queue depths are read at all.
    expect(await router.routeAmong(session(9, 4), options)).toBeNull();
    expect(asked.map((ids) => [...ids].sort())).toEqual([['w-both', 'w-dec', 'w-pre'], ['w-pre'], ['w-dec']]);
    await router.withdraw('w-pre');
    expect(await router.liveRoles()).toEqual({ both: 1, prefill: 0, decode: 1 });
  });

  it('balances on load: a hot worker busier than the least loaded by more than the slack loses its preference', async () => {
    const router = new CacheAwareRouter(client);
    const s1 = session(11, 4);
    await router.announce('w-hot', s1);
    await router.announce('w-warm', s1.slice(0, 2));
    await router.announce('w-cold', []);
    const waiting = new Map([['w-hot', 0], ['w-warm', 0], ['w-cold', 0]]);
    const options = { maxQueued: 2, slack: 1, waitingOf: async () => waiting };
    await router.reportRunning('w-hot', 1);
    expect((await router.routeAmong(s1, options))?.workerId).toBe('w-hot');
    // Running 2 while w-cold runs none: w-warm (running 0, within the slack) gets it.
    await router.reportRunning('w-hot', 2);
    expect(await router.routeAmong(s1, options)).toEqual({ workerId: 'w-warm', coveredBlocks: 2 });
    // Waiting jobs count as load too, and the waiting cap applies on its own.
    await router.reportRunning('w-hot', 0);
    waiting.set('w-hot', 2);
    expect((await router.routeAmong(s1, { ...options, slack: 5 }))?.workerId).toBe('w-warm');
    await router.reportRunning('w-warm', 3);
    expect(await router.routeAmong(s1, options)).toBeNull();
    await router.withdraw('w-hot');
    expect(await client.hexists('kvtier:{hot}:running', 'w-hot')).toBe(0);
  });

  it('a heartbeat (no keys) keeps a worker live and its set whole; a per-worker maxKeys trims to its budget', async () => {
    const router = new CacheAwareRouter(client, { ttlMs: 1000 });
    const s1 = session(10, 6);
    const t0 = Date.now();
    await router.announce('w', s1, t0, 'both', 3);
    expect(await client.zcard('kvtier:{hot}:w')).toBe(3);
    await router.announce('w', [], t0 + 900);
    expect(await router.liveWorkers(t0 + 1500)).toEqual(['w']);
    expect(await client.zcard('kvtier:{hot}:w')).toBe(3);
  });

  it('rejects bad options with a typed error', () => {
    expect(() => new CacheAwareRouter(client, { ttlMs: 1 })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CLUSTER_BAD_OPTION' }));
    expect(() => new CacheAwareRouter(client, { maxKeys: 0 })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CLUSTER_BAD_OPTION' }));
  });
});
