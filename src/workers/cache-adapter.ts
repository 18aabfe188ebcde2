/**
 * Fits src/kvtier's KvTier to the scheduler's CacheTier port, and adds the
 * worker's single-flight memory: the payloads of blocks this worker handed
 * to the write-behind queue in the last moments. KvTier's index only knows a
 * block once its write finished; a request admitted right after the one that
 * computed a prefix must not compute it again, so its lookup continues into
 * these recent blocks (same chained key ⇒ same prefix tokens in the same
 * namespace, computed by this engine — as safe as a verified load).
 */
import { PrefixHasher, payloadBytesFor, type KvLayout, type KvNamespace, type KvTier, type LookupResult } from '../kvtier/index.ts';
import type { CacheHit, CacheTier } from './ports.ts';

interface TierHit extends CacheHit {
  lookup: LookupResult;
  /** Payloads of the recent blocks that continue the tier's hits. */
  recent: Uint8Array[];
}

interface RecentBlock {
  payload: Uint8Array;
  storedAt: number;
}

export class KvTierCache implements CacheTier {
  private readonly recent = new Map<string, RecentBlock>();
  private recentBytes = 0;

  private constructor(
    readonly tier: KvTier,
    private readonly hasher: PrefixHasher,
    private readonly layout: KvLayout,
    private readonly recentBudgetBytes: number,
    private readonly recentTtlMs: number,
  ) {}

  static async create(tier: KvTier, layout: KvLayout, options: { recentBudgetBytes?: number; recentTtlMs?: number } = {}): Promise<KvTierCache> {
    const hasher = await PrefixHasher.create({ blockTokens: tier.blockTokens });
    return new KvTierCache(tier, hasher, layout, options.recentBudgetBytes ?? 256 * 1024 * 1024, options.recentTtlMs ?? 30_000);
  }

  get blockBytes(): number {
    return payloadBytesFor(this.layout, this.layout.tokensPerBlock);
  }

  flush(): Promise<void> {
    return this.tier.flush();
  }

  namespace(modelFingerprint: string, tenantSaltHex: string): KvNamespace {
    return this.tier.namespace({ modelFingerprint, tenantSalt: tenantSaltHex });
  }

  async lookup(namespace: unknown, tokens: readonly number[], context: { tenant: string; trafficClass: string }, maxBlocks: number): Promise<TierHit> {
    const lookup = await this.tier.lookup(namespace as KvNamespace, Uint32Array.from(tokens), context);
    const recent: Uint8Array[] = [];
    const now = Date.now();
    for (let i = lookup.hitBlocks; i < Math.min(lookup.chain.blockCount, maxBlocks); i++) {
      const entry = this.recent.get(lookup.chain.keyHex(i));
      if (!entry || now - entry.storedAt > this.recentTtlMs) break;
      recent.push(entry.payload);
    }
    return { lookup, recent, blocks: Math.min(maxBlocks, lookup.hitBlocks + recent.length) };
  }

  async load(hit: CacheHit, maxBlocks: number, fromBlock = 0): Promise<{ payloads: Uint8Array[] }> {
    const { lookup, recent } = hit as TierHit;
    const tierFrom = Math.min(fromBlock, lookup.hitBlocks);
    const fromTier = lookup.hitBlocks > tierFrom ? await this.tier.load(lookup, { fromBlock: tierFrom }) : { blocks: [] };
    const payloads = fromTier.blocks.map((b) => b.payload);
    // Recent blocks continue the run only if every tier hit loaded (a failed verification ends the prefix there).
    if (tierFrom + fromTier.blocks.length === lookup.hitBlocks) for (const payload of recent.slice(Math.max(0, fromBlock - lookup.hitBlocks))) payloads.push(payload);
    return { payloads: payloads.slice(0, Math.max(0, maxBlocks - fromBlock)) };
  }

  async store(request: {
    namespace: unknown;
    tokens: readonly number[];
    fromBlock: number;
    payloads: readonly Uint8Array[];
    tenant: string;
    trafficClass: string;
    retention?: { ttlMs?: number; noStore?: boolean };
  }): Promise<void> {
    // No-store: not kept here either (the recent buffer would serve it to the next request).
    if (request.retention?.noStore) return;
    const namespace = request.namespace as KvNamespace;
    const tokens = Uint32Array.from(request.tokens);
    const chain = this.hasher.chain(namespace.keyBytes, tokens);
    const now = Date.now();
    request.payloads.forEach((payload, i) => this.remember(chain.keyHex(request.fromBlock + i), payload, now));
    this.tier.store({
      namespace,
      tokens,
      fromBlock: request.fromBlock,
      payloads: request.payloads,
      layout: this.layout,
      tenant: request.tenant,
      trafficClass: request.trafficClass,
      chain,
      // The operator's cap on client hints applies here; the plane caps again by the class TTL.
      ...(request.retention?.ttlMs !== undefined ? { ttlMs: this.tier.policy.current().clientTtlMs(request.retention.ttlMs) } : {}),
    });
  }

  /** Drops every recently stored payload (a purge: they would continue a lookup into purged blocks). */
  forgetRecent(): void {
    this.recent.clear();
    this.recentBytes = 0;
  }

  private remember(key: string, payload: Uint8Array, now: number): void {
    if (this.recentBudgetBytes === 0) return;
    const old = this.recent.get(key);
    if (old) {
      this.recent.delete(key);
      this.recentBytes -= old.payload.byteLength;
    }
    this.recent.set(key, { payload, storedAt: now });
    this.recentBytes += payload.byteLength;
    for (const [oldKey, entry] of this.recent) {
      if (this.recentBytes <= this.recentBudgetBytes && now - entry.storedAt <= this.recentTtlMs) break;
      this.recent.delete(oldKey);
      this.recentBytes -= entry.payload.byteLength;
    }
  }
}
