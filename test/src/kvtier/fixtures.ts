import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { payloadBytesFor, type KvLayout, type KvTierLogger } from '../../../src/kvtier/index.ts';

/** Tiny layout: 2 layers × 1 kv head × 32 dims f16 → 16 KiB per 64-token block. */
export const LAYOUT: KvLayout = { layers: 2, kvHeads: 1, headDim: 32, dtype: 'f16', tokensPerBlock: 64 };
export const BLOCK_PAYLOAD_BYTES = payloadBytesFor(LAYOUT, 64);

export function tokensOf(count: number, seed: number): Uint32Array {
  const tokens = new Uint32Array(count);
  let state = seed >>> 0 || 1;
  for (let i = 0; i < count; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    tokens[i] = state % 50_000;
  }
  return tokens;
}

/** A payload whose bytes depend on (seed, block), so a wrong block is visible. */
export function payloadFor(seed: number, block: number, bytes = BLOCK_PAYLOAD_BYTES): Uint8Array {
  const payload = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) payload[i] = (seed * 31 + block * 7 + i) & 0xff;
  return payload;
}

export async function tempDir(prefix = 'kvtier-test-'): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/** Collects warnings so tests can assert on them (and keep stderr quiet). */
export function captureLogger(): KvTierLogger & { warnings: { fields: Record<string, unknown>; message: string }[] } {
  const warnings: { fields: Record<string, unknown>; message: string }[] = [];
  return { warnings, warn: (fields, message) => warnings.push({ fields, message }), info: () => {} };
}
