/**
 * The reply memory shared through Redis (src/serve/redis-reply-memory.ts), on a real redis-server:
 * a reply one API process generated is spliced by another; tenants stay apart; every key has the
 * reply TTL; a Redis that is gone leaves replies to be re-encoded, without an error.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ReplyMemory } from '../../../src/recipe/index.ts';
import { REPLY_TTL_MS, replyKey } from '../../../src/recipe/index.ts';
import { RedisReplyMemory } from '../../../src/serve/redis-reply-memory.ts';
import { startRedis, type RedisServer } from '../../helpers/redis-server.ts';

let redis: RedisServer;
const quiet = () => undefined;

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  await redis?.stop();
});

describe('ReplyMemory over Redis', () => {
  it('a reply shared by one process is recalled by another with the ids sampled, for its tenant only', async () => {
    const a = new ReplyMemory(undefined, new RedisReplyMemory(redis.url, quiet));
    const b = new ReplyMemory(undefined, new RedisReplyMemory(redis.url, quiet));
    const ids = [5, 70_000, 4_000_000_000, 0, 17];
    await a.share('alice', [{ text: 'the build is red', ids }]);
    expect(b.recall('alice', 'the build is red')).toBeUndefined();
    await b.load('alice', ['the build is red', 'never generated']);
    expect(Array.from(b.recall('alice', 'the build is red')!)).toEqual(ids);
    expect(b.recall('alice', 'never generated')).toBeUndefined();
    await b.load('bob', ['the build is red']);
    expect(b.recall('bob', 'the build is red')).toBeUndefined();
    await a.close();
    await b.close();
  });

  it('a read another process sends right after a share finds the ids, every time: share resolves once Redis answered the SET', async () => {
    // Resolving as soon as the SET was written, without its answer (~0.4 ms less per cluster request), lost this
    // race on 28 of these 3,000 turns (bench/RESULTS.md, "e2e overhead, fifth session"): a read on another
    // connection can be served before a SET whose bytes reached Redis first.
    const a = new ReplyMemory(undefined, new RedisReplyMemory(redis.url, quiet));
    const b = new ReplyMemory(undefined, new RedisReplyMemory(redis.url, quiet));
    // Both connections ready (a first call waits for its connection), as in a serving API process.
    await a.load('alice', ['warm-up']);
    await b.load('alice', ['warm-up']);
    const missed: number[] = [];
    for (let turn = 0; turn < 3000; turn++) {
      await a.share('alice', [{ text: `reply ${turn}`, ids: [turn, turn + 1, 4_000_000_000] }]);
      await b.load('alice', [`reply ${turn}`]);
      if (b.recall('alice', `reply ${turn}`) === undefined) missed.push(turn);
    }
    expect(missed).toEqual([]);
    await a.close();
    await b.close();
  });

  it('a shared reply lives REPLY_TTL_MS, renewed when read', async () => {
    const memory = new ReplyMemory(undefined, new RedisReplyMemory(redis.url, quiet));
    await memory.share('alice', [{ text: 'renewed', ids: [1, 2, 3] }]);
    const probe = new Redis(redis.url);
    const key = replyKey('alice', 'renewed');
    const written = await probe.pttl(key);
    expect(written).toBeGreaterThan(0);
    expect(written).toBeLessThanOrEqual(REPLY_TTL_MS);
    await probe.pexpire(key, 5_000);
    const reader = new ReplyMemory(undefined, new RedisReplyMemory(redis.url, quiet));
    await reader.load('alice', ['renewed']);
    expect(await probe.pttl(key)).toBeGreaterThan(5_000);
    probe.disconnect();
    await memory.close();
    await reader.close();
  });

  it('with Redis gone, share and load resolve: the reply is remembered locally and another process re-encodes it', async () => {
    const gone = await startRedis();
    const faults: string[] = [];
    const shared = new RedisReplyMemory(gone.url, (_level, message) => faults.push(message));
    const a = new ReplyMemory(undefined, shared);
    const b = new ReplyMemory(undefined, new RedisReplyMemory(gone.url, quiet));
    await gone.stop();
    await a.share('alice', [{ text: 'while down', ids: [9, 8] }]);
    expect(Array.from(a.recall('alice', 'while down')!)).toEqual([9, 8]);
    await b.load('alice', ['while down']);
    expect(b.recall('alice', 'while down')).toBeUndefined();
    expect(shared.faults).toBeGreaterThan(0);
    expect(faults.some((line) => line.includes('reply memory save skipped'))).toBe(true);
    await a.close();
    await b.close();
  });
});
