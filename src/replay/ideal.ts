/**
 * The ideal a replay is measured against: a cache that keeps every block it
 * has seen (optionally for `ttlMs` after its last use), with kvtier's block
 * rule. A request's hit is the longest prefix of its block ids that an
 * earlier request had (and, with a TTL, whose every block was used less than
 * `ttlMs` before this request); then all its blocks count as used now.
 *
 * Prefixes are nodes of a trie (parent node, block id) → node, so a prefix is
 * named by one number however long it is.
 */
import type { ReplayRequest } from './trace.ts';

export class IdealCache {
  private readonly nodes = new Map<number, number>();
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
      // Parent node ids stay below 2^21 for traces of a few million blocks; the pair is exact in a double.
      const edge = parent * 4_294_967_296 + request.blocks[i];
      let node = this.nodes.get(edge);
      if (node === undefined) {
        node = this.nextNode++;
        this.nodes.set(edge, node);
        if (node >= this.lastUse.length) {
          const grown = new Float64Array(this.lastUse.length * 2);
          grown.set(this.lastUse);
          this.lastUse = grown;
        }
        this.lastUse[node] = Number.NEGATIVE_INFINITY;
      }
      if (!missed && now - this.lastUse[node] < this.ttlMs) hit++;
      else missed = true;
      this.lastUse[node] = now;
      parent = node;
    }
    return hit;
  }
}
