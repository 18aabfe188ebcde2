/**
 * The engine thread's job events to its owner, one message per burst.
 *
 * A step's postprocess emits its events in one synchronous run: a one-token
 * job's `prefilled`, `tokens` and `done`, or one `tokens` per sequence of a
 * decode batch. Posted one by one, each wakes the owner's event loop and, in
 * `kvtier worker`, becomes a PUBLISH and a wake-up of the API of its own
 * (bench/RESULTS.md, "e2e overhead, seventh look"). Gathered, the burst leaves
 * as one message at the first microtask checkpoint.
 *
 * Invariants:
 * - a job's end (`done`, `error`) leaves at once, with what was gathered
 *   before it: postprocess emits `done` first and only then does the work off
 *   the reply's path (the last token fed, blocks stored, the KV retained);
 * - no event waits behind an engine forward: the loop awaits (yieldToIo)
 *   between every step's postprocess and the next step, and that await is a
 *   microtask checkpoint; events emitted outside the loop (a submit while
 *   closing, a cancel of a waiting job) leave when their handler returns;
 * - order is kept: a burst is sent in emission order, bursts in turn.
 */
import type { JobEvent } from './job.ts';

export interface JobEventOf {
  jobId: string;
  event: JobEvent;
}

export class EventBurst {
  private burst: JobEventOf[] = [];

  constructor(private readonly post: (events: JobEventOf[]) => void) {}

  readonly emit = (jobId: string, event: JobEvent): void => {
    if (this.burst.length === 0) queueMicrotask(this.flush);
    this.burst.push({ jobId, event });
    if (event.type === 'done' || event.type === 'error') this.flush();
  };

  private readonly flush = (): void => {
    const events = this.burst;
    this.burst = [];
    if (events.length > 0) this.post(events);
  };
}
