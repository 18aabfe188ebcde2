/** One pending block write. `bytes` is what it holds in memory until it finishes. */
export interface WriteJob {
  key: string;
  bytes: number;
  /**
   * The write. It may call `putLanded` once its blob is on storage: its slot
   * goes to the next job then, while it records the block (index, plane) as
   * a job still held (its key and bytes count until it settles).
   */
  run: (putLanded: () => void) => Promise<void>;
}

export type OfferOutcome = 'queued' | 'duplicate' | 'dropped';

/**
 * Bounded write-behind: `offer` never waits. A job is refused ('dropped')
 * when its bytes would push the queued + in-flight total over `maxBytes`, and
 * ('duplicate') when the same key is already queued or being written. Jobs
 * start FIFO with at most `concurrency` puts in flight: a job that reports its
 * put landed gives its slot up while it records the block, so the next puts
 * go to storage while the last ones are committed to the index (they had
 * waited for every commit in turn: idle time on the #29 replay). `drain`
 * waits for whole jobs. `run` must not throw (the caller counts its own
 * failures); a throw is caught and reported to `onUnexpected`.
 */
export class WriteBehindQueue {
  // A started job's slot is cleared at once: its closure holds the block bytes (and its request's payloads).
  private readonly pending: (WriteJob | undefined)[] = [];
  private pendingHead = 0;
  private readonly keys = new Set<string>();
  /** Jobs holding a slot (put not landed yet). */
  private inFlight = 0;
  /** Jobs started and not settled (with or without a slot). */
  private running = 0;
  private heldBytes = 0;
  /** Waiters of `below` (and `drain`: below 0), each with its bound. */
  private waiters: { jobs: number; resolve: () => void }[] = [];

  constructor(
    private readonly maxBytes: number,
    private readonly concurrency: number,
    private readonly onUnexpected: (error: unknown) => void,
  ) {}

  has(key: string): boolean {
    return this.keys.has(key);
  }

  /** Whether a job of `bytes` would fit now. */
  fits(bytes: number): boolean {
    return this.heldBytes + bytes <= this.maxBytes;
  }

  offer(job: WriteJob): OfferOutcome {
    if (this.keys.has(job.key)) return 'duplicate';
    if (!this.fits(job.bytes)) return 'dropped';
    this.keys.add(job.key);
    this.heldBytes += job.bytes;
    this.pending.push(job);
    this.pump();
    return 'queued';
  }

  /** Resolves once nothing is queued or in flight. */
  drain(): Promise<void> {
    return this.below(0);
  }

  /** Resolves once at most `jobs` jobs are queued or in flight (backpressure that keeps the rest going). */
  below(jobs: number): Promise<void> {
    if (this.queuedJobs <= jobs) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ jobs, resolve }));
  }

  get queuedJobs(): number {
    return this.pending.length - this.pendingHead + this.running;
  }

  get queuedBytes(): number {
    return this.heldBytes;
  }

  /** Gives the job's write slot back, once: true when this call did. */
  private releaseSlot(slot: { held: boolean }): boolean {
    if (!slot.held) return false;
    slot.held = false;
    this.inFlight--;
    return true;
  }

  private freeSlot(slot: { held: boolean }): void {
    if (this.releaseSlot(slot)) this.pump();
  }

  private finished(job: WriteJob, slot: { held: boolean }): void {
    // Its slot too, if it never reported its put (one pump below for both).
    this.releaseSlot(slot);
    this.running--;
    this.heldBytes -= job.bytes;
    this.keys.delete(job.key);
    this.pump();
    if (this.waiters.length > 0) this.wakeWaiters();
  }

  private wakeWaiters(): void {
    const queued = this.queuedJobs;
    const waiting: typeof this.waiters = [];
    for (const waiter of this.waiters) {
      if (queued <= waiter.jobs) waiter.resolve();
      else waiting.push(waiter);
    }
    this.waiters = waiting;
  }

  private pump(): void {
    while (this.inFlight < this.concurrency && this.pendingHead < this.pending.length) {
      const job = this.pending[this.pendingHead]!;
      this.pending[this.pendingHead++] = undefined;
      if (this.pendingHead === this.pending.length || (this.pendingHead > 1024 && this.pendingHead * 2 > this.pending.length)) {
        this.pending.splice(0, this.pendingHead);
        this.pendingHead = 0;
      }
      this.inFlight++;
      this.running++;
      // A plain object and unnamed arrows: a named closure per job is also a naming helper call under tsx.
      const slot = { held: true };
      // One reaction per job, not a catch and a finally (a promise less per block written).
      job.run(() => this.freeSlot(slot)).then(
        () => this.finished(job, slot),
        (error: unknown) => {
          try {
            this.onUnexpected(error);
          } finally {
            this.finished(job, slot);
          }
        },
      );
    }
  }
}
