/**
 * deepseek4 prefix units through the tier (src/kvtier/tier-units.ts) over a
 * real fs store, on deepseek4-tiny (n_swa 16, ratios 0/4/128/4/128): a unit
 * written by one engine is found by DeepSeek's rule, loaded, imported into a
 * FRESH engine and continued bit for bit — at p past a block (CSA entries of
 * the partial block in the tail), at an HCA group boundary and inside a CSA
 * group; its blocks (entry pages) are shared by every unit on the prefix;
 * a corrupt tail, a missing block or a tail of another model fingerprint is
 * a miss, never a wrong state; a tail's stored size is its sections plus a
 * header.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadEngine, type LoadedEngine } from '../../../inference-core/engine/index.ts';
import { deepseek4TailBytes } from '../../../inference-core/engine/deepseek4-unit.ts';
import type { Deepseek4GraphConfig } from '../../../inference-core/engine/deepseek4-graph.ts';
import { ensureDeepseek4Model } from '../../../inference-core/synthetic/index.ts';
import { TailCodec } from '../../../src/kvtier/index.ts';
import { TEST_DATA_DIR, randomTokens } from '../../inference-core/engine-fixtures.ts';
import { unitRig } from './unit-rig.ts';

let engine: LoadedEngine;
let fresh: LoadedEngine;

beforeAll(async () => {
  const file = ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f32' });
  engine = await loadEngine(file, { dataDir: TEST_DATA_DIR, threads: 1, prefillChunk: 64 });
  fresh = await loadEngine(file, { dataDir: TEST_DATA_DIR, threads: 1, prefillChunk: 64 });
}, 120_000);
afterAll(() => {
  engine?.destroy();
  fresh?.destroy();
});

const { openRig, writeUnit, find, loadOf, continuesExactly } = unitRig(() => engine);
const text = () => randomTokens(300, 500, 23);

describe('deepseek4 prefix units in the tier', () => {
  for (const p of [70, 128, 131]) {
    it(`a unit at ${p} is found, loaded and continued bit for bit in a fresh engine`, async () => {
      const rig = await openRig();
      try {
        const t = text();
        expect(writeUnit(rig, t, p)).toBe('queued');
        await rig.tier.flush();
        // a partial match (one token changed before p) is a miss
        const other = t.slice();
        other[p - 1] = (other[p - 1]! + 1) % 500;
        expect(await find(rig, other)).toBeNull();
        const loaded = await loadOf(rig, t);
        expect(loaded?.position).toBe(p);
        expect(loaded!.blocks).toHaveLength(Math.floor(p / 64));
        expect(continuesExactly(loaded!, t, fresh)).toBe(true);
        // the tail on storage: its f32 sections plus the header, the fingerprint, the tokens after the last block and the section table
        const key = (await find(rig, t))!.key;
        const stored = (await rig.store.get(key))!.byteLength;
        const sections = deepseek4TailBytes((engine.graphConfig as Deepseek4GraphConfig).cfg, p);
        expect(stored).toBeGreaterThan(sections);
        expect(stored).toBeLessThan(sections + 512 + engine.fingerprint.length);
      } finally {
        await rig.close();
      }
    }, 120_000);
  }

  it('units on one prefix share its blocks; the longest whole match wins', async () => {
    const rig = await openRig();
    try {
      const t = text();
      writeUnit(rig, t, 131);
      writeUnit(rig, t, 200);
      await rig.tier.flush();
      const at200 = (await find(rig, t))!;
      expect(at200.position).toBe(200);
      const at131 = (await find(rig, t.slice(0, 150)))!;
      expect(at131.position).toBe(131);
      expect(at200.blocks.keys.slice(0, 2)).toEqual(at131.blocks.keys);
    } finally {
      await rig.close();
    }
  }, 120_000);

  it('a corrupt tail, a missing block or a tail of another model fingerprint is a miss', async () => {
    const rig = await openRig();
    try {
      const t = text();
      writeUnit(rig, t, 131);
      await rig.tier.flush();
      const key = (await find(rig, t))!.key;
      const good = (await rig.store.get(key))!;
      const bad = good.slice();
      bad[bad.byteLength - 9] ^= 1;
      await rig.store.put(key, bad);
      expect(await loadOf(rig, t)).toBeNull();
      await rig.tier.flush();
      writeUnit(rig, t, 131);
      await rig.tier.flush();
      const codec = await TailCodec.create();
      const decoded = codec.decode((await rig.store.get(key))!);
      await rig.store.put(key, codec.encode({ ...decoded, key: decoded.keyBytes, blockKey: decoded.blockKeyBytes, modelFingerprint: 'another-model' }));
      expect(await loadOf(rig, t)).toBeNull();
      await rig.store.put(key, good);
      const loaded = await loadOf(rig, t);
      expect(loaded?.position).toBe(131);
      loaded!.release();
      const blockKeys = (await find(rig, t))!.blocks.keys;
      await rig.store.delete([blockKeys[1]!]);
      expect(await loadOf(rig, t)).toBeNull();
      expect(rig.tier.stats().units!.loadFailed).toBe(3);
    } finally {
      await rig.close();
    }
  }, 120_000);
});
