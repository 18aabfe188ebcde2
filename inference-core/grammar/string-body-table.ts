/**
 * A string body's local walk, once per vocabulary. Inside a JSON string
 * (no excluded contents) the bytes of a token move the same way whatever the
 * string's bounds and count so far: only two checks depend on them — a
 * character may start while count < maxLength, and the closing quote needs
 * count ≥ minLength. So the non-plain trie is walked once from a body with
 * count 0 and no bounds, recording per node what those checks need (chars
 * started, chars at the closing quote) and the end state for the close cost;
 * a frame's local entry is then a filter over those records instead of a
 * walk of ~20k trie nodes with a frame allocated per byte (FrameMachine's
 * feedStr, whose rules this mirrors for exclude === null; the grammar tests
 * compare the masks with the brute-force twin, which runs feedStr itself).
 *
 * Records (parallel arrays):
 *   tok*     nodes where tokens end inside the frame: chars started, chars at
 *            the close (-1: open), and the close cost's parts (phase, chars,
 *            pending: 1 escape / hex digits left / UTF-8 bytes left)
 *   esc*     nodes where a byte after the closing quote leaves the frame
 */
import { S_BODY, S_END, S_ESC, S_HEX, S_UTF8 } from './grammar-frame-types.ts';
import type { ByteTrie, VocabIndex } from './vocab-index.ts';
import { leadHi, leadLo, leadRem, utf8Lead } from './utf8-lead.ts';

export interface StringBodyTable {
  readonly tokNode: Int32Array;
  readonly tokStarted: Int32Array;
  readonly tokClose: Int32Array;
  readonly tokPhase: Uint8Array;
  readonly tokChars: Int32Array;
  readonly tokPending: Uint8Array;
  readonly escNode: Int32Array;
  readonly escByte: Uint8Array;
  readonly escClose: Int32Array;
}

const tables = new WeakMap<VocabIndex, StringBodyTable>();

export function stringBodyTable(vocab: VocabIndex): StringBodyTable {
  let t = tables.get(vocab);
  if (t === undefined) {
    t = buildTable(vocab.nonPlainTrie);
    tables.set(vocab, t);
  }
  return t;
}

/** Body state: phase, chars done, chars at the close (-1), pending (hex digits / UTF-8 bytes), UTF-8 range of the next byte. */
interface Body {
  p: number;
  chars: number;
  close: number;
  pend: number;
  lo: number;
  hi: number;
}

