/**
 * One run's events to the API process that waits on them (the job's reply
 * channel), in order and not lost to a Redis failover. Pub/sub is at most
 * once: a message published while the API's (sharded) subscription moves to a
 * promoted replica reaches nobody, and PUBLISH says so by its receiver count.
 *
 *   push(e) ──▶ queue ──▶ one PUBLISH in flight (seq n…m) ──▶ ≥ 1 receiver: next (m + 1…)
 *                                  ▲                   └──▶ error, or 0 receivers
 *                                  └── same message after a pause (100 ms doubling to 1 s) ──┘
 *
 * Invariants:
 * - a run's messages leave in push order, one at a time, each with the next
 *   `seq` (0 is `started`); a retried message keeps its seq, so the API drops
 *   a copy it already has and treats a skipped seq as a lost event;
 * - what is queued behind the PUBLISH in flight leaves as one (a JSON array of
 *   messages, each with its seq; consecutive token events merged into one);
 * - a message undelivered for RETRY_WINDOW_MS (the API process is gone, or
 *   Redis is down for longer than a failover) is dropped with everything
 *   queued behind it and logged: the request ends by its own timeout.
 */
import type { PublishedEvent } from './bullmq-protocol.ts';

const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 1000;
const RETRY_WINDOW_MS = 30_000;

export type ReplyMessage = Omit<PublishedEvent, 'seq'>;

export class ReplyOutbox {
  private readonly queue: ReplyMessage[] = [];
  private nextSeq = 0;
  private sending = false;
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
    const last = this.queue.at(-1);
    if (last?.event?.type === 'tokens' && message.event?.type === 'tokens' && last.runId === message.runId) {
      last.event = { type: 'tokens', ids: [...last.event.ids, ...message.event.ids] };
    } else this.queue.push(message.event?.type === 'tokens' ? { ...message, event: { ...message.event } } : message);
    if (!this.sending) void this.pump();
  }

  /** Nothing more leaves (the worker is shutting down, or a message was dropped). */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
    if (!this.sending) this.wake();
  }

  /** Settles once everything pushed so far was delivered or dropped. */
  flushed(): Promise<void> {
    if (!this.sending && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    for (const resolve of this.waiters.splice(0)) resolve();
  }

  private async pump(): Promise<void> {
    this.sending = true;
    try {
      while (!this.closed && this.queue.length > 0) {
        // Everything queued behind the one in flight goes as one message: a batch is heard whole or not at all.
        const batch = this.queue.splice(0).map((message) => ({ ...message, seq: this.nextSeq++ }));
        const wire = JSON.stringify(batch.length === 1 ? batch[0] : batch);
        if (!(await this.deliver(wire, batch[0].jobId))) {
          this.closed = true;
          this.queue.length = 0;
        }
      }
    } finally {
      this.sending = false;
      this.wake();
    }
  }

  private async deliver(wire: string, jobId: string): Promise<boolean> {
    const since = Date.now();
    let pause = FIRST_PAUSE_MS;
    let why = '';
    while (!this.closed) {
      try {
        if ((await this.send(wire)) > 0) return true;
        why = 'no API process is subscribed to the reply channel';
      } catch (error) {
        why = (error as Error).message;
      }
      if (Date.now() - since >= this.retryWindowMs) {
        this.warn(`job ${jobId}: its events were not delivered for ${this.retryWindowMs} ms (${why}); dropped, the request ends by its own timeout`);
        return false;
      }
      await new Promise((resolve) => setTimeout(resolve, pause).unref());
      pause = Math.min(MAX_PAUSE_MS, pause * 2);
    }
    return false;
  }
}
