/**
 * Units at engine level (inference-core/engine/unit-state.ts), bit for bit:
 * prefill a prefix, export the unit at p (blocks of the block layers + one
 * tail), import it into a fresh sequence, prefill the suffix: the logits, an
 * 8-token greedy continuation and the unit at the end equal one pass over
 * the whole text. On gpt-oss-tiny (sliding layers 0, 2 with window 40, full
 * layers 1, 3 as blocks) at the same positions; on gemma3-tiny (sliding window 40, 7 sliding + 1 global
 * layer) at p inside a window, at the window's edge (39, 40, 41), at block
 * boundaries (64, 128), at an interval position (192), at the end of the
 * input and at the end of a generated output; on synthetic:tiny (llama,
 * block-concatenable: the tail is the partial block only) and on lfm2-tiny
 * (attention K/V blocks + the convolution state as the tail's `conv`
 * section; zeroing that state changes the answer). A unit that does
 * not fit the engine is a typed KVT_ERR_ENGINE_BAD_BLOCK (the caller's miss).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportUnit, importUnit, loadEngine, unitShapeOf, type EngineUnit, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { ensureGemma3Model } from '../../inference-core/synthetic/gemma3-synthetic.ts';
import { ensureLfm2Model } from '../../inference-core/synthetic/lfm2-synthetic.ts';
import { ensureGptOssModel } from '../../inference-core/synthetic/gptoss-synthetic.ts';
import { TEST_DATA_DIR, greedyFrom, randomTokens, tinyEngine } from './engine-fixtures.ts';

let gemma: LoadedEngine;
let llama: LoadedEngine;
let lfm2: LoadedEngine;
let gptoss: LoadedEngine;

beforeAll(async () => {
  gemma = await loadEngine(ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR }), { kvDtype: 'f16', threads: 1, poolBytes: 16 * 2 ** 20, prefillChunk: 48 });
  llama = await tinyEngine({ prefillChunk: 48 });
  lfm2 = await loadEngine(ensureLfm2Model({ dataDir: TEST_DATA_DIR }), { kvDtype: 'f16', threads: 1, poolBytes: 8 * 2 ** 20, prefillChunk: 48 });
  gptoss = await loadEngine(ensureGptOssModel('gpt-oss-tiny', { dataDir: TEST_DATA_DIR }), { kvDtype: 'f16', threads: 1, poolBytes: 8 * 2 ** 20, prefillChunk: 48 });
}, 120_000);
afterAll(() => {
  gemma?.destroy();
  llama?.destroy();
  lfm2?.destroy();
  gptoss?.destroy();
});

const same = (a: Uint8Array | Float32Array, b: Uint8Array | Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

function expectUnitsEqual(a: EngineUnit, b: EngineUnit): void {
  expect(a.position).toBe(b.position);
  expect(a.blocks.length).toBe(b.blocks.length);
  a.blocks.forEach((x, i) => expect(same(x, b.blocks[i]), `block ${i}`).toBe(true));
  expect(a.tail.map((t) => [t.kind, t.firstToken, t.tokens])).toEqual(b.tail.map((t) => [t.kind, t.firstToken, t.tokens]));
  a.tail.forEach((t, i) => expect(same(t.bytes, b.tail[i].bytes), `tail ${t.kind}`).toBe(true));
}

/**
 * The exporter reaches p by another route than the one-pass reference (first
 * 5 tokens, then the rest, prefill chunk 48 vs one call), so a unit cannot
 * pass by carrying the reference's bits.
 */
function expectEquivalence(engine: LoadedEngine, tokens: number[], p: number): EngineUnit {
  const exporter = engine.createSequence();
  exporter.prefill(tokens.slice(0, Math.min(5, p)));
  if (p > 5) exporter.prefill(tokens.slice(5, p));
  const unit = exportUnit(engine, exporter);
  exporter.free();
  expect(unit.position).toBe(p);

  const whole = engine.createSequence();
  const wholeLogits = whole.prefill(tokens);
  const hit = engine.createSequence();
  importUnit(engine, hit, unit);
  expect(hit.length).toBe(p);
  const hitLogits = hit.prefill(tokens.slice(p));
  expect(same(hitLogits, wholeLogits), `logits after a unit at ${p}`).toBe(true);
  expectUnitsEqual(exportUnit(engine, hit), exportUnit(engine, whole));
  expect(greedyFrom(hit, hitLogits, 8)).toEqual(greedyFrom(whole, wholeLogits, 8));
  whole.free();
  hit.free();
  return unit;
}

/** Positions around a 40-token sliding window's edge and the block boundaries, for the windowed models. */
const WINDOW_POSITIONS: [string, number][] = [
  ['inside the first window', 25],
  ['one before the window edge', 39],
  ['at the window edge', 40],
  ['one past the window edge', 41],
  ['at a block boundary', 64],
  ['inside a window, mid block', 100],
  ['at the second block boundary', 128],
  ['at an interval position', 192],
];

