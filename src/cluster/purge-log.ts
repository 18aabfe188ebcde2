/**
 * Cluster purges: every node drops what an operator purged, and says so.
 *
 *   API (kvtier purge)                         each worker
 *   ─ appendPurge: gen = INCR, RPUSH entry ─┐
 *   ─ PUBLISH kvtier:purge gen ─────────────┼──▶ PurgeFollower.catchUp(): every logged entry with gen > applied
 *                                           │      → its own index, hot cache, recent payloads, retained sequences
 *   ◀── heartbeat key says appliedGen ≥ gen ─┘      (also on every heartbeat: a missed message costs ≤ 2 s)
 *
 * The log keeps the last 1000 purges, so a worker that was stopped during a
 * purge applies it when it starts (its index on disk still lists the purged
 * blocks). An entry applies to blocks created up to its `at` only, so a late
 * application never removes blocks written since.
 */
import { keysOnEveryPrimary, type RedisClient as Redis } from '../kvtier/index.ts';

// One hash tag: the append script writes both (one slot on a Redis Cluster).
export const PURGE_LOG_KEY = 'kvtier:{purge}:log';
export const PURGE_GEN_KEY = 'kvtier:{purge}:gen';
export const PURGE_CHANNEL = 'kvtier:purge';
const KEEP = 1000;

export interface PurgeFilterShape {
  tenant?: string;
  trafficClass?: string;
  olderThanMs?: number;
  all?: boolean;
}

export interface LoggedPurge {
  gen: number;
  /** When the operator asked (ms since the epoch). */
  at: number;
  filter: PurgeFilterShape;
}

/** KEYS: gen counter, log list. ARGV: entry JSON without gen, entries kept. Returns the new gen. */
const APPEND_SCRIPT = `
local gen = redis.call('INCR', KEYS[1])
local entry = cjson.decode(ARGV[1])
entry.gen = gen
redis.call('RPUSH', KEYS[2], cjson.encode(entry))
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
return gen
`;

/** Logs a purge for every node; returns its generation. */
export async function appendPurge(redis: Redis, filter: PurgeFilterShape, at: number): Promise<number> {
  const gen = await redis.eval(APPEND_SCRIPT, 2, PURGE_GEN_KEY, PURGE_LOG_KEY, JSON.stringify({ at, filter }), KEEP);
  return Number(gen);
}

export async function purgeGeneration(redis: Redis): Promise<number> {
  return Number((await redis.get(PURGE_GEN_KEY)) ?? 0);
}

/** Logged purges newer than `gen`, oldest first. */
export async function purgesAfter(redis: Redis, gen: number): Promise<LoggedPurge[]> {
  const entries = (await redis.lrange(PURGE_LOG_KEY, 0, -1)).map((text) => JSON.parse(text) as LoggedPurge);
  return entries.filter((entry) => entry.gen > gen).sort((a, b) => a.gen - b.gen);
}

export interface PurgeOutcome {
  removedBlocks: number;
  removedBytes: number;
}

/**
 * A node's side: applies logged purges it has not applied yet, one pass at a
 * time, and remembers the outcome of the last few (reported in its heartbeat).
 */
export class PurgeFollower {
  private applied = 0;
  private running: Promise<void> | null = null;
  readonly outcomes = new Map<number, PurgeOutcome>();

  constructor(
    private readonly redis: Redis,
    private readonly apply: (purge: LoggedPurge) => Promise<PurgeOutcome>,
  ) {}

  get appliedGen(): number {
    return this.applied;
  }

  /** Applies what is new (joins a pass in progress, then checks again). Throws if one fails; it is retried next time. */
  async catchUp(): Promise<void> {
    while (this.running) await this.running.catch(() => undefined);
    this.running = this.pass();
    try {
      await this.running;
    } finally {
      this.running = null;
    }
  }

  private async pass(): Promise<void> {
    if ((await purgeGeneration(this.redis)) <= this.applied) return;
    for (const purge of await purgesAfter(this.redis, this.applied)) {
      this.outcomes.set(purge.gen, await this.apply(purge));
      this.applied = purge.gen;
      for (const gen of this.outcomes.keys()) if (this.outcomes.size > 16) this.outcomes.delete(gen);
    }
  }
}

export interface PurgeAck {
  workerId: string;
  /** Undefined when the worker has not applied the purge (yet). */
  outcome?: PurgeOutcome;
}

/**
 * Waits until every live worker (heartbeat keys under `statsPrefix`) reports
 * `purgeGen ≥ gen`, or `timeoutMs`; returns each worker's answer.
 */
export async function awaitPurgeAcks(redis: Redis, statsPrefix: string, gen: number, timeoutMs: number, onAck: (acks: PurgeAck[]) => void = () => undefined): Promise<PurgeAck[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const keys = await keysOnEveryPrimary(redis, `${statsPrefix}*`);
    const values = keys.length > 0 ? await redis.mget(keys) : [];
    const acks: PurgeAck[] = values
      .filter((v): v is string => v !== null)
      .map((v) => JSON.parse(v) as { workerId: string; purgeGen?: number; purges?: Record<string, PurgeOutcome> })
      .map((w) => ({ workerId: w.workerId, outcome: (w.purgeGen ?? 0) >= gen ? (w.purges?.[gen] ?? { removedBlocks: 0, removedBytes: 0 }) : undefined }));
    onAck(acks);
    if (acks.every((ack) => ack.outcome !== undefined) || Date.now() > deadline) return acks;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
