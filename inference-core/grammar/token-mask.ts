/**
 * Per-step token masks of a grammar over a vocabulary.
 *
 * A matcher state is a set of stacks (grammar-frames.ts). Its mask is found
 * by walking the vocabulary's byte trie once, feeding each edge's byte to
 * the states reached so far and cutting a subtree as soon as no stack
 * survives — so shared prefixes are fed once and most of a 128k vocabulary
 * is never visited. A string state takes the plain-string tokens as one
 * bitset (vocab-index.ts) and walks only the rest. Masks are cached per
 * state key: the same grammar position later in the reply, or in the next
 * request with the same schema, costs one Map lookup.
 *
 * Budget: a token is allowed only if the bytes that still close the grammar
 * after it (the state's cost) fit the budget, so the reply can always end.
 * Each entry records the largest cost among its tokens; only when that
 * exceeds the budget (the last few tokens of a reply) is a budget-specific
 * mask computed (and cached under state+budget).
 */
import { GrammarError } from './grammar-errors.ts';
import { frameKey, sentinelStack, type Frame, type Stack } from './grammar-frames.ts';
import type { MatcherState } from './grammar-matcher.ts';
import { TrieWalker, type Escapes } from './trie-walk.ts';
import type { ByteTrie, VocabIndex } from './vocab-index.ts';

export type { MatcherState } from './grammar-matcher.ts';

export interface MaskEntry {
  /** Allowed token ids (bitset over the vocabulary); stop tokens are not in it. */
  readonly bits: Uint32Array;
  /** Some stack is complete: a stop token (EOS) may end the reply here. */
  readonly accepts: boolean;
  /** Largest close cost among the allowed tokens (≤ the budget it was computed for). */
  readonly maxCost: number;
}

/**
 * Masks kept per grammar (each is one bit per token: 16 KiB at 128k tokens).
 * Past this the cache starts over: bounded numbers and strings with
 * maxLength make positions that a long-running server would otherwise
 * accumulate without end.
 */
export const MAX_CACHED_MASKS = 1024;

/**
 * What one top frame allows regardless of the stack below it (xgrammar's
 * context-independent tokens), and the tokens that leave the frame: those
 * are checked against the real stack below, from the byte where they left.
 */
interface LocalEntry {
  readonly bits: Uint32Array;
  /** Largest close cost of the frame itself after an inside token (-1: none). */
  readonly maxLocalCost: number;
  /** The trie walked (the plain-string fast path walks the non-plain trie) and where stacks left the frame: the node reached and the byte that left. */
  readonly trie: ByteTrie;
  readonly escapeNodes: Int32Array;
  readonly escapeBytes: Uint8Array;
}

export class GrammarMasks extends TrieWalker {
  private readonly entries = new Map<string, MaskEntry>();
  private readonly locals = new Map<string, LocalEntry>();
  private readonly contents: Array<string | null | undefined> = [];
  /** Entries' bitsets with the stop tokens added (for accepting states), by entry. */
  private readonly withStops = new WeakMap<MaskEntry, { stops: readonly number[]; stopsKey: string; bits: Uint32Array }>();

  get cachedMasks(): number {
    return this.entries.size;
  }

  /** `entry.bits` plus `stops` (computed once per entry; the stop list is the same for a model). */
  bitsWithStops(entry: MaskEntry, stops: readonly number[]): Uint32Array {
    let cached = this.withStops.get(entry);
    // Same stop array as last time (one decoder's steps): no key string built per step.
    if (cached !== undefined && cached.stops === stops) return cached.bits;
    const stopsKey = stops.join(',');
    if (cached === undefined || cached.stopsKey !== stopsKey) {
      const bits = entry.bits.slice();
      for (const t of stops) bits[t >>> 5] |= 1 << (t & 31);
      cached = { stops, stopsKey, bits };
      this.withStops.set(entry, cached);
    } else cached.stops = stops;
    return cached.bits;
  }

  /** The mask of `state` for tokens after which at most `budget` bytes close the grammar. */
  mask(state: MatcherState, budget: number): MaskEntry {
    let entry = this.entries.get(state.key);
    if (entry === undefined) {
      if (this.entries.size >= MAX_CACHED_MASKS) this.entries.clear();
      if (this.locals.size >= MAX_CACHED_MASKS) this.locals.clear();
      entry = this.compute(state, Infinity);
      this.entries.set(state.key, entry);
    }
    if (entry.maxCost <= budget) return entry;
    const key = `${state.key}@${budget}`;
    let tight = this.entries.get(key);
    if (tight === undefined) {
      tight = this.compute(state, budget);
      this.entries.set(key, tight);
    }
    return tight;
  }

