/**
 * runReplay's loop against a target that answers without I/O: each request
 * must start in its own event-loop turn, so work the target left for the
 * event loop (the tier's write-behind: segment appends and index commits
 * finish in callbacks) runs beside the next requests, not only at a settle.
 */
import { describe, expect, it } from 'vitest';

import { parseTrace, runReplay, type ReplayRequest, type ReplayTarget } from '../../../src/replay/index.ts';

const TRACE = [0, 1, 2, 3, 4].map((i) => JSON.stringify({ timestamp: i * 1000, input_length: 1024, output_length: 1, hash_ids: [i, i + 100] })).join('\n');

class ImmediateTarget implements ReplayTarget {
  /** Background steps queued by each serve that had not run when the next serve began. */
  readonly pendingAtServe: number[] = [];
  private pending = 0;

  setTime(): void {}
  async settle(): Promise<void> {}
  backlogged(): boolean {
    return false;
  }
  async serve(_request: ReplayRequest): Promise<number> {
    this.pendingAtServe.push(this.pending);
    this.pending++;
    setImmediate(() => this.pending--);
    return 0;
  }
  async stored(): Promise<{ bytes: number; blocks: number }> {
    return { bytes: 0, blocks: 0 };
  }
}

describe('runReplay', () => {
  it('starts each request in its own event-loop turn: what a request left for the event loop has run before the next one', async () => {
    const trace = parseTrace(TRACE, { blockTokens: 512 });
    const target = new ImmediateTarget();
    const outcome = await runReplay(trace, target, { sampleEveryMs: 0 });
    expect(outcome.total.requests).toBe(5);
    expect(target.pendingAtServe).toEqual([0, 0, 0, 0, 0]);
  });
});
