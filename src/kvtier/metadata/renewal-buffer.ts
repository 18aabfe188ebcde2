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
  /** Batches handed to `write` and not yet written (oldest first): still pending to a reader (`pendingAt`). */
  private writing: Map<string, PendingRenewal>[] = [];
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

  /** Whether any renewal is buffered or being written (a reader then asks `pendingAt`). */
  get holding(): boolean {
    return this.pending.size > 0 || this.writing.length > 0;
  }

  /** The latest buffered (or being written) renewal of `key`, or -1: a reader of the plane's records adds it to what it read. */
  pendingAt(key: string): number {
    let at = this.pending.get(key)?.at ?? -1;
    for (const batch of this.writing) at = Math.max(at, batch.get(key)?.at ?? -1);
    return at;
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
    if (batch.size === 0) return this.inFlight;
    this.writing.push(batch);
    const run = this.inFlight.then(() => this.write(batch)).finally(() => {
      this.writing.splice(this.writing.indexOf(batch), 1);
    });
    this.inFlight = run.catch(() => undefined);
    return run;
  }

  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
