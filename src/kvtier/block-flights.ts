/**
 * The one registry of prefix blocks in flight on this node, from "being
 * computed" until "written" (single flight). The worker's scheduler claims
 * and asks it (src/scheduler/single-flight.ts); the tier's store, lookup and
 * load ask it (tier-store.ts, tier-lookup.ts, tier-load.ts). Keyed by the
 * block's chained key (hex), so a block names its whole prefix.
 *
 * ```
 *            claim(owner)              store() hands it over          the write lands
 *  absent ───────────────▶ computing ───────────────────────▶ writing ──────────────▶ written
 *    │                     owner: the      (tick; bytes held       (bytes: the       (tick only, until no
 *    │                     earliest        when the tier           encoded block)    lookup that started
 *    │                     unfinished      queued them)                              before it is in flight)
 *    │                     claimant                                                        │
 *    └─ store() of a block nobody claimed ──▶ writing ──▶ absent        prune(…) ──▶ absent ◀┘
 * ```
 *
 * A block being written is in use like a stored one: the store call's time is
 * its last use, a lookup hit on it (`useWhileWriting`) or a second store of
 * it (`renewWhileWriting`) moves that to now and reports the gap, and it
 * expires after the TTL it was stored under. The tier's write records the
 * latest of these as the block's last use (tier-store.ts), so a block read
 * while its write is in flight lives as long as one read after.
 *
 * Invariant: a key is readable from this node while it is `writing` here
 * or live in the tier's index — never in between: the bytes are dropped
 * only once the index entry is committed (or the write failed, a miss).
 * A key has an owner only while that owner is unfinished; a no-store
 * request claims nothing and stores nothing, so it is never served. Memory:
 * claimed keys go when their owner ends (`release` + `prune`); bytes are
 * bounded by the tier's write-behind budget. Owners are opaque here
 * (src/kvtier knows no engine sequences): the scheduler gives its requests.
 *
 * Reads: a blob read from storage by several loads at once is read once
 * (`readOnce`: the loads that start while the read is in flight share its
 * result). Unit tails use it (tier-units.ts): concurrent requests on one unit
 * share a tail, then the hot tier serves it.
 */
interface Flight {
  /** The earliest unfinished claimant computing this block (null: none). */
  owner: object | null;
  /** Tick when the block was handed to the tier's store (0: not yet, or no lookup needs it any more). */
  storedTick: number;
  /** The encoded block while its write is in flight. */
  bytes: Uint8Array | undefined;
  /** `bytes` were handed to a reader (bytesOf): someone may hold views into them after the write. */
  lent: boolean;
  /** While writing: the block's last use (its store call, or a later hit or store), ms; -1 when unknown. */
  lastUseAt: number;
  /** While writing: the TTL it was stored under, ms (expired for a lookup once lastUseAt + ttlMs <= now). */
  ttlMs: number;
}

export class BlockFlights {
  private readonly flights = new Map<string, Flight>();
  private readonly reads = new Map<string, Promise<unknown>>();
  private ticks = 0;

  /** `read()` of `key`, unless one is in flight: then its result, shared. */
  readOnce<T>(key: string, read: () => Promise<T>): Promise<T> {
    const pending = this.reads.get(key);
    if (pending !== undefined) return pending as Promise<T>;
    const started = read().finally(() => this.reads.delete(key));
    this.reads.set(key, started);
    return started;
  }

  /** The current store tick: a lookup that starts now sees every block handed over up to it. */
  get tick(): number {
    return this.ticks;
  }

  /** Keys held for single flight (an owner, or a tick a lookup may need); blocks only being written are not counted. */
  get claimed(): number {
    let n = 0;
    for (const flight of this.flights.values()) if (flight.owner !== null || flight.storedTick > 0) n++;
    return n;
  }

  /** `owner` computes `key` unless an earlier unfinished claimant does. */
  claim(key: string, owner: object): void {
    const flight = this.flights.get(key);
    if (!flight) this.flights.set(key, { owner, storedTick: 0, bytes: undefined, lent: false, lastUseAt: -1, ttlMs: 0 });
    else flight.owner ??= owner;
  }

