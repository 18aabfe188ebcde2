/**
 * Fits src/kvtier's KvTier to the scheduler's CacheTier port. A request's
 * prompt is hashed once (`prefixKeys`, at admission) and its key chain is
 * handed back to lookup and store, so neither hashes the prompt again.
 *
 * Single flight needs nothing here: the tier's `flights` registry (handed
 * to the scheduler as is) holds every block from its claim through its
 * write, and the tier's lookup and load continue into blocks being written
 * (src/kvtier/block-flights.ts, src/scheduler/single-flight.ts). A no-store
 * request is not handed to the tier at all, so it is never served to
 * another request.
 */
import { PrefixHasher, payloadBytesFor, type BlockFlights, type KvLayout, type KvNamespace, type KvTier, type LoadedUnit, type PrefixChain, type UnitHit } from '../kvtier/index.ts';
import type { CacheHit, CacheTier, StoreRequest } from './ports.ts';
import type { UnitCache, UnitStoreCall } from './units.ts';

export class KvTierCache implements CacheTier, UnitCache {
  private constructor(
    readonly tier: KvTier,
    private readonly hasher: PrefixHasher,
    private readonly layout: KvLayout,
  ) {}

  static async create(tier: KvTier, layout: KvLayout): Promise<KvTierCache> {
    const hasher = await PrefixHasher.create({ blockTokens: tier.blockTokens });
    return new KvTierCache(tier, hasher, layout);
  }

  get flights(): BlockFlights {
    return this.tier.flights;
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

  prefixKeys(namespace: KvNamespace, tokens: Uint32Array): PrefixChain {
    return this.hasher.chain(namespace.keyBytes, tokens);
  }

  async lookup(namespace: KvNamespace, tokens: Uint32Array, context: { tenant: string; trafficClass: string }, maxBlocks: number, keys?: PrefixChain): Promise<CacheHit> {
    const lookup = await this.tier.lookup(namespace, tokens, context, keys);
    return { lookup, blocks: Math.min(maxBlocks, lookup.hitBlocks) };
  }

  async load(hit: CacheHit, maxBlocks: number, fromBlock = 0): Promise<{ payloads: Uint8Array[]; release?: () => void }> {
    const { lookup } = hit;
    if (lookup.hitBlocks <= fromBlock) return { payloads: [] };
    const loaded = await this.tier.load(lookup, { fromBlock });
    return { payloads: loaded.blocks.map((b) => b.payload).slice(0, Math.max(0, maxBlocks - fromBlock)), release: () => loaded.release() };
  }

  async store(request: StoreRequest): Promise<void> {
    // No-store: the request's blocks are not kept, nor held where another request's lookup would find them.
    if (request.retention?.noStore) return;
    const { namespace, tokens } = request;
    const toBlock = request.fromBlock + request.payloads.length;
    // The request's prompt keys when they cover these blocks (its prompt's); a reply's blocks past them are hashed here.
    const chain = request.keys && request.keys.blockCount >= toBlock ? request.keys : this.hasher.chain(namespace.keyBytes, tokens);
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

  lookupUnit(namespace: KvNamespace, tokens: Uint32Array, context: { tenant: string; trafficClass: string }, maxPosition: number, keys?: PrefixChain | null): Promise<UnitHit | null> {
    return this.tier.lookupUnit(namespace, tokens, context, maxPosition, keys ?? undefined);
  }

  loadUnit(hit: UnitHit): Promise<LoadedUnit | null> {
    return this.tier.loadUnit(hit);
  }

  /** A unit's tail (its blocks went through `store`); no-store requests write none. */
  storeUnit(request: UnitStoreCall): void {
    if (request.retention?.noStore) return;
    const { namespace, tokens, dtype, sections, tenant, trafficClass, keys } = request;
    this.tier.storeUnit({
      namespace,
      tokens,
      dtype,
      sections,
      tenant,
      trafficClass,
      ...(keys ? { chain: keys } : {}),
      ...(request.retention?.ttlMs !== undefined ? { ttlMs: this.tier.policy.current().clientTtlMs(request.retention.ttlMs) } : {}),
    });
  }
}
