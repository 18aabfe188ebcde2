// The CpuBackend seam, memory helpers and the ISA / thread environment.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import {
  allocAligned, backendInfo, createBackend, mmapFile, NativeError, PAGE_TOKENS, unmapFile,
} from '../../native/index.ts';
import { addon, ggufWeight, ISAS, randomF32 } from './native-fixtures.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const backend = createBackend('cpu');

describe('CpuBackend', () => {
  it('alloc / view / write / read', () => {
    const t = backend.alloc(10);
    expect(Array.from(backend.read(t))).toEqual(new Array(10).fill(0));
    backend.write(t, new Float32Array([1, 2, 3]), 4);
    const v = backend.view(t, 3, 4);
    expect(Array.from(backend.read(v))).toEqual([0, 1, 2, 3]);
    backend.write(v, new Float32Array([9]));
    expect(backend.read(t)[3]).toBe(9);
    expect(() => backend.view(t, 8, 3)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }));
  });

  it('runs a small layer through handles: embed → rmsNorm → matmul → swiglu → add', () => {
    const [vocab, d, f] = [20, 64, 48];
    const emb = ggufWeight('f16', vocab, d, 1);
    const up = ggufWeight('q8_0', f, d, 2);
    const gate = ggufWeight('bf16', f, d, 3);
    const gain = randomF32(d, 4);
    const wE = backend.uploadWeight('f16', vocab, d, emb.bytes);
    const wU = backend.uploadWeight('q8_0', f, d, up.bytes);
    const wG = backend.uploadWeight('bf16', f, d, gate.bytes);
    const wN = backend.uploadWeight('f32', 1, d, new Uint8Array(gain.buffer));
    const tokens = new Int32Array([3, 19, 0]);
    const x = backend.alloc(3 * d);
    const h = backend.alloc(3 * d);
    const u = backend.alloc(3 * f);
    const g = backend.alloc(3 * f);
    backend.embed(x, wE, tokens);
    backend.rmsNorm(h, x, wN, 3, d, 1e-5);
    backend.matmul(u, h, wU, 3);
    backend.matmul(g, h, wG, 3);
    backend.swiglu(g, g, u, 3 * f);
    backend.add(u, u, g, 3 * f);
    // same chain on the raw addon reference twins
    const rx = new Float32Array(3 * d);
    addon.embedRef(rx, emb.bytes, 1, vocab, d, tokens);
    const rh = new Float32Array(3 * d);
    addon.rmsNormRef(rh, rx, gain, 3, d, 1e-5);
    const ru = new Float32Array(3 * f);
    const rg = new Float32Array(3 * f);
    addon.matmulRef(ru, rh, up.bytes, 8, f, d, 3);
    addon.matmulRef(rg, rh, gate.bytes, 30, f, d, 3);
    addon.swigluRef(rg, rg, ru, 3 * f);
    addon.addRef(ru, ru, rg, 3 * f);
    expect(Array.from(backend.read(u))).toEqual(Array.from(ru));
  });

  it('KV pages: one copy in, one copy out, page size from the layout', () => {
    const pool = backend.createKvPool({ layers: 2, kvHeads: 2, headDim: 16, pages: 4 });
    expect(pool.pageBytes).toBe(2 * 2 * 2 * PAGE_TOKENS * 16 * 2);
    const block = new Uint8Array(pool.pageBytes).map((_, i) => i * 7);
    backend.copyIntoPage(pool, 2, block);
    expect(Buffer.from(backend.copyFromPage(pool, 2)).equals(Buffer.from(block))).toBe(true);
    expect(backend.copyFromPage(pool, 1).every((b) => b === 0)).toBe(true);
    expect(() => backend.copyIntoPage(pool, 4, block)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }));
    expect(() => backend.copyIntoPage(pool, 0, block.subarray(1))).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }));
  });

  it('typed errors: wrong handle, bad dtype, short weight bytes', () => {
    expect(() => backend.read({ kind: 'tensor', length: 1 })).toThrow(NativeError);
    expect(() => backend.uploadWeight('q9_9' as never, 1, 32, new Uint8Array(64))).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_DTYPE' }));
    expect(() => backend.uploadWeight('f16', 4, 32, new Uint8Array(10))).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }));
  });

  it('createBackend: cuda without a registered CUDA backend is a typed error', () => {
    expect(() => createBackend('cuda')).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_NO_CUDA' }));
    expect(() => createBackend('tpu' as never)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_DEVICE' }));
  });
});

describe('memory', () => {
  it('mmapFile views a file without copying; unmapFile detaches it', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvt-mmap-'));
    const file = path.join(dir, 'w.bin');
    const data = new Uint8Array(3 * 4096 + 5).map((_, i) => (i * 31) & 255);
    fs.writeFileSync(file, data);
    const ab = mmapFile(file);
    expect(ab.byteLength).toBe(data.length);
    expect(Buffer.from(new Uint8Array(ab)).equals(Buffer.from(data))).toBe(true);
    expect(unmapFile(ab)).toBe(true);
    expect(ab.byteLength).toBe(0);
    expect(unmapFile(ab)).toBe(false);
    fs.writeFileSync(path.join(dir, 'empty'), '');
    expect(mmapFile(path.join(dir, 'empty')).byteLength).toBe(0);
    expect(() => mmapFile(path.join(dir, 'missing'))).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_MMAP' }));
    fs.rmSync(dir, { recursive: true });
  });

  it('allocAligned is zeroed in both size classes (heap and mmap)', () => {
    for (const n of [1, 100, 1 << 21]) {
      const ab = allocAligned(n);
      expect(ab.byteLength).toBe(n);
      expect(new Uint8Array(ab).every((b) => b === 0)).toBe(true);
    }
  });
});

describe('ISA and thread environment', () => {
  const probe = `import { backendInfo } from './native/index.ts'; console.log(JSON.stringify(backendInfo()));`;
  function spawnInfo(env: Record<string, string>) {
    return spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', probe], {
      cwd: root, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000,
    });
  }
  it('KVTIER_NATIVE_ISA forces each available ISA; KVTIER_NATIVE_THREADS sizes the pool', () => {
    for (const isa of ISAS) {
      const r = spawnInfo({ KVTIER_NATIVE_ISA: isa, KVTIER_NATIVE_THREADS: '1' });
      expect(r.status, r.stderr).toBe(0);
      const info = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}');
      expect(info.isa).toBe(isa);
      expect(info.threads).toBe(1);
    }
  });
  it('an unknown ISA fails with KVT_ERR_NATIVE_ISA', () => {
    const r = spawnInfo({ KVTIER_NATIVE_ISA: 'neon' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('KVT_ERR_NATIVE_ISA');
  });
  it('backendInfo reports the best ISA by default', () => {
    const info = backendInfo();
    expect(info.isasAvailable).toContain('scalar');
    expect(info.threads).toBeGreaterThanOrEqual(1);
  });
});

describe('device selection', () => {
  it('createBackendAsync("cpu") is the CPU backend; "auto" falls back to cpu without a usable GPU', async () => {
    const { createBackendAsync } = await import('../../native/index.ts');
    expect((await createBackendAsync('cpu')).name).toBe('cpu');
    const auto = await createBackendAsync('auto');
    expect(['cpu', 'cuda']).toContain(auto.name);
  });
});
