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
 * Retention: points of the last `fullResolutionMs` (48 h) are kept at every
 * step; older ones are thinned to the last point of each interval the 7-day
 * view charts (`coarseStepMs`: 42 min at 5 s steps), kept `retentionMs` (8 d).
 * The series is the difference of cumulative points at interval ends, and
 * the point kept for an interval is the last one at or before its end, so the
 * 7-day chart is the same as from every point. Each point is judged once,
 * when it leaves the full-resolution window (no later point of its interval
 * can appear after that), so a flush thins only what crossed since the last.
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

import { seriesIntervalMs } from './overview.ts';

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
  /** History older than this is dropped; default 8 d (the dashboard's 7-day view and its left edge). */
  retentionMs?: number;
  /** History younger than this keeps every step; older is thinned to one point per `coarseStepMs`. Default 48 h. */
  fullResolutionMs?: number;
}

const DAY_MS = 86_400_000;
const DEFAULT_RETENTION_MS = 8 * DAY_MS;
const DEFAULT_FULL_RESOLUTION_MS = 2 * DAY_MS;

/** The interval the dashboard's 7-day view charts at for this step: older history keeps one point per such interval. */
export function coarseStepMs(stepMs: number): number {
  return seriesIntervalMs({ since: 0, until: 7 * DAY_MS, stepMs });
}

/** The end of the coarse interval holding `t` (intervals are (end - coarse, end], ends at multiples of `coarse`, as the chart's). */
function coarseEnd(t: number, coarse: number): number {
  return Math.ceil(t / coarse) * coarse;
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
    private readonly fullResolutionMs: number,
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
      options.retentionMs ?? DEFAULT_RETENTION_MS,
      options.fullResolutionMs ?? DEFAULT_FULL_RESOLUTION_MS,
    );
  }

  async add(deltas: Record<string, number>, gauges: Record<string, number>, now: number): Promise<void> {
    const t = Math.floor(now / this.stepMs) * this.stepMs;
    await this.counters.transaction(() => {
      for (const [name, delta] of Object.entries(deltas)) if (delta !== 0) this.counters.put(name, (this.counters.get(name) ?? 0) + delta);
      for (const [name, value] of Object.entries(gauges)) this.gauges.put(name, value);
      // A new store counted from zero: that zero is the left edge of its first interval,
      // so the traffic of the first step is charted instead of becoming the baseline.
      const newest = [...this.points.getKeys({ reverse: true, limit: 1 })][0];
      if (newest === undefined) this.points.put(t - this.stepMs, { t: t - this.stepMs, counters: {}, gauges: {} });
      const point: StatsPoint = { t, counters: {}, gauges: {} };
      for (const { key, value } of this.counters.getRange()) if (inHistory(key, TENANT_COUNTER)) point.counters[key] = value;
      for (const { key, value } of this.gauges.getRange()) if (inHistory(key, TENANT_GAUGE)) point.gauges[key] = value;
      this.points.put(t, point);
      if (newest !== undefined) this.thin(newest - this.fullResolutionMs, now - this.fullResolutionMs);
      for (const key of this.points.getKeys({ end: now - this.retentionMs })) this.points.remove(key);
    });
  }

  /** Points in [from, cut) that are not the last of their coarse interval are removed (see the file's comment). */
  private thin(from: number, cut: number): void {
    const coarse = coarseStepMs(this.stepMs);
    for (const key of [...this.points.getKeys({ start: from, end: cut })]) {
      const later = this.points.getKeys({ start: key + 1, end: coarseEnd(key, coarse) + 1, limit: 1 });
      if ([...later].length > 0) this.points.remove(key);
    }
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
 * ARGV: t, cutoff, deltas JSON, gauges JSON, step ms, full-resolution ms, coarse step ms, now.
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
local newest = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
-- A new history counted from zero: that zero is the left edge of its first interval.
if #newest == 0 then
  redis.call('ZADD', KEYS[3], t - tonumber(ARGV[5]), '{"t":' .. (t - tonumber(ARGV[5])) .. ',"counters":{},"gauges":{}}')
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], t, t)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[2])
-- cjson writes an empty table as {} and numbers with 14 significant digits.
local point = '{"t":' .. ARGV[1] .. ',"counters":' .. cjson.encode(counters) .. ',"gauges":' .. cjson.encode(gaugeValues) .. '}'
redis.call('ZADD', KEYS[3], t, point)
-- Thinning (see the file's comment): each point that left the full-resolution window since the last flush
-- is removed unless it is the last of its coarse interval.
if #newest > 0 then
  local full = tonumber(ARGV[6])
  local coarse = tonumber(ARGV[7])
  local band = redis.call('ZRANGEBYSCORE', KEYS[3], tonumber(newest[2]) - full, '(' .. (tonumber(ARGV[8]) - full), 'WITHSCORES')
  for i = 1, #band, 2 do
    local at = tonumber(band[i + 1])
    if redis.call('ZCOUNT', KEYS[3], '(' .. at, math.ceil(at / coarse) * coarse) > 0 then redis.call('ZREM', KEYS[3], band[i]) end
  end
end
return 1
`;

export class RedisStatsStore implements StatsStore {
  readonly kind = 'redis';
  private constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    readonly stepMs: number,
    private readonly retentionMs: number,
    private readonly fullResolutionMs: number,
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
    return new RedisStatsStore(redis, `${options.keyPrefix ?? 'kvtier:stats:'}{stats}:`, options.stepMs ?? 5000, options.retentionMs ?? DEFAULT_RETENTION_MS, options.fullResolutionMs ?? DEFAULT_FULL_RESOLUTION_MS);
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
      this.fullResolutionMs,
      coarseStepMs(this.stepMs),
      now,
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
