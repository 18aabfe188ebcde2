/**
 * `kvtier model inspect` on a deepseek4 file: no per-token K/V chain is
 * claimed (kvBytesPerToken absent); the deepseek4 state is stated per token
 * inside the SWA window, per context position (compressed entries + indexer
 * keys) and in total at 4k / 32k, next to one unit's tail (bounded, whatever
 * the context) and a shared entry block; the file is runnable (exit 0) and
 * served with prefix units.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEEPSEEK4_UNITS_DETAIL, type ModelReport } from '../../../inference-core/index.ts';
import { deepseek4TailBytes } from '../../../inference-core/engine/deepseek4-unit.ts';
import { readDeepseek4Config } from '../../../inference-core/engine/deepseek4-config.ts';
import { readGguf } from '../../../inference-core/gguf/index.ts';
import { deepseek4StateBytes } from '../../../inference-core/engine/deepseek4-state.ts';
import { DEEPSEEK4_SYNTHETIC_SPECS, ensureDeepseek4Model } from '../../../inference-core/synthetic/index.ts';
import { kvtier } from './cli-runner.ts';

let dir: string;
let file: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kvt-model-inspect-ds4-'));
  file = ensureDeepseek4Model('deepseek4-tiny', { dataDir: dir, weightType: 'f16' });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('kvtier model inspect on a deepseek4 file', () => {
  it('states per-token and per-position state bytes, the unit tail next to the whole state, and that it runs', async () => {
    const r = await kvtier(['model', 'inspect', file, '--json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as ModelReport;
    expect(report.architecture).toBe('deepseek4');
    expect(report.kvBytesPerToken).toBeUndefined();
    const s = DEEPSEEK4_SYNTHETIC_SPECS['deepseek4-tiny'];
    // 5 trunk layers · head 32 · f32
    expect(report.dsv4!.perTokenInWindow).toBe(5 * 32 * 4);
    // two CSA layers (head/4 + indexer/4) and two HCA layers (head/128), f32
    expect(report.dsv4!.perPosition).toBe(2 * ((32 * 4) / 4 + (64 * 4) / 4) + 2 * ((32 * 4) / 128));
    const shape = { nLayer: s.nLayers, headDim: s.headDim, indexerDim: s.indexerDim, nSwa: s.nSwa, ratios: s.compressRatios };
    expect(report.dsv4!.stateBytes4k).toBe(deepseek4StateBytes(shape, 4096));
    expect(report.dsv4!.stateBytes32k).toBe(deepseek4StateBytes(shape, 32768));
    expect(report.dsv4!.units).toBe(DEEPSEEK4_UNITS_DETAIL);
    // tiny at p = 4096 + 127: windows 5·16 keys; CSA rows 7 × (4·32 + 4·64) and 15 partial-block entries × (32 + 64) on 2 layers; HCA rows 127 × 2·32 on 2 layers
    const g = readGguf(file);
    const cfg = readDeepseek4Config(g);
    g.close();
    const tail = 5 * 16 * 32 * 4 + 2 * 7 * (4 * 32 + 4 * 64) * 4 + 2 * 15 * (32 + 64) * 4 + 2 * 127 * 2 * 32 * 4;
    expect(deepseek4TailBytes(cfg, 4096 + 127)).toBe(tail);
    expect(report.dsv4!.unitTailBytes).toBe(tail);
    expect(report.dsv4!.unitTailBytes).toBeLessThan(report.dsv4!.stateBytes4k);
    expect(report.runnable.ok).toBe(true);
    const text = await kvtier(['model', 'inspect', file]);
    expect(text.stdout).toMatch(/state \(f32\)\s+deepseek4: 640 B per token inside the 16-token SWA window/);
    expect(text.stdout).toMatch(/units\s+tail ≤ [\d.]+ KiB per unit \(f32: .*\) next to the whole state [\d.]+ KiB at 4k/);
  });
});
