/**
 * What a frame still needs: whether it may end here, and `closeCost`, the
 * fewest bytes that finish it (see grammar-frames.ts for the contract the
 * budget rule leans on). The base of FrameMachine, which feeds the bytes.
 */
import type { Grammar, GrammarNode } from './grammar-nodes.ts';
import { minNumberCompletion, parseNumberPrefix, withinBounds } from './number-prefix.ts';
import { numberComplete, unboundedNumberCost } from './number-state.ts';
import { A_END, A_FIRST, A_ITEM, A_NEXT, A_OPEN, O_COLON, O_END, O_EXTRA_VALUE, O_MEMBER, O_MEMBER_OR_CLOSE, O_OPEN, O_VALUE, S_BODY, S_END, S_ESC, S_HEX, S_OPEN, S_UTF8, T_MARKED, T_TEXT, type Frame, type Stack } from './grammar-frame-types.ts';

export class FrameCosts {
  /** Per obj node: whether a required member is at index ≥ i; the fewest bytes of the required members from i; their count. */
  protected readonly reqAfter: Array<Uint8Array | null>;
  protected readonly restCost: Array<Float64Array | null>;
  protected readonly reqCount: Array<Int32Array | null>;
  /** Per bounded num node: close cost and whether the text is a complete in-bounds value, by number text. */
  private readonly numCost: Array<Map<string, number> | null>;
  private readonly numEnds: Array<Map<string, boolean> | null>;

  constructor(readonly g: Grammar) {
    this.reqAfter = g.nodes.map(() => null);
    this.restCost = g.nodes.map(() => null);
    this.reqCount = g.nodes.map(() => null);
    this.numCost = g.nodes.map((nd) => (nd.kind === 'num' && nd.bounds !== null ? new Map() : null));
    this.numEnds = g.nodes.map((nd) => (nd.kind === 'num' && nd.bounds !== null ? new Map() : null));
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

  /**
   * A number frame carries its automaton state (number-state.ts: phase p, counts a, b) and, when bounded, its
   * text s: the phase decides completeness and the unbounded cost; the bounds need the text, once per text.
   */
  numberEnds(f: Frame, nd: Extract<GrammarNode, { kind: 'num' }>): boolean {
    if (!numberComplete(f.p)) return false;
    if (nd.bounds === null) return true;
    const memo = this.numEnds[f.n]!;
    let v = memo.get(f.s);
    if (v === undefined) {
      v = withinBounds(f.s, nd.bounds);
      memo.set(f.s, v);
    }
    return v;
  }

  /** Fewest bytes that complete a number frame; for a bounded one, of text `s` (Infinity: no value in bounds). */
  numberCost(n: number, p: number, s: string, nd: Extract<GrammarNode, { kind: 'num' }>): number {
    if (nd.bounds === null) return unboundedNumberCost(p);
    const memo = this.numCost[n]!;
    let v = memo.get(s);
    if (v === undefined) {
      const parts = parseNumberPrefix(s, nd.integer, false);
      v = parts === null ? Infinity : minNumberCompletion(parts, nd.integer, nd.bounds);
      memo.set(s, v);
    }
    return v;
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
        return this.numberEnds(f, nd);
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
        return this.numberCost(f.n, f.p, f.s, nd);
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
