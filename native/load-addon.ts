/**
 * Loads native/build/Release/kvtier_native.node once and applies the
 * environment: KVTIER_NATIVE_ISA=scalar|avx2|avx512 forces a kernel set,
 * KVTIER_NATIVE_THREADS=n sizes the thread pool (read by the addon itself),
 * KVTIER_NATIVE_SPIN_US=us is how long idle workers spin before sleeping.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import type { NativeAddon } from './addon-types.ts';
import { NativeError } from './backend.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
export const ADDON_PATH = path.join(here, 'build', 'Release', 'kvtier_native.node');
const EXPECTED_ABI = 2;

let cached: NativeAddon | null = null;

export function loadAddon(): NativeAddon {
  if (cached) return cached;
  if (!existsSync(ADDON_PATH)) {
    throw new NativeError('KVT_ERR_NATIVE_NOT_BUILT',
      `native addon not built (${ADDON_PATH} missing): run \`npm install\` or \`npm run install\``);
  }
  const require = createRequire(import.meta.url);
  const addon = require(ADDON_PATH) as NativeAddon;
  if (addon.abiVersion !== EXPECTED_ABI) {
    throw new NativeError('KVT_ERR_NATIVE_STALE_BUILD',
      `native addon ABI ${addon.abiVersion}, expected ${EXPECTED_ABI}: rebuild with \`npm run install\``);
  }
  const isa = process.env.KVTIER_NATIVE_ISA;
  if (isa) {
    try {
      addon.setIsa(isa);
    } catch (e) {
      throw new NativeError('KVT_ERR_NATIVE_ISA', `KVTIER_NATIVE_ISA=${isa}: ${(e as Error).message}`);
    }
  }
  cached = addon;
  return addon;
}

/** Re-throws an addon error as a NativeError with its stable code. */
export function wrapNativeError(e: unknown): never {
  const err = e as { code?: unknown; message?: string };
  if (typeof err?.code === 'string' && err.code.startsWith('KVT_ERR_NATIVE_')) {
    throw new NativeError(err.code, err.message ?? String(e));
  }
  throw e;
}
