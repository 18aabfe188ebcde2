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
import { ESCAPED, FrameMachine, frameKey, sentinelStack, stackKey, T_TEXT, type Frame, type Stack } from './grammar-frames.ts';
import type { Grammar } from './grammar-nodes.ts';
import { buildTrie, PLAIN_MAX_CHARS, type ByteTrie, type VocabIndex } from './vocab-index.ts';

export interface MatcherState {
  readonly stacks: readonly Stack[];
  readonly key: string;
}

export interface MaskEntry {
  /** Allowed token ids (bitset over the vocabulary); stop tokens are not in it. */
  readonly bits: Uint32Array;
  /** Some stack is complete: a stop token (EOS) may end the reply here. */
  readonly accepts: boolean;
  /** Largest close cost among the allowed tokens (≤ the budget it was computed for). */
  readonly maxCost: number;
}

const DEDUPE_OVER = 8;
/**
 * Masks kept per grammar (each is one bit per token: 16 KiB at 128k tokens).
 * Past this the cache starts over: bounded numbers and strings with
 * maxLength make positions that a long-running server would otherwise
 * accumulate without end.
 */
export const MAX_CACHED_MASKS = 1024;
/** Cached matcher steps per grammar (state objects; a few hundred bytes each). */
const MAX_CACHED_STEPS = 65536;

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

interface Escapes {
  nodes: number[];
  bytes: number[];
}

export class GrammarMasks {
  readonly machine: FrameMachine;
  private readonly entries = new Map<string, MaskEntry>();
  private readonly locals = new Map<string, LocalEntry>();
  /** Steps taken from a state (advanceToken), by state object; started over past MAX_CACHED_STEPS. */
  private steps = new WeakMap<MatcherState, Map<number, MatcherState>>();
  private stepCount = 0;
  private readonly byteSplits = new Map<number, { without: Uint32Array; withTrie: ByteTrie }>();
  /** Entries' bitsets with the stop tokens added (for accepting states), by entry. */
  private readonly withStops = new WeakMap<MaskEntry, { stops: readonly number[]; stopsKey: string; bits: Uint32Array }>();
  private readonly words: number;

  constructor(
    readonly grammar: Grammar,
    readonly vocab: VocabIndex,
  ) {
    this.machine = new FrameMachine(grammar);
    this.words = (vocab.size + 31) >>> 5;
  }

  get cachedMasks(): number {
    return this.entries.size;
  }

  initial(): MatcherState {
    const out: Stack[] = [];
    this.machine.push(null, this.grammar.root, out);
    return this.stateOf(out);
  }

  stateOf(stacks: Stack[]): MatcherState {
    // One stack (the usual step) or none: its key as is, without the dedupe map, sort and join.
    if (stacks.length === 0) return { stacks: [], key: '' };
    if (stacks.length === 1) return { stacks: [stacks[0]], key: stackKey(stacks[0], this.grammar) };
    const byKey = new Map<string, Stack>();
    for (const s of stacks) byKey.set(stackKey(s, this.grammar), s);
    const keys = [...byKey.keys()].sort();
    return { stacks: keys.map((k) => byKey.get(k)!), key: keys.join('|') };
  }

  /** The state after `bytes`; empty stacks when the grammar rejects them. */
  advance(state: MatcherState, bytes: Uint8Array): MatcherState {
    let cur: Stack[] = state.stacks as Stack[];
    for (const c of bytes) {
      const next: Stack[] = [];
      for (const s of cur) this.machine.feed(s, c, next);
      cur = next.length > DEDUPE_OVER ? dedupe(next, this.grammar) : next;
      if (cur.length === 0) break;
    }
    return this.stateOf(cur);
  }

