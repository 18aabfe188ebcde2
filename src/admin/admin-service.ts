/**
 * The admin operations behind both the HTTP API and `kvtier --data-dir`:
 * one object, so the server and the local CLI compute every figure the same
 * way.
 *
 * With `tier` (the server: the job runner's admin channel to the cache tier
 * that serves requests), a real GC runs inside that tier, a policy edit
 * returns once that tier reads the new version, and the stats recorder
 * follows that tier's counters. Without it (a data dir, no server), GC runs on
 * this process's handle of the index and its removals are counted here.
 */
import { CodecGate, type CodecPolicyPatch, type GcReport, type PolicyStore, type RetentionPolicyDoc } from '../kvtier/index.ts';
import { C, computeOverview, computeWhatIf, computeSeries, seriesIntervalMs, type Pricing, type StatsRecorder } from '../stats/index.ts';
import { AdminError } from './admin-error.ts';
import type { AdminProgress, HistoryResponse, OverviewResponse, PolicyEdit, PolicyEditResult, PurgeFilter, PurgeReport } from './admin-types.ts';
import type { BlockAdmin } from './block-admin.ts';
import { policyChangeFor } from './policy-edits.ts';

export interface TierChannel {
  admin(call: { op: 'stats' | 'getPolicy' | 'setPolicy' | 'gc' | 'purge'; policy?: unknown; filter?: PurgeFilter; at?: number }): Promise<unknown>;
}

export interface AdminServiceOptions {
  /** Or why the block store / index could not open (block operations then answer 503). */
  blocks: BlockAdmin | string;
  policy: PolicyStore;
  recorder: StatsRecorder;
  pricing: Pricing;
  tier?: TierChannel;
  /** How long a policy edit waits for the tier to read the new version. Default 5 s. */
  applyTimeoutMs?: number;
}

/** The tier's answer to a purge: embedded, the engine thread's tier result; BullMQ, each live worker's acknowledgement. */
type TierPurgeAnswer =
  | { matched: number; removedBlocks: number; removedBytes: number; errors: { code: string; message: string }[] }
  | { gen: number; workers: { workerId: string; outcome?: { removedBlocks: number; removedBytes: number } }[] };

export class AdminService {
  constructor(private readonly options: AdminServiceOptions) {}

  get blocks(): BlockAdmin {
    const blocks = this.options.blocks;
    if (typeof blocks === 'string') throw new AdminError('KVT_ERR_ADMIN_UNAVAILABLE', `block operations are unavailable on this server: ${blocks}`);
    return blocks;
  }

  get pricing(): Pricing {
    return this.options.pricing;
  }

  async getPolicy(): Promise<RetentionPolicyDoc> {
    if (this.options.tier) return (await this.options.tier.admin({ op: 'getPolicy' })) as RetentionPolicyDoc;
    return (await this.options.policy.refresh()).toJSON();
  }

