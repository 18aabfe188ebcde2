/**
 * `kvtier model inspect` on gpt-oss files: with the o200k_harmony vocabulary the report names the
 * gpt-4o pre-tokenizer, the 201,088 tokens and the harmony template; with the synthetic test
 * vocabulary it reports neither harmony nor that size. Both files run (exit 0).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelReport } from '../../../inference-core/index.ts';
import { ensureGptOssModel } from '../../../inference-core/synthetic/gptoss-synthetic.ts';
import { TEST_DATA_DIR } from '../../inference-core/engine-fixtures.ts';
import { kvtier } from './cli-runner.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kvt-model-inspect-gptoss-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('kvtier model inspect on gpt-oss', () => {
  it('reports the o200k_harmony vocabulary and the harmony template', async () => {
    const file = ensureGptOssModel('gpt-oss-tiny', { dataDir: TEST_DATA_DIR, vocab: 'o200k-harmony' });
    const r = await kvtier(['model', 'inspect', file, '--json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as ModelReport;
    expect(report.architecture).toBe('gpt-oss');
    expect(report.vocab).toEqual({ model: 'gpt2', pre: 'gpt-4o', size: 201088 });
    expect(report.chatTemplate.harmony).toBe(true);
    const text = await kvtier(['model', 'inspect', file]);
    expect(text.stdout).toContain('vocabulary      gpt2 (pre-tokenizer gpt-4o) · 201,088 tokens');
    expect(text.stdout).toContain('harmony (analysis → reasoning_content');
    expect(text.stdout).toContain('kvtier can run it: yes');
  }, 120_000);

  it('the synthetic-vocabulary file is neither', async () => {
    const r = await kvtier(['model', 'inspect', ensureGptOssModel('gpt-oss-tiny', { dataDir: dir }), '--json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as ModelReport;
    expect(report.vocab.size).toBe(512);
    expect(report.chatTemplate.harmony).toBe(false);
  }, 120_000);
});
