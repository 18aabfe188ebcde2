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
 *
 * Frame shapes and keys: grammar-frame-types.ts; ends and costs:
 * grammar-frame-costs.ts (the base class); this file feeds bytes.
 */
import type { GrammarNode } from './grammar-nodes.ts';
import { numberA, numberB, numberPhase, numberStep } from './number-state.ts';
import { FrameCosts } from './grammar-frame-costs.ts';
import { A_END, A_FIRST, A_ITEM, A_NEXT, A_OPEN, clampCount, DONE, ESCAPED, frame, kmpStep, O_COLON, O_END, O_EXTRA_VALUE, O_MEMBER, O_MEMBER_OR_CLOSE, O_OPEN, O_VALUE, S_BODY, S_END, S_ESC, S_HEX, S_OPEN, S_UTF8, T_END, T_MARKED, T_TEXT, type Frame, type Stack } from './grammar-frame-types.ts';
import { leadHi, leadLo, leadRem, utf8Lead } from './utf8-lead.ts';

export { ESCAPED, frameKey, kmpStep, SENTINEL_NODE, sentinelStack, stackKey, T_TEXT, type Frame, type Stack } from './grammar-frame-types.ts';

export class FrameMachine extends FrameCosts {
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
        const u = utf8Lead(c);
        if (u < 0) return;
        return this.next(st, { n: f.n, p: S_UTF8, a: f.a, b: x !== 0 ? f.b + 1 : 0, s: String.fromCharCode(leadRem(u), leadLo(u), leadHi(u)), x }, out);
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
    const unbounded = nd.bounds === null;
    const packed = numberStep(f.p, f.a, f.b, c, nd.integer, unbounded);
    if (packed >= 0) {
      const p = numberPhase(packed);
      // Unbounded: the automaton state is all that matters (no text kept, so frames of equal shape share keys).
      if (unbounded) return this.next(st, frame(f.n, p, numberA(packed), numberB(packed)), out);
      const s2 = f.s + String.fromCharCode(c);
      if (this.numberCost(f.n, p, s2, nd) !== Infinity) return this.next(st, frame(f.n, p, numberA(packed), numberB(packed), s2), out);
    }
    if (this.numberEnds(f, nd)) this.pop(st, c, out);
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
}
