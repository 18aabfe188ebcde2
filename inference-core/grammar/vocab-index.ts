/**
 * What the mask needs from a vocabulary, computed once per vocabulary and
 * cached: every token's bytes in a flat byte trie, and the "plain string"
 * class — tokens that stay inside a JSON string whatever the string's
 * context (no quote, backslash or control byte; whole UTF-8 characters) —
 * as cumulative bitsets by character count. A string state's mask is then a
 * bitset copy plus a walk of the other tokens only (xgrammar's
 * context-independent tokens).
 *
 * Trie layout (node 0 = root):
 *   edgeStart[n] … edgeStart[n+1]   edges of node n, bytes ascending
 *   edgeByte[e], edgeChild[e]
 *   tokStart[n] … tokStart[n+1]     ids of tokens whose bytes end at node n
 */
import { createHash } from 'node:crypto';
import { leadHi, leadLo, leadRem, utf8Lead } from './utf8-lead.ts';

/** Plain tokens are grouped by character count up to this; longer ones go through the walk. */
export const PLAIN_MAX_CHARS = 16;

export interface ByteTrie {
  readonly edgeStart: Int32Array;
  readonly edgeByte: Uint8Array;
  readonly edgeChild: Int32Array;
  readonly tokStart: Int32Array;
  readonly tokIds: Int32Array;
  readonly nodes: number;
}

export interface VocabIndex {
  readonly size: number;
  /** sha256 over every token's bytes: the vocabulary part of mask cache keys. */
  readonly fingerprint: string;
  readonly pieces: readonly Uint8Array[];
  readonly trie: ByteTrie;
  /** Trie of the tokens outside the plain class (what a string state still walks). */
  readonly nonPlainTrie: ByteTrie;
  /** plainUpTo[k]: plain tokens of ≤ k characters (bitset over ids). */
  readonly plainUpTo: Uint32Array[];
  /** Characters of each plain token (0 for the others). */
  readonly plainChars: Uint8Array;
  /** A token whose bytes are exactly that one byte, or -1 (the budget rule needs them). */
  readonly byteToken: Int32Array;
}

export function buildTrie(pieces: readonly Uint8Array[], include: (id: number) => boolean): ByteTrie {
  // Build with maps, then flatten breadth first.
  type TNode = { kids: Map<number, TNode>; toks: number[] };
  const root: TNode = { kids: new Map(), toks: [] };
  pieces.forEach((p, id) => {
    if (p.length === 0 || !include(id)) return;
    let n = root;
    for (const c of p) {
      let k = n.kids.get(c);
      if (!k) {
        k = { kids: new Map(), toks: [] };
        n.kids.set(c, k);
      }
      n = k;
    }
    n.toks.push(id);
  });
  const order: TNode[] = [root];
  for (let i = 0; i < order.length; i++) for (const [, k] of [...order[i].kids].sort((a, b) => a[0] - b[0])) order.push(k);
  const index = new Map<TNode, number>(order.map((n, i) => [n, i]));
  const edgeStart = new Int32Array(order.length + 1);
  const tokStart = new Int32Array(order.length + 1);
  let edges = 0;
  let toks = 0;
  for (let i = 0; i < order.length; i++) {
    edgeStart[i] = edges;
    tokStart[i] = toks;
    edges += order[i].kids.size;
    toks += order[i].toks.length;
  }
  edgeStart[order.length] = edges;
  tokStart[order.length] = toks;
  const edgeByte = new Uint8Array(edges);
  const edgeChild = new Int32Array(edges);
  const tokIds = new Int32Array(toks);
  for (let i = 0; i < order.length; i++) {
    let e = edgeStart[i];
    for (const [c, k] of [...order[i].kids].sort((a, b) => a[0] - b[0])) {
      edgeByte[e] = c;
      edgeChild[e++] = index.get(k)!;
    }
    tokIds.set(order[i].toks, tokStart[i]);
  }
  return { edgeStart, edgeByte, edgeChild, tokStart, tokIds, nodes: order.length };
}

/** Characters of `p` when it is whole UTF-8 characters with no quote, backslash or control byte; -1 otherwise. */
export function plainStringChars(p: Uint8Array): number {
  let chars = 0;
  for (let i = 0; i < p.length; ) {
    const c = p[i];
    if (c === 0x22 || c === 0x5c || c < 0x20) return -1;
    const u = c < 0x80 ? 0 : utf8Lead(c);
    if (u < 0) return -1;
    const n = leadRem(u), lo = leadLo(u), hi = leadHi(u);
    for (let k = 1; k <= n; k++) {
      const d = p[i + k];
      if (d === undefined) return -1;
      if (k === 1 ? d < lo || d > hi : d < 0x80 || d > 0xbf) return -1;
    }
    i += n + 1;
    chars++;
  }
  return chars;
}

const cache = new WeakMap<object, VocabIndex>();

/**
 * The index of a vocabulary given as each token's bytes (empty for tokens
 * that print nothing, e.g. control tokens: never allowed by a grammar).
 * Cached per `owner` (the tokenizer object).
 */
export function vocabIndexOf(owner: object, size: number, pieceOf: (id: number) => Uint8Array): VocabIndex {
  const known = cache.get(owner);
  if (known) return known;
  const pieces: Uint8Array[] = [];
  const hash = createHash('sha256');
  const len = new Uint32Array(1);
  for (let id = 0; id < size; id++) {
    const p = pieceOf(id);
    pieces.push(p);
    len[0] = p.length;
    hash.update(new Uint8Array(len.buffer));
    hash.update(p);
  }
  const words = (size + 31) >>> 5;
  const plainUpTo = Array.from({ length: PLAIN_MAX_CHARS + 1 }, () => new Uint32Array(words));
  const plainChars = new Uint8Array(size);
  const byteToken = new Int32Array(256).fill(-1);
  pieces.forEach((p, id) => {
    if (p.length === 1 && byteToken[p[0]] === -1) byteToken[p[0]] = id;
    const n = p.length === 0 ? -1 : plainStringChars(p);
    if (n < 1 || n > PLAIN_MAX_CHARS) return;
    plainChars[id] = n;
    for (let k = n; k <= PLAIN_MAX_CHARS; k++) plainUpTo[k][id >>> 5] |= 1 << (id & 31);
  });
  const index: VocabIndex = {
    size,
    fingerprint: hash.digest('hex').slice(0, 32),
    pieces,
    trie: buildTrie(pieces, () => true),
    nonPlainTrie: buildTrie(pieces, (id) => plainChars[id] === 0),
    plainUpTo,
    plainChars,
    byteToken,
  };
  cache.set(owner, index);
  return index;
}
