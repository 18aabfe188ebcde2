/**
 * `kvtier model inspect FILE` on a runnable file, on an architecture and on a
 * weight type the engine does not compute, and `kvtier serve --model FILE`
 * refusing the latter two with one line and exit 2 before binding a port.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSyntheticModel, GgmlType, readGguf, writeGguf, type ModelReport } from '../../../inference-core/index.ts';
import { expectOneLineError, kvtier } from './cli-runner.ts';

let dir: string;
let tiny: string;

/** Rewrites the type id of tensor `name` in a GGUF header (the bytes stay; only the declared type changes). */
function retypeTensor(src: string, dst: string, name: string, type: number): void {
  const bytes = new Uint8Array(readFileSync(src));
  const needle = new TextEncoder().encode(name);
  let at = -1;
  for (let i = 0; i + needle.length <= bytes.length && at < 0; i++) {
    if (needle.every((b, j) => bytes[i + j] === b) && new DataView(bytes.buffer).getBigUint64(i - 8, true) === BigInt(needle.length)) at = i;
  }
  if (at < 0) throw new Error(`tensor ${name} not found in ${src}`);
  const view = new DataView(bytes.buffer);
  let p = at + needle.length;
  const nDims = view.getUint32(p, true);
  p += 4 + 8 * nDims;
  view.setUint32(p, type, true);
  writeFileSync(dst, bytes);
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kvt-model-inspect-'));
  tiny = ensureSyntheticModel('tiny', { dataDir: dir, progress: null });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('kvtier model inspect', () => {
  it('reports a runnable file: arch, dims, quant mix, vocab, template, KV bytes; exit 0', async () => {
    const r = await kvtier(['model', 'inspect', tiny, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as ModelReport;
    const g = readGguf(tiny);
    try {
      expect(report.architecture).toBe('llama');
      expect(report.dims.layers).toBe(2);
      expect(report.dims.kvHeads).toBe(2);
      expect(report.dims.keyDim).toBe(16);
      // f16 K and V: layers · kvHeads · (key + value dim) · 2 bytes
      expect(report.kvBytesPerToken).toBe(2 * 2 * (16 + 16) * 2);
      expect(report.kvBytesPerBlock).toBe(report.kvBytesPerToken! * 64);
      expect(report.contextLength).toBe(2048);
      expect(report.vocab.size).toBe(g.getStringArray('tokenizer.ggml.tokens').length);
      expect(report.quantMix.reduce((s, m) => s + m.tensors, 0)).toBe(g.tensors.size);
      expect(report.quantMix.map((m) => m.type).sort()).toEqual(['F16', 'F32']);
      expect(report.runnable).toEqual({ ok: true });
    } finally {
      g.close();
    }
    const text = await kvtier(['model', 'inspect', tiny]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/architecture\s+llama/);
    expect(text.stdout).toMatch(/kv cache \(f16\)\s+256 B per token · 16\.0 KiB per 64-token block/);
    expect(text.stdout.trimEnd().split('\n').at(-1)).toBe('kvtier can run it: yes');
  });

  it('an unknown architecture: the report says why, exit 2; serve refuses it in one line, exit 2', async () => {
    const file = join(dir, 'arch.gguf');
    writeGguf(file, [
      ['general.architecture', { type: 'string', value: 'mamba9' }],
      ['mamba9.block_count', { type: 'u32', value: 1 }],
    ], [{ name: 'token_embd.weight', type: GgmlType.F32, dims: [32, 4], data: new Float32Array(128) }]);
    const r = await kvtier(['model', 'inspect', file]);
    expect(r.code).toBe(2);
    expect(r.stdout.trimEnd().split('\n').at(-1)).toMatch(/^kvtier can run it: no — .*mamba9/);
    const serve = await kvtier(['serve', '--model', file, '--port', '0', '--data-dir', dir]);
    expectOneLineError(serve, /cannot run .*arch\.gguf: .*architecture "mamba9" is not supported/, 2);
  });

  it('a weight type the engine has no kernel for: named in the report and in serve\'s one line, exit 2', async () => {
    const file = join(dir, 'iq2.gguf');
    retypeTensor(tiny, file, 'blk.0.attn_q.weight', GgmlType.IQ2_XXS);
    const r = await kvtier(['model', 'inspect', file, '--json']);
    expect(r.code).toBe(2);
    const report = JSON.parse(r.stdout) as ModelReport;
    expect(report.quantMix.map((m) => m.type)).toContain('IQ2_XXS');
    expect(report.runnable).toEqual({ ok: false, reason: expect.stringMatching(/blk\.0\.attn_q\.weight .*IQ2_XXS/) });
    const serve = await kvtier(['serve', '--model', file, '--port', '0', '--data-dir', dir]);
    expectOneLineError(serve, /cannot run .*iq2\.gguf: .*IQ2_XXS/, 2);
  });

  it('not a GGUF, a missing file, no file, an unknown flag: one line, exit 2', async () => {
    const junk = join(dir, 'junk.gguf');
    writeFileSync(junk, 'not a model');
    expectOneLineError(await kvtier(['model', 'inspect', junk]), /not a GGUF file/, 2);
    expectOneLineError(await kvtier(['model', 'inspect', join(dir, 'absent.gguf')]), /cannot open/, 2);
    expectOneLineError(await kvtier(['model', 'inspect']), /exactly one GGUF file/, 2);
    expectOneLineError(await kvtier(['model', 'inspect', tiny, '--jsn']), /unknown flag --jsn/, 2);
    expectOneLineError(await kvtier(['model', 'frob']), /unknown subcommand "frob"/, 2);
    const copy = join(dir, 'copy.gguf');
    copyFileSync(tiny, copy);
    expect((await kvtier(['model', 'inspect', copy])).code).toBe(0);
  });
});
