/**
 * The scheduler's book of cancels and ended jobs: which cancels arrived for
 * jobs it does not hold, when each held job's cancel arrived (a cancel ends
 * it at the next step at the latest), and the counts admin stats report.
 */

/** Cancels for ids this scheduler does not hold (they finished meanwhile): remembered this many at most. */
const MAX_UNMATCHED_CANCELS = 1024;

export class JobEnds {
  /** Jobs ended so far, whatever ended them (done, error, cancel). */
  ended = 0;
  /** Jobs ended by a cancel. */
  cancelsEnded = 0;
  /** The most engine steps any cancelled job ran after its cancel arrived. */
  maxStepsAfterCancel = 0;
  private readonly unmatched = new Set<string>();
  private readonly seenAt = new Map<string, number>();

  /** A cancel for a job this scheduler holds, seen at engine step `step`. */
  cancelHeld(jobId: string, step: number): void {
    if (!this.seenAt.has(jobId)) this.seenAt.set(jobId, step);
  }

  /**
   * A cancel for an id held nowhere: submit and cancel arrive in order on one
   * port, so it has finished (or was never sent here). Kept bounded so cancels
   * racing the end of their jobs cannot grow it forever.
   */
  cancelUnmatched(jobId: string): void {
    this.unmatched.add(jobId);
    if (this.unmatched.size > MAX_UNMATCHED_CANCELS) this.unmatched.delete(this.unmatched.values().next().value!);
  }

  /** True (once) when a cancel for `jobId` arrived before the job was found. */
  takeUnmatched(jobId: string): boolean {
    return this.unmatched.delete(jobId);
  }

  /** A job that never started ended by its cancel. */
  endedUnstarted(): void {
    this.ended++;
    this.cancelsEnded++;
  }

  /** A held job ended at engine step `step`. */
  endedHeld(jobId: string, step: number): void {
    this.ended++;
    const seenAt = this.seenAt.get(jobId);
    if (seenAt === undefined) return;
    this.seenAt.delete(jobId);
    this.cancelsEnded++;
    this.maxStepsAfterCancel = Math.max(this.maxStepsAfterCancel, step - seenAt);
  }
}
