/**
 * The scheduler's side of prefix units (issue #26), for a model whose state
 * is not its K/V blocks (lfm2's convolution state): what a request fetches
 * (the longest unit of its prompt, src/kvtier/tier-units.ts) and where it
 * writes units. Blocks are still stored as the prefill goes (store.ts): a
 * unit names them; its tail is written here.
 *
 * When a unit is written (each one is the state after exactly p tokens):
 *   - at the end of the prompt, and at the end of the reply (the last sampled
 *     token is fed first, so the next turn's prompt — this one, the reply,
 *     the next message — starts with the unit's tokens);
 *   - every `intervalTokens` tokens of the prompt and of the reply (positions
 *     k·N; the prefill is cut there, schedule.ts);
 *   - at a common prefix: each prompt's block keys are counted per worker
 *     (the keys are tenant-salted, so counts are per tenant); when the
 *     deepest block seen in ≥ K prompts ends past the unit the request
 *     found, the prefill stops at its end (a block boundary) and writes a
 *     unit there. A shared system + tools prompt thus gets a unit at its
 *     last whole block on the K-th request. Cost: one Map update per prompt
 *     block, in a map bounded to `commonPrefixEntries` keys (~120 B each,
 *     least recently seen dropped first), and one tail write per detected prefix.
 *
 * A no-store request writes no unit. A unit that fails to load, or any
 * storage fault, is a miss: the request prefills from 0. Fetch or recompute
 * (fetch.ts shouldLoad, the blocks' policy): a unit is loaded only when
 * reading its blocks and tail is predicted to beat prefilling its p tokens;
 * else it is computed and reported as recomputedHitTokens.
 */
import { exportUnitBlocks, exportUnitTail, importUnit, unitServingOf, type Sequence } from '../../inference-core/index.ts';
import type { KvDtype, KvLayout, LoadedUnit, TailSectionRecord, UnitHit } from '../kvtier/index.ts';
import { describeError } from '../errors.ts';
import { shouldLoad, type FetchDeps } from './fetch.ts';
import { retain } from './postprocess.ts';
import type { EngineSequence } from './ports.ts';
import type { RequestSequence } from './sequence.ts';

/** The engine's unit export and import (inference-core/engine/unit-state.ts), fitted by engine-thread.ts. */
export interface UnitEnginePort<S extends EngineSequence = EngineSequence> {
  /** Block payloads [from, to) of the unit's block layers (gemma3: its global layers; lfm2: whole pages). */
  exportBlocks(seq: S, from: number, to: number): Uint8Array[];
  /** The tail of the unit at the sequence's current length (its blocks are the sequence's full blocks). */
  exportTail(seq: S): { position: number; dtype: KvDtype; sections: TailSectionRecord[] };
  /** Restores a unit into an empty sequence; throws (a miss) when it does not fit the engine. */
  importUnit(seq: S, unit: FetchedUnit): void;
}

/** The port over an engine (unit-state.ts's export and import). */
export function engineUnitPort(engine: Parameters<typeof exportUnitTail>[0] & Parameters<typeof importUnit>[0]): UnitEnginePort<Sequence> {
  return {
    exportBlocks: (seq, from, to) => exportUnitBlocks(engine, seq, from, to),
    exportTail: (seq) => exportUnitTail(engine, seq),
    importUnit: (seq, unit) => importUnit(engine, seq, { position: unit.position, blocks: unit.blocks, tail: unit.sections }),
  };
}

type ServedEngine = Parameters<typeof unitServingOf>[0] & Parameters<typeof engineUnitPort>[0] & { fingerprint: string; kvLayout: KvLayout };

/**
 * How the worker serves `engine` from the tier (unit-state.ts unitServingOf):
 * null for 'blocks' (whole pages, the ordinary path) and 'off'. In unit mode
 * the blocks hold the unit's block layers only, so when those are fewer than
 * the pages' layers (gemma3: its global layers) the blocks live under their
 * own namespace (`<fingerprint>/unit-blocks:<layers>`), never mixed with the
 * whole-page blocks the same model stores in block mode.
 */
export function unitServing(engine: ServedEngine): { mode: 'blocks' | 'units' | 'off'; fingerprint: string; layout: KvLayout; port: UnitEnginePort<Sequence> | null } {
  const { mode, blockLayers } = unitServingOf(engine);
  const whole = engine.kvLayout;
  if (mode !== 'units') return { mode, fingerprint: engine.fingerprint, layout: whole, port: null };
  const subset = blockLayers < whole.layers;
  return {
    mode,
    fingerprint: subset ? `${engine.fingerprint}/unit-blocks:${blockLayers}` : engine.fingerprint,
    layout: { layers: blockLayers, kvHeads: whole.kvHeads, headDim: whole.headDim, dtype: whole.dtype, tokensPerBlock: whole.tokensPerBlock, ...(whole.kind ? { kind: whole.kind } : {}) },
    port: engineUnitPort(engine),
  };
}

