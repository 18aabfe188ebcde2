/**
 * Model fingerprint: a 128-bit hash (32 hex chars) of everything that changes
 * the KV a model writes for a token sequence — architecture, dimensions, rope
 * settings, norm epsilon, the KV dtype and every tensor's name, type, shape
 * and bytes. Two files with the same fingerprint produce interchangeable KV
 * blocks; any weight byte or the KV dtype changing gives a new namespace.
 *
 * Hashing the weights reads the whole file (hundreds of MB), so the weights
 * part is cached in a sidecar `<model>.kvtier-fingerprint.json`, keyed by the
 * file's size and mtime; a rewritten file misses the cache and is rehashed.
 *
 *   fingerprint = H128(config JSON ‖ kvDtype ‖ weightsHash)
 *   weightsHash = H128(for each tensor in file order: name, type, dims, bytes)
 *   H128        = xxh64(seed A) ‖ xxh64(seed B)
 */
import * as fs from 'node:fs';
import xxhash from 'xxhash-wasm';
import type { GgufFile } from './gguf/index.ts';
import { readDeepseek4Config } from './engine/deepseek4-config.ts';
import { modelConfigFromGguf } from './model-config.ts';
import { gemma3ConfigFromGguf } from './gemma3-config.ts';
import { gptOssConfigFromGguf } from './gptoss-config.ts';
import { lfm2ConfigFromGguf } from './lfm2-config.ts';
import { deepseekConfigFromGguf } from './deepseek-config.ts';

export const FINGERPRINT_VERSION = 1;
const SEED_A = 0x6b767469_65720001n; // "kvtier" + 1
const SEED_B = 0x9e3779b9_7f4a7c15n;

export class FingerprintError extends Error {
  override readonly name = 'FingerprintError';
  readonly code = 'KVT_ERR_FINGERPRINT_KV_DTYPE';
  constructor(message: string) {
    super(`KVT_ERR_FINGERPRINT_KV_DTYPE: ${message}`);
  }
}

export type FingerprintKvDtype = 'f16' | 'f32';

export interface FingerprintOptions {
  kvDtype: FingerprintKvDtype;
  /** Use and write the sidecar cache (default true). */
  cache?: boolean;
}

let api: Awaited<ReturnType<typeof xxhash>> | undefined;
async function hasher() {
  api ??= await xxhash();
  return api;
}

const hex64 = (x: bigint) => x.toString(16).padStart(16, '0');
const enc = new TextEncoder();

interface Sidecar {
  version: number;
  size: number;
  mtimeMs: number;
  weightsHash: string;
}

export function fingerprintSidecarPath(modelPath: string): string {
  return `${modelPath}.kvtier-fingerprint.json`;
}

/** H128 of all tensors (name, type, dims, bytes) in file order. */
export async function weightsHash(gguf: GgufFile): Promise<string> {
  const x = await hasher();
  const a = x.create64(SEED_A);
  const b = x.create64(SEED_B);
  const tensors = [...gguf.tensors.values()].sort((p, q) => p.fileOffset - q.fileOffset);
  for (const t of tensors) {
    const head = enc.encode(`${t.name}\0${t.type}\0${t.dims.join(',')}\0${t.byteLength}\0`);
    a.update(head);
    b.update(head);
    // Feed in slices: xxhash-wasm copies input into wasm memory, which grows to the largest chunk.
    const CHUNK = 16 << 20;
    for (let off = 0; off < t.data.byteLength; off += CHUNK) {
      const part = t.data.subarray(off, Math.min(off + CHUNK, t.data.byteLength));
      a.update(part);
      b.update(part);
    }
  }
  return hex64(a.digest()) + hex64(b.digest());
}

