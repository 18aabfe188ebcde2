/**
 * What the scheduler needs from the engine, the cache tier and the decoding
 * of one reply, in the scheduler's own terms. engine-thread.ts fits
 * inference-core's engine to EngineModel, cache-adapter.ts fits src/kvtier's
 * KvTier to CacheTier and engine-decoders.ts makes each request's decoder,
 * so the scheduler reads as the algorithm it is. Keys at the tier boundary
 * are the tier's own named types (KvNamespace, PrefixChain, LookupResult):
 * nothing here is `unknown`, nothing is cast.
 */
import type { BlockFlights, KvNamespace, LookupResult, PrefixChain } from '../kvtier/index.ts';
import type { CacheRetentionHint, RequestSpec } from './job.ts';

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

export interface StepItem<S extends EngineSequence = EngineSequence> {
  sequence: S;
  tokens: ArrayLike<number>;
  logits: boolean | 'all';
}

export interface EngineModel<S extends EngineSequence = EngineSequence> {
  readonly fingerprint: string;
  readonly contextLength: number;
  createSequence(): S;
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
  step(items: readonly StepItem<S>[]): (Float32Array | null)[];
  /** The loop has no step to run: release what is kept busy between steps (the CPU pool's spinning workers). */
  idle?(): void;
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

/**
 * One request's decoding state (its sampler, grammar cursor, speculative
 * session), owned by its RequestSequence and made by the DecoderFactory.
 */
export interface SequenceDecoder<S extends EngineSequence = EngineSequence, D extends SpeculativeDecoder = SpeculativeDecoder> {
  /** Next token from `logits`; `history` is every token of the sequence so far (for repetition penalty). */
  sample(logits: Float32Array, history: ArrayLike<number>): number;
  /**
   * Speculative decoding from the first sampled token on: `context` is the
   * prompt and that token, `kv` holds all but the last. Null (or absent): plain decoding.
   */
  speculate?(kv: S, context: ArrayLike<number>): D | null;
}

/** `S`, `D`: the engine's own sequence and speculative session types (the scheduler hands back what the factory and engine made). */
export interface DecoderFactory<S extends EngineSequence = EngineSequence, D extends SpeculativeDecoder = SpeculativeDecoder> {
  /** The decoder of one request, made when its prompt is in the KV (it may throw: the request fails alone). */
  create(spec: RequestSpec): SequenceDecoder<S, D>;
  /**
   * Plans the speculative decoders of one step together (e.g. their draft-model
   * steps batched in one draft forward per position); result i is
   * `batch[i].decoder.plan(batch[i].limit)`. Absent: each plans alone.
   */
  planBatch?(batch: readonly { decoder: D; limit: number }[]): { tokens: number[] }[];
}

/** A lookup's result: whole blocks found from block 0 (capped by the caller's maximum), and the tier's own record of them. */
export interface CacheHit {
  readonly blocks: number;
  readonly lookup: LookupResult;
}

/** Blocks [fromBlock, fromBlock + payloads.length) of one request's tokens, handed to the tier. */
export interface StoreRequest {
  namespace: KvNamespace;
  tokens: Uint32Array;
  fromBlock: number;
  payloads: readonly Uint8Array[];
  tenant: string;
  trafficClass: string;
  /** The client's retention hint: a TTL cap (capped again by the policy), or no storing at all. */
  retention?: CacheRetentionHint;
  /** The request's prompt keys (prefixKeys); used when they cover the stored blocks, else the cache hashes `tokens`. */
  keys?: PrefixChain;
}

export interface CacheTier {
  /** Blocks in flight on this node, computed through written: the one single-flight registry (src/kvtier/block-flights.ts). */
  readonly flights: BlockFlights;
  /** Bytes of one block's payload (what a load of one block reads). */
  readonly blockBytes: number;
  namespace(modelFingerprint: string, tenantSaltHex: string): KvNamespace;
  /** The key chain of `tokens`' full blocks, hashed once per request and handed back to lookup and store. */
  prefixKeys(namespace: KvNamespace, tokens: Uint32Array): PrefixChain;
  lookup(namespace: KvNamespace, tokens: Uint32Array, context: { tenant: string; trafficClass: string }, maxBlocks: number, keys?: PrefixChain): Promise<CacheHit>;
  /**
   * Verified payloads of blocks [fromBlock, maxBlocks) of `hit` (fewer when one fails verification).
   * `release`, when given, hands their read buffers back once the engine has copied them: the payloads read empty after it.
   */
  load(hit: CacheHit, maxBlocks: number, fromBlock?: number): Promise<{ payloads: Uint8Array[]; release?: () => void }>;
  store(request: StoreRequest): Promise<void>;
  /** Resolves once every block handed to `store` so far is written to storage (write-through for a prefill/decode split). */
  flush(): Promise<void>;
}
