/**
 * A fixture a test file's tests share (a server, a Redis, a cluster, engines): started once before
 * them and stopped after them, so each file does not repeat the beforeAll/afterAll pair.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';

import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { draftPair } from '../inference-core/engine-fixtures.ts';
import { startRedis, type RedisServer } from './redis-server.ts';

/**
 * Starts `start()` before the file's first test and `stop` on what it returned after the last one
 * (nothing to stop when starting failed). The returned function gives the running fixture and
 * throws when called before it started, so a test cannot run on a half-made one.
 */
export function suiteFixture<T>(start: () => Promise<T> | T, stop: (fixture: T) => unknown, timeoutMs?: number): () => T {
  let fixture: { value: T } | undefined;
  beforeAll(async () => {
    fixture = { value: await start() };
  }, timeoutMs);
  afterAll(async () => {
    if (fixture) await stop(fixture.value);
  });
  return () => {
    if (!fixture) throw new Error('suiteFixture: used before its beforeAll finished');
    return fixture.value;
  };
}

export interface DraftPairSuite {
  target: LoadedEngine;
  draft: LoadedEngine;
  /** The target's end-of-generation ids. */
  stops: number[];
}

/** draftPair() loaded before the file's tests (handed to `loaded`) and destroyed after them. */
export function draftPairForSuite(loaded: (pair: DraftPairSuite) => void): void {
  let pair: Omit<DraftPairSuite, 'stops'> | undefined;
  beforeAll(async () => {
    pair = await draftPair();
    loaded({ ...pair, stops: [...pair.target.tokenizer.eogIds] });
  }, 120_000);
  afterAll(() => {
    pair?.draft.destroy();
    pair?.target.destroy();
  });
}

/** A redis-server and one client on it, started before the file's tests (handed to `started`) and gone after them. */
export function redisForSuite(started: (redis: RedisServer, client: Redis) => void): void {
  let redis: RedisServer | undefined;
  let client: Redis | undefined;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url);
    started(redis, client);
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });
}