  /**
   * The state after token `id`. Inside a string body a plain token only
   * moves the character count, so its state is built directly (and cached by
   * state and count) instead of feeding its bytes: the common step of a
   * reply, and of every step of a random model inside a long string.
   */
  advanceToken(state: MatcherState, id: number): MatcherState {
    // Steps are cached per state object (a cached step returns the same object, so a reply's next lookup hits
    // by identity): no per-step key string to build and hash. Key: -chars for a plain step, else the token id.
    let steps = this.steps.get(state);
    if (steps === undefined) {
      if (this.stepCount > MAX_CACHED_STEPS) {
        this.steps = new WeakMap();
        this.stepCount = 0;
      }
      steps = new Map();
      this.steps.set(state, steps);
    }
    const chars = this.vocab.plainChars[id];
    const top = state.stacks.length === 1 ? state.stacks[0] : null;
    if (chars > 0 && top !== null && top.f.p === 1) {
      const node = this.grammar.nodes[top.f.n];
      if (node.kind === 'str' && (node.exclude === null || top.f.x === 0)) {
        let next = steps.get(-chars);
        if (next === undefined) {
          const count = top.f.a + chars;
          if (count > node.max) next = { stacks: [], key: '' };
          else {
            const f = { n: top.f.n, p: 1, a: node.max === Infinity ? Math.min(count, node.min) : count, b: 0, s: '', x: 0 };
            next = this.stateOf([{ f, up: top.up }]);
          }
          this.stepCount++;
          steps.set(-chars, next);
        }
        return next;
      }
    }
    if (top !== null && top.f.p === T_TEXT) {
      const node = this.grammar.nodes[top.f.n];
      if (node.kind === 'trig' && !this.vocab.pieces[id].includes(node.marker[0])) {
        return top.f.a === 0 ? state : this.stateOf([{ f: { n: top.f.n, p: T_TEXT, a: 0, b: 0, s: '', x: 0 }, up: top.up }]);
      }
    }
    // Other steps: cached per (state, token), since a model repeats itself (keys, punctuation, numbers).
    let next = steps.get(id);
    if (next === undefined) {
      next = this.advance(state, this.vocab.pieces[id]);
      this.stepCount++;
      steps.set(id, next);
    }
    return next;
  }

