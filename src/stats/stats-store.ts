/**
 * Where the cluster's cumulative counters and their history live, so the
 * dashboard's series cover every API process and worker and survive restarts.
 *
 *   each process, every few seconds:  add(deltas since its last flush, gauges)
 *        totals  += deltas                       (monotone, summed over processes)
 *        gauges   = latest values                (stored bytes/blocks: last writer wins)
 *        history[floor(now / step)] = totals ∪ gauges   (one point per step; a later
 *                                                         writer in the same step replaces it)
 *
 * Counters named `tenant:<id>:<what>` are kept in the totals only (a point
 * holding every tenant would grow without bound); gauges named `t:<id>…`
 * likewise. A process that restarts starts its own counting from zero and
 * only ever adds deltas, so totals never go back.
 *
 * Embedded mode: an LMDB environment under `<dataDir>/stats`. REDIS_URL set:
 * one Lua script per flush, atomic against every other process. Its three keys
 * (`<prefix>{stats}:counters|gauges|history`) share one hash tag, so on a Redis
 * Cluster the script touches one slot.
 */
import { mkdirSync } from 'node:fs';

import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { open as openLmdb, type Database, type RootDatabase } from 'lmdb';

export interface StatsPoint {
  /** Start of the step, ms since the epoch. */
  t: number;
  counters: Record<string, number>;
  gauges: Record<string, number>;
}

export interface StatsStore {
  readonly kind: 'lmdb' | 'redis';
  readonly stepMs: number;
  add(deltas: Record<string, number>, gauges: Record<string, number>, now: number): Promise<void>;
  totals(): Promise<{ counters: Record<string, number>; gauges: Record<string, number> }>;
  /** Points with t in [since, until], oldest first. */
  history(since: number, until: number): Promise<StatsPoint[]>;
  close(): Promise<void>;
}

/** Makes a Redis client for an address (a Redis Cluster address needs one: src/kvtier/redis-connection.ts). */
export type RedisConnect = (url: string, options: RedisOptions) => Redis | Cluster;

export interface StatsStoreOptions {
  /** One history point per step; default 5 s. */
  stepMs?: number;
  /** History older than this is dropped; default 48 h. */
  retentionMs?: number;
}

const TENANT_COUNTER = 'tenant:';
const TENANT_GAUGE = 't:';

function inHistory(name: string, prefix: string): boolean {
  return !name.startsWith(prefix);
}

export class LmdbStatsStore implements StatsStore {
  readonly kind = 'lmdb';
  private constructor(
    private readonly env: RootDatabase,
    private readonly counters: Database<number, string>,
    private readonly gauges: Database<number, string>,
    private readonly points: Database<StatsPoint, number>,
    readonly stepMs: number,
    private readonly retentionMs: number,
  ) {}

  static open(options: StatsStoreOptions & { path: string }): LmdbStatsStore {
    mkdirSync(options.path, { recursive: true });
    const env = openLmdb({ path: options.path, maxDbs: 4 });
    return new LmdbStatsStore(
      env,
      env.openDB<number, string>({ name: 'counters' }),
      env.openDB<number, string>({ name: 'gauges' }),
      env.openDB<StatsPoint, number>({ name: 'history' }),
      options.stepMs ?? 5000,
      options.retentionMs ?? 48 * 3_600_000,
    );
  }

  async add(deltas: Record<string, number>, gauges: Record<string, number>, now: number): Promise<void> {
    const t = Math.floor(now / this.stepMs) * this.stepMs;
    await this.counters.transaction(() => {
      for (const [name, delta] of Object.entries(deltas)) if (delta !== 0) this.counters.put(name, (this.counters.get(name) ?? 0) + delta);
      for (const [name, value] of Object.entries(gauges)) this.gauges.put(name, value);
      // A new store counted from zero: that zero is the left edge of its first interval,
      // so the traffic of the first step is charted instead of becoming the baseline.
      if (this.points.getKeysCount({ limit: 1 }) === 0) this.points.put(t - this.stepMs, { t: t - this.stepMs, counters: {}, gauges: {} });
      const point: StatsPoint = { t, counters: {}, gauges: {} };
      for (const { key, value } of this.counters.getRange()) if (inHistory(key, TENANT_COUNTER)) point.counters[key] = value;
      for (const { key, value } of this.gauges.getRange()) if (inHistory(key, TENANT_GAUGE)) point.gauges[key] = value;
      this.points.put(t, point);
      for (const key of this.points.getKeys({ end: now - this.retentionMs })) this.points.remove(key);
    });
  }

  async totals(): Promise<{ counters: Record<string, number>; gauges: Record<string, number> }> {
    const counters: Record<string, number> = {};
    const gauges: Record<string, number> = {};
    for (const { key, value } of this.counters.getRange()) counters[key] = value;
    for (const { key, value } of this.gauges.getRange()) gauges[key] = value;
    return { counters, gauges };
  }

