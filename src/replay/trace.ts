/**
 * Traces to replay: one request per line of JSONL, gzipped or plain (told
 * apart by the gzip magic, not the file name).
 *
 * Mooncake (FAST'25 release):
 *   {"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [id, …]}
 * Generic (README.md in this folder):
 *   {"t_ms": ms, "blocks": [id, …], "input_tokens"?: n, "output_tokens"?: n,
 *    "tenant"?: "acme", "class"?: "chat", "conversation"?: "c-17"}
 *
 * Ids are numbers or strings; one id is one block of `blockTokens` tokens,
 * and two requests share KV exactly as far as their id sequences agree from
 * the start. Only full blocks are cached (kvtier's rule): a request's
 * cacheable blocks are its first floor(input_tokens / blockTokens) ids.
 */
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

export interface ReplayRequest {
  /** Line number (0-based) in the trace. */
  index: number;
  /** Arrival, ms from the trace's start. */
  atMs: number;
  /** Interned block ids of the cacheable (full) blocks, in prompt order. */
  blocks: Uint32Array;
  inputTokens: number;
  outputTokens: number;
  tenant: string;
  trafficClass: string;
  conversation: string | null;
}

export interface Trace {
  format: 'mooncake' | 'generic';
  requests: ReplayRequest[];
  blockTokens: number;
  /** Distinct block ids seen. */
  distinctBlocks: number;
  spanMs: number;
}

export class TraceError extends Error {
  readonly code = 'KVT_ERR_REPLAY_TRACE';
  constructor(message: string) {
    super(message);
    this.name = 'TraceError';
  }
}

export interface TraceOptions {
  blockTokens?: number;
  /** Class of requests that name none (all of a Mooncake trace). Default `chat`. */
  defaultClass?: string;
  defaultTenant?: string;
  /** Keep only the first N requests. */
  limit?: number;
}

/** Reads and checks a whole trace (a 12,000-request hour is a few MB). */
export function readTrace(path: string, options: TraceOptions = {}): Trace {
  let raw: Buffer;
  try {
    raw = readFileSync(path);
  } catch (error) {
    throw new TraceError(`cannot read trace ${path}: ${(error as Error).message}`);
  }
  const text = (raw[0] === 0x1f && raw[1] === 0x8b ? gunzipSync(raw) : raw).toString('utf8');
  return parseTrace(text, options, path);
}

export function parseTrace(text: string, options: TraceOptions = {}, source = 'trace'): Trace {
  const blockTokens = options.blockTokens ?? 512;
  const defaultClass = options.defaultClass ?? 'chat';
  const defaultTenant = options.defaultTenant ?? 'replay';
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const ids = new Map<string | number, number>();
  const intern = (id: unknown, where: string): number => {
    if (typeof id !== 'number' && typeof id !== 'string') throw new TraceError(`${where}: a block id must be a number or a string, got ${JSON.stringify(id)}`);
    let n = ids.get(id);
    if (n === undefined) {
      n = ids.size;
      ids.set(id, n);
    }
    return n;
  };
  const requests: ReplayRequest[] = [];
  let format: Trace['format'] | null = null;
  const lines = text.split('\n');
  for (let lineNo = 0; lineNo < lines.length && requests.length < limit; lineNo++) {
    const line = lines[lineNo].trim();
    if (line === '') continue;
    const where = `${source} line ${lineNo + 1}`;
    let row: Record<string, unknown>;
    try {
      row = JSON.parse(line) as Record<string, unknown>;
    } catch (error) {
      throw new TraceError(`${where}: not JSON (${(error as Error).message})`);
    }
    if (row === null || typeof row !== 'object' || Array.isArray(row)) throw new TraceError(`${where}: each line must be a JSON object`);
    const lineFormat = Array.isArray(row.hash_ids) ? 'mooncake' : Array.isArray(row.blocks) ? 'generic' : null;
    if (lineFormat === null) throw new TraceError(`${where}: no "hash_ids" (Mooncake) or "blocks" (generic) array`);
    format ??= lineFormat;
    if (lineFormat !== format) throw new TraceError(`${where}: a ${lineFormat} line in a ${format} trace`);
    const at = lineFormat === 'mooncake' ? row.timestamp : row.t_ms;
    const atName = lineFormat === 'mooncake' ? 'timestamp' : 't_ms';
    if (typeof at !== 'number' || !Number.isFinite(at) || at < 0) throw new TraceError(`${where}: "${atName}" must be a non-negative number of ms`);
    const rawIds = (lineFormat === 'mooncake' ? row.hash_ids : row.blocks) as unknown[];
    const inputName = lineFormat === 'mooncake' ? 'input_length' : 'input_tokens';
    const outputName = lineFormat === 'mooncake' ? 'output_length' : 'output_tokens';
    const input = row[inputName] ?? (lineFormat === 'generic' ? rawIds.length * blockTokens : undefined);
    const output = row[outputName] ?? 0;
    if (typeof input !== 'number' || !Number.isInteger(input) || input < 0) throw new TraceError(`${where}: "${inputName}" must be a non-negative integer`);
    if (typeof output !== 'number' || !Number.isInteger(output) || output < 0) throw new TraceError(`${where}: "${outputName}" must be a non-negative integer`);
    const full = Math.min(rawIds.length, Math.floor(input / blockTokens));
    const blocks = new Uint32Array(full);
    for (let i = 0; i < rawIds.length; i++) {
      const id = intern(rawIds[i], where);
      if (i < full) blocks[i] = id;
    }
    const text = (name: string, fallback: string | null): string | null => {
      const value = row[name];
      if (value === undefined || value === null) return fallback;
      if (typeof value !== 'string' || value === '') throw new TraceError(`${where}: "${name}" must be a non-empty string`);
      return value;
    };
    requests.push({
      index: requests.length,
      atMs: at,
      blocks,
      inputTokens: input,
      outputTokens: output,
      tenant: text('tenant', defaultTenant)!,
      trafficClass: text('class', defaultClass)!,
      conversation: text('conversation', null),
    });
  }
  if (requests.length === 0) throw new TraceError(`${source}: no requests`);
  // Replayed in arrival order; a stable sort keeps the trace's order among equal times.
  requests.sort((a, b) => a.atMs - b.atMs || a.index - b.index);
  const first = requests[0].atMs;
  return { format: format!, requests, blockTokens, distinctBlocks: ids.size, spanMs: requests[requests.length - 1].atMs - first };
}
