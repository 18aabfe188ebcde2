import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier } from '../../../src/kvtier/index.ts';
import { LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from './fixtures.ts';
import { childArgs } from '../../helpers/ts-child.ts';

const run = promisify(execFile);
const child = join(import.meta.dirname, 'kv-tier-child.ts');

async function inChild(...args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await run(process.execPath, [...childArgs(child), ...args], { cwd: process.cwd(), timeout: 60_000 });
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe('two OS processes sharing one fs directory', () => {
  it('a block written by one process is a hit for the other, each with its own index', async () => {
    const dir = await tempDir();
    const storeDir = join(dir.path, 'shared-blocks');
    try {
      // Another process writes; this one reads.
      expect(await inChild('write', storeDir, join(dir.path, 'child-index'), '41', '12')).toEqual({ written: 12 });
      const store = await FsBlobStore.open({ dir: storeDir });
      const tier = await KvTier.open({ dataDir: join(dir.path, 'parent-index'), store, logger: captureLogger() });
      const scope = { tenant: 'acme', trafficClass: 'chat' };
      const ns = tier.namespace({ modelFingerprint: 'cross-process-fp', tenantSalt: 'acme' });
      const tokens = tokensOf(12 * 64 + 3, 41);
      const hit = await tier.lookup(ns, tokens, scope);
      expect(hit.hitBlocks).toBe(12);
      expect(hit.adoptedBlocks).toBe(12);
      const loaded = await tier.load(hit);
      expect(loaded.blocks.map((block) => Buffer.from(block.payload).equals(Buffer.from(payloadFor(41, block.index))))).toEqual(new Array(12).fill(true));

      // This one writes; another process reads.
      const mine = tokensOf(5 * 64 + 3, 42);
      tier.store({ namespace: ns, tokens: mine, layout: LAYOUT, ...scope, payloads: Array.from({ length: 5 }, (_, b) => payloadFor(42, b)) });
      await tier.flush();
      expect(await inChild('read', storeDir, join(dir.path, 'child-index'), '42', '5')).toEqual({
        hitBlocks: 5,
        adoptedBlocks: 5,
        loadedBlocks: 5,
        payloadOk: true,
      });
      await tier.close();
      await store.close();
    } finally {
      await dir.remove();
    }
  });
});
