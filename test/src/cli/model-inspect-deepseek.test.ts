/**
 * `kvtier model inspect` on a deepseek2 (MLA) file: KV bytes are the latent
 * row (layers · (kv_lora_rank + rope) · 2 per token), the per-head expanded
 * size is reported beside it, and the file is runnable.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelReport } from '../../../inference-core/index.ts';
import { ensureDeepseekModel } from '../../../inference-core/synthetic/deepseek-synthetic.ts';
import { kvtier } from './cli-runner.ts';

let dir: string;
let file: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kvt-model-inspect-ds-'));
  file = ensureDeepseekModel('deepseek-tiny', { dataDir: dir, shape: 'v3', weightType: 'f16' });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('kvtier model inspect on a deepseek2 file', () => {
  it('reports MLA latent KV bytes per token and per block, and the expanded size beside them', async () => {
    const r = await kvtier(['model', 'inspect', file, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as ModelReport;
    expect(report.architecture).toBe('deepseek2');
    // 3 layers · (kv_lora_rank 64 + rope 16) · 2 bytes
    expect(report.kvBytesPerToken).toBe(3 * 80 * 2);
    expect(report.kvBytesPerBlock).toBe(3 * 80 * 2 * 64);
    // per-head K (nope 32 + rope 16) and V (32) for 4 heads
    expect(report.mla).toEqual({ kvLoraRank: 64, ropeDim: 16, expandedBytesPerToken: 3 * 4 * (48 + 32) * 2, expandedBytesPerBlock: 3 * 4 * 80 * 2 * 64 });
    expect(report.runnable).toEqual({ ok: true });
    const text = await kvtier(['model', 'inspect', file]);
    expect(text.stdout).toMatch(/MLA latent \(kv_lora_rank 64 \+ rope 16 per layer\)/);
  });
});