  accepts(state: MatcherState): boolean {
    return state.stacks.some((s) => this.machine.accepts(s));
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

  /** Fewest bytes that complete the grammar from `state` (Infinity: rejected). */
  cost(state: MatcherState): number {
    let best = Infinity;
    for (const s of state.stacks) best = Math.min(best, this.machine.stackCost(s));
    return best;
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
    const bits = new Uint32Array(this.words);
    const stat = { maxCost: -1 };
    const accepts = this.accepts(state);
    if (budget !== Infinity) {
      this.walkStacks(state.stacks, budget, bits, stat, null);
      return { bits, accepts, maxCost: stat.maxCost };
    }
    const machine = this.machine;
    let touched = false;
    for (let st of state.stacks) {
      // A finished frame passes every byte down: the stack below is the same state.
      while (st.up !== null && this.finishedOnly(st.f)) st = st.up;
      if (this.finishedOnly(st.f)) continue; // the top level is complete: only a stop token
      const local = this.localEntry(st.f);
      const upCost = st.up === null ? 0 : machine.stackCost(st.up);
      if (upCost === Infinity) continue;
      if (local.maxLocalCost >= 0) {
        // Nothing set yet (the usual one-stack state): a copy, not a word-by-word OR.
        if (!touched) bits.set(local.bits);
        else for (let w = 0; w < bits.length; w++) bits[w] |= local.bits[w];
        touched = true;
        stat.maxCost = Math.max(stat.maxCost, local.maxLocalCost + upCost);
      }
      if (st.up === null) continue; // nothing may follow the top level
      // Tokens that leave the frame: the rest of their bytes go to the stack below (a walk of those subtrees only).
      const { trie } = local;
      for (let i = 0; i < local.escapeNodes.length; i++) {
        const node = local.escapeNodes[i];
        const cur: Stack[] = [];
        machine.feed(st.up, local.escapeBytes[i], cur);
        if (cur.length === 0) continue;
        touched = true;
        this.allowTokensAt(trie, node, cur, Infinity, bits, stat);
        this.walk(trie, cur, Infinity, bits, stat, null, node);
      }
    }
    return { bits, accepts, maxCost: stat.maxCost };
  }

  /** lit done, string/object/array closed, seq complete: the frame can only pass bytes down. */
  private finishedOnly(f: Frame): boolean {
    return this.machine.finishedOnly(f);
  }

  /** Tokens without byte `b` (a bitset) and a trie of the others, made once per byte and vocabulary. */
  private byByte(b: number): { without: Uint32Array; withTrie: ByteTrie } {
    let known = this.byteSplits.get(b);
    if (known === undefined) {
      const without = new Uint32Array(this.words);
      const has = new Uint8Array(this.vocab.size);
      this.vocab.pieces.forEach((p, id) => {
        if (p.length === 0) return;
        if (p.includes(b)) has[id] = 1;
        else without[id >>> 5] |= 1 << (id & 31);
      });
      known = { without, withTrie: buildTrie(this.vocab.pieces, (id) => has[id] === 1) };
      this.byteSplits.set(b, known);
    }
    return known;
  }

  private allowTokensAt(trie: ByteTrie, node: number, stacks: readonly Stack[], budget: number, bits: Uint32Array, stat: { maxCost: number }): void {
    if (trie.tokStart[node] === trie.tokStart[node + 1]) return;
    let cost = Infinity;
    for (let i = 0; i < stacks.length; i++) cost = Math.min(cost, this.machine.stackCost(stacks[i]));
    if (cost > budget || cost === Infinity) return;
    if (cost > stat.maxCost) stat.maxCost = cost;
    for (let t = trie.tokStart[node]; t < trie.tokStart[node + 1]; t++) {
      const id = trie.tokIds[t];
      bits[id >>> 5] |= 1 << (id & 31);
    }
  }

  private localEntry(f: Frame): LocalEntry {
    const key = frameKey(f, this.grammar);
    let local = this.locals.get(key);
    if (local !== undefined) return local;
    const bits = new Uint32Array(this.words);
    const stat = { maxCost: -1 };
    const escapes: Escapes = { nodes: [], bytes: [] };
    const trie = this.walkStacks([{ f, up: sentinelStack() }], Infinity, bits, stat, escapes);
    local = { bits, maxLocalCost: stat.maxCost, trie, escapeNodes: Int32Array.from(escapes.nodes), escapeBytes: Uint8Array.from(escapes.bytes) };
    this.locals.set(key, local);
    return local;
  }

  /** A string body on top: plain tokens as one bitset, only the others walked. */
  private walkStacks(stacks: readonly Stack[], budget: number, bits: Uint32Array, stat: { maxCost: number }, escapes: Escapes | null): ByteTrie {
    const top = stacks.length === 1 ? stacks[0] : null;
    const node = top ? this.grammar.nodes[top.f.n] : null;
    // A plain token never closes the string, so excluded key names do not change which are allowed — only
    // (by at most one byte) the cost after them; under a binding budget that must be exact, so walk instead.
    if (top && node && node.kind === 'str' && top.f.p === 1 && (node.exclude === null || top.f.x === 0 || budget === Infinity)) {
      this.plainString(top, node.min, node.max, budget, bits, stat, top.f.x !== 0 ? 1 : 0);
      this.walk(this.vocab.nonPlainTrie, stacks, budget, bits, stat, escapes, 0);
      return this.vocab.nonPlainTrie;
    }
    if (top && node && node.kind === 'trig' && top.f.p === T_TEXT) {
      // Free text: a token without the marker's first byte stays text (cost 0 here); walk only the others.
      const rest = top.up === null ? 0 : this.machine.stackCost(top.up);
      const split = this.byByte(node.marker[0]);
      if (rest <= budget && rest !== Infinity) {
        for (let w = 0; w < bits.length; w++) bits[w] |= split.without[w];
        stat.maxCost = Math.max(stat.maxCost, rest);
      }
      this.walk(split.withTrie, stacks, budget, bits, stat, escapes, 0);
      return split.withTrie;
    }
    this.walk(this.vocab.trie, stacks, budget, bits, stat, escapes, 0);
    return this.vocab.trie;
  }

  /** Plain tokens inside a string body: chars ≤ what maxLength leaves, and (under a budget) enough chars to reach minLength in time. */
  private plainString(top: Stack, min: number, max: number, budget: number, bits: Uint32Array, stat: { maxCost: number }, slack: number): void {
    const count = top.f.a;
    const kmax = Math.min(PLAIN_MAX_CHARS, max - count);
    if (kmax < 1) return;
    const rest = top.up === null ? 0 : this.machine.stackCost(top.up);
    if (rest === Infinity || rest + 1 > budget) return;
    // cost(n chars) = rest + 1 + max(0, min − count − n) ≤ budget  ⇔  n ≥ nmin
    const nmin = Math.max(1, min - count - (budget - rest - 1));
    if (nmin > kmax) return;
    const upTo = this.vocab.plainUpTo[kmax];
    const below = nmin >= 2 ? this.vocab.plainUpTo[nmin - 1] : null;
    for (let w = 0; w < bits.length; w++) bits[w] |= below ? upTo[w] & ~below[w] : upTo[w];
    stat.maxCost = Math.max(stat.maxCost, rest + 1 + Math.max(0, min - count - nmin) + slack);
  }

  /**
   * Depth-first over the trie, feeding each edge's byte to the stacks that
   * reached its parent. With `escapes` (a local walk): where a stack leaves
   * its frame (ESCAPED), every token of that subtree is recorded with the
   * byte index it left at.
   */
  private walk(trie: ByteTrie, start: readonly Stack[], budget: number, bits: Uint32Array, stat: { maxCost: number }, escapes: Escapes | null, from: number): void {
    const { edgeStart, edgeByte, edgeChild, tokStart, tokIds } = trie;
    const machine = this.machine;
    const nodes: number[] = [from];
    const states: Stack[][] = [start as Stack[]];
    while (nodes.length > 0) {
      const n = nodes.pop()!;
      const cur = states.pop()!;
      for (let e = edgeStart[n]; e < edgeStart[n + 1]; e++) {
        const c = edgeByte[e];
        let next: Stack[] = [];
        for (let i = 0; i < cur.length; i++) machine.feed(cur[i], c, next);
        if (next.length === 0) continue;
        const child = edgeChild[e];
        if (escapes !== null && next.includes(ESCAPED)) {
          escapes.nodes.push(child);
          escapes.bytes.push(c);
          next = next.filter((s) => s !== ESCAPED);
          if (next.length === 0) continue;
        }
        if (next.length > DEDUPE_OVER) next = dedupe(next, this.grammar);
        if (tokStart[child] < tokStart[child + 1]) {
          let cost = Infinity;
          for (let i = 0; i < next.length; i++) cost = Math.min(cost, machine.stackCost(next[i]));
          if (cost <= budget && cost !== Infinity) {
            if (cost > stat.maxCost) stat.maxCost = cost;
            for (let t = tokStart[child]; t < tokStart[child + 1]; t++) {
              const id = tokIds[t];
              bits[id >>> 5] |= 1 << (id & 31);
            }
          }
        }
        if (edgeStart[child] < edgeStart[child + 1]) {
          nodes.push(child);
          states.push(next);
        }
      }
    }
  }
}

function dedupe(stacks: Stack[], g: Grammar): Stack[] {
  const byKey = new Map<string, Stack>();
  for (const s of stacks) byKey.set(stackKey(s, g), s);
  return [...byKey.values()];
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
