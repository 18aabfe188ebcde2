/**
 * What the prefill scheduler needs from the engine and the cache tier, in the
 * scheduler's own terms. `engine-adapter.ts` and `cache-adapter.ts` fit
 * inference-core's engine and src/kvtier's KvTier to these, so the scheduler
 * reads as the algorithm it is.
 */
import type { BlockFlights } from '../kvtier/index.ts';

export interface EngineSequence {
  /** Cached blocks, in order from block 0; the sequence's KV then covers blocks × blockTokens tokens. */
  importBlocks(payloads: readonly Uint8Array[]): void;
  /** Keeps only the first `tokens` tokens of the KV (to continue a finished sequence with another prompt). */
  truncate(tokens: number): void;
  /** Appends one token to the KV; logits of the next. */
  decode(token: number): Float32Array;
  /** Payloads of blocks [fromBlock, toBlock) of this sequence's KV. */
  exportBlocks(fromBlock: number, toBlock: number): Uint8Array[];
  free(): void;
}

export interface EngineModel {
  readonly fingerprint: string;
  readonly contextLength: number;
  createSequence(): EngineSequence;
  /** KV blocks (pages) free in the engine's pool, and the pool's size. */
  freeBlocks(): number;
  totalBlocks(): number;
  /** Rows (tokens) one step may carry. */
  readonly maxStepTokens: number;
  /** Logit rows one step may return (absent: one per item). */
  readonly maxLogitRows?: number;
  /**
   * One forward over new tokens of several sequences (decode rows and prefill
   * chunks mixed); per item, the last token's logits when asked, every token's
   * ([n][vocab]) with 'all' (speculative verification), else null.
   */
  step(items: readonly { sequence: EngineSequence; tokens: ArrayLike<number>; logits: boolean | 'all' }[]): (Float32Array | null)[];
}

/**
 * Speculative decoding of one reply (inference-core/speculative): each step
 * feeds the last token and the drafts, and turns the logits of all of them
 * into the emitted tokens, the sequence's KV rolled back to what was accepted.
 */
export interface SpeculativeDecoder {
  /** Tokens to feed: [last token, drafts…], emitting at most `limit` tokens. */
  plan(limit: number): { tokens: number[] };
  /** Logits of every planned token → emitted tokens (accepted drafts, then the target's own). */
  complete(rows: Float32Array): number[];
  readonly stats: { proposed: number; accepted: number };
  free(): void;
}

export interface TokenSampler {
  /** Next token from `logits`; `history` is every token of the sequence so far (for repetition penalty). */
  sample(logits: Float32Array, history: ArrayLike<number>): number;
}

/** A prompt's chained block keys (src/kvtier PrefixChain): key i names tokens [0, (i+1)·blockTokens) in one namespace. */
export interface PrefixKeys {
  readonly blockCount: number;
  keyHex(i: number): string;
}

export interface CacheHit {
  /** Whole blocks found, from block 0. */
  readonly blocks: number;
}

export interface CacheTier {
  /** Blocks in flight on this node, computed through written: the one single-flight registry (src/kvtier/block-flights.ts). */
  readonly flights: BlockFlights;
  /** Bytes of one block's payload (what a load of one block reads). */
  readonly blockBytes: number;
  namespace(modelFingerprint: string, tenantSaltHex: string): unknown;
  /** The key chain of `tokens`' full blocks, hashed once per request and handed back to lookup and store. */
  prefixKeys(namespace: unknown, tokens: Uint32Array): PrefixKeys;
  lookup(namespace: unknown, tokens: Uint32Array, context: { tenant: string; trafficClass: string }, maxBlocks: number, keys?: PrefixKeys): Promise<CacheHit>;
  /**
   * Verified payloads of blocks [fromBlock, maxBlocks) of `hit` (fewer when one fails verification).
   * `release`, when given, hands their read buffers back once the engine has copied them: the payloads read empty after it.
   */
  load(hit: CacheHit, maxBlocks: number, fromBlock?: number): Promise<{ payloads: Uint8Array[]; release?: () => void }>;
  store(request: {
    namespace: unknown;
    tokens: Uint32Array;
    fromBlock: number;
    payloads: readonly Uint8Array[];
    tenant: string;
    trafficClass: string;
    /** The client's retention hint: a TTL cap (capped again by the policy), or no storing at all. */
    retention?: { ttlMs?: number; noStore?: boolean };
    /** The request's prompt keys (prefixKeys); used when they cover the stored blocks, else the cache hashes `tokens`. */
    keys?: PrefixKeys;
  }): Promise<void>;
  /** Resolves once every block handed to `store` so far is written to storage (write-through for a prefill/decode split). */
  flush(): Promise<void>;
}
