/**
 * Shared fixtures of the engine suites: synthetic models are generated once
 * per machine under a temp data dir (their file names carry a content hash,
 * so a stale file is never reused) and shared by every suite.
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { loadEngine, type LoadEngineOptions, type LoadedEngine } from '../../inference-core/engine/index.ts';

export const TEST_DATA_DIR = process.env.KVTIER_TEST_DATA_DIR ?? path.join(os.tmpdir(), 'kvtier-engine-tests');

export async function tinyEngine(options: LoadEngineOptions = {}): Promise<LoadedEngine> {
  return await loadEngine('synthetic:tiny', { dataDir: TEST_DATA_DIR, threads: 1, poolBytes: 4 * 2 ** 20, ...options });
}

/** The speculative suites' pair: synthetic:tiny as the f16 target and its q8_0 twin as the draft (one thread, f16 KV). */
export async function draftPair(poolBytes = 16 * 2 ** 20): Promise<{ target: LoadedEngine; draft: LoadedEngine }> {
  const opts = { dataDir: TEST_DATA_DIR, threads: 1, poolBytes, kvDtype: 'f16' as const };
  const target = await loadEngine('synthetic:tiny', { ...opts, weightType: 'f16' });
  const draft = await loadEngine('synthetic:tiny', { ...opts, weightType: 'q8_0' });
  return { target, draft };
}

/** Deterministic pseudo-random token ids in [lo, vocab). */
export function randomTokens(n: number, vocab: number, seed = 1, lo = 0): number[] {
  let s = seed >>> 0 || 1;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out.push(lo + (s % (vocab - lo)));
  }
  return out;
}

export function argmax(a: Float32Array): number {
  let b = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i;
  return b;
}

/** Greedy continuation of `n` tokens from the logits of the prompt's last token. */
export function greedyFrom(seq: { decode(t: number): Float32Array }, logits: Float32Array, n: number): number[] {
  const out: number[] = [];
  let l = logits;
  for (let i = 0; i < n; i++) {
    const t = argmax(l);
    out.push(t);
    if (i + 1 < n) l = seq.decode(t);
  }
  return out;
}
