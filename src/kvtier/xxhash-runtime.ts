import xxhash, { type XXHashAPI } from 'xxhash-wasm';

import { KvTierError } from './errors.ts';

/**
 * Two xxhash-wasm instances:
 *
 * - `api`: the package's public API (h64Raw etc.) for checksums and small inputs.
 * - `raw`: a private instance whose exports (`mem`, `xxh64`) we drive
 *   directly, so the chained prefix hash can place all tokens in wasm memory
 *   with one bulk copy and hash every block in place. The public `h64Raw`
 *   copies its input into wasm memory on every call; for 2048 blocks that
 *   per-call copy plus a view check dominated (≈1.2 ms vs ≈0.4 ms for 128k
 *   tokens). The private instance is never handed to the public API, whose
 *   cached memory view our `mem.grow` would detach.
 *
 * The raw exports are captured by observing the package's own
 * `WebAssembly.instantiate` call, and cross-checked against `api.h64Raw`
 * before use; if the package ever changes shape, `raw` is null and the hasher
 * falls back to the public API (same keys, slower).
 */
export interface XxhashRuntime {
  api: XXHashAPI;
  raw: RawXxh64 | null;
}

export interface RawXxh64 {
  memory: WebAssembly.Memory;
  /** xxh64 over memory[ptr, ptr+len) with `seed`; returns a signed i64. */
  xxh64(ptr: number, len: number, seed: bigint): bigint;
}

let runtime: Promise<XxhashRuntime> | undefined;

export function loadXxhash(): Promise<XxhashRuntime> {
  runtime ??= init().catch((error: unknown) => {
    runtime = undefined;
    throw new KvTierError('KVT_ERR_HASH_INIT', `xxhash-wasm failed to initialise: ${(error as Error).message}; is WebAssembly available?`, {
      cause: error,
    });
  });
  return runtime;
}

async function init(): Promise<XxhashRuntime> {
  const api = await xxhash();
  return { api, raw: await captureRaw(api) };
}

async function captureRaw(api: XXHashAPI): Promise<RawXxh64 | null> {
  const original = WebAssembly.instantiate;
  let captured: WebAssembly.Instance | undefined;
  const observer = async (...args: unknown[]) => {
    const result = await (original as (...a: unknown[]) => Promise<unknown>).apply(WebAssembly, args);
    const instance = result instanceof WebAssembly.Instance ? result : (result as { instance?: WebAssembly.Instance }).instance;
    captured ??= instance;
    return result;
  };
  (WebAssembly as { instantiate: unknown }).instantiate = observer;
  try {
    await xxhash();
  } finally {
    (WebAssembly as { instantiate: unknown }).instantiate = original;
  }
  const exports = captured?.exports as { mem?: unknown; xxh64?: unknown } | undefined;
  if (!(exports?.mem instanceof WebAssembly.Memory) || typeof exports.xxh64 !== 'function') return null;
  const raw: RawXxh64 = { memory: exports.mem, xxh64: exports.xxh64 as RawXxh64['xxh64'] };
  // Self-check against the public API on a few lengths and seeds.
  const probe = new Uint8Array(300);
  for (let i = 0; i < probe.length; i++) probe[i] = (i * 131 + 7) & 0xff;
  for (const [len, seed] of [
    [0, 0n],
    [31, 1n],
    [272, 0x9e3779b97f4a7c15n],
    [300, 0xffffffffffffffffn],
  ] as const) {
    new Uint8Array(raw.memory.buffer).set(probe.subarray(0, len));
    if (BigInt.asUintN(64, raw.xxh64(0, len, seed)) !== api.h64Raw(probe.subarray(0, len), seed)) return null;
  }
  return raw;
}
