/**
 * Frames and stacks of the grammar machine (grammar-frames.ts): their
 * shapes, phase numbers, and the keys that identify them in the mask caches.
 */
import type { Grammar } from './grammar-nodes.ts';

/**
 * p: phase; a, b: counters; s: a bounded number's text so far (number
 * frames: p, a, b are the number-state.ts automaton); x: bitmask of excluded
 * key contents that still match.
 */
export interface Frame {
  readonly n: number;
  readonly p: number;
  readonly a: number;
  readonly b: number;
  readonly s: string;
  readonly x: number;
  key?: string;
}

export interface Stack {
  readonly f: Frame;
  readonly up: Stack | null;
  key?: string;
  cost?: number;
}

export const DONE = -1;
// str phases
export const S_OPEN = 0, S_BODY = 1, S_ESC = 2, S_HEX = 3, S_UTF8 = 4, S_END = 5;
// obj phases
export const O_OPEN = 0, O_MEMBER_OR_CLOSE = 1, O_MEMBER = 2, O_VALUE = 4, O_COLON = 5, O_EXTRA_VALUE = 6, O_END = 9;
// arr phases
export const A_OPEN = 0, A_FIRST = 1, A_NEXT = 2, A_ITEM = 3, A_END = 9;
// trig phases
export const T_TEXT = 0;
export const T_MARKED = 1, T_END = 9;

/** Longest prefix of `marker` that ends the text after byte `c`, given `a` bytes matched before. */
export function kmpStep(marker: Uint8Array, fail: Int32Array, a: number, c: number): number {
  while (a > 0 && marker[a] !== c) a = fail[a - 1];
  return marker[a] === c ? a + 1 : 0;
}

/**
 * Counted characters or items of an unbounded string or array stop at its minimum (only reaching it matters),
 * so positions past it share one key. A module function, not a closure per fed byte: those cost an allocation
 * (and, under tsx, a defineProperty for the name) on every step of the trie walk.
 */
export function clampCount(nd: { readonly min: number; readonly max: number }, count: number): number {
  return nd.max === Infinity ? Math.min(count, nd.min) : count;
}

export function frame(n: number, p: number, a = 0, b = 0, s = '', x = 0): Frame {
  return { n, p, a, b, s, x };
}

/** The frame's cache key (an unbounded number frame keeps no text: its automaton state is its whole key). */
export function frameKey(f: Frame, _g?: Grammar): string {
  if (f.key !== undefined) return f.key;
  const k = `${f.n}.${f.p}.${f.a}.${f.b}.${f.s}.${f.x}`;
  f.key = k;
  return k;
}

export function stackKey(st: Stack, g: Grammar): string {
  if (st.key !== undefined) return st.key;
  const k = st.up === null ? frameKey(st.f, g) : `${frameKey(st.f, g)}/${stackKey(st.up, g)}`;
  st.key = k;
  return k;
}

/**
 * The context boundary of a local walk: a stack [top frame, SENTINEL] runs
 * the top frame alone; a byte that would go below it yields ESCAPED.
 */
export const SENTINEL_NODE = -1;
export const ESCAPED: Stack = { f: { n: -2, p: 0, a: 0, b: 0, s: '', x: 0, key: 'ESC' }, up: null, key: 'ESC', cost: 0 };
export function sentinelStack(): Stack {
  return { f: { n: SENTINEL_NODE, p: 0, a: 0, b: 0, s: '', x: 0, key: 'S' }, up: null, key: 'S', cost: 0 };
}
