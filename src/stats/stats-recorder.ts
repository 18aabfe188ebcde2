/**
 * One process's share of the cluster counters. It keeps its own cumulative
 * counts in memory (fed per request, and from the cache tier's own stats),
 * and every `flushMs` adds what grew since the last flush to the shared
 * StatsStore. Only deltas travel, so several processes and restarts add up.
 *
 *   request ends ──record()──┐
 *   tier.stats() ──sample()──┼──▶ local cumulative ──(every flushMs: − last flushed)──▶ store.add
 *   engine up?  ──uptime─────┘
 */
import { C, tenantCounter, bytesGauge, blocksGauge, gapCounter } from './counter-names.ts';
import type { StatsStore } from './stats-store.ts';

export interface RequestUsage {
  tenant: string;
  trafficClass: string;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  workerMs: number;
}

/**
 * The figures of KvTier.stats() / usage() the recorder follows (cumulative
 * since that tier opened). Fields a source does not report count as absent,
 * not as zero.
 */
export interface TierSample {
  cache: {
    bytesRead?: number;
    bytesWritten?: number;
    blocksWritten?: number;
    gc?: { runs?: number; expired?: { blocks?: number; bytes?: number }; evicted?: { blocks?: number; bytes?: number } };
    errors?: Record<string, number>;
    /** KvTierStats.reuseGaps: cumulative hits per gap bucket and class (the what-if's histogram). */
    reuseGaps?: { edgesMs: readonly number[]; byClass: Record<string, { tokens: number[]; blocks: number[]; gapMs: number[] }> };
  } | null;
  usage?: { bytes: Record<string, number>; blocks: Record<string, number> };
}

/** Several tiers (BullMQ workers), each followed on its own: `id` keeps their cumulative counts apart. */
export interface TierSources {
  sources: Array<{ id: string; sample: TierSample }>;
  /** Engines up now (their wall time counts as engine-hours); default: engineUp(). */
  enginesUp?: number;
}

export interface StatsRecorderOptions {
  store: StatsStore;
  /** Default 5 s. */
  flushMs?: number;
  /** The tier's stats, wherever it lives (engine thread, workers). Called once per flush. */
  sampleTier?: () => Promise<TierSample | TierSources | null>;
  /** Whether this process hosts an engine that is up now (its wall time counts as engine-hours). */
  engineUp?: () => boolean;
  now?: () => number;
  onError?: (error: unknown, what: string) => void;
}

export class StatsRecorder {
  private readonly local = new Map<string, number>();
  private readonly flushed = new Map<string, number>();
  private gauges: Record<string, number> = {};
  /** Last cumulative figures seen from the tier (to turn them into deltas, and to notice a tier restart). */
  private tierSeen = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private lastUptimeAt: number;
  private flushing: Promise<void> | null = null;
  private readonly now: () => number;
  readonly errors = { flush: 0, sample: 0 };

  constructor(private readonly options: StatsRecorderOptions) {
    this.now = options.now ?? Date.now;
    this.lastUptimeAt = this.now();
  }

  start(): this {
    this.timer = setInterval(() => void this.flush(), this.options.flushMs ?? 5000);
    this.timer.unref();
    return this;
  }

  get store(): StatsStore {
    return this.options.store;
  }

  record(usage: RequestUsage): void {
    const miss = Math.max(0, usage.promptTokens - usage.cachedTokens);
    this.bump(C.requests, 1);
    if (usage.cachedTokens > 0) this.bump(C.requestsWithHit, 1);
    this.bump(C.promptTokens, usage.promptTokens);
    this.bump(C.hitTokens, usage.cachedTokens);
    this.bump(C.missTokens, miss);
    this.bump(C.outputTokens, usage.completionTokens);
    this.bump(C.engineBusyMs, usage.workerMs);
    this.bump(tenantCounter(usage.tenant, 'requests'), 1);
    this.bump(tenantCounter(usage.tenant, 'hitTokens'), usage.cachedTokens);
    this.bump(tenantCounter(usage.tenant, 'missTokens'), miss);
    this.bump(tenantCounter(usage.tenant, 'outputTokens'), usage.completionTokens);
  }

  /** Counts done by an admin operation of this process (purge). */
  bump(name: string, delta: number): void {
    if (!Number.isFinite(delta) || delta === 0) return;
    this.local.set(name, (this.local.get(name) ?? 0) + delta);
  }