  /**
   * Without a binding budget: per stack, its top frame's local entry (cached
   * by frame key, so shared by every context the frame appears in) plus its
   * escaping tokens fed on into the stack below. Under a binding budget (the
   * last tokens of a reply): one walk over the whole stacks.
   */
  private compute(state: MatcherState, budget: number): MaskEntry {
    const stat = { maxCost: -1 };
    const accepts = this.accepts(state);
    if (budget !== Infinity) {
      const all = new Uint32Array(this.words);
      this.walkStacks(state.stacks, budget, all, stat, null);
      return { bits: all, accepts, maxCost: stat.maxCost };
    }
    const machine = this.machine;
    // The usual one-stack state whose tokens all stay in the top frame shares the local entry's bitset (both
    // read-only); anything more is written to a copy, made on the first write.
    let bits: Uint32Array | null = null;
    let own = false;
    const writable = (): Uint32Array => {
      if (!own) {
        bits = bits === null ? new Uint32Array(this.words) : bits.slice();
        own = true;
      }
      return bits!;
    };
    for (let st of state.stacks) {
      // A finished frame passes every byte down: the stack below is the same state.
      while (st.up !== null && this.finishedOnly(st.f)) st = st.up;
      if (this.finishedOnly(st.f)) continue; // the top level is complete: only a stop token
      const local = this.localEntry(st.f);
      const upCost = st.up === null ? 0 : machine.stackCost(st.up);
      if (upCost === Infinity) continue;
      if (local.maxLocalCost >= 0) {
        if (bits === null) bits = local.bits;
        else {
          const w = writable();
          for (let i = 0; i < w.length; i++) w[i] |= local.bits[i];
        }
        stat.maxCost = Math.max(stat.maxCost, local.maxLocalCost + upCost);
      }
      if (st.up === null) continue; // nothing may follow the top level
      // Tokens that leave the frame: the rest of their bytes go to the stack below (a walk of those subtrees
      // only). Many leave on the same byte: the stack below is fed each byte once.
      const { trie } = local;
      const fed: Array<Stack[] | undefined> = [];
      for (let i = 0; i < local.escapeNodes.length; i++) {
        const node = local.escapeNodes[i];
        const c = local.escapeBytes[i];
        let cur = fed[c];
        if (cur === undefined) {
          cur = [];
          machine.feed(st.up, c, cur);
          fed[c] = cur;
        }
        if (cur.length === 0) continue;
        const w = writable();
        this.allowTokensAt(trie, node, cur, Infinity, w, stat);
        this.walk(trie, cur, Infinity, w, stat, null, node);
      }
    }
    return { bits: bits ?? new Uint32Array(this.words), accepts, maxCost: stat.maxCost };
  }

  /** lit done, string/object/array closed, seq complete: the frame can only pass bytes down. */
  private finishedOnly(f: Frame): boolean {
    return this.machine.finishedOnly(f);
  }

  private localEntry(f: Frame): LocalEntry {
    // Literal, string and number frames read nothing but their own node's fields: their entries are kept per
    // vocabulary under the node's content, so every grammar (every schema) shares them.
    const content = this.contentOf(f.n);
    const cache = content === null ? this.locals : sharedLocals(this.vocab);
    const key = content === null ? frameKey(f, this.grammar) : `${content}|${f.p}.${f.a}.${f.b}.${f.s}.${f.x}`;
    let local = cache.get(key);
    if (local !== undefined) return local;
    if (cache.size >= MAX_CACHED_MASKS) cache.clear();
    const bits = new Uint32Array(this.words);
    const stat = { maxCost: -1 };
    const escapes: Escapes = { nodes: [], bytes: [] };
    const trie = this.walkStacks([{ f, up: sentinelStack() }], Infinity, bits, stat, escapes);
    local = { bits, maxLocalCost: stat.maxCost, trie, escapeNodes: Int32Array.from(escapes.nodes), escapeBytes: Uint8Array.from(escapes.bytes) };
    cache.set(key, local);
    return local;
  }

  /** The content of a literal, string or number node (what its frames' local entries depend on); null for others. */
  private contentOf(n: number): string | null {
    let c = this.contents[n];
    if (c === undefined) {
      const nd = this.grammar.nodes[n];
      if (nd.kind === 'lit') c = `l${Array.from(nd.bytes).join(',')}`;
      else if (nd.kind === 'str') c = `s${nd.min},${nd.max},${nd.exclude === null ? '' : JSON.stringify(nd.exclude.map((e) => Array.from(e)))}`;
      else if (nd.kind === 'num') c = `n${nd.integer},${JSON.stringify(nd.bounds)}`;
      else c = null;
      this.contents[n] = c;
    }
    return c;
  }
}

const shared = new WeakMap<VocabIndex, Map<string, LocalEntry>>();

/** Local entries of literal, string and number frames over a vocabulary, shared by every grammar (same bound as per grammar). */
function sharedLocals(vocab: VocabIndex): Map<string, LocalEntry> {
  let m = shared.get(vocab);
  if (m === undefined) {
    m = new Map();
    shared.set(vocab, m);
  }
  return m;
}

/** Reference twin of `GrammarMasks.mask`: every token's bytes through the matcher, one by one. */
export function bruteForceMask(masks: GrammarMasks, state: MatcherState, budget: number): Uint32Array {
  const bits = new Uint32Array((masks.vocab.size + 31) >>> 5);
  masks.vocab.pieces.forEach((p, id) => {
    if (p.length === 0) return;
    const after = masks.advance(state, p);
    if (after.stacks.length === 0) return;
    const cost = masks.cost(after);
    if (cost <= budget && cost !== Infinity) bits[id >>> 5] |= 1 << (id & 31);
  });
  return bits;
}

export function maskHas(bits: Uint32Array, id: number): boolean {
  return (bits[id >>> 5] & (1 << (id & 31))) !== 0;
}

/** Dead end guard: the grammar needs a byte no token can give. */
export function deadEnd(detail: string): GrammarError {
  return new GrammarError('KVT_ERR_GRAMMAR_DEAD_END', `${detail}; the vocabulary cannot spell what the grammar needs — report the schema and model`);
}
