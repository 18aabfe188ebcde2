/**
 * Fuzzes the GGUF reader with mutated and truncated files: absurd counts,
 * offsets and string lengths, nested arrays. The reader runs in a child
 * process (mmap and read paths) so a native fault or an unbounded allocation
 * fails this test instead of killing the runner; every file must read or fail
 * with a typed GgufError, and every tensor view must lie inside the file.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { GgmlType, GgufError, parseGguf, writeGguf, type GgufValue } from '../../inference-core/gguf/index.ts';
import { fuzz, int, mutateBytes, pick, type Rand } from './fuzz-runner.ts';
import { childArgs } from '../helpers/ts-child.ts';

const dir = mkdtempSync(join(tmpdir(), 'kvtier-fuzz-gguf-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function seedFile(): Uint8Array {
  const path = join(dir, 'seed.gguf');
  const metadata: [string, GgufValue][] = [
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['llama.context_length', { type: 'u32', value: 128 }],
    ['tokenizer.ggml.tokens', { type: 'array', itemType: 'string', value: ['<s>', '</s>', 'a', 'b', 'hello'] }],
    ['tokenizer.ggml.scores', { type: 'array', itemType: 'f32', value: new Float32Array([0, 0, -1, -2, -3]) }],
    ['tokenizer.ggml.token_type', { type: 'array', itemType: 'i32', value: new Int32Array([3, 3, 1, 1, 1]) }],
    ['general.flag', { type: 'bool', value: true }],
    ['general.big', { type: 'u64', value: 1n << 40n }],
  ];
  const f32 = new Float32Array(64).map((_, i) => i / 7);
  const f16 = new Uint16Array(32).fill(0x3c00);
  writeGguf(path, metadata, [
    { name: 'a.weight', type: GgmlType.F32, dims: [16, 4], data: f32 },
    { name: 'b.weight', type: GgmlType.F16, dims: [32], data: f16 },
  ]);
  return new Uint8Array(readFileSync(path));
}

/** Overwrites a u64 count or length field in the header region with an absurd value. */
function absurdField(rand: Rand, bytes: Uint8Array): Uint8Array {
  const out = bytes.slice();
  const view = new DataView(out.buffer);
  const at = pick(rand, [8, 16, 24 + int(rand, Math.max(1, Math.min(out.length - 32, 400)))]);
  if (at + 8 <= out.length) view.setBigUint64(at, pick(rand, [0n, 1n, 0xffffffffn, 1n << 32n, 1n << 40n, 1n << 53n, (1n << 64n) - 1n, BigInt(out.length)]), true);
  return out;
}

function runChild(files: string[]): { status: number | null; signal: string | null; lines: { file: string; mmap: boolean; outcome?: string; start?: boolean }[]; stderr: string } {
  const result = spawnSync(process.execPath, ['--max-old-space-size=512', ...childArgs(join(import.meta.dirname, 'gguf-reader-child.ts')), ...files], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20 });
  const lines = result.stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { file: string; mmap: boolean; outcome?: string; start?: boolean });
  return { status: result.status, signal: result.signal, lines, stderr: result.stderr };
}

describe('fuzz: GGUF reader', () => {
  it('nested arrays deeper than the reader allows are a typed error, not a stack overflow (found while writing this fuzzer)', () => {
    // array → array → … 100k levels deep, each level one element: 12 bytes a level.
    const depth = 100_000;
    const head = new Uint8Array(4 + 4 + 8 + 8 + 8 + 3 + 4);
    const view = new DataView(head.buffer);
    view.setUint32(0, 0x46554747, true);
    view.setUint32(4, 3, true);
    view.setBigUint64(8, 0n, true);
    view.setBigUint64(16, 1n, true);
    view.setBigUint64(24, 3n, true);
    head.set([0x61, 0x62, 0x63], 32);
    view.setUint32(35, 9, true); // ARRAY
    const body = new Uint8Array(depth * 12 + 12);
    const bodyView = new DataView(body.buffer);
    for (let i = 0; i < depth; i++) {
      bodyView.setUint32(i * 12, 9, true);
      bodyView.setBigUint64(i * 12 + 4, 1n, true);
    }
    bodyView.setUint32(depth * 12, 4, true); // innermost: u32 array of 0
    const bytes = new Uint8Array(head.length + body.length);
    bytes.set(head);
    bytes.set(body, head.length);
    let thrown: unknown;
    try {
      parseGguf(bytes, 'nested.gguf');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(GgufError);
    expect((thrown as GgufError).code).toBe('KVT_ERR_GGUF_BAD_VALUE_TYPE');
  });

  it('mutated, truncated and absurd-count files read or fail typed, in a child process (mmap and read paths)', async () => {
    const seed = seedFile();
    let files: string[] = [];
    // The reader runs in batches of child processes, so a longer fuzz run (npm run fuzz) scales.
    const checkBatch = () => {
      if (files.length === 0) return;
      const { status, signal, lines, stderr } = runChild(files);
      const last = lines.at(-1);
      expect({ status, signal, crashedOn: last?.start ? last.file : undefined, stderr: status === 0 ? '' : stderr.slice(-2000) }).toEqual({ status: 0, signal: null, crashedOn: undefined, stderr: '' });
      const outcomes = lines.filter((l) => l.outcome !== undefined);
      expect(outcomes.length).toBe(files.length * 2);
      const untyped = outcomes.filter((l) => l.outcome !== 'ok' && !l.outcome!.startsWith('KVT_ERR_GGUF_'));
      expect(untyped).toEqual([]);
      for (const file of files) rmSync(file, { force: true });
      files = [];
    };
    await fuzz({ name: 'gguf mutations', budgetMs: 1500, maxCases: 400 }, (rand, i) => {
      let bytes: Uint8Array;
      const r = rand();
      if (r < 0.2) bytes = seed.subarray(0, int(rand, seed.length)).slice();
      else if (r < 0.5) bytes = absurdField(rand, seed);
      else bytes = mutateBytes(rand, seed, 1 + int(rand, 6));
      const path = join(dir, `m${i}.gguf`);
      writeFileSync(path, bytes);
      files.push(path);
      if (files.length >= 400) checkBatch();
    });
    checkBatch();
  });
});