/** feedStr for a body without exclusions and without bounds; null: the byte is refused. */
function step(s: Body, c: number): Body | null {
  switch (s.p) {
    case S_BODY: {
      if (c === 0x22) return { p: S_END, chars: s.chars, close: s.chars, pend: 0, lo: 0, hi: 0 };
      if (c === 0x5c) return { p: S_ESC, chars: s.chars, close: -1, pend: 1, lo: 0, hi: 0 };
      if (c < 0x20) return null;
      if (c < 0x80) return { p: S_BODY, chars: s.chars + 1, close: -1, pend: 0, lo: 0, hi: 0 };
      const u = utf8Lead(c);
      if (u < 0) return null;
      return { p: S_UTF8, chars: s.chars, close: -1, pend: leadRem(u), lo: leadLo(u), hi: leadHi(u) };
    }
    case S_UTF8:
      if (c < s.lo || c > s.hi) return null;
      if (s.pend === 1) return { p: S_BODY, chars: s.chars + 1, close: -1, pend: 0, lo: 0, hi: 0 };
      return { p: S_UTF8, chars: s.chars, close: -1, pend: s.pend - 1, lo: 0x80, hi: 0xbf };
    case S_ESC:
      if (c === 0x75) return { p: S_HEX, chars: s.chars, close: -1, pend: 4, lo: 0, hi: 0 };
      if (c === 0x22 || c === 0x5c || c === 0x2f || c === 0x62 || c === 0x66 || c === 0x6e || c === 0x72 || c === 0x74) {
        return { p: S_BODY, chars: s.chars + 1, close: -1, pend: 0, lo: 0, hi: 0 };
      }
      return null;
    case S_HEX: {
      const isHex = (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
      if (!isHex || (s.pend === 4 && (c === 0x64 || c === 0x44))) return null;
      if (s.pend === 1) return { p: S_BODY, chars: s.chars + 1, close: -1, pend: 0, lo: 0, hi: 0 };
      return { p: S_HEX, chars: s.chars, close: -1, pend: s.pend - 1, lo: 0, hi: 0 };
    }
  }
  return null;
}

/** Characters begun: a byte past a character's start was allowed only while the count before it was below maxLength. */
function started(s: Body): number {
  return s.p === S_BODY || s.p === S_END ? s.chars : s.chars + 1;
}

function buildTable(trie: ByteTrie): StringBodyTable {
  const tok = { node: [] as number[], started: [] as number[], close: [] as number[], phase: [] as number[], chars: [] as number[], pend: [] as number[] };
  const esc = { node: [] as number[], byte: [] as number[], close: [] as number[] };
  const nodes: number[] = [0];
  const states: Body[] = [{ p: S_BODY, chars: 0, close: -1, pend: 0, lo: 0, hi: 0 }];
  // The closing quote's count along the path (a node below a close keeps it).
  while (nodes.length > 0) {
    const n = nodes.pop()!;
    const s = states.pop()!;
    for (let e = trie.edgeStart[n]; e < trie.edgeStart[n + 1]; e++) {
      const c = trie.edgeByte[e];
      const child = trie.edgeChild[e];
      if (s.p === S_END) {
        esc.node.push(child);
        esc.byte.push(c);
        esc.close.push(s.close);
        continue;
      }
      const next = step(s, c);
      if (next === null) continue;
      if (trie.tokStart[child] < trie.tokStart[child + 1]) {
        tok.node.push(child);
        tok.started.push(started(next));
        tok.close.push(next.close);
        tok.phase.push(next.p);
        tok.chars.push(next.chars);
        tok.pend.push(next.pend);
      }
      if (trie.edgeStart[child] < trie.edgeStart[child + 1]) {
        nodes.push(child);
        states.push(next);
      }
    }
  }
  return {
    tokNode: Int32Array.from(tok.node),
    tokStarted: Int32Array.from(tok.started),
    tokClose: Int32Array.from(tok.close),
    tokPhase: Uint8Array.from(tok.phase),
    tokChars: Int32Array.from(tok.chars),
    tokPending: Uint8Array.from(tok.pend),
    escNode: Int32Array.from(esc.node),
    escByte: Uint8Array.from(esc.byte),
    escClose: Int32Array.from(esc.close),
  };
}

/**
 * The non-plain tokens of a string body at count `a` with bounds [min, max] below a stack that costs
 * `upCost` to close: what walk(nonPlainTrie) gives for the tokens that stay in the frame (bits, the
 * largest cost within `budget`), and the nodes and bytes where tokens leave it (`escapes`).
 */
export function stringBodyLocal(
  t: StringBodyTable,
  trie: ByteTrie,
  a: number,
  min: number,
  max: number,
  upCost: number,
  budget: number,
  bits: Uint32Array,
  stat: { maxCost: number },
  escapes: { nodes: number[]; bytes: number[] },
): void {
  const { tokStart, tokIds } = trie;
  for (let i = 0; i < t.tokNode.length; i++) {
    if (a + t.tokStarted[i] > max) continue;
    const close = t.tokClose[i];
    if (close >= 0 && a + close < min) continue;
    // frameCost of the end state (grammar-frame-costs.ts, no exclusions); the count only matters below min.
    const chars = a + t.tokChars[i];
    const phase = t.tokPhase[i];
    let cost: number;
    if (phase === S_END) cost = 0;
    else if (phase === S_BODY) cost = Math.max(0, min - chars) + 1;
    else cost = t.tokPending[i] + Math.max(0, min - chars - 1) + 1;
    cost += upCost;
    if (cost > budget || cost === Infinity) continue;
    if (cost > stat.maxCost) stat.maxCost = cost;
    const node = t.tokNode[i];
    for (let k = tokStart[node]; k < tokStart[node + 1]; k++) {
      const id = tokIds[k];
      bits[id >>> 5] |= 1 << (id & 31);
    }
  }
  for (let i = 0; i < t.escNode.length; i++) {
    const close = t.escClose[i];
    if (a + close > max || a + close < min) continue;
    escapes.nodes.push(t.escNode[i]);
    escapes.bytes.push(t.escByte[i]);
  }
}
