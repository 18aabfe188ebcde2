/**
 * Tail files (src/kvtier/tail-codec.ts): a gemma3 unit's tail written and read
 * back continues the prefix bit for bit; every corruption is a typed
 * BlockError (a miss); codecs compress kv sections exactly as they compress
 * a block payload of the same shape and leave state sections raw; a sealed
 * tail opens only under its own key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlockCodec, TailCodec, errorCodeOf, type TailSectionRecord, type TailToEncode } from '../../../src/kvtier/index.ts';
import { BlockSealer } from '../../../src/kvtier/seal/index.ts';
import { keyringFromSecret } from '../../../src/kvtier/seal/seal-keyring.ts';
import { exportUnit, importUnit, loadEngine, unitShapeOf, type EngineUnit, type LoadedEngine } from '../../../inference-core/engine/index.ts';
import { ensureGemma3Model } from '../../../inference-core/synthetic/gemma3-synthetic.ts';
import { ensureLfm2Model } from '../../../inference-core/synthetic/lfm2-synthetic.ts';
import { TEST_DATA_DIR, randomTokens } from '../../inference-core/engine-fixtures.ts';

let engine: LoadedEngine;
let codec: TailCodec;
const KEY = Uint8Array.from({ length: 16 }, (_, i) => i + 1);
const BLOCK_KEY = Uint8Array.from({ length: 16 }, (_, i) => 200 - i);

beforeAll(async () => {
  engine = await loadEngine(ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR }), { kvDtype: 'f16', threads: 1, poolBytes: 8 * 2 ** 20 });
  codec = await TailCodec.create();
}, 120_000);
afterAll(() => engine?.destroy());

function tailOf(unit: EngineUnit, tokens: number[]): TailToEncode {
  const s = unitShapeOf(engine);
  return {
    key: KEY,
    blockKey: BLOCK_KEY,
    modelFingerprint: engine.fingerprint,
    position: unit.position,
    tokensPerBlock: 64,
    tokens: Uint32Array.from(tokens.slice(Math.floor(unit.position / 64) * 64, unit.position)),
    dtype: s.dtype,
    sections: unit.tail.map((t) => ({ kind: t.kind, layers: t.layers, kvHeads: s.kvHeads, headDim: s.headDim, firstToken: t.firstToken, tokens: t.tokens, bytes: t.bytes })),
  };
}

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return errorCodeOf(error);
  }
  return 'no error';
}

const same = (a: ArrayBufferView, b: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

describe('tail files', () => {
  const prompt = () => randomTokens(180, engine.vocabSize, 515);

  it('a gemma3 unit at 100 through encode/decode continues bit for bit (logits of the next 80 tokens)', () => {
    const tokens = prompt();
    const seq = engine.createSequence();
    seq.prefill(tokens.slice(0, 100));
    const unit = exportUnit(engine, seq);
    seq.free();
    const file = codec.encode(tailOf(unit, tokens));
    const back = codec.decode(file);
    expect(back).toMatchObject({ position: 100, blocks: 1, key: Buffer.from(KEY).toString('hex'), blockKey: Buffer.from(BLOCK_KEY).toString('hex'), modelFingerprint: engine.fingerprint, codec: 'none' });
    expect(Array.from(back.tokens)).toEqual(tokens.slice(64, 100));
    expect(back.sections.map((s) => s.kind)).toEqual(['partial-kv', 'window-kv']);
    const restored: EngineUnit = { position: back.position, blocks: unit.blocks, tail: back.sections.map((s) => ({ kind: s.kind as 'partial-kv' | 'window-kv', layers: s.layers, firstToken: s.firstToken, tokens: s.tokens, bytes: s.bytes })) };
    const hit = engine.createSequence();
    importUnit(engine, hit, restored);
    const whole = engine.createSequence();
    expect(same(hit.prefill(tokens.slice(100)), whole.prefill(tokens))).toBe(true);
    hit.free();
    whole.free();
    // what the tail costs next to the whole state at p: 7 sliding layers × 39 tokens + the global layer's 36 tokens
    console.log(`tail at p=100: ${file.byteLength} B (payload ${back.storedPayloadBytes} B); whole K|V of 100 tokens: ${100 * engine.kvBytesPerToken} B`);
  });

  it('an lfm2 unit (attention partial block + convolution state) through encode/decode under int8 continues bit for bit', async () => {
    const lfm2 = await loadEngine(ensureLfm2Model({ dataDir: TEST_DATA_DIR }), { kvDtype: 'f16', threads: 1, poolBytes: 8 * 2 ** 20 });
    try {
      const tokens = randomTokens(160, lfm2.vocabSize, 616);
      const seq = lfm2.createSequence();
      seq.prefill(tokens.slice(0, 100));
      const unit = exportUnit(lfm2, seq);
      seq.free();
      const s = unitShapeOf(lfm2);
      const sections: TailSectionRecord[] = unit.tail.map((t) =>
        t.kind === 'conv'
          ? { kind: 'conv', layers: t.layers, kvHeads: s.conv!.rows, headDim: s.conv!.width, firstToken: t.firstToken, tokens: 1, bytes: t.bytes }
          : { kind: t.kind, layers: t.layers, kvHeads: s.kvHeads, headDim: s.headDim, firstToken: t.firstToken, tokens: t.tokens, bytes: t.bytes },
      );
      const file = codec.encode({ key: KEY, blockKey: BLOCK_KEY, modelFingerprint: lfm2.fingerprint, position: 100, tokensPerBlock: 64, tokens: Uint32Array.from(tokens.slice(64, 100)), dtype: 'f16', sections }, 'none');
      const back = codec.decode(file);
      const conv = back.sections.find((x) => x.kind === 'conv')!;
      expect(same(conv.bytes, unit.tail.find((t) => t.kind === 'conv')!.bytes)).toBe(true);
      // int8 may only touch the kv section: the convolution state comes back bit for bit
      const packed = codec.decode(codec.encode({ key: KEY, blockKey: BLOCK_KEY, modelFingerprint: lfm2.fingerprint, position: 100, tokensPerBlock: 64, tokens: Uint32Array.from(tokens.slice(64, 100)), dtype: 'f16', sections }, 'int8'));
      expect(same(packed.sections.find((x) => x.kind === 'conv')!.bytes, conv.bytes)).toBe(true);
      const restored: EngineUnit = { position: 100, blocks: unit.blocks, tail: back.sections.map((x) => ({ kind: x.kind as 'partial-kv' | 'conv', layers: x.layers, firstToken: x.firstToken, tokens: x.tokens, bytes: x.bytes })) };
      const hit = lfm2.createSequence();
      importUnit(lfm2, hit, restored);
      const whole = lfm2.createSequence();
      expect(same(hit.prefill(tokens.slice(100)), whole.prefill(tokens))).toBe(true);
      hit.free();
      whole.free();
    } finally {
      lfm2.destroy();
    }
  });

  it('corruption, truncation, another magic or version: typed errors, never a wrong tail', () => {
    const tokens = prompt();
    const seq = engine.createSequence();
    seq.prefill(tokens.slice(0, 70));
    const file = codec.encode(tailOf(exportUnit(engine, seq), tokens));
    seq.free();
    const flip = (at: number) => {
      const c = file.slice();
      c[at] ^= 0x10;
      return c;
    };
    const code = (b: Uint8Array) => codeOf(() => codec.decode(b));
    expect(code(flip(file.byteLength - 3))).toBe('KVT_ERR_BLOCK_PAYLOAD_CHECKSUM');
    expect(code(flip(50))).toBe('KVT_ERR_BLOCK_HEADER_CHECKSUM');
    expect(code(flip(TAIL_TOKENS_AT(file)))).toBe('KVT_ERR_BLOCK_HEADER_CHECKSUM');
    expect(code(file.subarray(0, file.byteLength - 1))).toBe('KVT_ERR_BLOCK_TRUNCATED');
    expect(code(flip(0))).toBe('KVT_ERR_BLOCK_BAD_MAGIC');
    expect(code(flip(4))).toBe('KVT_ERR_BLOCK_VERSION');
    const longer = new Uint8Array(file.byteLength + 1);
    longer.set(file);
    expect(code(longer)).toBe('KVT_ERR_BLOCK_MALFORMED');
    // a section whose bytes do not match its shape is refused at encode
    const t = tailOf({ position: 70, blocks: [], tail: [] }, tokens);
    expect(codeOf(() => codec.encode({ ...t, sections: [{ kind: 'window-kv', layers: [0], kvHeads: 1, headDim: 32, firstToken: 31, tokens: 39, bytes: new Uint8Array(10) }] }))).toBe('KVT_ERR_BLOCK_MALFORMED');
  });

  it.each(['int8', 'fp8', 'int4'] as const)('%s: kv sections compress as a block payload of their shape does; state sections stay raw', async (name) => {
    const tokens = prompt();
    const seq = engine.createSequence();
    seq.prefill(tokens.slice(0, 150));
    const tail = tailOf(exportUnit(engine, seq), tokens);
    seq.free();
    const state: TailSectionRecord = { kind: 'recurrent', layers: [2, 5], kvHeads: 3, headDim: 16, firstToken: 150, tokens: 1, bytes: new Uint8Array(new Float32Array(2 * 3 * 16).map((_, i) => Math.sin(i) * 1e-3).buffer) };
    const file = codec.encode({ ...tail, sections: [...tail.sections, state] }, name);
    const plain = codec.encode({ ...tail, sections: [...tail.sections, state] });
    expect(file.byteLength).toBeLessThan(plain.byteLength);
    const back = codec.decode(file);
    expect(back.codec).toBe(name);
    const blocks = await BlockCodec.create();
    tail.sections.forEach((s, i) => {
      const layout = { layers: s.layers.length, kvHeads: s.kvHeads, headDim: s.headDim, dtype: 'f16' as const, tokensPerBlock: s.tokens };
      const viaBlock = blocks.decode(blocks.encode({ key: KEY, parentKey: BLOCK_KEY, modelFingerprint: 'x', tokens: new Uint32Array(s.tokens), layout, payload: s.bytes }, name));
      expect(same(back.sections[i].bytes, viaBlock.payload), `${s.kind} as a block`).toBe(true);
    });
    expect(same(back.sections[2].bytes, state.bytes)).toBe(true);
  });

  it('sealed like a block: opens under its own key, not under another', () => {
    const tokens = prompt();
    const seq = engine.createSequence();
    seq.prefill(tokens.slice(0, 90));
    const file = codec.encode(tailOf(exportUnit(engine, seq), tokens));
    seq.free();
    const sealer = new BlockSealer(keyringFromSecret('t'.repeat(16) + '0123456789abcdef0123456789abcdef'), { openThreads: 0 });
    const salt = '5f1c0e1a2b3c4d5e6f708192a3b4c5d6';
    const sealed = sealer.seal(file, KEY, salt);
    expect(same(codec.decode(sealer.open(sealed, KEY, salt), { authenticatedBy: 'aes-256-gcm' }).bytes, file)).toBe(true);
    expect(codeOf(() => sealer.open(sealed, BLOCK_KEY, salt))).toBe('KVT_ERR_SEAL_AUTH_FAILED');
  });
});

/** Offset of the first token in a tail file (header field at 20). */
function TAIL_TOKENS_AT(file: Uint8Array): number {
  return new DataView(file.buffer, file.byteOffset).getUint32(20, true);
}