describe('gemma3 units (sliding window 40)', () => {
  const text = () => randomTokens(230, gemma.vocabSize, 2601);
  it('shape: the global layer is the block layer, the 7 sliding layers go in the tail', () => {
    const s = unitShapeOf(gemma);
    expect(s).toMatchObject({ blockConcatenable: false, blockLayers: [5], windowLayers: [0, 1, 2, 3, 4, 6, 7], window: 40 });
  });
  it.each(WINDOW_POSITIONS)('p %s (%i): import + suffix == one pass, bit for bit', (_what, p) => {
    const unit = expectEquivalence(gemma, text(), p);
    const w = Math.min(p, 39);
    const win = unit.tail.find((t) => t.kind === 'window-kv')!;
    expect(win).toMatchObject({ firstToken: p - w, tokens: w });
    // 7 sliding layers × K|V × 1 kv head × w tokens × 32 dims × f16
    expect(win.bytes.byteLength).toBe(7 * 2 * w * 32 * 2);
    expect(unit.blocks.length).toBe(Math.floor(p / 64));
    for (const b of unit.blocks) expect(b.byteLength).toBe(1 * 2 * 64 * 32 * 2);
  });
  it('at the end of the input: the unit of a 150-token prompt continues into the next turn', () => {
    expectEquivalence(gemma, text(), 150);
  });
  it('at the end of the output: prompt + greedy reply, then the next turn', () => {
    const prompt = text().slice(0, 90);
    const seq = gemma.createSequence();
    const reply = greedyFrom(seq, seq.prefill(prompt), 20);
    // greedyFrom decodes all but the last token: feed it so the state covers prompt + reply
    seq.decode(reply[reply.length - 1]);
    const unit = exportUnit(gemma, seq);
    seq.free();
    expect(unit.position).toBe(110);
    const next = randomTokens(30, gemma.vocabSize, 77);
    const all = [...prompt, ...reply, ...next];
    const whole = gemma.createSequence();
    const wholeLogits = whole.prefill(all);
    const hit = gemma.createSequence();
    importUnit(gemma, hit, unit);
    expect(same(hit.prefill(next), wholeLogits)).toBe(true);
    expectUnitsEqual(exportUnit(gemma, hit), exportUnit(gemma, whole));
    whole.free();
    hit.free();
  });
  it('a unit that does not fit is a typed KVT_ERR_ENGINE_BAD_BLOCK and leaves the sequence empty', () => {
    const seq = gemma.createSequence();
    seq.prefill(text().slice(0, 100));
    const unit = exportUnit(gemma, seq);
    seq.free();
    const bads: EngineUnit[] = [
      { ...unit, tail: unit.tail.map((t) => (t.kind === 'window-kv' ? { ...t, bytes: t.bytes.subarray(2) } : t)) },
      { ...unit, tail: unit.tail.filter((t) => t.kind !== 'window-kv') },
      { ...unit, blocks: unit.blocks.slice(1) },
      { ...unit, position: 99 },
    ];
    for (const bad of bads) {
      const fresh = gemma.createSequence();
      expect(() => importUnit(gemma, fresh, bad)).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_BAD_BLOCK' }));
      expect(fresh.length).toBe(0);
      fresh.free();
    }
    // another model's unit (llama's blocks hold every layer)
    const l = llama.createSequence();
    l.prefill(randomTokens(100, llama.vocabSize, 3));
    const foreign = exportUnit(llama, l);
    l.free();
    const fresh = gemma.createSequence();
    expect(() => importUnit(gemma, fresh, foreign)).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_BAD_BLOCK' }));
    fresh.free();
  });
});

