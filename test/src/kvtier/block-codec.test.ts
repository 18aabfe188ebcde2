import { describe, expect, it } from 'vitest';

import { BlockCodec, BlockError, PAYLOAD_ALIGNMENT, PrefixHasher, type BlockToEncode } from '../../../src/kvtier/index.ts';
import { BLOCK_PAYLOAD_BYTES, LAYOUT, payloadFor, tokensOf } from './fixtures.ts';

async function sampleBlock(): Promise<{ codec: BlockCodec; block: BlockToEncode; bytes: Uint8Array }> {
  const codec = await BlockCodec.create();
  const hasher = await PrefixHasher.create();
  const tokens = tokensOf(128, 9);
  const chain = hasher.chain(hasher.namespaceKeyBytes({ modelFingerprint: 'm', tenantSalt: 't' }), tokens);
  const block: BlockToEncode = {
    key: chain.keyBytes(1),
    parentKey: chain.parentKeyBytes(1),
    modelFingerprint: 'model-fp-123',
    tokens: tokens.subarray(64, 128),
    layout: LAYOUT,
    payload: payloadFor(1, 1),
  };
  return { codec, block, bytes: codec.encode(block) };
}

function expectBlockError(fn: () => unknown, code: string): void {
  let thrown: unknown;
  try {
    fn();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(BlockError);
  expect((thrown as BlockError).code).toBe(code);
}

describe('BlockCodec', () => {
  it('round-trips every field, payload 64-byte aligned, tokens and payload as views', async () => {
    const { codec, block, bytes } = await sampleBlock();
    const decoded = codec.decode(bytes);
    expect(decoded.key).toBe(Buffer.from(block.key).toString('hex'));
    expect(decoded.parentKey).toBe(Buffer.from(block.parentKey).toString('hex'));
    expect(decoded.modelFingerprint).toBe('model-fp-123');
    expect(decoded.formatVersion).toBe(1);
    expect(decoded.layout).toEqual(LAYOUT);
    expect(Array.from(decoded.tokens)).toEqual(Array.from(block.tokens));
    expect(Buffer.from(decoded.payload).equals(Buffer.from(block.payload))).toBe(true);
    expect((decoded.payload.byteOffset - bytes.byteOffset) % PAYLOAD_ALIGNMENT).toBe(0);
    expect(decoded.payload.buffer).toBe(bytes.buffer);
    expect(decoded.tokens.buffer).toBe(bytes.buffer);
    expect(bytes.byteLength).toBe(decoded.payload.byteOffset + decoded.payload.byteLength);
  });

  it('zeroes its padding and reserved bytes whatever memory it got, in a buffer of its own', async () => {
    const { codec, block } = await sampleBlock();
    // 13 fingerprint bytes and 61 tokens: both pads are non-empty.
    const odd: BlockToEncode = { ...block, modelFingerprint: 'model-fp-1234', tokens: block.tokens.subarray(0, 61), layout: { ...LAYOUT, tokensPerBlock: 64 }, payload: payloadFor(1, 1, (BLOCK_PAYLOAD_BYTES / 64) * 61) };
    const first = codec.encode(odd);
    for (let round = 0; round < 200; round++) {
      // Freed, dirty memory of the block's size for the allocator to hand out again.
      Buffer.allocUnsafeSlow(first.byteLength).fill(0xa5);
      const bytes = codec.encode(odd);
      expect(bytes.byteOffset).toBe(0);
      expect(bytes.buffer.byteLength).toBe(bytes.byteLength);
      expect(Buffer.from(bytes).equals(Buffer.from(first))).toBe(true);
    }
    const view = new DataView(first.buffer);
    const tokensOffset = view.getUint32(12, true);
    const payloadOffset = view.getUint32(16, true);
    const zeroed = [...first.subarray(75, 80), ...first.subarray(104 + 13, tokensOffset), ...first.subarray(tokensOffset + 61 * 4, payloadOffset)];
    expect(zeroed.length).toBeGreaterThan(5);
    expect(zeroed.every((b) => b === 0)).toBe(true);
    expect(codec.decode(first).tokens).toEqual(odd.tokens);
  });

  it('supports every dtype with the right payload size', async () => {
    const { codec, block } = await sampleBlock();
    for (const [dtype, bytesPerRow] of [
      ['f32', 128],
      ['f16', 64],
      ['bf16', 64],
      ['q8_0', 34],
    ] as const) {
      const layout = { ...LAYOUT, dtype };
      const payload = payloadFor(2, 0, 2 * layout.layers * layout.kvHeads * 64 * bytesPerRow);
      const decoded = codec.decode(codec.encode({ ...block, layout, payload }));
      expect(decoded.layout.dtype).toBe(dtype);
      expect(decoded.payload.byteLength).toBe(payload.byteLength);
    }
  });

  it('rejects a payload of the wrong size and a bad layout at encode', async () => {
    const { codec, block } = await sampleBlock();
    expectBlockError(() => codec.encode({ ...block, payload: new Uint8Array(10) }), 'KVT_ERR_BLOCK_PAYLOAD_SIZE');
    expectBlockError(() => codec.encode({ ...block, layout: { ...LAYOUT, dtype: 'f8' as never } }), 'KVT_ERR_BLOCK_BAD_LAYOUT');
    expectBlockError(() => codec.encode({ ...block, layout: { ...LAYOUT, dtype: 'q8_0', headDim: 48 } }), 'KVT_ERR_BLOCK_BAD_LAYOUT');
  });

  it('rejects every truncation with a typed error, never partial data', async () => {
    const { codec, bytes } = await sampleBlock();
    for (const length of [0, 3, 7, 8, 50, 103, 104, 200, 400, bytes.byteLength - 1]) {
      let thrown: unknown;
      try {
        codec.decode(bytes.slice(0, length));
      } catch (error) {
        thrown = error;
      }
      expect(thrown, `length ${length}`).toBeInstanceOf(BlockError);
      expect(['KVT_ERR_BLOCK_TRUNCATED', 'KVT_ERR_BLOCK_MALFORMED']).toContain((thrown as BlockError).code);
    }
    expectBlockError(() => codec.decode(bytes.slice(0, bytes.byteLength - 1)), 'KVT_ERR_BLOCK_TRUNCATED');
    const extended = new Uint8Array(bytes.byteLength + 1);
    extended.set(bytes);
    expectBlockError(() => codec.decode(extended), 'KVT_ERR_BLOCK_MALFORMED');
  });

  it('detects a single flipped bit anywhere in the file', async () => {
    const { codec, bytes } = await sampleBlock();
    // Every byte of the header/tokens region, and a spread of payload bytes.
    const positions = [...Array.from({ length: 700 }, (_, i) => i), bytes.byteLength - 1, bytes.byteLength - 4000, 5000];
    for (const position of positions) {
      if (position >= bytes.byteLength) continue;
      const flipped = bytes.slice();
      flipped[position] ^= 1 << (position % 8);
      let thrown: unknown;
      try {
        codec.decode(flipped);
      } catch (error) {
        thrown = error;
      }
      expect(thrown, `bit flip at byte ${position}`).toBeInstanceOf(BlockError);
    }
  });

  it('names a bad magic and another format version', async () => {
    const { codec, bytes } = await sampleBlock();
    const notOurs = bytes.slice();
    notOurs[0] = 0x50;
    expectBlockError(() => codec.decode(notOurs), 'KVT_ERR_BLOCK_BAD_MAGIC');
    const v2 = bytes.slice();
    new DataView(v2.buffer).setUint16(4, 2, true);
    expectBlockError(() => codec.decode(v2), 'KVT_ERR_BLOCK_VERSION');
    expectBlockError(() => codec.decode(new TextEncoder().encode('hello world, not a block')), 'KVT_ERR_BLOCK_BAD_MAGIC');
  });
});
