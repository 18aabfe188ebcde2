// The "mla" layout kind (DeepSeek latent KV: one row per token and layer):
// sized without a V half, recorded in the block header (byte 73) and read
// back, kept apart from a K|V layout of the same numbers; a header whose kind
// byte is unknown is malformed.
import { describe, expect, it } from 'vitest';

import { BlockCodec, BlockError, PrefixHasher, assertValidLayout, kvBytesPerToken, payloadBytesFor, sameLayout, type KvLayout } from '../../../src/kvtier/index.ts';
import { loadXxhash } from '../../../src/kvtier/xxhash-runtime.ts';
import { tokensOf } from './fixtures.ts';

const MLA: KvLayout = { kind: 'mla', layers: 3, kvHeads: 1, headDim: 80, dtype: 'f16', tokensPerBlock: 64 };
const KV: KvLayout = { layers: 3, kvHeads: 1, headDim: 80, dtype: 'f16', tokensPerBlock: 64 };

describe('mla layouts', () => {
  it('a latent row per token and layer: half the bytes of a K|V layout with the same numbers', () => {
    expect(kvBytesPerToken(MLA)).toBe(3 * 80 * 2);
    expect(payloadBytesFor(MLA, 64)).toBe(3 * 64 * 80 * 2);
    expect(kvBytesPerToken(KV)).toBe(2 * kvBytesPerToken(MLA));
    expect(sameLayout(MLA, KV)).toBe(false);
    expect(sameLayout(MLA, { ...MLA })).toBe(true);
    expect(sameLayout(KV, { ...KV, kind: 'kv' })).toBe(true);
    expect(() => assertValidLayout({ ...MLA, kind: 'paged' as never })).toThrow(BlockError);
  });

  it('an mla layout has one latent row per layer: kvHeads other than 1 is refused (the native codecs size it by layers alone)', async () => {
    expect(() => assertValidLayout({ ...MLA, kvHeads: 2 })).toThrow(/mla layouts have kvHeads 1/);
    const codec = await BlockCodec.create();
    const hasher = await PrefixHasher.create();
    const tokens = tokensOf(64, 5);
    const chain = hasher.chain(hasher.namespaceKeyBytes({ modelFingerprint: 'm', tenantSalt: 't' }), tokens);
    const wide: KvLayout = { ...MLA, kvHeads: 2 };
    const block = { key: chain.keyBytes(0), parentKey: chain.parentKeyBytes(0), modelFingerprint: 'fp', tokens, layout: wide, payload: new Uint8Array(payloadBytesFor(wide, 64)) };
    expect(() => codec.encode(block)).toThrow(BlockError);
  });

  it('the block header records the kind; old headers (kind byte 0) read as K|V; an unknown kind byte is malformed', async () => {
    const codec = await BlockCodec.create();
    const hasher = await PrefixHasher.create();
    const tokens = tokensOf(64, 3);
    const chain = hasher.chain(hasher.namespaceKeyBytes({ modelFingerprint: 'm', tenantSalt: 't' }), tokens);
    const block = { key: chain.keyBytes(0), parentKey: chain.parentKeyBytes(0), modelFingerprint: 'fp', tokens, layout: MLA, payload: new Uint8Array(payloadBytesFor(MLA, 64)).fill(7) };
    const bytes = codec.encode(block);
    expect(bytes[73]).toBe(1);
    expect(codec.decode(bytes).layout).toEqual(MLA);
    const kvBytes = codec.encode({ ...block, layout: KV, payload: new Uint8Array(payloadBytesFor(KV, 64)) });
    expect(kvBytes[73]).toBe(0);
    expect(codec.decode(kvBytes).layout.kind).toBeUndefined();
    // a payload sized for the other kind is refused at encode
    expect(() => codec.encode({ ...block, layout: KV })).toThrow(BlockError);
    // an unknown kind byte under a valid header checksum
    const bad = bytes.slice();
    bad[73] = 9;
    const payloadOffset = new DataView(bad.buffer).getUint32(16, true);
    const meta = bad.slice(0, payloadOffset);
    meta.fill(0, 96, 104);
    new DataView(bad.buffer).setBigUint64(96, (await loadXxhash()).api.h64Raw(meta, 0n), true);
    expect(() => codec.decode(bad)).toThrow(/layout kind code 9/);
  });
});