describe('gpt-oss units (alternating sliding window 40 / full attention, sinks, MoE)', () => {
  const text = () => randomTokens(230, gptoss.vocabSize, 2701);
  it('shape: the full layers 1, 3 are block layers, the sliding layers 0, 2 go in the tail', () => {
    expect(unitShapeOf(gptoss)).toMatchObject({ blockConcatenable: false, blockLayers: [1, 3], windowLayers: [0, 2], window: 40 });
  });
  it.each(WINDOW_POSITIONS)('p %s (%i): import + suffix == one pass, bit for bit', (_what, p) => {
    const unit = expectEquivalence(gptoss, text(), p);
    const w = Math.min(p, 39);
    // 2 sliding layers × K|V × 2 kv heads × w tokens × 32 dims × f16
    expect(unit.tail.find((t) => t.kind === 'window-kv')).toMatchObject({ firstToken: p - w, tokens: w, layers: [0, 2] });
    expect(unit.tail.find((t) => t.kind === 'window-kv')!.bytes.byteLength).toBe(2 * 2 * 2 * w * 32 * 2);
    expect(unit.blocks.length).toBe(Math.floor(p / 64));
    for (const b of unit.blocks) expect(b.byteLength).toBe(2 * 2 * 2 * 64 * 32 * 2);
  });
  it('at the end of the output: prompt + greedy reply, then the next turn', () => {
    const prompt = text().slice(0, 90);
    const seq = gptoss.createSequence();
    const reply = greedyFrom(seq, seq.prefill(prompt), 20);
    seq.decode(reply[reply.length - 1]);
    const unit = exportUnit(gptoss, seq);
    seq.free();
    expect(unit.position).toBe(110);
    const next = randomTokens(30, gptoss.vocabSize, 78);
    const whole = gptoss.createSequence();
    const wholeLogits = whole.prefill([...prompt, ...reply, ...next]);
    const hit = gptoss.createSequence();
    importUnit(gptoss, hit, unit);
    expect(same(hit.prefill(next), wholeLogits)).toBe(true);
    expectUnitsEqual(exportUnit(gptoss, hit), exportUnit(gptoss, whole));
    whole.free();
    hit.free();
  });
  it.each([30, 100, 150])('p %i: a unit exported by one engine and imported into a freshly loaded one continues as one pass, bit for bit', async (p) => {
    const tokens = text().slice(0, 200);
    const a = gptoss.createSequence();
    a.prefill(tokens.slice(0, p));
    const unit = exportUnit(gptoss, a);
    a.free();
    const whole = gptoss.createSequence();
    const wholeLogits = whole.prefill(tokens);
    const fresh = await loadEngine(gptoss.modelPath, { kvDtype: 'f16', threads: 1, poolBytes: 4 * 2 ** 20, prefillChunk: 48 });
    try {
      const hit = fresh.createSequence();
      importUnit(fresh, hit, unit);
      expect(same(hit.prefill(tokens.slice(p)), wholeLogits)).toBe(true);
      expectUnitsEqual(exportUnit(fresh, hit), exportUnit(gptoss, whole));
      hit.free();
    } finally {
      whole.free();
      fresh.destroy();
    }
  });
  it('a unit without its window is a typed KVT_ERR_ENGINE_BAD_BLOCK', () => {
    const seq = gptoss.createSequence();
    seq.prefill(text().slice(0, 100));
    const unit = exportUnit(gptoss, seq);
    seq.free();
    const fresh = gptoss.createSequence();
    expect(() => importUnit(gptoss, fresh, { ...unit, tail: unit.tail.filter((t) => t.kind !== 'window-kv') })).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_BAD_BLOCK' }));
    expect(fresh.length).toBe(0);
    fresh.free();
  });
});

describe('llama units (block-concatenable)', () => {
  it('shape: every layer is a block layer; the tail is the partial block', () => {
    expect(unitShapeOf(llama)).toMatchObject({ blockConcatenable: true, windowLayers: [], window: 0 });
  });
  it.each([30, 64, 100, 128])('p %i: import + suffix == one pass, bit for bit; blocks are the pages', (p) => {
    const tokens = randomTokens(200, llama.vocabSize, 99);
    const unit = expectEquivalence(llama, tokens, p);
    expect(unit.tail.map((t) => t.kind)).toEqual(p % 64 === 0 ? [] : ['partial-kv']);
    for (const b of unit.blocks) expect(b.byteLength).toBe(llama.kvLayout.blockBytes);
  });
});

describe('lfm2 units (attention blocks + convolution state in the tail)', () => {
  it('shape: the pool holds the 2 attention layers; the 4 conv layers\' state is the tail', () => {
    expect(unitShapeOf(lfm2)).toMatchObject({ blockConcatenable: false, blockLayers: [0, 1], windowLayers: [], conv: { layers: [0, 1, 3, 4], rows: 2, width: 64 } });
  });
  it.each([1, 2, 3, 30, 64, 100, 128, 192])('p %i: import + suffix == one pass, bit for bit', (p) => {
    const unit = expectEquivalence(lfm2, randomTokens(230, lfm2.vocabSize, 4040), p);
    const conv = unit.tail.find((t) => t.kind === 'conv')!;
    expect(conv).toMatchObject({ firstToken: p, tokens: 1, layers: [0, 1, 3, 4] });
    expect(conv.bytes.byteLength).toBe(4 * 2 * 64 * 4);
  });
  it('a unit whose convolution state is zeroed continues differently (the state is needed), and a wrong-size state is a miss', () => {
    const tokens = randomTokens(150, lfm2.vocabSize, 4141);
    const a = lfm2.createSequence();
    a.prefill(tokens.slice(0, 100));
    const unit = exportUnit(lfm2, a);
    a.free();
    const whole = lfm2.createSequence();
    const ref = whole.prefill(tokens);
    whole.free();
    const zeroed: EngineUnit = { ...unit, tail: unit.tail.map((t) => (t.kind === 'conv' ? { ...t, bytes: new Uint8Array(t.bytes.byteLength) } : t)) };
    const z = lfm2.createSequence();
    importUnit(lfm2, z, zeroed);
    expect(same(z.prefill(tokens.slice(100)), ref)).toBe(false);
    z.free();
    const short: EngineUnit = { ...unit, tail: unit.tail.map((t) => (t.kind === 'conv' ? { ...t, bytes: t.bytes.subarray(4) } : t)) };
    const s2 = lfm2.createSequence();
    expect(() => importUnit(lfm2, s2, short)).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_BAD_BLOCK' }));
    expect(s2.length).toBe(0);
    s2.free();
  });
});
