// A mapped file's ArrayBuffer may be collected long after the file was
// closed (unmapFile) and mapped again at the same address: its finalizer must
// then leave the new mapping alone.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { GgmlType, writeGguf } from '../../inference-core/gguf/index.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

describe('mmapFile lifetime', () => {
  it('open, close, open again, gc, read tensor bytes: no crash, bytes intact', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvt-mmap-'));
    try {
      const file = path.join(dir, 'm.gguf');
      const values = new Float32Array(256 * 1024); // 1 MiB of tensor data: many pages to touch
      for (let i = 0; i < values.length; i++) values[i] = (i % 251) / 8;
      writeGguf(file, [['general.architecture', { type: 'string', value: 'test' }]], [
        { name: 'w', type: GgmlType.F32, dims: [values.length], data: values },
      ]);
      const bytes = new Uint8Array(values.buffer);
      let expectSum = 0;
      for (let k = 0; k < bytes.length; k += 4096) expectSum += bytes[k];
      expectSum += bytes[bytes.length - 1];
      const rounds = 20;
      const child = spawnSync(
        process.execPath,
        ['--expose-gc', '--import', 'tsx', path.join(here, 'mmap-reopen-child.mts'), file, String(rounds)],
        { encoding: 'utf8', timeout: 120_000 },
      );
      expect(child.signal, child.stderr).toBeNull();
      expect(child.status, child.stderr).toBe(0);
      expect(JSON.parse(child.stdout.trim())).toEqual({ ok: true, sum: expectSum * rounds });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
