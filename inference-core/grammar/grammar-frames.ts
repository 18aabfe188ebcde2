/**
 * The pushdown machine that runs a Grammar over bytes.
 *
 * A stack is a persistent linked list of frames (top first); each frame is
 * one node part-way through. Frames and stacks are immutable, so a trie walk
 * shares them freely. A byte fed to a stack either is consumed by the top
 * frame, or first calls a child node (the top becomes its return frame and
 * the child gets the byte), or ends the top frame (popped, the byte goes to
 * the parent). Alternatives fork the stack, so a matcher state is a set of
 * stacks.
 *
 * `closeCost` is the fewest bytes that finish a frame from where it is, once
 * its children (above it on the stack) have finished; a stack's cost is the
 * sum over its frames. Every value is achieved by a real completion whose
 * first byte lowers it by exactly one: the budget rule leans on that.
 */
import type { Grammar, GrammarNode } from './grammar-nodes.ts';
import { isCompleteNumber, minNumberCompletion, parseNumberPrefix, withinBounds } from './number-prefix.ts';

/**
 * p: phase; a, b: counters; s: number text so far; x: bitmask of excluded
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

const DONE = -1;
// str phases
const S_OPEN = 0, S_BODY = 1, S_ESC = 2, S_HEX = 3, S_UTF8 = 4, S_END = 5;
// obj phases
const O_OPEN = 0, O_MEMBER_OR_CLOSE = 1, O_MEMBER = 2, O_VALUE = 4, O_COLON = 5, O_EXTRA_VALUE = 6, O_END = 9;
// arr phases
const A_OPEN = 0, A_FIRST = 1, A_NEXT = 2, A_ITEM = 3, A_END = 9;
// trig phases
export const T_TEXT = 0;
const T_MARKED = 1, T_END = 9;

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
function clampCount(nd: { readonly min: number; readonly max: number }, count: number): number {
  return nd.max === Infinity ? Math.min(count, nd.min) : count;
}

function frame(n: number, p: number, a = 0, b = 0, s = '', x = 0): Frame {
  return { n, p, a, b, s, x };
}

export function frameKey(f: Frame, g: Grammar): string {
  if (f.key !== undefined) return f.key;
  const node = g.nodes[f.n];
  let k: string;
  if (node.kind === 'num' && node.bounds === null) {
    // Unbounded: only the shape matters (digit counts, for the caps), not the digits.
    k = `${f.n}#${f.s.replace(/(?<=\d)\d/g, 'd').replace(/(?<!\d)[1-9]/g, 'd')}`;
  } else k = `${f.n}.${f.p}.${f.a}.${f.b}.${f.s}.${f.x}`;
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

export class FrameMachine {
  /** Per obj node: whether a required member is at index ≥ i; the fewest bytes of the required members from i; their count. */
  private readonly reqAfter: Array<Uint8Array | null>;
  private readonly restCost: Array<Float64Array | null>;
  private readonly reqCount: Array<Int32Array | null>;
  private readonly numCost = new Map<string, number>();

  constructor(readonly g: Grammar) {
    this.reqAfter = g.nodes.map(() => null);
    this.restCost = g.nodes.map(() => null);
    this.reqCount = g.nodes.map(() => null);
    g.nodes.forEach((node, id) => {
      if (node.kind !== 'obj') return;
      const n = node.props.length;
      const after = new Uint8Array(n + 1);
      const rest = new Float64Array(n + 1);
      const count = new Int32Array(n + 1);
      for (let i = n - 1; i >= 0; i--) {
        const pr = node.props[i];
        after[i] = pr.required ? 1 : after[i + 1];
        rest[i] = rest[i + 1] + (pr.required ? g.minLen[pr.key] + g.minLen[pr.value] : 0);
        count[i] = count[i + 1] + (pr.required ? 1 : 0);
      }
      this.reqAfter[id] = after;
      this.restCost[id] = rest;
      this.reqCount[id] = count;
    });
  }

  /** Stacks that start `node` on top of `up` (alternatives fork; seq/alt are expanded here). */
  push(up: Stack | null, node: number, out: Stack[]): void {
    const nd = this.g.nodes[node];
    if (nd.kind === 'alt') {
      for (const a of nd.alts) this.push(up, a, out);
      return;
    }
    out.push({ f: frame(node, 0, 0, 0, '', nd.kind === 'str' && nd.exclude ? (2 ** nd.exclude.length - 1) : 0), up });
  }

  /** Every stack that results from feeding byte `c` to `st`, appended to `out`. */
  feed(st: Stack, c: number, out: Stack[]): void {
    const f = st.f;
    if (f.n < 0) {
      out.push(ESCAPED);
      return;
    }
    const nd = this.g.nodes[f.n];
    switch (nd.kind) {
      case 'lit':
        if (f.p === DONE || f.a === nd.bytes.length) return this.pop(st, c, out);
        if (nd.bytes[f.a] === c) out.push({ f: frame(f.n, f.a + 1 === nd.bytes.length ? DONE : 0, f.a + 1), up: st.up });
        return;
      case 'str':
        return this.feedStr(st, nd, c, out);
      case 'num':
        return this.feedNum(st, nd, c, out);
      case 'obj':
        return this.feedObj(st, nd, c, out);
      case 'arr':
        return this.feedArr(st, nd, c, out);
      case 'seq':
        if (f.a === nd.parts.length) return this.pop(st, c, out);
        return this.call(st, nd.parts[f.a], frame(f.n, 0, f.a + 1), c, out);
      case 'trig':
        if (f.p === T_TEXT) {
          const k = kmpStep(nd.marker, nd.fail, f.a, c);
          return this.next(st, k === nd.marker.length ? frame(f.n, T_MARKED) : frame(f.n, T_TEXT, k), out);
        }
        if (f.p === T_MARKED) return this.call(st, nd.then, frame(f.n, T_END), c, out);
        return this.pop(st, c, out);
      case 'alt':
        return; // never on a stack: expanded by push
    }
  }

  private pop(st: Stack, c: number, out: Stack[]): void {
    if (st.up !== null) this.feed(st.up, c, out);
  }

  /** The top becomes `ret`; `child` starts above it and takes byte `c`. */
  private call(st: Stack, child: number, ret: Frame, c: number, out: Stack[]): void {
    const starts: Stack[] = [];
    this.push({ f: ret, up: st.up }, child, starts);
    for (const s of starts) this.feed(s, c, out);
  }

  private next(st: Stack, f: Frame, out: Stack[]): void {
    out.push({ f, up: st.up });
  }

  private feedStr(st: Stack, nd: Extract<GrammarNode, { kind: 'str' }>, c: number, out: Stack[]): void {
    const f = st.f;
    switch (f.p) {
      case S_OPEN:
        if (c === 0x22) this.next(st, frame(f.n, S_BODY, 0, 0, '', f.x), out);
        return;
      case S_END:
        return this.pop(st, c, out);
      case S_BODY: {
        if (c === 0x22) {
          if (f.a < nd.min) return;
          if (nd.exclude && f.x !== 0) {
            for (let i = 0; i < nd.exclude.length; i++) if (f.x & (1 << i) && nd.exclude[i].length === f.b) return;
          }
          return this.next(st, frame(f.n, S_END, f.a), out);
        }
        if (f.a >= nd.max && nd.max !== Infinity) return;
        if (c === 0x5c) {
          if (nd.exclude) return; // extra keys are written without escapes, so exclusion compares raw bytes
          return this.next(st, frame(f.n, S_ESC, f.a), out);
        }
        if (c < 0x20) return;
        let x = f.x;
        if (x !== 0) {
          for (let i = 0; i < nd.exclude!.length; i++) if (x & (1 << i) && nd.exclude![i][f.b] !== c) x &= ~(1 << i);
        }
        // b (byte position) matters only while an exclusion still matches: 0 otherwise, so states merge.
        if (c < 0x80) return this.next(st, frame(f.n, S_BODY, clampCount(nd, f.a + 1), x !== 0 ? f.b + 1 : 0, '', x), out);
        // UTF-8 lead byte: b packs the continuation bytes still due and the range of the next one.
        let rem: number, lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) rem = 1;
        else if (c >= 0xe0 && c <= 0xef) {
          rem = 2;
          if (c === 0xe0) lo = 0xa0;
          if (c === 0xed) hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
          rem = 3;
          if (c === 0xf0) lo = 0x90;
          if (c === 0xf4) hi = 0x8f;
        } else return;
        return this.next(st, { n: f.n, p: S_UTF8, a: f.a, b: x !== 0 ? f.b + 1 : 0, s: String.fromCharCode(rem, lo, hi), x }, out);
      }
      case S_UTF8: {
        const rem = f.s.charCodeAt(0), lo = f.s.charCodeAt(1), hi = f.s.charCodeAt(2);
        if (c < lo || c > hi) return;
        let x = f.x;
        if (x !== 0) {
          for (let i = 0; i < nd.exclude!.length; i++) if (x & (1 << i) && nd.exclude![i][f.b] !== c) x &= ~(1 << i);
        }
        if (rem === 1) return this.next(st, frame(f.n, S_BODY, clampCount(nd, f.a + 1), x !== 0 ? f.b + 1 : 0, '', x), out);
        return this.next(st, { n: f.n, p: S_UTF8, a: f.a, b: x !== 0 ? f.b + 1 : 0, s: String.fromCharCode(rem - 1, 0x80, 0xbf), x }, out);
      }
      case S_ESC:
        if (c === 0x75) return this.next(st, frame(f.n, S_HEX, f.a, 0), out);
        if (c === 0x22 || c === 0x5c || c === 0x2f || c === 0x62 || c === 0x66 || c === 0x6e || c === 0x72 || c === 0x74) {
          return this.next(st, frame(f.n, S_BODY, clampCount(nd, f.a + 1)), out);
        }
        return;
      case S_HEX: {
        const isHex = (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
        // No surrogate escapes (\uD800-\uDFFF): a code point then counts as one character for every validator.
        if (!isHex || (f.b === 0 && (c === 0x64 || c === 0x44))) return;
        if (f.b === 3) return this.next(st, frame(f.n, S_BODY, clampCount(nd, f.a + 1)), out);
        return this.next(st, frame(f.n, S_HEX, f.a, f.b + 1), out);
      }
    }
  }

  private feedNum(st: Stack, nd: Extract<GrammarNode, { kind: 'num' }>, c: number, out: Stack[]): void {
    const f = st.f;
    const s2 = f.s + String.fromCharCode(c);
    const p = parseNumberPrefix(s2, nd.integer, nd.bounds === null);
    if (p !== null && (nd.bounds === null || this.numberCost(s2, nd) !== Infinity)) {
      return this.next(st, frame(f.n, 1, 0, 0, s2), out);
    }
    if (this.numberEnds(f.s, nd)) this.pop(st, c, out);
  }

  numberEnds(s: string, nd: Extract<GrammarNode, { kind: 'num' }>): boolean {
    const p = parseNumberPrefix(s, nd.integer, nd.bounds === null);
    return p !== null && isCompleteNumber(p) && withinBounds(s, nd.bounds);
  }

  numberCost(s: string, nd: Extract<GrammarNode, { kind: 'num' }>): number {
    if (nd.bounds === null) {
      const p = parseNumberPrefix(s, nd.integer, true);
      return p === null ? Infinity : minNumberCompletion(p, nd.integer, null);
    }
    const key = `${nd.integer ? 'i' : 'n'}${nd.bounds.lo},${nd.bounds.loExclusive},${nd.bounds.hi},${nd.bounds.hiExclusive}|${s}`;
    let v = this.numCost.get(key);
    if (v === undefined) {
      const p = parseNumberPrefix(s, nd.integer, false);
      v = p === null ? Infinity : minNumberCompletion(p, nd.integer, nd.bounds);
      this.numCost.set(key, v);
    }
    return v;
  }

  private feedObj(st: Stack, nd: Extract<GrammarNode, { kind: 'obj' }>, c: number, out: Stack[]): void {
    const f = st.f;
    const reqAfter = this.reqAfter[f.n]!;
    switch (f.p) {
      case O_OPEN:
        if (c === 0x7b) this.next(st, frame(f.n, O_MEMBER_OR_CLOSE, 0, 0), out);
        return;
      case O_END:
        return this.pop(st, c, out);
      case O_MEMBER_OR_CLOSE:
        if (c === 0x7d) {
          if (!reqAfter[f.a]) this.next(st, frame(f.n, O_END), out);
          return;
        }
        if (f.b === 1) {
          if (c === 0x2c && this.canAddMember(nd, f.a)) this.next(st, frame(f.n, O_MEMBER, f.a, 1), out);
          return;
        }
        return this.startMember(st, nd, f.a, c, out);
      case O_MEMBER:
        return this.startMember(st, nd, f.a, c, out);
      case O_VALUE:
        return this.call(st, nd.props[f.a].value, frame(f.n, O_MEMBER_OR_CLOSE, f.a + 1, 1), c, out);
      case O_COLON:
        if (c === 0x3a) this.next(st, frame(f.n, O_EXTRA_VALUE, f.a, 1), out);
        return;
      case O_EXTRA_VALUE:
        return this.call(st, nd.extra!, frame(f.n, O_MEMBER_OR_CLOSE, nd.props.length, 1), c, out);
    }
  }

  private canAddMember(nd: Extract<GrammarNode, { kind: 'obj' }>, a: number): boolean {
    return a < nd.props.length || nd.extra !== null;
  }

  /** A member may be any declared one from index a up to the next required one, or an extra one once none is required. */
  private startMember(st: Stack, nd: Extract<GrammarNode, { kind: 'obj' }>, a: number, c: number, out: Stack[]): void {
    for (let j = a; j < nd.props.length; j++) {
      this.call(st, nd.props[j].key, frame(st.f.n, O_VALUE, j, 1), c, out);
      if (nd.props[j].required) return;
    }
    if (nd.extra !== null) this.call(st, nd.extraKey, frame(st.f.n, O_COLON, nd.props.length, 1), c, out);
  }

  private feedArr(st: Stack, nd: Extract<GrammarNode, { kind: 'arr' }>, c: number, out: Stack[]): void {
    const f = st.f;
    switch (f.p) {
      case A_OPEN:
        if (c === 0x5b) this.next(st, frame(f.n, A_FIRST), out);
        return;
      case A_END:
        return this.pop(st, c, out);
      case A_FIRST:
        if (c === 0x5d) {
          if (nd.min === 0) this.next(st, frame(f.n, A_END), out);
          return;
        }
        if (nd.max > 0) this.call(st, nd.item, frame(f.n, A_NEXT, clampCount(nd, 1)), c, out);
        return;
      case A_NEXT:
        if (c === 0x5d) {
          if (f.a >= nd.min) this.next(st, frame(f.n, A_END), out);
          return;
        }
        if (c === 0x2c && f.a < nd.max) this.next(st, frame(f.n, A_ITEM, f.a), out);
        return;
      case A_ITEM:
        return this.call(st, nd.item, frame(f.n, A_NEXT, clampCount(nd, f.a + 1)), c, out);
    }
  }

  /** The frame is complete: it may end here (a number may also go on). */
  frameEnds(f: Frame): boolean {
    if (f.n < 0) return true;
    const nd = this.g.nodes[f.n];
    switch (nd.kind) {
      case 'lit':
        return f.a === nd.bytes.length;
      case 'str':
        return f.p === S_END;
      case 'num':
        return this.numberEnds(f.s, nd);
      case 'obj':
        return f.p === O_END;
      case 'arr':
        return f.p === A_END;
      case 'seq':
        return f.a === nd.parts.length;
      case 'trig':
        return f.p !== T_MARKED;
      case 'alt':
        return false;
    }
  }

  /** Complete and can only pass bytes down (not a number, which may go on, nor free text). */
  finishedOnly(f: Frame): boolean {
    const nd = this.g.nodes[f.n];
    if (nd.kind === 'num' || (nd.kind === 'trig' && f.p === T_TEXT)) return false;
    return this.frameEnds(f);
  }

  /** Every frame of the stack is complete: the reply may end (EOS). */
  accepts(st: Stack): boolean {
    for (let s: Stack | null = st; s !== null; s = s.up) if (!this.frameEnds(s.f)) return false;
    return true;
  }

  /** Fewest bytes that complete the whole stack. */
  stackCost(st: Stack): number {
    if (st.cost !== undefined) return st.cost;
    const v = this.frameCost(st.f) + (st.up === null ? 0 : this.stackCost(st.up));
    st.cost = v;
    return v;
  }

  frameCost(f: Frame): number {
    if (f.n < 0) return 0;
    const g = this.g;
    const nd = g.nodes[f.n];
    switch (nd.kind) {
      case 'lit':
        return nd.bytes.length - f.a;
      case 'seq': {
        let sum = 0;
        for (let i = f.a; i < nd.parts.length; i++) sum += g.minLen[nd.parts[i]];
        return sum;
      }
      case 'str': {
        switch (f.p) {
          case S_OPEN:
            return g.minLen[f.n];
          case S_END:
            return 0;
          case S_BODY: {
            let blocked = false;
            if (nd.exclude && f.x !== 0) for (let i = 0; i < nd.exclude.length; i++) if (f.x & (1 << i) && nd.exclude[i].length === f.b) blocked = true;
            // An excluded content can always be escaped by one more character (one that continues no exclusion).
            return Math.max(Math.max(0, nd.min - f.a), blocked ? 1 : 0) + 1;
          }
          case S_ESC:
            return 1 + Math.max(0, nd.min - f.a - 1) + 1;
          case S_HEX:
            return 4 - f.b + Math.max(0, nd.min - f.a - 1) + 1;
          case S_UTF8:
            return f.s.charCodeAt(0) + Math.max(0, nd.min - f.a - 1) + 1;
        }
        return Infinity;
      }
      case 'num':
        return this.numberCost(f.s, nd);
      case 'obj':
        switch (f.p) {
          case O_OPEN:
            return g.minLen[f.n];
          case O_END:
            return 0;
          case O_MEMBER_OR_CLOSE:
            return this.objTail(f.n, f.a, f.b);
          case O_MEMBER:
            return this.objOneMore(f.n, nd, f.a);
          case O_VALUE:
            return g.minLen[nd.props[f.a].value] + this.objTail(f.n, f.a + 1, 1);
          case O_COLON:
            return 1 + g.minLen[nd.extra!] + this.objTail(f.n, nd.props.length, 1);
          case O_EXTRA_VALUE:
            return g.minLen[nd.extra!] + this.objTail(f.n, nd.props.length, 1);
        }
        return Infinity;
      case 'arr': {
        const item = g.minLen[nd.item];
        switch (f.p) {
          case A_OPEN:
            return g.minLen[f.n];
          case A_END:
            return 0;
          case A_FIRST:
            return nd.min === 0 ? 1 : nd.min * item + (nd.min - 1) + 1;
          case A_NEXT:
            return f.a >= nd.min ? 1 : (nd.min - f.a) * (item + 1) + 1;
          case A_ITEM:
            return item + Math.max(0, nd.min - f.a - 1) * (item + 1) + 1;
        }
        return Infinity;
      }
      case 'trig':
        return f.p === T_MARKED ? g.minLen[nd.then] : 0;
      case 'alt':
        return Infinity;
    }
  }

  /** Bytes that finish an object after member index a (b: a member was written, so the next needs a comma). */
  private objTail(n: number, a: number, b: number): number {
    const count = this.reqCount[n]![a];
    return this.restCost[n]![a] + (count > 0 ? count - 1 + b : 0) + 1;
  }

  /** After a comma: at least one more member, then the rest. */
  private objOneMore(n: number, nd: Extract<GrammarNode, { kind: 'obj' }>, a: number): number {
    if (this.reqCount[n]![a] > 0) return this.restCost[n]![a] + this.reqCount[n]![a] - 1 + 1;
    const g = this.g;
    let best = Infinity;
    for (let j = a; j < nd.props.length; j++) best = Math.min(best, g.minLen[nd.props[j].key] + g.minLen[nd.props[j].value]);
    if (nd.extra !== null) best = Math.min(best, g.minLen[nd.extraKey] + 1 + g.minLen[nd.extra]);
    return best + 1;
  }
}
