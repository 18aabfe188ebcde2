/**
 * deepseek4 units (inference-core/engine/deepseek4-unit.ts), bit for bit, on
 * deepseek4-tiny (n_swa 16, compress ratios 0/4/128/4/128, MTP block): prefill
 * P, export the unit at p, import it into a FRESH engine, prefill the suffix S:
 * the logits, a greedy continuation and the unit at the end equal one pass over
 * P+S. At p inside the SWA window, at a CSA (ratio 4) group boundary, inside a
 * CSA group, at an HCA (ratio 128) group boundary, inside an HCA group, at and
 * just past block boundaries (entries of the partial block in the tail). With
 * MTP drafting on the drafter's logits agree too. A unit that does not fit
 * (blocks, sections, MTP part) is a typed KVT_ERR_ENGINE_BAD_BLOCK and leaves
 * the sequence empty and usable: the caller's miss.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportUnit, importUnit, loadEngine, type EngineUnit, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { deepseek4TailBytes } from '../../inference-core/engine/deepseek4-unit.ts';
import type { Deepseek4GraphConfig } from '../../inference-core/engine/deepseek4-graph.ts';
import { ensureDeepseek4Model } from '../../inference-core/synthetic/index.ts';
import { TEST_DATA_DIR, greedyFrom, randomTokens } from './engine-fixtures.ts';

let exporter: LoadedEngine;
let importer: LoadedEngine;
let mtpA: LoadedEngine;
let mtpB: LoadedEngine;
let tokens: number[];

beforeAll(async () => {
  const file = ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f32' });
  const opts = { dataDir: TEST_DATA_DIR, threads: 1, prefillChunk: 48, maxBatch: 8 };
  exporter = await loadEngine(file, opts);
  importer = await loadEngine(file, opts);
  mtpA = await loadEngine(file, { ...opts, mtp: true });
  mtpB = await loadEngine(file, { ...opts, mtp: true });
  tokens = randomTokens(290, 500, 17);
}, 180_000);
afterAll(() => {
  for (const e of [exporter, importer, mtpA, mtpB]) e?.destroy();
});

const same = (a: Uint8Array | Float32Array, b: Uint8Array | Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

function expectUnitsEqual(a: EngineUnit, b: EngineUnit): void {
  expect(a.position).toBe(b.position);
  expect(a.blocks.length).toBe(b.blocks.length);
  a.blocks.forEach((x, i) => expect(same(x, b.blocks[i]!), `block ${i}`).toBe(true));
  expect(a.tail.map((t) => [t.kind, t.layers, t.bytes.byteLength])).toEqual(b.tail.map((t) => [t.kind, t.layers, t.bytes.byteLength]));
  a.tail.forEach((t, i) => expect(same(t.bytes, b.tail[i]!.bytes), `tail section ${i}`).toBe(true));
}

/** Unit at p from `from` (reached in two prefills), imported into `into`; the suffix there equals one pass in `from`. */
function expectEquivalence(from: LoadedEngine, into: LoadedEngine, p: number): EngineUnit {
  const a = from.createSequence();
  a.prefill(tokens.slice(0, Math.min(5, p)));
  if (p > 5) a.prefill(tokens.slice(5, p));
  const unit = exportUnit(from, a);
  a.free();
  expect(unit.position).toBe(p);
  expect(unit.blocks.length).toBe(Math.floor(p / 64));

  const whole = from.createSequence();
  const wholeLogits = whole.prefill(tokens);
  const hit = into.createSequence();
  importUnit(into, hit, unit);
  expect(hit.length).toBe(p);
  const hitLogits = hit.prefill(tokens.slice(p));
  expect(same(hitLogits, wholeLogits), `logits after a unit at ${p}`).toBe(true);
  // an engine without MTP drafting keeps no MTP window: its unit is the trunk's sections only
  const ref = exportUnit(from, whole);
  expectUnitsEqual(exportUnit(into, hit), from.hasMtp && !into.hasMtp ? { ...ref, tail: ref.tail.slice(0, -2) } : ref);
  if (from.hasMtp && into.hasMtp) {
    const d1 = from.mtpDrafter(whole)!;
    const d2 = into.mtpDrafter(hit)!;
    expect(same(d2.step(7), d1.step(7)), 'MTP draft logits').toBe(true);
  }
  expect(greedyFrom(hit, hitLogits, 6)).toEqual(greedyFrom(whole, wholeLogits, 6));
  whole.free();
  hit.free();
  return unit;
}

