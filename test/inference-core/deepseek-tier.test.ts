/**
 * DeepSeek latent blocks through the real tier (KvTier over an fs store):
 * exported "mla" blocks are stored, looked up, loaded and imported, and the
 * imported prefix + the suffix prefilled equals the whole prompt prefilled,
 * bit for bit; the stored payload is the latent size (layers · 64 ·
 * (kv_lora_rank + rope) · 2 bytes), a quarter of what this model's per-head
 * K and V would take; and a llama model's blocks for the same tokens are
 * never served to the deepseek2 model (different fingerprint → namespace).
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../storage-adapters/index.ts';
import { KvTier } from '../../src/kvtier/index.ts';
import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { ensureDeepseekModel } from '../../inference-core/synthetic/deepseek-synthetic.ts';
import type { DeepseekConfig } from '../../inference-core/deepseek-config.ts';
import { tempDir } from '../src/kvtier/fixtures.ts';
import { TEST_DATA_DIR, randomTokens, tinyEngine } from './engine-fixtures.ts';

let ds: LoadedEngine;
let llama: LoadedEngine;

beforeAll(async () => {
  ds = await loadEngine(ensureDeepseekModel('deepseek-tiny', { dataDir: TEST_DATA_DIR, shape: 'v3', weightType: 'f16' }), { threads: 1, poolBytes: 8 * 2 ** 20 });
  llama = await tinyEngine();
}, 120_000);

afterAll(() => {
  ds?.destroy();
  llama?.destroy();
});

describe('deepseek2 latent blocks in the tier', () => {
  it('fingerprints of a llama and a deepseek2 model differ; their layouts differ in kind', () => {
    expect(ds.fingerprint).not.toBe(llama.fingerprint);
    expect(ds.kvLayout.kind).toBe('mla');
    expect(llama.kvLayout.kind).toBeUndefined();
  });

  it('store → lookup → load → import + suffix prefill == whole prefill, bit for bit; llama blocks never hit', async () => {
    const dir = await tempDir('kvtier-deepseek-');
    const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store });
    try {
      const scope = { tenant: 'acme', trafficClass: 'chat' };
      const prompt = randomTokens(64 * 3 + 20, ds.vocabSize, 4242);
      const tokens = Uint32Array.from(prompt);
      const whole = ds.createSequence();
      const wholeLogits = whole.prefill(prompt);
      const blocks = whole.exportBlocks(0, 3);
      whole.free();

      const c = ds.config as unknown as DeepseekConfig;
      const latentBlock = c.nLayers * 64 * (c.kvLoraRank + c.qkRopeDim) * 2;
      const expandedBlock = c.nLayers * 64 * c.nHeads * (c.qkNopeDim + c.qkRopeDim + c.vHeadDim) * 2;
      expect(blocks[0].byteLength).toBe(latentBlock);
      expect(latentBlock).toBeLessThanOrEqual(0.25 * expandedBlock);

      const dsNs = tier.namespace({ modelFingerprint: ds.fingerprint, tenantSalt: 'acme' });
      const llamaNs = tier.namespace({ modelFingerprint: llama.fingerprint, tenantSalt: 'acme' });
      // a llama model stores its blocks for another prompt (ids valid in both vocabularies)
      const vocab = Math.min(ds.vocabSize, llama.vocabSize);
      const llamaPrompt = randomTokens(64 * 3, vocab, 777);
      const lseq = llama.createSequence();
      lseq.prefill(llamaPrompt);
      tier.store({ namespace: llamaNs, tokens: Uint32Array.from(llamaPrompt), layout: llama.kvLayout, ...scope, payloads: lseq.exportBlocks(0, 3) });
      lseq.free();
      tier.store({ namespace: dsNs, tokens, layout: ds.kvLayout, ...scope, payloads: blocks });
      await tier.flush();

      const hit = await tier.lookup(dsNs, tokens, scope);
      expect(hit.hitBlocks).toBe(3);
      const loaded = await tier.load(hit);
      expect(loaded.blocks).toHaveLength(3);
      for (const b of loaded.blocks) {
        expect(b.layout.kind).toBe('mla');
        expect(b.payload.byteLength).toBe(latentBlock);
      }
      const seq = ds.createSequence();
      seq.importBlocks(loaded.blocks.map((b) => b.payload));
      const logits = seq.prefill(prompt.slice(64 * 3));
      seq.free();
      expect(Buffer.from(logits.buffer).equals(Buffer.from(wholeLogits.buffer))).toBe(true);

      // the llama blocks are found under the llama fingerprint only
      expect((await tier.lookup(llamaNs, Uint32Array.from(llamaPrompt), scope)).hitBlocks).toBe(3);
      expect((await tier.lookup(dsNs, Uint32Array.from(llamaPrompt), scope)).hitBlocks).toBe(0);
      expect((await tier.lookup(llamaNs, tokens, scope)).hitBlocks).toBe(0);
    } finally {
      await tier.close();
      await store.close();
      await dir.remove();
    }
  });
});