async function cachedWeightsHash(gguf: GgufFile, useCache: boolean): Promise<string> {
  let stat: fs.Stats | undefined;
  try {
    stat = fs.statSync(gguf.path);
  } catch {
    stat = undefined; // an in-memory image (parseGguf) has no file to cache next to
  }
  const sidecar = fingerprintSidecarPath(gguf.path);
  if (useCache && stat) {
    try {
      const s = JSON.parse(fs.readFileSync(sidecar, 'utf8')) as Sidecar;
      if (s.version === FINGERPRINT_VERSION && s.size === stat.size && s.mtimeMs === stat.mtimeMs && /^[0-9a-f]{32}$/.test(s.weightsHash)) return s.weightsHash;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') process.stderr.write(`kvtier: ignoring unreadable fingerprint cache ${sidecar}: ${(err as Error).message}\n`);
    }
  }
  const h = await weightsHash(gguf);
  if (useCache && stat) {
    const body: Sidecar = { version: FINGERPRINT_VERSION, size: stat.size, mtimeMs: stat.mtimeMs, weightsHash: h };
    const tmp = `${sidecar}.tmp-${process.pid}`;
    try {
      fs.writeFileSync(tmp, JSON.stringify(body));
      fs.renameSync(tmp, sidecar);
    } catch (err) {
      // A read-only model directory only costs a rehash on the next start.
      process.stderr.write(`kvtier: cannot write fingerprint cache ${sidecar} (${(err as Error).message}); the weights will be rehashed next start\n`);
      fs.rmSync(tmp, { force: true });
    }
  }
  return h;
}

/** 32 lowercase hex chars. */
export async function modelFingerprint(gguf: GgufFile, options: FingerprintOptions): Promise<string> {
  if (options.kvDtype !== 'f16' && options.kvDtype !== 'f32') {
    throw new FingerprintError(`kvDtype must be 'f16' or 'f32', got ${JSON.stringify(options.kvDtype)}`);
  }
  if (gguf.optString('general.architecture') === 'deepseek2') {
    // a latent (MLA) KV layout: its own namespace, never shared with K|V-layout models
    const w = await cachedWeightsHash(gguf, options.cache ?? true);
    const canonical = JSON.stringify({ v: FINGERPRINT_VERSION, arch: 'deepseek2', kv: 'mla', config: deepseekConfigFromGguf(gguf), kvDtype: options.kvDtype, weights: w });
    const x = await hasher();
    const bytes = enc.encode(canonical);
    return hex64(x.h64Raw(bytes, SEED_A)) + hex64(x.h64Raw(bytes, SEED_B));
  }
  const special = gguf.optString('general.architecture');
  if (special === 'gemma3' || special === 'lfm2' || special === 'deepseek4' || special === 'gpt-oss') {
    // the config holds the window / layer pattern / layer kinds: a file that differs only there is another model
    const w = await cachedWeightsHash(gguf, options.cache ?? true);
    const config = special === 'gemma3' ? gemma3ConfigFromGguf(gguf) : special === 'lfm2' ? lfm2ConfigFromGguf(gguf) : special === 'gpt-oss' ? gptOssConfigFromGguf(gguf) : readDeepseek4Config(gguf);
    const canonical = JSON.stringify({ v: FINGERPRINT_VERSION, arch: special, config, kvDtype: options.kvDtype, weights: w });
    const x = await hasher();
    const bytes = enc.encode(canonical);
    return hex64(x.h64Raw(bytes, SEED_A)) + hex64(x.h64Raw(bytes, SEED_B));
  }
  const cfg = modelConfigFromGguf(gguf);
  const w = await cachedWeightsHash(gguf, options.cache ?? true);
  const canonical = JSON.stringify({
    v: FINGERPRINT_VERSION,
    arch: cfg.arch,
    nLayers: cfg.nLayers,
    dModel: cfg.dModel,
    nHeads: cfg.nHeads,
    nKvHeads: cfg.nKvHeads,
    headDim: cfg.headDim,
    ffnDim: cfg.ffnDim,
    vocabSize: cfg.vocabSize,
    ropeTheta: cfg.ropeTheta,
    ropeType: cfg.ropeType,
    ropeDims: cfg.ropeDims,
    rmsEps: cfg.rmsEps,
    qkvBias: cfg.qkvBias,
    tied: cfg.tiedEmbeddings,
    kvDtype: options.kvDtype,
    weights: w,
  });
  const x = await hasher();
  const bytes = enc.encode(canonical);
  return hex64(x.h64Raw(bytes, SEED_A)) + hex64(x.h64Raw(bytes, SEED_B));
}
