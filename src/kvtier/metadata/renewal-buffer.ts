/**
 * Coalesces renewals before they reach a plane driver: a key renewed many
 * times between flushes costs one write, at its latest time. Flushes when
 * `maxKeys` distinct keys are buffered or `intervalMs` after the first
 * buffered renewal (wall time: this bounds how stale another node's view of
 * a hit can be, not a retention duration).
 */
export interface PendingRenewal {
  at: number;
  depth: number;
}

export class RenewalBuffer {
  private pending = new Map<string, PendingRenewal>();
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: (batch: Map<string, PendingRenewal>) => Promise<void>,
    private readonly onError: (error: unknown) => void,
    private readonly maxKeys = 8192,
    private readonly intervalMs = 1000,
  ) {}

  get size(): number {
    return this.pending.size;
  }

  add(keys: readonly string[], at: number, depths?: readonly number[]): void {
    for (let i = 0; i < keys.length; i++) {
      const existing = this.pending.get(keys[i]);
      if (existing === undefined) this.pending.set(keys[i], { at, depth: depths?.[i] ?? 0 });
      else if (at > existing.at) existing.at = at;
    }
    if (this.pending.size >= this.maxKeys) void this.flush().catch(this.onError);
    else if (this.timer === undefined && this.pending.size > 0 && this.intervalMs > 0) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.flush().catch(this.onError);
      }, this.intervalMs);
      this.timer.unref();
    }
  }

  /** Writes what is buffered; flushes are serialised so renewals land in order. */
  flush(): Promise<void> {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const batch = this.pending;
    this.pending = new Map();
    const run = this.inFlight.then(() => (batch.size > 0 ? this.write(batch) : undefined));
    this.inFlight = run.catch(() => undefined);
    return run;
  }

  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
