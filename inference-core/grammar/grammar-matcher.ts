/**
 * Matcher states of a grammar and the steps between them: a state is a set
 * of stacks (grammar-frames.ts), keyed for the mask caches (token-mask.ts);
 * a step feeds a token's bytes, or — for the common plain token inside a
 * string body — builds the next state directly. The base of TrieWalker and
 * GrammarMasks.
 */
import { FrameMachine, stackKey, T_TEXT, type Stack } from './grammar-frames.ts';
import type { Grammar } from './grammar-nodes.ts';
import type { VocabIndex } from './vocab-index.ts';

export interface MatcherState {
  readonly stacks: readonly Stack[];
  readonly key: string;
}

export const DEDUPE_OVER = 8;
/** Cached matcher steps per grammar (state objects; a few hundred bytes each). */
const MAX_CACHED_STEPS = 65536;

export class GrammarMatcher {
  readonly machine: FrameMachine;
  /** Steps taken from a state (advanceToken), by state object; started over past MAX_CACHED_STEPS. */
  private steps = new WeakMap<MatcherState, Map<number, MatcherState>>();
  private stepCount = 0;

  constructor(
    readonly grammar: Grammar,
    readonly vocab: VocabIndex,
  ) {
    this.machine = new FrameMachine(grammar);
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

  /** Fewest bytes that complete the grammar from `state` (Infinity: rejected). */
  cost(state: MatcherState): number {
    let best = Infinity;
    for (const s of state.stacks) best = Math.min(best, this.machine.stackCost(s));
    return best;
  }
}

export function dedupe(stacks: Stack[], g: Grammar): Stack[] {
  const byKey = new Map<string, Stack>();
  for (const s of stacks) byKey.set(stackKey(s, g), s);
  return [...byKey.values()];
}
