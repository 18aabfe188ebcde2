/**
 * Stored responses: the in-process store (embedded mode) expires records at
 * their TTL and keys them by tenant; the Redis store (REDIS_URL) does the same
 * with PX keys, and two stores on one Redis (two API processes) share records.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { MemoryResponseStore, RedisResponseStore, type StoredResponse } from '../../../src/serve/response-store.ts';
import { startRedis, type RedisServer } from '../../helpers/redis-server.ts';

const record = (text: string): StoredResponse => ({ response: { id: 'resp_1', output_text: text }, transcript: [{ role: 'user', content: text }] });

describe('MemoryResponseStore', () => {
  it('keys by tenant, expires at the TTL, deletes once', async () => {
    let now = 1_000;
    const store = new MemoryResponseStore(() => now);
    await store.put('alice', 'resp_1', record('a'), 500);
    expect(await store.get('alice', 'resp_1')).toEqual(record('a'));
    expect(await store.get('bob', 'resp_1')).toBeUndefined();
    expect(await store.delete('bob', 'resp_1')).toBe(false);
    now += 499;
    expect(await store.get('alice', 'resp_1')).toEqual(record('a'));
    now += 1;
    expect(await store.get('alice', 'resp_1')).toBeUndefined();
    await store.put('alice', 'resp_2', record('b'), 500);
    expect(await store.delete('alice', 'resp_2')).toBe(true);
    expect(await store.delete('alice', 'resp_2')).toBe(false);
  });

  it('control: run, then cancel once asked, deleted once the record is gone or expired', async () => {
    let now = 1_000;
    const store = new MemoryResponseStore(() => now);
    await store.put('alice', 'r', record('a'), 500);
    expect(await store.control('alice', 'r')).toBe('run');
    expect(await store.control('bob', 'r')).toBe('deleted');
    await store.requestCancel('bob', 'r');
    expect(await store.control('alice', 'r')).toBe('run');
    await store.requestCancel('alice', 'r');
    expect(await store.control('alice', 'r')).toBe('cancel');
    now += 500;
    expect(await store.control('alice', 'r')).toBe('deleted');
  });

  it('returns copies: a caller editing a record does not change the stored one', async () => {
    const store = new MemoryResponseStore();
    await store.put('alice', 'r', record('a'), 60_000);
    const got = (await store.get('alice', 'r'))!;
    got.transcript.push({ role: 'assistant', content: 'x' });
    expect((await store.get('alice', 'r'))!.transcript).toHaveLength(1);
  });

  it('keeps at most its byte bound of records (JSON bytes): the oldest go first, the newest stays', async () => {
    const store = new MemoryResponseStore(Date.now, 10_000);
    const text = 'x'.repeat(1_000);
    for (let i = 0; i < 30; i++) await store.put('alice', `r${i}`, record(`${i} ${text}`), 3_600_000);
    expect(store.heldBytes).toBeLessThanOrEqual(10_000);
    expect(store.size).toBeGreaterThanOrEqual(4);
    expect(store.size).toBeLessThan(30);
    expect(await store.get('alice', 'r0')).toBeUndefined();
    expect(await store.get('alice', 'r29')).toEqual(record(`29 ${text}`));
    // A record larger than the whole bound is refused (it was kept, alone, past the bound); what was held stays.
    const held = { bytes: store.heldBytes, size: store.size };
    await expect(store.put('alice', 'big', record('y'.repeat(20_000)), 3_600_000)).rejects.toMatchObject({ code: 'KVT_ERR_RESPONSE_TOO_LARGE', status: 400, param: 'store' });
    expect(await store.get('alice', 'big')).toBeUndefined();
    expect({ bytes: store.heldBytes, size: store.size }).toEqual(held);
    expect(await store.get('alice', 'r29')).toBeDefined();
  });

  it('counts UTF-8 bytes, not UTF-16 units: a record holding 2 × 4 000 three-byte characters is 24 000 bytes (8 000 units), past a 10 000-byte bound', async () => {
    const store = new MemoryResponseStore(Date.now, 10_000);
    await expect(store.put('alice', 'cjk', record('漢'.repeat(4_000)), 3_600_000)).rejects.toMatchObject({ code: 'KVT_ERR_RESPONSE_TOO_LARGE' });
    await store.put('alice', 'cjk-small', record('漢'.repeat(1_600)), 3_600_000);
    expect(store.heldBytes).toBeGreaterThan(9_000);
    expect(store.heldBytes).toBeLessThanOrEqual(10_000);
  });

  it('a chain of growing records (each the whole conversation so far) stays within the bound: the turn that would pass it is refused', async () => {
    const store = new MemoryResponseStore(Date.now, 50_000);
    let transcript: StoredResponse['transcript'] = [];
    let refusedAt = -1;
    for (let turn = 0; turn < 40; turn++) {
      transcript = [...transcript, { role: 'user', content: `turn ${turn} ${'q'.repeat(2_000)}` }];
      try {
        await store.put('alice', `t${turn}`, { response: { id: `t${turn}` }, transcript }, 3_600_000);
      } catch (error) {
        expect(error).toMatchObject({ code: 'KVT_ERR_RESPONSE_TOO_LARGE' });
        refusedAt = turn;
        break;
      }
      expect(store.heldBytes).toBeLessThanOrEqual(50_000);
    }
    expect(refusedAt).toBeGreaterThan(15);
    expect(refusedAt).toBeLessThan(30);
  });

  it('the default bound: 48 one-MiB records leave at most 32 MiB held (a soak filled the heap by count alone)', async () => {
    const store = new MemoryResponseStore();
    const text = 'z'.repeat(1 << 20);
    for (let i = 0; i < 48; i++) await store.put('alice', `r${i}`, record(`${i}${text}`), 3_600_000);
    expect(store.heldBytes).toBeLessThanOrEqual(32 * 1024 * 1024);
    expect(await store.get('alice', 'r0')).toBeUndefined();
    expect(await store.get('alice', 'r47')).toBeDefined();
  });

  it('records past their TTL are dropped as new ones arrive, not only when read', async () => {
    let now = 1_000;
    const store = new MemoryResponseStore(() => now);
    for (let i = 0; i < 10; i++) await store.put('alice', `old${i}`, record('a'), 500);
    now += 1_000;
    await store.put('alice', 'new', record('b'), 500);
    expect(store.size).toBe(1);
  });
});

describe('RedisResponseStore', () => {
  let redis: RedisServer;
  let probe: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    probe = new Redis(redis.url);
  }, 30_000);

  afterAll(async () => {
    probe?.disconnect();
    await redis?.stop();
  });

  it('two API processes share records; the key carries the TTL; tenants are apart', async () => {
    const log = () => undefined;
    const one = new RedisResponseStore(redis.url, log);
    const two = new RedisResponseStore(redis.url, log);
    try {
      await one.put('alice', 'resp_x', record('shared'), 60_000);
      expect(await two.get('alice', 'resp_x')).toEqual(record('shared'));
      expect(await two.get('bob', 'resp_x')).toBeUndefined();
      const keys = await probe.keys('kvtier:resp:*');
      expect(keys).toHaveLength(1);
      const ttl = await probe.pttl(keys[0]);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60_000);
      expect(await two.delete('bob', 'resp_x')).toBe(false);
      // A cancel asked through one process is what the other (running it) sees; a delete ends the run too.
      expect(await one.control('alice', 'resp_x')).toBe('run');
      await two.requestCancel('alice', 'resp_x', 60_000);
      expect(await one.control('alice', 'resp_x')).toBe('cancel');
      expect(await one.control('bob', 'resp_x')).toBe('deleted');
      expect(await two.delete('alice', 'resp_x')).toBe(true);
      expect(await one.get('alice', 'resp_x')).toBeUndefined();
      expect(await one.control('alice', 'resp_x')).toBe('deleted');
    } finally {
      await one.close();
      await two.close();
    }
  });

  it('a record past the one-record bound is refused and nothing is written to Redis', async () => {
    const store = new RedisResponseStore(redis.url, () => undefined, 10_000);
    try {
      await expect(store.put('carol', 'resp_big', record('y'.repeat(20_000)), 60_000)).rejects.toMatchObject({ code: 'KVT_ERR_RESPONSE_TOO_LARGE', param: 'store' });
      expect(await probe.keys('kvtier:resp:carol:*')).toEqual([]);
      await store.put('carol', 'resp_small', record('y'.repeat(1_000)), 60_000);
      expect(await store.get('carol', 'resp_small')).toEqual(record('y'.repeat(1_000)));
    } finally {
      await store.close();
    }
  });
});
