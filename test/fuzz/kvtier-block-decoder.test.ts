/**
 * Fuzzes BlockCodec.decode on mutated block files (plain and compressed,
 * codec byte 74) and BlockSealer's open on tampered envelopes. A decode either
 * returns a block whose every field agrees with the file's header (never a
 * partial payload) or throws a BlockError; a tampered envelope never opens.
 */
import { describe, expect, it } from 'vitest';

import { blockChecksum } from '../../src/kvtier/block-checksum.ts';
import { BlockCodec, BlockError, payloadBytesFor, type BlockToEncode, type KvLayout } from '../../src/kvtier/index.ts';
import { BlockSealer, keyringFromSecret, openStored, SealError } from '../../src/kvtier/seal/index.ts';
import { loadXxhash } from '../../src/kvtier/xxhash-runtime.ts';
import { floatPayload } from '../src/kvtier/codecs/codec-fixtures.ts';
import { fuzz, int, mutateBytes, pick, type Rand } from './fuzz-runner.ts';

const F16: KvLayout = { layers: 2, kvHeads: 1, headDim: 32, dtype: 'f16', tokensPerBlock: 16 };
const F32: KvLayout = { layers: 1, kvHeads: 2, headDim: 16, dtype: 'f32', tokensPerBlock: 8 };
const MLA: KvLayout = { layers: 2, kvHeads: 1, headDim: 24, dtype: 'f16', tokensPerBlock: 8, kind: 'mla' };

async function corpus(codec: BlockCodec): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  for (const [i, layout] of [F16, F32, MLA].entries()) {
    for (const count of [1, layout.tokensPerBlock]) {
      const tokens = new Uint32Array(layout.tokensPerBlock).map((_, t) => (t * 7919 + i) % 50_000);
      const block: BlockToEncode = { key: new Uint8Array(16).fill(i + 1), parentKey: new Uint8Array(16).fill(i + 9), modelFingerprint: `fp-${i}`, tokens: tokens.subarray(0, count), layout, payload: floatPayload(layout, 3 + i, count) };
      for (const name of ['none', 'int8', 'fp8', 'int4'] as const) out.push(codec.encode(block, name));
    }
  }
  return out;
}

/** Rewrites both checksums so a mutation reaches the structural checks behind them. */
function refreshChecksums(h64: (b: Uint8Array) => bigint, bytes: Uint8Array): void {
  if (bytes.length < 104) return;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const payloadOffset = view.getUint32(16, true);
  if (payloadOffset > bytes.length || payloadOffset < 104) return;
  view.setBigUint64(88, h64(bytes.subarray(payloadOffset)), true);
  const meta = bytes.slice(0, payloadOffset);
  meta.fill(0, 96, 104);
  view.setBigUint64(96, h64(meta), true);
}

function mutateHeader(rand: Rand, bytes: Uint8Array): Uint8Array {
  const out = bytes.slice();
  const view = new DataView(out.buffer);
  const field = pick(rand, [8, 12, 16, 20, 56, 60, 64, 68, 72, 73, 74, 80]);
  if (field >= 72 && field <= 74) out[field] = int(rand, 8) === 0 ? int(rand, 256) : int(rand, 5);
  else if (field === 80) view.setBigUint64(80, pick(rand, [0n, 1n, BigInt(out.length), 1n << 40n, (1n << 64n) - 1n, view.getBigUint64(80, true) + BigInt(int(rand, 64)) - 32n]) & ((1n << 64n) - 1n), true);
  else view.setUint32(field, pick(rand, [0, 1, 2, 0xffffffff, 0x7fffffff, view.getUint32(field, true) * 2, view.getUint32(field, true) + int(rand, 9) - 4]) >>> 0, true);
  return out;
}

function checkDecoded(codec: BlockCodec, bytes: Uint8Array, original: Uint8Array | undefined): void {
  let block;
  try {
    block = codec.decode(bytes);
  } catch (error) {
    if (!(error instanceof BlockError)) throw new Error(`decode threw ${String(error)} (not a BlockError)`);
    expect(error.code).toMatch(/^KVT_ERR_BLOCK_/);
    return;
  }
  // A block that decodes is whole: token count, layout and payload agree with each other and the file.
  expect(block.tokens.length).toBeGreaterThan(0);
  expect(block.tokens.length).toBeLessThanOrEqual(block.layout.tokensPerBlock);
  expect(block.payload.byteLength).toBe(payloadBytesFor(block.layout, block.tokens.length));
  expect(block.bytes.byteLength).toBe(bytes.byteLength);
  if (original !== undefined) expect(Buffer.compare(Buffer.from(bytes), Buffer.from(original))).toBe(0);
}

