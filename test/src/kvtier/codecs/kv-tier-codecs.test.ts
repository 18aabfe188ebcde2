/**
 * Codecs through KvTier on an fs store: the policy's codec (document-wide or
 * per class) decides how new blocks are stored; a block keeps the codec it
 * was written with, so blocks written under int8 still load after the policy
 * moves to fp8 and then to none, side by side with blocks of those codecs;
 * what a hit returns is the codec's decompression of what was stored; and
 * until the write lands the raw block is served (compression happens in the
 * write-behind job, not in `store`).
 */
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../../storage-adapters/index.ts';
import { KvTier, type KvLayout } from '../../../../src/kvtier/index.ts';
import { compressPayload, decompressPayloadInto, type BlockCodecName } from '../../../../src/kvtier/codecs/kv-codecs.ts';
import { tempDir, tokensOf } from '../fixtures.ts';
import { floatPayload } from './codec-fixtures.ts';

const LAYOUT: KvLayout = { layers: 2, kvHeads: 2, headDim: 16, dtype: 'f16', tokensPerBlock: 64 };

function lossy(codec: BlockCodecName, payload: Uint8Array): Uint8Array {
  if (codec === 'none') return payload;
  const out = new Uint8Array(payload.byteLength);
  decompressPayloadInto(out, codec, LAYOUT, 64, compressPayload(codec, LAYOUT, 64, payload)!);
  return out;
}

describe('KvTier block codecs', () => {
  it('stores under the policy codec; blocks written under one codec are read after a policy change', async () => {
    const dir = await tempDir('kvtier-codecs-');
    const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, hotCacheBytes: 0 });
    try {
      const scope = { tenant: 'acme', trafficClass: 'chat' };
      const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
      const prompts: { codec: BlockCodecName; tokens: Uint32Array; payloads: Uint8Array[] }[] = [];
      for (const [n, codec] of (['int8', 'fp8', 'int4', 'none'] as const).entries()) {
        await tier.policy.update((doc) => ({ ...doc, codec }));
        const tokens = tokensOf(64 * 2, 100 + n);
        const payloads = [0, 1].map((b) => floatPayload(LAYOUT, 10 * n + b));
        expect(tier.store({ namespace: ns, tokens, layout: LAYOUT, ...scope, payloads }).queued).toBe(2);
        await tier.flush();
        prompts.push({ codec, tokens, payloads });
      }
      // The policy now says none; every earlier block still loads, each decoded by its own header's codec.
      for (const { codec, tokens, payloads } of prompts) {
        const hit = await tier.lookup(ns, tokens, scope);
        expect(hit.hitBlocks).toBe(2);
        for (const key of hit.keys) {
          const file = (await store.get(key))!;
          expect(file[74], `${codec} header`).toBe(['none', 'int8', 'fp8', 'int4'].indexOf(codec));
        }
        const loaded = await tier.load(hit);
        expect(loaded.blocks).toHaveLength(2);
        loaded.blocks.forEach((block, b) => expect(Buffer.from(block.payload).equals(Buffer.from(lossy(codec, payloads[b]))), `${codec} block ${b}`).toBe(true));
      }
      const stored = (codec: BlockCodecName) => prompts.find((p) => p.codec === codec)!;
      const sizes = async (codec: BlockCodecName) => (await store.get((await tier.lookup(ns, stored(codec).tokens, scope)).keys[0]))!.byteLength;
      expect(await sizes('int8')).toBeLessThan(0.6 * (await sizes('none')));
      expect(await sizes('int4')).toBeLessThan(0.35 * (await sizes('none')));
      expect(tier.stats().errors).toEqual({});
    } finally {
      await tier.close();
      await store.close();
      await dir.remove();
    }
  });

  it("a class's codec overrides the document's; a policy naming an unknown codec is refused", async () => {
    const dir = await tempDir('kvtier-codecs-class-');
    const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, hotCacheBytes: 0 });
    try {
      await tier.policy.update((doc) => ({ ...doc, codec: 'fp8', classes: { ...doc.classes, agent: { ...doc.classes.agent, codec: 'int4' } } }));
      expect(tier.policy.current().codecFor('agent')).toBe('int4');
      expect(tier.policy.current().codecFor('chat')).toBe('fp8');
      await expect(tier.policy.update((doc) => ({ ...doc, codec: 'zstd' as BlockCodecName }))).rejects.toMatchObject({ code: 'KVT_ERR_POLICY_INVALID' });
      const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
      const tokens = tokensOf(64, 7);
      const payload = floatPayload(LAYOUT, 7);
      tier.store({ namespace: ns, tokens, layout: LAYOUT, tenant: 'acme', trafficClass: 'agent', payloads: [payload] });
      // Before the write lands the raw block is served from the tier's blocks in flight (block-flights.ts).
      const early = await tier.load(await tier.lookup(ns, tokens, { tenant: 'acme', trafficClass: 'agent' }));
      expect(Buffer.from(early.blocks[0].payload).equals(Buffer.from(payload))).toBe(true);
      await tier.flush();
      const hit = await tier.lookup(ns, tokens, { tenant: 'acme', trafficClass: 'agent' });
      expect((await store.get(hit.keys[0]))![74]).toBe(3);
      const late = await tier.load(hit);
      expect(Buffer.from(late.blocks[0].payload).equals(Buffer.from(lossy('int4', payload)))).toBe(true);
    } finally {
      await tier.close();
      await store.close();
      await dir.remove();
    }
  });
});