describe('deepseek4 units', () => {
  // tiny: n_swa 16; CSA groups of 4, HCA groups of 128; pages of 64 tokens
  const cases: Array<[number, string]> = [
    [3, 'inside the SWA window, inside the first CSA group'],
    [12, 'inside the SWA window, at a CSA boundary'],
    [64, 'at a block and CSA boundary, inside an HCA group'],
    [70, 'past a block: CSA entries of the partial block in the tail'],
    [127, 'inside the last CSA group before an HCA boundary'],
    [128, 'at an HCA group boundary'],
    [131, 'inside a CSA group just past an HCA boundary'],
    [201, 'inside both, three full blocks'],
    [256, 'at a second HCA boundary'],
  ];
  for (const [p, what] of cases) {
    it(`p = ${p}: ${what}`, () => {
      const unit = expectEquivalence(exporter, importer, p);
      const c = (exporter.graphConfig as Deepseek4GraphConfig).cfg;
      expect(unit.tail.reduce((n, t) => n + t.bytes.byteLength, 0)).toBe(deepseek4TailBytes(c, p));
      expect(unit.tail.every((t) => t.kind === 'recurrent' && t.firstToken === p && t.tokens === 1)).toBe(true);
    }, 120_000);
  }

  it('blocks are the same bytes for every prefix through them (shared by every unit on that prefix)', () => {
    const a = exporter.createSequence();
    a.prefill(tokens.slice(0, 130));
    const short = exportUnit(exporter, a);
    a.prefill(tokens.slice(130, 260));
    const long = exportUnit(exporter, a);
    a.free();
    short.blocks.forEach((b, i) => expect(same(b, long.blocks[i]!), `block ${i}`).toBe(true));
  }, 60_000);

  it('with MTP drafting on: the unit carries the MTP window, and the drafter continues bit for bit', () => {
    for (const p of [10, 70, 130]) {
      const unit = expectEquivalence(mtpA, mtpB, p);
      const c = (mtpA.graphConfig as Deepseek4GraphConfig).cfg;
      expect(unit.tail.reduce((n, t) => n + t.bytes.byteLength, 0)).toBe(deepseek4TailBytes(c, p, true));
    }
  }, 180_000);

  it('an MTP unit serves an engine without MTP; a unit without the MTP window is a miss for an MTP engine', () => {
    expectEquivalence(mtpA, importer, 70);
    const a = exporter.createSequence();
    a.prefill(tokens.slice(0, 70));
    const plain = exportUnit(exporter, a);
    a.free();
    const b = mtpB.createSequence();
    expect(() => importUnit(mtpB, b, plain)).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_BAD_BLOCK' }));
    expect(b.length).toBe(0);
    b.free();
  }, 120_000);

  // the suffix runs past 256, so the HCA rows of the unfinished group are read when that group ends
  it('each tail section matters: zeroing one (same shape) changes the answer', () => {
    const a = exporter.createSequence();
    a.prefill(tokens.slice(0, 131));
    const unit = exportUnit(exporter, a);
    const want = a.prefill(tokens.slice(131, 260));
    a.free();
    expect(unit.tail.length).toBeGreaterThanOrEqual(3);
    unit.tail.forEach((_, i) => {
      const seq = importer.createSequence();
      importUnit(importer, seq, { ...unit, tail: unit.tail.map((t, j) => (j === i ? { ...t, bytes: new Uint8Array(t.bytes.byteLength) } : t)) });
      expect(same(seq.prefill(tokens.slice(131, 260)), want), `section ${i} zeroed`).toBe(false);
      seq.free();
    });
  }, 60_000);

  it('a unit that does not fit is a typed miss and leaves the sequence empty and usable', () => {
    const a = exporter.createSequence();
    a.prefill(tokens.slice(0, 131));
    const unit = exportUnit(exporter, a);
    a.free();
    const bads: EngineUnit[] = [
      { ...unit, blocks: unit.blocks.slice(1) },
      { ...unit, blocks: unit.blocks.map((b, i) => (i === 0 ? b.subarray(8) : b)) },
      { ...unit, tail: unit.tail.slice(1) },
      { ...unit, tail: unit.tail.map((t, i) => (i === 1 ? { ...t, bytes: t.bytes.subarray(4) } : t)) },
      { ...unit, tail: unit.tail.map((t, i) => (i === 0 ? { ...t, layers: t.layers.slice(1) } : t)) },
      { ...unit, position: 130 },
    ];
    const seq = importer.createSequence();
    for (const bad of bads) {
      expect(() => importUnit(importer, seq, bad)).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_BAD_BLOCK' }));
      expect(seq.length).toBe(0);
    }
    const fresh = importer.createSequence();
    expect(same(seq.prefill(tokens.slice(0, 20)), fresh.prefill(tokens.slice(0, 20)))).toBe(true);
    seq.free();
    fresh.free();
  }, 60_000);
});
