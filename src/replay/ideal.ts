/**
 * The ideal a replay is measured against: a cache that keeps every block it
 * has seen (optionally for `ttlMs` after its last use), with kvtier's block
 * rule. A request's hit is the longest prefix of its block ids that an
 * earlier request had (and, with a TTL, whose every block was used less than
 * `ttlMs` before this request); then all its blocks count as used now.
 *
 * Prefixes are nodes of a trie (parent node, block id) → node, so a prefix is
 * named by one number however long it is. The edges live in an open-addressed
 * table of typed arrays: a Map keyed by the pair (a number past 2^31, boxed)
 * cost ~0.5 µs per block, a tenth of the replay's time per request.
 */
import type { ReplayRequest } from './trace.ts';

export class IdealCache {
  /** Per slot: the edge's parent node, block id and child node (0 = an empty slot). */
  private parents = new Uint32Array(1 << 16);
  private ids = new Uint32Array(1 << 16);
  private children = new Uint32Array(1 << 16);
  private edges = 0;
  private lastUse = new Float64Array(1 << 16);
  private nextNode = 1;

  constructor(private readonly ttlMs = Number.POSITIVE_INFINITY) {}

  /** Hit blocks of `request` at its arrival; records its blocks as used then. */
  serve(request: ReplayRequest): number {
    const now = request.atMs;
    let parent = 0;
    let hit = 0;
    let missed = false;
    for (let i = 0; i < request.blocks.length; i++) {
      const node = this.child(parent, request.blocks[i]);
      if (!missed && now - this.lastUse[node] < this.ttlMs) hit++;
      else missed = true;
      this.lastUse[node] = now;
      parent = node;
    }
    return hit;
  }

  /** The node of edge (parent, id), made (never used: last use −∞) if new. */
  private child(parent: number, id: number): number {
    const mask = this.children.length - 1;
    let slot = slotOf(parent, id) & mask;
    for (;;) {
      const node = this.children[slot];
      if (node === 0) break;
      if (this.parents[slot] === parent && this.ids[slot] === id) return node;
      slot = (slot + 1) & mask;
    }
    const node = this.nextNode++;
    this.parents[slot] = parent;
    this.ids[slot] = id;
    this.children[slot] = node;
    if (node >= this.lastUse.length) {
      const grown = new Float64Array(this.lastUse.length * 2);
      grown.set(this.lastUse);
      this.lastUse = grown;
    }
    this.lastUse[node] = Number.NEGATIVE_INFINITY;
    // At most half full: linear probing stays short.
    if (++this.edges * 2 > this.children.length) this.grow();
    return node;
  }

  private grow(): void {
    const { parents, ids, children } = this;
    const size = children.length * 2;
    this.parents = new Uint32Array(size);
    this.ids = new Uint32Array(size);
    this.children = new Uint32Array(size);
    const mask = size - 1;
    for (let old = 0; old < children.length; old++) {
      if (children[old] === 0) continue;
      let slot = slotOf(parents[old], ids[old]) & mask;
      while (this.children[slot] !== 0) slot = (slot + 1) & mask;
      this.parents[slot] = parents[old];
      this.ids[slot] = ids[old];
      this.children[slot] = children[old];
    }
  }
}

function slotOf(parent: number, id: number): number {
  let h = Math.imul(parent, 0x9e3779b1) ^ Math.imul(id, 0x85ebca77);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  return h ^ (h >>> 12);
}
