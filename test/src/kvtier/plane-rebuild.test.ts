/**
 * Rebuild of the metadata plane from the storage listing (src/kvtier/plane-rebuild.ts) after the
 * plane lost its data: a unit tail's record says it is a tail — from this node's index entry, or,
 * for a tail no index knows, from the file itself (plain: the tail magic; sealed: the envelope's
 * content byte) — and the plane's usage counts it under k:tail; blocks stay blocks.
 */
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { BlockCodec, BlockIndex, LmdbMetadataPlane, RetentionPolicy, TailCodec, defaultPolicyDoc, type TailToEncode } from '../../../src/kvtier/index.ts';
import { rebuildRecords } from '../../../src/kvtier/plane-rebuild.ts';
import { BlockSealer, sealedContent } from '../../../src/kvtier/seal/index.ts';
import { keyringFromSecret } from '../../../src/kvtier/seal/seal-keyring.ts';
import { LAYOUT, payloadFor, tempDir, tokensOf } from './fixtures.ts';

const policy = new RetentionPolicy(defaultPolicyDoc());
const NOW = Date.UTC(2026, 5, 1);
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

function keyBytes(n: number): Uint8Array {
  return Uint8Array.from({ length: 16 }, (_, i) => (n * 31 + i * 7) & 0xff);
}

function tailFile(codec: TailCodec, key: Uint8Array): Uint8Array {
  const tail: TailToEncode = {
    key,
    blockKey: new Uint8Array(16),
    modelFingerprint: 'test-model',
    position: 10,
    tokensPerBlock: 64,
    tokens: tokensOf(10, 3),
    dtype: 'f16',
    // One short-convolution state (rows × width f32), the state at p.
    sections: [{ kind: 'conv', layers: [0], kvHeads: 2, headDim: 4, firstToken: 10, tokens: 1, bytes: new Uint8Array(2 * 4 * 4).fill(7) }],
  };
  return codec.encode(tail);
}

describe('plane rebuild from the storage listing', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>;
  let store: FsBlobStore;
  let plane: LmdbMetadataPlane;
  let index: BlockIndex;

  beforeEach(async () => {
    dir = await tempDir('kvtier-rebuild-');
    store = new FsBlobStore({ dir: join(dir.path, 'blocks') });
    plane = await LmdbMetadataPlane.open({ path: join(dir.path, 'plane') });
    index = BlockIndex.open({ path: join(dir.path, 'index') });
  });
  afterEach(async () => {
    await plane.close();
    index.close();
    await store.close();
    await dir.remove();
  });

  it('records unit tails as tails (index entry, plain tail file, sealed tail file) and blocks as blocks; usage counts the tails under k:tail', async () => {
    const tails = await TailCodec.create();
    const blocks = await BlockCodec.create();
    const sealer = new BlockSealer(keyringFromSecret('r'.repeat(16) + '0123456789abcdef0123456789abcdef'), { openThreads: 0 });
    const block = keyBytes(1);
    const knownTail = keyBytes(2);
    const plainTail = keyBytes(3);
    const sealedTail = keyBytes(4);
    const sealedBlock = keyBytes(5);
    const blockFile = (key: Uint8Array) =>
      blocks.encode({ key, parentKey: new Uint8Array(16), modelFingerprint: 'test-model', layout: LAYOUT, tokens: tokensOf(64, 1), payload: payloadFor(1, 0) });
    await store.put(hex(block), blockFile(block));
    await store.put(hex(knownTail), tailFile(tails, knownTail));
    await store.put(hex(plainTail), tailFile(tails, plainTail));
    const sealed = sealer.seal(tailFile(tails, sealedTail), sealedTail, 'salt-a');
    expect(sealedContent(sealed)).toBe('tail');
    await store.put(hex(sealedTail), sealed);
    const sealedBlockBytes = sealer.seal(blockFile(sealedBlock), sealedBlock, 'salt-a');
    expect(sealedContent(sealedBlockBytes)).toBe('block');
    await store.put(hex(sealedBlock), sealedBlockBytes);
    // This node's index knows one tail (written here); the others were written by nodes whose index is gone.
    await index.recordWrites([{ keyBytes: knownTail, sizeBytes: 999, trafficClass: 'chat', tenant: 'acme', depth: 0, kind: 'tail' }], NOW - 1000, policy);

    const result = await rebuildRecords({ plane, store, index, policy, now: NOW, batchSize: 2 });
    expect(result).toEqual({ written: 5, complete: true });
    const records = await plane.get([block, knownTail, plainTail, sealedTail, sealedBlock].map(hex));
    expect(records.map((record) => record?.kind ?? 'block')).toEqual(['block', 'tail', 'tail', 'tail', 'block']);
    expect(records[1]).toMatchObject({ tenant: 'acme', trafficClass: 'chat', sizeBytes: 999 });
    const usage = await plane.usage();
    expect(usage.blocks).toMatchObject({ g: 5, 'k:tail': 3 });
    expect(usage.bytes['k:tail']).toBe(999 + records[2]!.sizeBytes + records[3]!.sizeBytes);
    await sealer.close();
  });

});
