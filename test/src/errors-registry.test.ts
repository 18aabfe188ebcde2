/**
 * Every error code the project throws has its own HTTP status and type in the
 * one registry (src/errors.ts): none falls through to KVT_ERR_INTERNAL's 500
 * by accident. The codes are read from the source, so a new code that is not
 * registered fails here.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

import { describe, expect, it } from 'vitest';

import { ERROR_REGISTRY, describeError, specFor } from '../../src/errors.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const SOURCE_DIRS = ['src', 'inference-core', 'storage-adapters', 'native', 'bin', 'scripts'];
const SOURCE_FILE = /\.(ts|mts|mjs|js|cc|h|cu|cuh)$/;
const SKIP_DIRS = new Set(['node_modules', 'build', 'assets']);

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (!SKIP_DIRS.has(name)) sourceFiles(path, out);
    } else if (SOURCE_FILE.test(name)) out.push(path);
  }
  return out;
}

/** Full codes written as literals, and the cluster codes built from `new ClusterError('WHAT'`. */
function thrownCodes(): Map<string, string> {
  const codes = new Map<string, string>();
  for (const dir of SOURCE_DIRS) {
    for (const file of sourceFiles(join(ROOT, dir))) {
      const text = readFileSync(file, 'utf8');
      // A literal code ends at a quote; `KVT_ERR_CLI_${x}` and prefix tests (`startsWith('KVT_ERR_STORAGE_')`) end in `_` or `$`.
      for (const m of text.matchAll(/KVT_ERR_[A-Z0-9_]*[A-Z0-9](?=['"`])/g)) if (!codes.has(m[0])) codes.set(m[0], relative(ROOT, file));
      for (const m of text.matchAll(/new ClusterError\('([A-Z0-9_]+)'/g)) codes.set(`KVT_ERR_CLUSTER_${m[1]}`, relative(ROOT, file));
    }
  }
  return codes;
}

describe('error registry', () => {
  const codes = thrownCodes();

  it('finds the codes the project throws', () => {
    // Sanity of the scan itself: codes from each layer are seen.
    for (const known of ['KVT_ERR_AUTH_BAD_KEY', 'KVT_ERR_ADMIN_NOT_FOUND', 'KVT_ERR_STORAGE_BAD_CONFIG', 'KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD', 'KVT_ERR_CLUSTER_GC_BUSY']) {
      expect(codes.has(known), known).toBe(true);
    }
    expect(codes.size).toBeGreaterThan(100);
  });

  it('maps every thrown code to its own status and type, not the internal fallback', () => {
    const unmapped = [...codes].filter(([code]) => code !== 'KVT_ERR_INTERNAL' && specFor(code) === ERROR_REGISTRY.KVT_ERR_INTERNAL).map(([code, file]) => `${code} (${file})`);
    expect(unmapped).toEqual([]);
  });

  it('falls back to KVT_ERR_INTERNAL only for an unknown code', () => {
    expect(specFor('KVT_ERR_NO_SUCH_AREA_X')).toBe(ERROR_REGISTRY.KVT_ERR_INTERNAL);
    expect(describeError(new Error('plain')).code).toBe('KVT_ERR_INTERNAL');
  });

  it('gives every registered code a 4xx or 5xx status, a type and a hint', () => {
    for (const [code, spec] of Object.entries(ERROR_REGISTRY)) {
      expect(spec.status, code).toBeGreaterThanOrEqual(400);
      expect(spec.status, code).toBeLessThan(600);
      expect(spec.hint.length, code).toBeGreaterThan(10);
    }
  });

  it('keeps the admin codes in the same registry', () => {
    for (const code of ['KVT_ERR_ADMIN_BAD_REQUEST', 'KVT_ERR_ADMIN_NOT_FOUND', 'KVT_ERR_ADMIN_UNAVAILABLE']) expect(code in ERROR_REGISTRY, code).toBe(true);
  });
});