  ownerOf(key: string): object | null {
    return this.flights.get(key)?.owner ?? null;
  }

  /** Tick when `key` was last handed to the store (0: never, or forgotten). */
  storedTickOf(key: string): number {
    return this.flights.get(key)?.storedTick ?? 0;
  }

  /** A store call starts handing blocks over: one tick for all of them. */
  nextTick(): number {
    return ++this.ticks;
  }

  /**
   * `key` was handed to the store at `tick`; `bytes` when the tier queued its
   * write (readable until `written`), with `use`: the store call's time and the TTL it is stored under.
   */
  stored(key: string, tick: number, bytes?: Uint8Array, use?: { at: number; ttlMs: number }): void {
    let flight = this.flights.get(key);
    if (flight) flight.storedTick = tick;
    else if (bytes !== undefined) this.flights.set(key, (flight = { owner: null, storedTick: 0, bytes, lent: false, lastUseAt: -1, ttlMs: 0 }));
    if (flight !== undefined && bytes !== undefined) {
      flight.bytes = bytes;
      flight.lent = false;
      flight.lastUseAt = use?.at ?? -1;
      flight.ttlMs = use?.ttlMs ?? Number.POSITIVE_INFINITY;
    }
  }

  /**
   * A lookup at `now` hits `key` while its write is in flight: returns the
   * block's previous use (the what-if's gap is `now` minus it) and renews it
   * to `now`; -1 when it is not being written here or its TTL has run out.
   */
  useWhileWriting(key: string, now: number): number {
    const flight = this.flights.get(key);
    if (flight?.bytes === undefined) return -1;
    const previous = flight.lastUseAt;
    if (previous >= 0 && previous + flight.ttlMs <= now) return -1;
    flight.lastUseAt = Math.max(previous, now);
    return previous >= 0 ? previous : now;
  }

  /** A store call at `now` hands over `key` again while its write is in flight: a use, like a hit. */
  renewWhileWriting(key: string, now: number): void {
    const flight = this.flights.get(key);
    if (flight?.bytes !== undefined && flight.lastUseAt < now) flight.lastUseAt = now;
  }

  /** While `key` is being written: its last use (store, or a later hit or store); -1 otherwise. */
  lastUseWhileWriting(key: string): number {
    const flight = this.flights.get(key);
    return flight?.bytes !== undefined ? flight.lastUseAt : -1;
  }

  /**
   * The write of `key` ended (its index entry is committed, or it failed): the bytes go. Returns whether they were
   * handed to a reader while in flight (the writer may reuse its buffer only when not: encode-buffer-pool.ts).
   */
  written(key: string): boolean {
    const flight = this.flights.get(key);
    if (!flight) return false;
    const lent = flight.lent;
    flight.lent = false;
    flight.bytes = undefined;
    flight.lastUseAt = -1;
    if (flight.owner === null && flight.storedTick === 0) this.flights.delete(key);
    return lent;
  }

  /** Whether `key`'s encoded block is held while its write is in flight (a lookup counts it as a hit). */
  readable(key: string): boolean {
    return this.flights.get(key)?.bytes !== undefined;
  }

  /** The encoded block of `key` while its write is in flight. */
  bytesOf(key: string): Uint8Array | undefined {
    const flight = this.flights.get(key);
    if (flight?.bytes === undefined) return undefined;
    flight.lent = true;
    return flight.bytes;
  }

  /** `owner` ended: it computes none of `keys` any more. */
  release(owner: object, keys: Iterable<string>): void {
    for (const key of keys) {
      const flight = this.flights.get(key);
      if (flight?.owner === owner) flight.owner = null;
    }
  }

  /** Unowned keys stored at or before `oldestLookupTick` (no lookup in flight started before them) are forgotten, unless still being written. */
  prune(oldestLookupTick: number): void {
    for (const [key, flight] of this.flights) {
      if (flight.owner !== null || flight.storedTick > oldestLookupTick) continue;
      flight.storedTick = 0;
      if (flight.bytes === undefined) this.flights.delete(key);
    }
  }

  /** The tier closes: nothing is in flight any more. */
  clear(): void {
    this.flights.clear();
    this.reads.clear();
  }
}
