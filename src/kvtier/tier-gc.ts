/**
 * The tier's GC runs: one at a time per tier; a second call for the same
 * shards joins the running one, one for other shards runs after it. Each run
 * flushes buffered renewals into the plane first (GC judges by the plane),
 * then folds its report into the tier's counters and plane trust.
 */
import type { BlobStore } from '../../storage-adapters/index.ts';

import type { NodeIndex } from './node-index.ts';
import type { Clock } from './clock.ts';
import { runGc, type GcOptions, type GcReport } from './gc.ts';
import type { PolicyStore } from './policy-store.ts';
import type { TierCore } from './tier-core.ts';

/** What GC reads and removes beside the shared core: this node's index, the blobs, the policy, and the hook that drops removed blocks here. */
export interface TierGcSide {
  index: NodeIndex;
  store: BlobStore;
  policy: PolicyStore;
  clock: Clock;
  onRemoved: (keys: readonly string[]) => void;
}

export class TierGcRuns {
  private running: Promise<GcReport> | undefined;
  /** Which shards the running GC collects ('' = all). */
  private runningShards = '';

  constructor(
    private readonly core: TierCore,
    private readonly gcSide: TierGcSide,
  ) {}

  run(options: GcOptions): Promise<GcReport> {
    const shards = options.shards?.join(',') ?? '';
    if (this.running !== undefined && this.runningShards === shards) return this.running;
    const before = this.running?.catch(() => undefined) ?? Promise.resolve();
    const run = before
      .then(() => this.core.planeLink.plane.flush())
      .catch((error: unknown) => this.core.noteError(error, 'flushing plane renewals before GC failed'))
      .then(() =>
        runGc(
          {
            plane: this.core.planeLink.plane,
            index: this.gcSide.index,
            store: this.gcSide.store,
            policy: this.gcSide.policy.current(),
            clock: this.gcSide.clock,
            onRemoved: this.gcSide.onRemoved,
          },
          options,
        ),
      )
      .then(async (report) => {
        // A run over some shards vouches for those only: it can say the plane is untrusted, not that all of it is trusted.
        if (options.shards === undefined || !report.plane.trusted) this.core.planeLink.noteState(report.plane.trusted);
        // Removals reach this node's index through dropLocal; let them land before reporting.
        await this.core.settleBackground();
        const gc = this.core.counters.gc;
        gc.runs++;
        if (!report.dryRun) {
          for (const reason of ['expired', 'evicted'] as const) {
            gc[reason].blocks += report.removed[reason].blocks;
            gc[reason].bytes += report.removed[reason].bytes;
          }
        }
        for (const error of report.errors) this.core.noteError(error, 'GC: ' + error.message);
        return report;
      });
    this.running = run;
    this.runningShards = shards;
    const clear = () => {
      if (this.running === run) this.running = undefined;
    };
    run.then(clear, clear);
    return run;
  }

  /** Settles once no run is in flight (close waits for it); never rejects. */
  async settled(): Promise<void> {
    await this.running?.catch(() => undefined);
  }
}