export interface FetchedUnit {
  position: number;
  /** Payloads of the unit's full blocks, from block 0. */
  blocks: Uint8Array[];
  sections: TailSectionRecord[];
}

/** The tier's unit calls (cache-adapter.ts fits KvTier to them). */
export interface UnitCache {
  lookupUnit(namespace: NonNullable<RequestSequence['prefix']>['namespace'], tokens: Uint32Array, context: { tenant: string; trafficClass: string }, maxPosition: number, keys?: RequestSequence['keys']): Promise<UnitHit | null>;
  loadUnit(hit: UnitHit): Promise<LoadedUnit | null>;
  storeUnit(request: UnitStoreCall): void;
}

export interface UnitStoreCall {
  namespace: NonNullable<RequestSequence['prefix']>['namespace'];
  tokens: Uint32Array;
  dtype: KvDtype;
  sections: TailSectionRecord[];
  tenant: string;
  trafficClass: string;
  retention?: RequestSequence['spec']['retention'];
  keys?: NonNullable<RequestSequence['keys']>;
}

/** `KVTIER_UNIT_INTERVAL_TOKENS` default: see bench/RESULTS.md "units" (interval sweep). */
export const DEFAULT_UNIT_INTERVAL_TOKENS = 1024;
/** A prefix seen in this many prompts of one tenant gets a unit (`KVTIER_UNIT_COMMON_PREFIX_REQUESTS`). */
export const DEFAULT_COMMON_PREFIX_REQUESTS = 2;
const DEFAULT_COMMON_PREFIX_ENTRIES = 65_536;

export interface UnitPolicyOptions {
  intervalTokens?: number;
  commonPrefixRequests?: number;
  commonPrefixEntries?: number;
}

export class UnitPolicy {
  readonly intervalTokens: number;
  readonly commonPrefixRequests: number;
  private readonly maxEntries: number;
  /** Block key → prompts that held it (insertion order = least recently seen first). */
  private readonly seen = new Map<string, number>();

  constructor(
    readonly engine: UnitEnginePort,
    readonly cache: UnitCache,
    options: UnitPolicyOptions = {},
  ) {
    this.intervalTokens = options.intervalTokens ?? DEFAULT_UNIT_INTERVAL_TOKENS;
    this.commonPrefixRequests = options.commonPrefixRequests ?? DEFAULT_COMMON_PREFIX_REQUESTS;
    this.maxEntries = options.commonPrefixEntries ?? DEFAULT_COMMON_PREFIX_ENTRIES;
  }

  /** Counts the prompt's first `blocks` block keys; the end (in tokens) of the deepest one seen in ≥ K prompts, 0 if none. */
  countPrefix(seq: RequestSequence, blocks: number, blockTokens: number): number {
    const keys = seq.keys;
    if (!keys || this.commonPrefixRequests < 1) return 0;
    let deepest = 0;
    for (let i = 0; i < Math.min(blocks, keys.blockCount); i++) {
      const key = keys.keyHex(i);
      const count = (this.seen.get(key) ?? 0) + 1;
      this.seen.delete(key);
      this.seen.set(key, count);
      if (count >= this.commonPrefixRequests) deepest = i + 1;
    }
    while (this.seen.size > this.maxEntries) this.seen.delete(this.seen.keys().next().value!);
    return deepest * blockTokens;
  }

  /** Positions in (from, to) where the prompt's prefill stops to write a unit, ascending. */
  promptStops(from: number, to: number, commonEnd: number): number[] {
    const stops = new Set<number>();
    const n = this.intervalTokens;
    if (n > 0) for (let p = (Math.floor(from / n) + 1) * n; p < to; p += n) stops.add(p);
    if (commonEnd > from && commonEnd < to) stops.add(commonEnd);
    return [...stops].sort((a, b) => a - b);
  }
}

/**
 * A retained sequence of the tenant whose whole KV is a prefix of the prompt (shorter than it): its
 * state is the unit at its length, already in the engine. Only whole: a sliding window, a
 * convolution or recurrent state cannot be cut back to an earlier position (the pages can, the
 * state past them cannot), so a sequence sharing only part of its tokens is put back and the
 * prompt goes to the tier's units. The last token of a reply is fed at its end (postprocess.ts
 * finish), so a next turn's prompt (prompt + reply + message) holds the whole sequence.
 */
function takeWholeDonor(seq: RequestSequence, deps: FetchDeps): { entry: RequestSequence; reusable: number } | null {
  const { tokens } = seq.spec;
  const taken = deps.retained.take(seq.tenantSalt, tokens, tokens.length - 1);
  if (taken === null) return null;
  if (taken.reusable > 0 && taken.reusable === taken.entry.fedTokens.length) return taken;
  retain(deps.retained, taken.entry);
  return null;
}

