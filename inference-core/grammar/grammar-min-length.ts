/**
 * Shortest serialization of each grammar node in bytes (Grammar.minLen):
 * the closing budget and the frame costs lean on it.
 */
import type { GrammarNode } from './grammar-nodes.ts';
import { minNumberCompletion, parseNumberPrefix } from './number-prefix.ts';

/** Shortest serialization of every node, by fixed point (recursion converges from Infinity). */
export function minLengths(nodes: readonly GrammarNode[]): Float64Array {
  const len = new Float64Array(nodes.length).fill(Infinity);
  for (let changed = true; changed; ) {
    changed = false;
    nodes.forEach((nd, i) => {
      let v: number;
      switch (nd.kind) {
        case 'lit':
          v = nd.bytes.length;
          break;
        case 'str':
          v = 2 + nd.min + (nd.exclude?.some((e) => e.length === 0) && nd.min === 0 ? 1 : 0);
          break;
        case 'num':
          v = minNumberCompletion(parseNumberPrefix('', nd.integer, nd.bounds === null)!, nd.integer, nd.bounds);
          break;
        case 'obj': {
          let sum = 2;
          let req = 0;
          for (const p of nd.props) if (p.required) {
            sum += len[p.key] + len[p.value];
            req++;
          }
          v = sum + Math.max(0, req - 1);
          break;
        }
        case 'arr':
          v = nd.min === 0 ? 2 : 2 + nd.min * len[nd.item] + nd.min - 1;
          break;
        case 'alt':
          v = Infinity;
          for (const a of nd.alts) v = Math.min(v, len[a]);
          break;
        case 'seq':
          v = 0;
          for (const p of nd.parts) v += len[p];
          break;
        case 'trig':
          v = 0;
          break;
      }
      if (v < len[i]) {
        len[i] = v;
        changed = true;
      }
    });
  }
  return len;
}