  async editPolicy(edit: PolicyEdit): Promise<PolicyEditResult> {
    await this.applyCodec(edit);
    const next = await this.options.policy.update(policyChangeFor(edit));
    const policy = next.toJSON();
    const tier = this.options.tier;
    if (!tier) return { policy, applied: true };
    // The tier re-reads the shared policy within its refresh interval (1 s); wait for it, so the next GC or lookup sees the edit.
    const deadline = Date.now() + (this.options.applyTimeoutMs ?? 5000);
    for (;;) {
      const seen = (await tier.admin({ op: 'getPolicy' })) as RetentionPolicyDoc;
      if (seen.version >= policy.version) return { policy, applied: true };
      if (Date.now() > deadline) return { policy, applied: false };
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /**
   * A codec an edit names passes the quality gate first (kvtier/codecs/codec-gate.ts): with a tier, the
   * tier applies it as PUT /admin/policy does (measured on the served model there; unmeasured without an
   * engine, so only with force); with none (kvtier --data-dir) nothing is measured here, so it needs force.
   */
  private async applyCodec(edit: PolicyEdit): Promise<void> {
    const codec = edit.op === 'setCodec' || edit.op === 'setClass' ? edit.codec : undefined;
    if (codec === undefined || (edit.op !== 'setCodec' && edit.op !== 'setClass')) return;
    const className = edit.op === 'setClass' ? edit.name : edit.trafficClass;
    const force = edit.force === true;
    if (!this.options.tier) {
      new CodecGate().checkPatch(className === undefined ? { codec } : { classes: { [className]: { codec } } }, force);
      return;
    }
    let patch: CodecPolicyPatch;
    if (className === undefined) patch = { codec };
    else {
      // The tier's merge replaces a named class whole: send its current spec with the codec.
      const doc = (await this.options.policy.refresh()).doc;
      if (!Object.hasOwn(doc.classes, className)) {
        throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', `unknown class "${className}"; known: ${Object.keys(doc.classes).join(', ')}`, edit.op === 'setClass' ? 'name' : 'trafficClass');
      }
      patch = { classes: { [className]: { ...doc.classes[className], codec } } };
    }
    await this.options.tier.admin({ op: 'setPolicy', policy: { ...patch, force } });
  }

  async overview(): Promise<OverviewResponse> {
    const recorder = this.options.recorder;
    await recorder.flush();
    const totals = await recorder.store.totals();
    const policy = this.options.policy.current();
    return {
      overview: computeOverview(totals, this.options.pricing),
      whatIf: computeWhatIf(totals, this.options.pricing, Object.fromEntries(Object.entries(policy.doc.classes).map(([name, spec]) => [name, spec.ttlMs]))),
      generatedAt: Date.now(),
      source: { statsStore: recorder.store.kind, stepMs: recorder.store.stepMs, policyStore: this.options.policy.kind, policyVersion: policy.version },
    };
  }

  async history(windowMs: number): Promise<HistoryResponse> {
    const store = this.options.recorder.store;
    const until = Date.now();
    const since = until - windowMs;
    const window = { since, until, stepMs: store.stepMs };
    const intervalMs = seriesIntervalMs(window);
    // From one step before the first interval's start, so it has a left edge.
    const points = await store.history(Math.floor(since / intervalMs) * intervalMs - store.stepMs, until);
    return { series: computeSeries(points, this.options.pricing, window), stepMs: store.stepMs, intervalMs, since, until };
  }

  checkPurgeFilter(filter: PurgeFilter): void {
    const narrowed = filter.tenant !== undefined || filter.trafficClass !== undefined || filter.olderThanMs !== undefined;
    if (!narrowed && !filter.all) throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', 'purge needs tenant, class, olderThanMs, or all: true', 'filter');
    if (narrowed && filter.all) throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', 'purge takes either all or a filter, not both', 'all');
    if (filter.trafficClass !== undefined && !this.options.policy.current().hasClass(filter.trafficClass)) {
      throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', `unknown class "${filter.trafficClass}"; known: ${Object.keys(this.options.policy.current().doc.classes).join(', ')}`, 'class');
    }
  }

  /**
   * Removes the matching blocks from storage and from every node's view:
   * first the cluster's metadata plane and this process's own index (each
   * block counted once), then the serving tier purges its own index and
   * caches (embedded: the engine thread; BullMQ: every live worker, which
   * acknowledges; see cluster/purge-log.ts).
   */
  async purge(filter: PurgeFilter, onProgress: (progress: AdminProgress) => void): Promise<PurgeReport> {
    this.checkPurgeFilter(filter);
    const at = Date.now();
    const report: PurgeReport = await this.blocks.purge(filter, onProgress, at);
    const tier = this.options.tier;
    if (tier) {
      const nodes: NonNullable<PurgeReport['nodes']> = [];
      onProgress({ phase: 'purge serving nodes', scannedBlocks: 0, removedBlocks: report.removedBlocks, removedBytes: report.removedBytes });
      const answer = (await tier.admin({ op: 'purge', filter, at })) as TierPurgeAnswer;
      if ('workers' in answer) {
        for (const ack of answer.workers) nodes.push({ node: ack.workerId, acknowledged: ack.outcome !== undefined, removedBlocks: ack.outcome?.removedBlocks ?? 0, removedBytes: ack.outcome?.removedBytes ?? 0 });
      } else nodes.push({ node: 'engine', acknowledged: true, removedBlocks: answer.removedBlocks, removedBytes: answer.removedBytes, errors: answer.errors });
      report.nodes = nodes;
      report.errors.push(...nodes.flatMap((n) => n.errors ?? []));
      const silent = nodes.filter((n) => !n.acknowledged).map((n) => n.node);
      if (silent.length > 0) report.errors.push({ code: 'KVT_ERR_CLUSTER_PURGE_UNACKNOWLEDGED', message: `workers ${silent.join(', ')} did not confirm the purge within 30 s; they apply it at their next heartbeat or start` });
      onProgress({ phase: 'purge serving nodes', scannedBlocks: nodes.length, removedBlocks: report.removedBlocks, removedBytes: report.removedBytes });
    }
    this.options.recorder.bump(C.purgedBlocks, report.removedBlocks);
    this.options.recorder.bump(C.purgedBytes, report.removedBytes);
    await this.options.recorder.flush();
    return report;
  }

  async gc(options: { dryRun: boolean }, onProgress: (progress: AdminProgress) => void): Promise<GcReport> {
    const tier = this.options.tier;
    if (options.dryRun || !tier) {
      const report = await this.blocks.gc(options, onProgress);
      if (!report.dryRun && !tier) {
        const recorder = this.options.recorder;
        recorder.bump(C.gcRuns, 1);
        recorder.bump(C.expiredBlocks, report.removed.expired.blocks);
        recorder.bump(C.expiredBytes, report.removed.expired.bytes);
        recorder.bump(C.evictedBlocks, report.removed.evicted.blocks);
        recorder.bump(C.evictedBytes, report.removed.evicted.bytes);
        await recorder.flush();
      }
      return report;
    }
    // A real run goes through the tier that serves requests: one GC at a time there, its counters, its caches dropped.
    onProgress({ phase: 'gc', scannedBlocks: 0, removedBlocks: 0, removedBytes: 0 });
    const report = (await tier.admin({ op: 'gc' })) as GcReport;
    await this.options.recorder.flush();
    return report;
  }
}