  async history(since: number, until: number): Promise<StatsPoint[]> {
    const out: StatsPoint[] = [];
    for (const { value } of this.points.getRange({ start: since, end: until + 1 })) out.push(value);
    return out;
  }

  async close(): Promise<void> {
    await this.env.close();
  }
}

/**
 * KEYS: counters hash, gauges hash, history zset (score = t, member = JSON point).
 * ARGV: t, cutoff, deltas JSON, gauges JSON, step ms.
 */
const ADD_SCRIPT = `
local deltas = cjson.decode(ARGV[3])
for name, delta in pairs(deltas) do redis.call('HINCRBYFLOAT', KEYS[1], name, delta) end
local gauges = cjson.decode(ARGV[4])
for name, value in pairs(gauges) do redis.call('HSET', KEYS[2], name, value) end
local counters = {}
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  if string.sub(flat[i], 1, ${TENANT_COUNTER.length}) ~= '${TENANT_COUNTER}' then counters[flat[i]] = tonumber(flat[i + 1]) end
end
local gaugeValues = {}
flat = redis.call('HGETALL', KEYS[2])
for i = 1, #flat, 2 do
  if string.sub(flat[i], 1, ${TENANT_GAUGE.length}) ~= '${TENANT_GAUGE}' then gaugeValues[flat[i]] = tonumber(flat[i + 1]) end
end
local t = tonumber(ARGV[1])
-- A new history counted from zero: that zero is the left edge of its first interval.
if redis.call('ZCARD', KEYS[3]) == 0 then
  redis.call('ZADD', KEYS[3], t - tonumber(ARGV[5]), '{"t":' .. (t - tonumber(ARGV[5])) .. ',"counters":{},"gauges":{}}')
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], t, t)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[2])
-- cjson writes an empty table as {} and numbers with 14 significant digits.
local point = '{"t":' .. ARGV[1] .. ',"counters":' .. cjson.encode(counters) .. ',"gauges":' .. cjson.encode(gaugeValues) .. '}'
redis.call('ZADD', KEYS[3], t, point)
return 1
`;

export class RedisStatsStore implements StatsStore {
  readonly kind = 'redis';
  private constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    readonly stepMs: number,
    private readonly retentionMs: number,
  ) {}

  static async open(options: StatsStoreOptions & { url: string; keyPrefix?: string; connect?: RedisConnect }): Promise<RedisStatsStore> {
    const clientOptions = { lazyConnect: true, connectTimeout: 5000, maxRetriesPerRequest: 3 };
    let redis: Redis | Cluster;
    if (options.connect !== undefined) redis = options.connect(options.url, clientOptions);
    else if (/^redis(s)?:\/\//.test(options.url)) {
      // ioredis is loaded by the first Redis-backed open (the embedded default never needs it).
      const { Redis: RedisClient } = await import('ioredis');
      redis = new RedisClient(options.url, clientOptions);
    } else throw new Error(`the stats store takes a redis:// URL, or a connect function for ${options.url} (src/kvtier/redis-connection.ts createRedisClient)`);
    redis.on('error', () => undefined); // connection errors surface as rejected commands, counted by the recorder
    await redis.connect();
    redis.defineCommand('kvtierStatsAdd', { numberOfKeys: 3, lua: ADD_SCRIPT });
    return new RedisStatsStore(redis, `${options.keyPrefix ?? 'kvtier:stats:'}{stats}:`, options.stepMs ?? 5000, options.retentionMs ?? 48 * 3_600_000);
  }

  async add(deltas: Record<string, number>, gauges: Record<string, number>, now: number): Promise<void> {
    const t = Math.floor(now / this.stepMs) * this.stepMs;
    const nonZero = Object.fromEntries(Object.entries(deltas).filter(([, v]) => v !== 0));
    // An empty Lua table encodes as [] in cjson.decode → pairs() over it is still fine.
    await (this.redis as unknown as { kvtierStatsAdd: (...args: (string | number)[]) => Promise<unknown> }).kvtierStatsAdd(
      `${this.prefix}counters`,
      `${this.prefix}gauges`,
      `${this.prefix}history`,
      t,
      now - this.retentionMs,
      JSON.stringify(nonZero),
      JSON.stringify(gauges),
      this.stepMs,
    );
  }

  async totals(): Promise<{ counters: Record<string, number>; gauges: Record<string, number> }> {
    const [counters, gauges] = await Promise.all([this.redis.hgetall(`${this.prefix}counters`), this.redis.hgetall(`${this.prefix}gauges`)]);
    return { counters: numbers(counters), gauges: numbers(gauges) };
  }

  async history(since: number, until: number): Promise<StatsPoint[]> {
    const members = await this.redis.zrangebyscore(`${this.prefix}history`, since, until);
    return members.map((member) => JSON.parse(member) as StatsPoint);
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

function numbers(record: Record<string, string>): Record<string, number> {
  return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, Number(v)]));
}
