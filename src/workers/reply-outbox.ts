/**
 * One run's events to the API process that waits on them (the job's reply
 * channel), not lost to a Redis failover. Pub/sub is at most once: a message
 * published while the API's (sharded) subscription moves to a promoted
 * replica reaches nobody, and PUBLISH says so by its receiver count.
 *
 *   push(e) ──▶ seq n, PUBLISH at once (pipelined, as plain pub/sub) ──▶ ≥ 1 receiver: done
 *                                                                 └──▶ error, or 0 receivers:
 *   recovery: every unheard message, in seq order, as one PUBLISH ──▶ ≥ 1 receiver: all heard
 *                ▲ (what is pushed meanwhile joins the next batch)  └──▶ not heard: again after
 *                └────────────────────── a pause (100 ms doubling to 1 s) ─────────┘
 *
 * Invariants:
 * - every message carries the run's next `seq` (0 is `started`) and keeps it
 *   when re-sent: the API drops a copy, holds one that overtook a lost one
 *   until it arrives (bullmq-pending.ts), so the request sees each event once,
 *   in order;
 * - a message is unheard until a PUBLISH carrying it counted a receiver;
 * - unheard for RETRY_WINDOW_MS (the API process is gone, or Redis is down for
 *   longer than a failover): everything unheard is dropped and logged, nothing
 *   more leaves; the request ends by its own timeout.
 */
import { describeError } from '../errors.ts';
import type { PublishedEvent } from './bullmq-protocol.ts';

const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 1000;
const RETRY_WINDOW_MS = 30_000;

export type ReplyMessage = Omit<PublishedEvent, 'seq'>;

export class ReplyOutbox {
  /** Sent (or being sent) but not yet heard, in seq order. */
  private readonly unheard: PublishedEvent[] = [];
  private nextSeq = 0;
  private inFlight = 0;
  private recovering = false;
  private closed = false;
  private readonly waiters: (() => void)[] = [];

  constructor(
    /** PUBLISH (SPUBLISH on a cluster) of one message: its receiver count. */
    private readonly send: (message: string) => Promise<number>,
    private readonly warn: (message: string) => void,
    private readonly retryWindowMs = RETRY_WINDOW_MS,
  ) {}

  push(message: ReplyMessage): void {
    if (this.closed) return;
    const numbered: PublishedEvent = { ...message, seq: this.nextSeq++ };
    this.unheard.push(numbered);
    if (this.recovering) return;
    this.inFlight++;
    this.send(JSON.stringify(numbered)).then(
      (receivers) => (receivers > 0 ? this.heard(numbered) : this.recover()),
      () => this.recover(),
    ).finally(() => {
      this.inFlight--;
      this.wakeIfIdle();
    });
  }

  /** Nothing more leaves (the worker is shutting down). */
  close(): void {
    this.closed = true;
    this.unheard.length = 0;
    this.wakeIfIdle();
  }

  /** Settles once everything pushed so far was heard or dropped. */
  flushed(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private get idle(): boolean {
    return this.inFlight === 0 && !this.recovering && this.unheard.length === 0;
  }

  private wakeIfIdle(): void {
    if (this.idle) for (const resolve of this.waiters.splice(0)) resolve();
  }

  private heard(message: PublishedEvent): void {
    const at = this.unheard.indexOf(message);
    if (at >= 0) this.unheard.splice(at, 1);
  }

  /** A whole batch heard: one pass (a failover's batch can hold a long stream's every token event). */
  private heardAll(batch: readonly PublishedEvent[]): void {
    const heard = new Set(batch);
    let kept = 0;
    for (const message of this.unheard) if (!heard.has(message)) this.unheard[kept++] = message;
    this.unheard.length = kept;
  }

  private recover(): void {
    if (this.recovering || this.closed) return;
    this.recovering = true;
    void this.resend().finally(() => {
      this.recovering = false;
      this.wakeIfIdle();
    });
  }

  private async resend(): Promise<void> {
    const since = Date.now();
    let pause = FIRST_PAUSE_MS;
    let why = '';
    while (!this.closed && this.unheard.length > 0) {
      const batch = [...this.unheard];
      try {
        if ((await this.send(JSON.stringify(batch))) > 0) {
          this.heardAll(batch);
          pause = FIRST_PAUSE_MS;
          continue;
        }
        why = 'no API process is subscribed to the reply channel';
      } catch (error) {
        why = describeError(error).message;
      }
      if (Date.now() - since >= this.retryWindowMs) {
        this.warn(`job ${batch[0].jobId}: ${batch.length} of its events were not delivered for ${this.retryWindowMs} ms (${why}); dropped, the request ends by its own timeout`);
        this.closed = true;
        this.unheard.length = 0;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, pause).unref());
      pause = Math.min(MAX_PAUSE_MS, pause * 2);
    }
  }
}