/**
 * Fetch in unit mode: the longest of a retained sequence that is a whole prefix of the prompt
 * (takeWholeDonor) and the prompt's longest unit in the tier (at most its length − 1: one token is
 * always computed). The tier is looked up even with a donor: another worker may have written a
 * deeper unit (a prefill/decode split's prefill half); a donor at least as deep wins (no read).
 */
export async function fetchUnit(seq: RequestSequence, deps: FetchDeps, units: UnitPolicy): Promise<void> {
  const { tokens, tenant, trafficClass } = seq.spec;
  const donor = takeWholeDonor(seq, deps);
  // The donor's state is exactly the unit at its length, already in the engine.
  const fromDonor = { loaded: [], release: null, donor: donor?.entry ?? null, reusable: donor?.reusable ?? 0, unit: null };
  seq.fetched = fromDonor;
  if (!deps.cache || !seq.prefix) return;
  seq.units.commonEnd = units.countPrefix(seq, Math.floor((tokens.length - 1) / deps.blockTokens), deps.blockTokens);
  const f = seq.figures;
  try {
    const started = deps.now();
    const hit = await units.cache.lookupUnit(seq.prefix.namespace, tokens, { tenant, trafficClass }, tokens.length - 1, seq.keys ?? undefined);
    f.lookupMs += deps.now() - started;
    if (hit === null || hit.position <= fromDonor.reusable) return;
    // The same policy as blocks: the unit's blocks and tail against prefilling the tokens it adds.
    const unitBytes = hit.blocks.hitBlocks * deps.cache.blockBytes + hit.tailBytes;
    if (!shouldLoad(seq, deps, unitBytes, hit.position - fromDonor.reusable)) return;
    const loadStarted = deps.now();
    const loaded = await units.cache.loadUnit(hit);
    const loadMs = deps.now() - loadStarted;
    f.loadMs += loadMs;
    // A unit that failed to load is a miss: the request continues the donor, or prefills from 0 (a slower answer, never a wrong one).
    if (loaded === null) return;
    deps.fetchPolicy?.observeLoad(unitBytes, loadMs);
    // The deeper unit replaces the donor, which goes back for its own conversation.
    if (donor !== null) retain(deps.retained, donor.entry);
    seq.fetched = { loaded: [], release: () => loaded.release(), donor: null, reusable: 0, unit: { position: loaded.position, blocks: loaded.blocks.map((b) => b.payload), sections: loaded.tail.sections } };
  } catch (error) {
    const described = describeError(error);
    f.storageError = `${described.code}: ${described.message}`;
    deps.onStorageError?.('lookup', error);
  }
}

/**
 * Imports a fetched unit into the sequence's empty KV. One that does not fit
 * the engine (another shape, blocks of another layout) is a miss, reported as
 * a load fault: false, and the prompt prefills from 0.
 */
export function importFetchedUnit(seq: RequestSequence, units: UnitPolicy, unit: FetchedUnit, onStorageError?: (phase: 'load', error: unknown) => void): boolean {
  try {
    units.engine.importUnit(seq.kv!, unit);
    return true;
  } catch (error) {
    const described = describeError(error);
    seq.figures.storageError = `${described.code}: ${described.message}`;
    onStorageError?.('load', error);
    // nothing of it stays: the prefill starts at token 0
    seq.kv!.truncate(0);
    return false;
  }
}

/** Writes the unit at the sequence's current length (its blocks were handed to the store before). Faults are reported, never thrown. */
export function writeUnit(seq: RequestSequence, units: UnitPolicy, onStorageError?: (phase: 'store', error: unknown) => void): void {
  const p = seq.fedTokens.length;
  if (!seq.kv || !seq.prefix || seq.spec.retention?.noStore || p === 0 || seq.units.lastAt === p) return;
  seq.units.lastAt = p;
  try {
    const tail = units.engine.exportTail(seq.kv);
    const { spec, keys } = seq;
    units.cache.storeUnit({
      namespace: seq.prefix.namespace,
      tokens: seq.fedTokens.view.slice(0, p),
      dtype: tail.dtype,
      sections: tail.sections,
      tenant: spec.tenant,
      trafficClass: spec.trafficClass,
      ...(spec.retention ? { retention: spec.retention } : {}),
      ...(keys ? { keys } : {}),
    });
  } catch (error) {
    onStorageError?.('store', error);
  }
}

/** After a prefill chunk or a decode row: a unit at a planned stop, the prompt's end, or an interval of the reply. */
export function unitDue(seq: RequestSequence, units: UnitPolicy, promptDone: boolean): boolean {
  const p = seq.fedTokens.length;
  if (promptDone || seq.units.stops.includes(p)) return true;
  return p > seq.spec.tokens.length && units.intervalTokens > 0 && p % units.intervalTokens === 0;
}
