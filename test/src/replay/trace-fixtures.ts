/**
 * The shared Mooncake traces, and the definition a replay is checked
 * against, written here from the words and nothing in src/replay:
 *
 *   a request's hit is the longest prefix of its (full) block ids that an
 *   earlier request had — with a TTL, an earlier request less than TTL ms
 *   before it (a prefix had by such a request was used then, so it is live).
 *
 * Plain O(n²) over pairs: slow, obviously right.
 */
import { writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { readFileSync } from 'node:fs';

export const TRACES = '/work/shared/traces';
export const CONVERSATION = `${TRACES}/mooncake_conversation_trace.jsonl.gz`;
export const SYNTHETIC = `${TRACES}/mooncake_synthetic_trace.jsonl.gz`;

export interface RawRequest {
  timestamp: number;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}

export function rawTrace(path: string): RawRequest[] {
  return gunzipSync(readFileSync(path))
    .toString('utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as RawRequest);
}

/** Each request's full blocks (512-token blocks; the last id may be a partial block). */
export function fullBlocks(r: RawRequest, blockTokens = 512): number[] {
  return r.hash_ids.slice(0, Math.floor(r.input_length / blockTokens));
}

/** Hit blocks per request by the definition, requests in arrival order (ties in trace order). */
export function definitionHits(requests: Array<{ at: number; blocks: number[] }>, ttlMs = Number.POSITIVE_INFINITY): number[] {
  const order = requests.map((r, i) => ({ ...r, i })).sort((a, b) => a.at - b.at || a.i - b.i);
  const hits: number[] = [];
  for (let i = 0; i < order.length; i++) {
    let best = 0;
    const mine = order[i].blocks;
    for (let j = i - 1; j >= 0; j--) {
      if (!(order[i].at - order[j].at < ttlMs)) break;
      const theirs = order[j].blocks;
      let k = 0;
      while (k < mine.length && k < theirs.length && mine[k] === theirs[k]) k++;
      if (k > best) best = k;
      if (best === mine.length) break;
    }
    hits.push(best);
  }
  return hits;
}

/**
 * Every `step`-th request of a Mooncake trace, written in the generic form
 * (t_ms, blocks, input/output tokens, tenant, class, conversation) so a run
 * spans the whole hour with few requests; classes alternate agent/chat.
 */
export function writeGenericSubsample(source: string, step: number, path: string): Array<{ at: number; blocks: number[]; trafficClass: string }> {
  const picked = rawTrace(source).filter((_, i) => i % step === 0);
  const lines = picked.map((r, i) =>
    JSON.stringify({ t_ms: r.timestamp, blocks: r.hash_ids.map((id) => `b${id}`), input_tokens: r.input_length, output_tokens: r.output_length, tenant: 'acme', class: i % 2 === 0 ? 'chat' : 'agent', conversation: `c${i % 7}` }),
  );
  writeFileSync(path, lines.join('\n') + '\n');
  return picked.map((r, i) => ({ at: r.timestamp, blocks: fullBlocks(r), trafficClass: i % 2 === 0 ? 'chat' : 'agent' }));
}