describe('fuzz: kvtier block decoder', () => {
  it('mutated and truncated block files decode whole or throw a BlockError', async () => {
    const codec = await BlockCodec.create();
    const files = await corpus(codec);
    await fuzz({ name: 'block-decode raw mutations', budgetMs: 2500 }, (rand) => {
      const original = pick(rand, files);
      const mutated = mutateBytes(rand, original);
      // Without refreshed checksums only an unchanged file may decode.
      checkDecoded(codec, mutated, mutated.length === original.length && Buffer.compare(Buffer.from(mutated), Buffer.from(original)) === 0 ? undefined : original);
    });
  });

  it('header fields with refreshed checksums decode whole or throw a BlockError', async () => {
    const codec = await BlockCodec.create();
    const h64 = blockChecksum((await loadXxhash()).api).h64Raw;
    const files = await corpus(codec);
    await fuzz({ name: 'block-decode header fields', budgetMs: 2500 }, (rand) => {
      let mutated = mutateHeader(rand, pick(rand, files));
      if (rand() < 0.3) mutated = mutateBytes(rand, mutated, 1);
      refreshChecksums((b) => h64(b, 0n), mutated);
      checkDecoded(codec, mutated, undefined);
    });
  });

  /** Encodes a block of `layout` under int8, edits its header, re-checksums it and returns what decode throws. */
  async function decodeEdited(layout: KvLayout, edit: (bytes: Uint8Array, view: DataView) => void): Promise<unknown> {
    const codec = await BlockCodec.create();
    const h64 = blockChecksum((await loadXxhash()).api).h64Raw;
    const block: BlockToEncode = { key: new Uint8Array(16).fill(1), parentKey: new Uint8Array(16).fill(2), modelFingerprint: 'fp', tokens: new Uint32Array(layout.tokensPerBlock).fill(5), layout, payload: floatPayload(layout, 1) };
    const bytes = codec.encode(block, 'int8');
    edit(bytes, new DataView(bytes.buffer, bytes.byteOffset));
    refreshChecksums((b) => h64(b, 0n), bytes);
    try {
      codec.decode(bytes);
    } catch (error) {
      return error;
    }
    return undefined;
  }

  it('a compressed MLA block whose header claims 2 kv heads is KVT_ERR_BLOCK_MALFORMED (found by this fuzzer: the native codec threw a plain Error)', async () => {
    const thrown = await decodeEdited(MLA, (bytes, view) => {
      expect(bytes[74]).not.toBe(0);
      view.setUint32(60, 2, true);
    });
    expect(thrown).toBeInstanceOf(BlockError);
    expect((thrown as BlockError).code).toBe('KVT_ERR_BLOCK_MALFORMED');
  });

  it('a compressed block whose header claims more layers than the codec takes is KVT_ERR_BLOCK_MALFORMED (found by this fuzzer)', async () => {
    const thrown = await decodeEdited(F16, (_bytes, view) => view.setUint32(56, 70_000, true));
    expect(thrown).toBeInstanceOf(BlockError);
    expect((thrown as BlockError).code).toBe('KVT_ERR_BLOCK_MALFORMED');
  });

  it('a tampered sealed envelope never opens (typed SealError), an intact one opens to the same block', async () => {
    const codec = await BlockCodec.create();
    const files = await corpus(codec);
    const sealer = new BlockSealer(keyringFromSecret('f'.repeat(16) + '0123456789abcdef0123456789abcdef'), { openThreads: 0 });
    const blockKey = new Uint8Array(16).map((_, i) => i * 13);
    const tenant = '5f1c0e1a2b3c4d5e6f708192a3b4c5d6';
    await fuzz({ name: 'seal envelope tampering', budgetMs: 2000 }, (rand) => {
      const plain = pick(rand, files);
      const sealed = sealer.seal(plain, blockKey, tenant);
      const tampered = mutateBytes(rand, sealed);
      const unchanged = tampered.length === sealed.length && Buffer.compare(Buffer.from(tampered), Buffer.from(sealed)) === 0;
      let opened: Uint8Array | undefined;
      try {
        opened = openStored(sealer, tampered, blockKey, tenant);
      } catch (error) {
        if (!(error instanceof SealError)) throw new Error(`open threw ${String(error)} (not a SealError)`);
        expect(unchanged).toBe(false);
        return;
      }
      expect(unchanged).toBe(true);
      expect(Buffer.compare(Buffer.from(opened), Buffer.from(plain))).toBe(0);
      checkDecoded(codec, opened, plain);
    });
  });
});