  /**
   * Follows tiers' cumulative stats: the growth since the last sample of the
   * same source is counted (a restarted tier counts from 0). Stored bytes and
   * blocks are the sum over the sources that report them.
   */
  followTier(sample: TierSample | TierSources): void {
    const sources = 'sources' in sample ? sample.sources : [{ id: 'local', sample }];
    let gauges: Record<string, number> | null = null;
    for (const { id, sample: one } of sources) {
      const cache = one.cache;
      if (cache) {
        const figures: Record<string, number | undefined> = {
          [C.bytesRead]: cache.bytesRead,
          [C.bytesWritten]: cache.bytesWritten,
          [C.blocksWritten]: cache.blocksWritten,
          [C.gcRuns]: cache.gc?.runs,
          [C.expiredBlocks]: cache.gc?.expired?.blocks,
          [C.expiredBytes]: cache.gc?.expired?.bytes,
          [C.evictedBlocks]: cache.gc?.evicted?.blocks,
          [C.evictedBytes]: cache.gc?.evicted?.bytes,
          [C.tierErrors]: cache.errors === undefined ? undefined : Object.values(cache.errors).reduce((a, b) => a + b, 0),
        };
        const gaps = cache.reuseGaps;
        if (gaps) {
          for (const [trafficClass, buckets] of Object.entries(gaps.byClass)) {
            for (let b = 0; b < buckets.tokens.length; b++) {
              const edge = b < gaps.edgesMs.length ? gaps.edgesMs[b] : null;
              figures[gapCounter(trafficClass, edge, 'tokens')] = buckets.tokens[b];
              figures[gapCounter(trafficClass, edge, 'blocks')] = buckets.blocks[b];
              figures[gapCounter(trafficClass, edge, 'ms')] = buckets.gapMs[b];
            }
          }
        }
        const known = Object.entries(figures).filter((entry): entry is [string, number] => Number.isFinite(entry[1]));
        const restarted = known.some(([name, value]) => value < (this.tierSeen.get(`${id}|${name}`) ?? 0));
        for (const [name, value] of known) {
          const seen = restarted ? 0 : (this.tierSeen.get(`${id}|${name}`) ?? 0);
          this.bump(name, value - seen);
          this.tierSeen.set(`${id}|${name}`, value);
        }
      }
      if (one.usage) {
        gauges ??= { [bytesGauge('g')]: 0, [blocksGauge('g')]: 0 };
        for (const [tag, bytes] of Object.entries(one.usage.bytes)) gauges[bytesGauge(tag)] = (gauges[bytesGauge(tag)] ?? 0) + bytes;
        for (const [tag, blocks] of Object.entries(one.usage.blocks)) gauges[blocksGauge(tag)] = (gauges[blocksGauge(tag)] ?? 0) + blocks;
      }
    }
    if (gauges) {
      // A scope that emptied must read 0, not its last non-zero value.
      for (const name of Object.keys(this.gauges)) if (!(name in gauges)) gauges[name] = 0;
      this.gauges = gauges;
    }
    if ('sources' in sample && sample.enginesUp !== undefined) this.enginesUpNow = sample.enginesUp;
  }

  private enginesUpNow: number | null = null;

  /** Samples the tier, then adds this process's growth since the last flush to the store. One flush at a time. */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    this.flushing = this.flushOnce().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async flushOnce(): Promise<void> {
    this.enginesUpNow = null;
    if (this.options.sampleTier) {
      try {
        const sample = await this.options.sampleTier();
        if (sample) this.followTier(sample);
      } catch (error) {
        this.errors.sample++;
        this.options.onError?.(error, 'stats: sampling the cache tier failed; its figures wait for the next flush');
      }
    }
    const now = this.now();
    const engines = this.enginesUpNow ?? (this.options.engineUp?.() ? 1 : 0);
    this.bump(C.engineUpMs, engines * (now - this.lastUptimeAt));
    this.lastUptimeAt = now;
    const deltas: Record<string, number> = {};
    const sent = new Map<string, number>();
    for (const [name, value] of this.local) {
      const delta = value - (this.flushed.get(name) ?? 0);
      if (delta !== 0) deltas[name] = delta;
      sent.set(name, value);
    }
    try {
      await this.options.store.add(deltas, this.gauges, now);
      for (const [name, value] of sent) this.flushed.set(name, value);
    } catch (error) {
      // Not marked as flushed: the next flush sends these deltas again.
      this.errors.flush++;
      this.options.onError?.(error, 'stats: writing the counters failed; they are sent with the next flush');
    }
  }

  /** Final flush, then stops the timer. The store stays open (its owner closes it). */
  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }
}
