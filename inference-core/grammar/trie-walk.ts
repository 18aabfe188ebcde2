/**
 * The trie walk behind every mask (token-mask.ts): depth first over the
 * vocabulary's byte trie, feeding each edge's byte to the stacks that reached
 * its parent and cutting a subtree once none survives; plain tokens inside a
 * string body as one bitset (vocab-index.ts), and free text split by the
 * marker's first byte. The base of GrammarMasks.
 */
import { ESCAPED, SENTINEL_NODE, T_TEXT, type Stack } from './grammar-frames.ts';
import { dedupe, DEDUPE_OVER, GrammarMatcher } from './grammar-matcher.ts';
import { stringBodyLocal, stringBodyTable } from './string-body-table.ts';
import { buildTrie, PLAIN_MAX_CHARS, type ByteTrie } from './vocab-index.ts';

/** Where stacks left a frame in a local walk: the trie node reached and the byte that left. */
export interface Escapes {
  nodes: number[];
  bytes: number[];
}

export class TrieWalker extends GrammarMatcher {
  private readonly byteSplits = new Map<number, { without: Uint32Array; withTrie: ByteTrie }>();
  protected readonly words = (this.vocab.size + 31) >>> 5;

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

  protected allowTokensAt(trie: ByteTrie, node: number, stacks: readonly Stack[], budget: number, bits: Uint32Array, stat: { maxCost: number }): void {
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

  /** A string body on top: plain tokens as one bitset, only the others walked. */
  protected walkStacks(stacks: readonly Stack[], budget: number, bits: Uint32Array, stat: { maxCost: number }, escapes: Escapes | null): ByteTrie {
    const top = stacks.length === 1 ? stacks[0] : null;
    const node = top ? this.grammar.nodes[top.f.n] : null;
    // A plain token never closes the string, so excluded key names do not change which are allowed — only
    // (by at most one byte) the cost after them; under a binding budget that must be exact, so walk instead.
    if (top && node && node.kind === 'str' && top.f.p === 1 && (node.exclude === null || top.f.x === 0 || budget === Infinity)) {
      this.plainString(top, node.min, node.max, budget, bits, stat, top.f.x !== 0 ? 1 : 0);
      const trie = this.vocab.nonPlainTrie;
      const local = escapes !== null && budget === Infinity && top.up !== null && top.up.f.n === SENTINEL_NODE;
      if (node.exclude === null && (local || escapes === null)) {
        // The per-vocabulary table of the body's walk, filtered by this frame's count and bounds; tokens that
        // leave the frame go on into the stack below (a local entry records them instead).
        const up = local ? null : top.up;
        const left: Escapes = local ? escapes : { nodes: [], bytes: [] };
        const upCost = up === null ? 0 : this.machine.stackCost(up);
        stringBodyLocal(stringBodyTable(this.vocab), trie, top.f.a, node.min, node.max, upCost, budget, bits, stat, left);
        if (up !== null) {
          const fed: Array<Stack[] | undefined> = [];
          for (let i = 0; i < left.nodes.length; i++) {
            const c = left.bytes[i];
            let cur = fed[c];
            if (cur === undefined) {
              cur = [];
              this.machine.feed(up, c, cur);
              fed[c] = cur;
            }
            if (cur.length === 0) continue;
            this.allowTokensAt(trie, left.nodes[i], cur, budget, bits, stat);
            this.walk(trie, cur, budget, bits, stat, null, left.nodes[i]);
          }
        }
      } else this.walk(trie, stacks, budget, bits, stat, escapes, 0);
      return trie;
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

  /** The one byte a stack can take when its top is a literal part-way through; -1 otherwise. */
  private onlyByte(st: Stack): number {
    const f = st.f;
    if (f.n < 0 || f.p !== 0) return -1;
    const nd = this.grammar.nodes[f.n];
    return nd.kind === 'lit' && f.a < nd.bytes.length ? nd.bytes[f.a] : -1;
  }

  /**
   * Depth-first over the trie, feeding each edge's byte to the stacks that
   * reached its parent. With `escapes` (a local walk): where a stack leaves
   * its frame (ESCAPED), every token of that subtree is recorded with the
   * byte index it left at.
   */
  protected walk(trie: ByteTrie, start: readonly Stack[], budget: number, bits: Uint32Array, stat: { maxCost: number }, escapes: Escapes | null, from: number): void {
    const { edgeStart, edgeByte, edgeChild, tokStart, tokIds } = trie;
    const machine = this.machine;
    const nodes: number[] = [from];
    const states: Stack[][] = [start as Stack[]];
    while (nodes.length > 0) {
      const n = nodes.pop()!;
      const cur = states.pop()!;
      let e0 = edgeStart[n];
      let e1 = edgeStart[n + 1];
      const only = cur.length === 1 ? this.onlyByte(cur[0]) : -1;
      if (only >= 0) {
        // One literal byte can follow: its edge alone (edges are sorted by byte), not a feed per edge.
        const e = edgeOf(edgeByte, e0, e1, only);
        e0 = e;
        e1 = e < 0 ? e : e + 1;
      }
      for (let e = e0; e < e1; e++) {
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

/** The edge of byte `b` among edges [e0, e1) sorted by byte; -1 when there is none. */
function edgeOf(edgeByte: Uint8Array, e0: number, e1: number, b: number): number {
  let lo = e0;
  let hi = e1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (edgeByte[mid] < b) lo = mid + 1;
    else hi = mid;
  }
  return lo < e1 && edgeByte[lo] === b ? lo : -1;
}
